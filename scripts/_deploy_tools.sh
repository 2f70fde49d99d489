# Sourced by scripts/test: the tools of the deploy tests (tests/deploy) that pip cannot install.
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
