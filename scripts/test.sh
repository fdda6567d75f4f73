#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: installs what it needs, then runs pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the integration tests use for real (a redis-server for the Redis store).
need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing ${need_apt[*]} with apt-get"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "missing: ${need_apt[*]} — install them (Debian: sudo apt-get install ${need_apt[*]})" >&2
    exit 2
  fi
fi

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test]" 2>&1 \
  | grep -v -E "^(WARNING: Location|  WARNING: Location)" || true
.venv/bin/python -c "import callwarden" # fail early when the install failed

exec .venv/bin/python -m pytest "$@"
