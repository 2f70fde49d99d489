# Sourced by scripts/test: the browser of the console's tests (tests/integration/test_console.py), which pip cannot
# install: Debian's chromium and chromium-driver, driven by Selenium (the dev extra). Without root or apt-get it only
# warns: those tests then fail and say why (or skip, with KMQ_ALLOW_SKIPS=1).
_kmq_install_browser() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && return 0
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "warning: chromium and chromium-driver not found and not installable here (needs root and apt-get); the console's browser tests will fail (or skip, with KMQ_ALLOW_SKIPS=1)" >&2
    return 0
  fi
  echo "== installing chromium and chromium-driver (Debian) for the console's browser tests"
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    chromium chromium-driver >/dev/null; }; then
    echo "warning: apt-get could not install chromium and chromium-driver; the console's browser tests will fail (or skip, with KMQ_ALLOW_SKIPS=1)" >&2
  fi
}
_kmq_install_browser
unset -f _kmq_install_browser
