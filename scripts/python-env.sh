#!/usr/bin/env bash
# Creates .venv with Tests/python/requirements.txt installed and prints the path of its python.
# Idempotent and quiet: it reinstalls only when requirements.txt changed since the last install.
#   PY="$(scripts/python-env.sh)" && "$PY" -m pytest -q Tests/python
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${COORD_VENV:-$ROOT/.venv}"
REQUIREMENTS="$ROOT/Tests/python/requirements.txt"
STAMP="$VENV/.requirements.sha256"

die() { echo "python-env.sh: $*" >&2; exit 1; }

command -v python3 >/dev/null 2>&1 || die "python3 is not installed (Debian: apt-get install python3 python3-venv)."
[[ -f "$REQUIREMENTS" ]] || die "$REQUIREMENTS is missing."

if [[ ! -x "$VENV/bin/python" ]]; then
    python3 -m venv "$VENV" >&2 \
        || die "cannot create a virtual environment at $VENV (Debian: apt-get install python3-venv)."
fi

want="$(sha256sum "$REQUIREMENTS" | cut -d' ' -f1)"
if [[ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]]; then
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    if ! "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            -r "$REQUIREMENTS" >"$log" 2>&1; then
        cat "$log" >&2
        die "installing $REQUIREMENTS into $VENV failed (see pip's output above)."
    fi
    echo "$want" >"$STAMP"
fi

echo "$VENV/bin/python"
