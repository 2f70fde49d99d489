# Sourced by scripts/test: the tools of the deploy tests (tests/deploy) that pip cannot install, and the image.
# kubectl renders the Kustomize overlays offline (`kubectl kustomize`, no cluster needed). Debian packages it as
# `kubernetes-client` (bookworm: kubectl 1.20 with Kustomize 2.0.3, which the manifests are written for).
# Without root or apt-get it only warns: those tests then skip and say why.
_kmq_install_kubectl() {
  command -v kubectl >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: kubectl not found and not installable here (needs root and apt-get); tests/deploy will skip the Kustomize renders" >&2
    return 0
  fi
  echo "== installing kubectl (Debian package kubernetes-client) for tests/deploy"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; }; then
    echo "warning: apt-get could not install kubernetes-client; tests/deploy will skip the Kustomize renders" >&2
  fi
}
_kmq_install_kubectl
unset -f _kmq_install_kubectl

# The image for the container tests (tests/deploy/test_deploy_containers.py), built before pytest so its first test
# does not spend its time budget on a build from scratch: scripts/image --keep-daemon, whose private dockerd (if it
# started one) serves the tests and is stopped when scripts/test exits. Where it cannot be built it only warns (the
# tests then skip and say why), except in CI (CI=true): there it fails.
_kmq_stop_private_dockerd() {
  [ -z "${KMQ_DOCKERD_PID:-}" ] || scripts/image --stop
}
kmq_build_image() {
  echo "== image (scripts/image; the container tests run it)"
  local exports
  if exports="$(scripts/image --keep-daemon)"; then
    eval "$exports"
    trap _kmq_stop_private_dockerd EXIT
  elif [ "${CI:-}" = true ]; then
    echo "scripts/image failed in CI: the container tests need the image" >&2
    exit 1
  else
    echo "warning: scripts/image failed (above); tests/deploy will skip the container tests" >&2
  fi
}
