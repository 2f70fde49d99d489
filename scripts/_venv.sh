# Sourced by the scripts: creates .venv (Python >= 3.11) and installs kmq with its dev extra when out of date.
# The install says one line; pip's and the build backend's output go to $VENV/install.log, shown only on failure.
VENV="${KMQ_VENV:-.venv}"
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "kmq needs Python >= 3.11 (found: $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
stamp="$VENV/.kmq-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  install_log="$VENV/install.log"
  echo "Installing kmq and its dev tools into $VENV (first run: a few minutes; log: $install_log)" >&2
  if ! { "$VENV/bin/python" -m pip install --upgrade pip && "$VENV/bin/python" -m pip install -e ".[dev]"; } \
    >"$install_log" 2>&1; then
    cat "$install_log" >&2
    echo "Installing kmq into $VENV failed (pip's output above, also in $install_log)" >&2
    exit 1
  fi
  touch "$stamp"
fi
