#!/usr/bin/env bash
# Runs the whole test suite from a fresh clone: installs what it needs, then runs pytest.
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the integration tests use for real (a redis-server for the Redis store, a JDK
# and node for the service's clients, chromium for its console).
need_apt=()
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
# The Java and TypeScript clients of callwarden serve are compiled and run against it.
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v node >/dev/null 2>&1 || need_apt+=(nodejs)
# The console is tested in a real headless browser: Debian's chromium, driven by Playwright.
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
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
# An editable install has no bytecode, and with PYTHONDONTWRITEBYTECODE set no process writes
# it: each of the suite's hundreds of child processes would compile callwarden from source.
.venv/bin/python -m compileall -q -j 0 src/callwarden >/dev/null
# The TypeScript client's dev packages (TypeScript, the OpenAI Agents JS SDK), from its lock file.
if [ ! -d clients/typescript/node_modules ]; then
  npm ci --prefix clients/typescript --no-audit --no-fund --silent
fi

if [ $# -gt 0 ]; then
  exec .venv/bin/python -m pytest "$@"
fi

status=0
# Environments for tests whose packages conflict with the main one's (see tests/conftest.py):
# autogen-ext's MCP client, CrewAI and Semantic Kernel need mcp<2; the rest of the suite runs with
# mcp 2. Each gets a virtualenv .venv-NAME and runs tests/envs/NAME with CALLWARDEN_TEST_ENV=NAME.
# Their installs (minutes on a fresh clone) run while the main suite does; their tests after it.
install_env() {  # NAME PIP-REQUIREMENT...
  local env_dir=.venv-$1
  shift
  [ -x "$env_dir/bin/python" ] || "$PYTHON" -m venv "$env_dir"
  "$env_dir/bin/python" -m pip install -q --disable-pip-version-check "pytest>=8" \
    "pytest-asyncio>=0.23" "$@" 2>&1 | grep -v -E "^(WARNING: Location|  WARNING: Location)" || true
}
install_envs() {
  install_env autogen-mcp -e . "autogen-agentchat>=0.7,<0.8" "autogen-ext[mcp]>=0.7,<0.8" "mcp<2"
  install_env crewai -e ".[crewai]" "jsonschema>=4"
  install_env semantic-kernel -e ".[semantic-kernel]"
}
envs_log=$(mktemp)
install_envs >"$envs_log" 2>&1 &
installing=$!

# The layers of ARCHITECTURE.md, as an import-linter contract (pyproject.toml).
echo "== lint-imports =="
.venv/bin/lint-imports --no-cache || status=$?
.venv/bin/python -m pytest || status=$?

wait "$installing" || true
cat "$envs_log"
rm -f "$envs_log"
for name in autogen-mcp crewai semantic-kernel; do
  echo "== environment $name =="
  CALLWARDEN_TEST_ENV=$name ".venv-$name/bin/python" -m pytest "tests/envs/${name//-/_}" \
    || status=$?
done
exit $status
