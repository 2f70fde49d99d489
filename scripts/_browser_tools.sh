# Sourced by scripts/test: the browser of the console's tests (tests/integration/test_console.py), which pip cannot
# install: Debian's chromium and chromium-driver, driven by Selenium (the dev extra). Without root or apt-get it only
# warns (those tests then skip and say why), except in CI (CI=true), where it fails: the tests must run there.
_kmq_install_browser() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && return 0
  local why=""
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    why="chromium and chromium-driver are not installed and not installable here (needs root and apt-get)"
  else
    echo "== installing chromium and chromium-driver (Debian) for the console's browser tests"
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      chromium chromium-driver >/dev/null; }; then
      why="apt-get could not install chromium and chromium-driver"
    fi
  fi
  [ -z "$why" ] && return 0
  if [ "${CI:-}" = true ]; then
    echo "$why in CI: the console's browser tests need them" >&2
    exit 1
  fi
  echo "warning: $why; tests/integration/test_console.py will skip" >&2
}
_kmq_install_browser
unset -f _kmq_install_browser
