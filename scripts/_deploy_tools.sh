# Sourced by scripts/test: the tools of the deploy tests (tests/deploy) that pip cannot install, and the image.
# kubectl renders the Kustomize overlays offline (`kubectl kustomize`, no cluster needed). Debian packages it as
# `kubernetes-client` (bookworm: kubectl 1.20 with Kustomize 2.0.3, which the manifests are written for).
# Without root or apt-get it only warns: those tests then fail and say why (or skip, with KMQ_ALLOW_SKIPS=1).
_kmq_install_kubectl() {
  command -v kubectl >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: kubectl not found and not installable here (needs root and apt-get); tests/deploy's Kustomize renders will fail (or skip, with KMQ_ALLOW_SKIPS=1)" >&2
    return 0
  fi
  echo "== installing kubectl (Debian package kubernetes-client) for tests/deploy"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; }; then
    echo "warning: apt-get could not install kubernetes-client; tests/deploy's Kustomize renders will fail (or skip, with KMQ_ALLOW_SKIPS=1)" >&2
  fi
}
_kmq_install_kubectl
unset -f _kmq_install_kubectl

# The image for the container tests (tests/deploy/test_deploy_containers.py), built before pytest so its first test
# does not spend its time budget on a build from scratch: scripts/image --keep-daemon, whose private dockerd (if it
# started one) serves the tests and is stopped when scripts/test exits. One test session at a time uses the private
# dockerd (the lock session.lock in its directory; the tests' fixture takes it too when run alone), so no session
# stops it under another's containers. Where the image cannot be built it fails, unless the caller opted in to
# skipping what this machine cannot run (KMQ_ALLOW_SKIPS=1): then it warns and the container tests skip and say why.
_kmq_stop_private_dockerd() {
  [ -z "${KMQ_DOCKERD_PID:-}" ] || scripts/image --stop
}
_kmq_skips_allowed() {
  [ "${KMQ_ALLOW_SKIPS:-}" = 1 ]
}
_kmq_image_unavailable() {
  if ! _kmq_skips_allowed; then
    echo "$1: the container tests need the image (KMQ_ALLOW_SKIPS=1 skips them)" >&2
    exit 1
  fi
  echo "warning: $1; tests/deploy will skip the container tests (KMQ_ALLOW_SKIPS=1)" >&2
}
kmq_build_image() {
  echo "== image (scripts/image; the container tests run it)"
  local dir="${KMQ_DOCKER_DIR:-$HOME/.cache/kmq/docker}" exports
  mkdir -p "$dir"
  exec 9>>"$dir/session.lock"
  if ! flock -w 900 9; then
    _kmq_image_unavailable "another test session held $dir/session.lock for 15 minutes"
    return 0
  fi
  if exports="$(scripts/image --keep-daemon 9>&-)"; then
    eval "$exports"
    trap _kmq_stop_private_dockerd EXIT
  else
    _kmq_image_unavailable "scripts/image failed (above)"
  fi
}

# Helm for the chart tests (tests/deploy/test_helm_chart.py, tests/k8s): built once from the Go module proxy
# (scripts/helm-build; a few minutes, then cached in ~/.cache/kmq/bin), before pytest so no test waits on it.
kmq_build_helm() {
  echo "== Helm (scripts/helm-build; the chart tests run it)"
  if ! scripts/helm-build >/dev/null; then
    _kmq_skips_allowed || exit 1
    echo "warning: scripts/helm-build failed (above): the Helm chart tests will fail (KMQ_ALLOW_SKIPS=1)" >&2
  fi
}

# Kubernetes for the cluster tests (tests/k8s, scripts/k8s-up): built once per machine from the Go module proxy
# (scripts/k8s-build; 5-8 minutes on 2 cores, then cached in ~/.cache/kmq/k8s), before pytest so no test waits on it.
# The cluster needs root: without it this fails, unless the caller opted in to skipping (KMQ_ALLOW_SKIPS=1).
kmq_build_kubernetes() {
  echo "== Kubernetes (scripts/k8s-build; tests/k8s runs it)"
  if [ "$(id -u)" != 0 ]; then
    if ! _kmq_skips_allowed; then
      echo "the Kubernetes tests need root (scripts/k8s-up runs a kubelet and containerd; KMQ_ALLOW_SKIPS=1 skips)" >&2
      exit 1
    fi
    echo "warning: not root: tests/k8s will skip (KMQ_ALLOW_SKIPS=1)" >&2
    return 0
  fi
  if ! scripts/k8s-build >/dev/null; then
    _kmq_skips_allowed || exit 1
    echo "warning: scripts/k8s-build failed (above): tests/k8s will fail at scripts/k8s-up" >&2
  fi
}
