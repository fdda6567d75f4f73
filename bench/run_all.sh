#!/usr/bin/env bash
# Every benchmark and corpus score, one after the other, into bench/results/all.txt.
# Run: bash bench/run_all.sh   (from the repository root, after `pip install -e ".[bench,redis]"`)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
mkdir -p bench/results
out=bench/results/all.txt
: > "$out"
status=0
for script in bench_core bench_shell bench_paths_urls bench_secrets bench_cel bench_limits \
              bench_state bench_history bench_coldstart bench_mcp bench_serve bench_approvals bench_audit bench_replay \
              score_shell score_paths score_secrets score_recommended; do
  echo "=== bench/$script.py" | tee -a "$out"
  if ! "$PY" "bench/$script.py" 2>&1 | tee -a "$out"; then
    echo "!!! bench/$script.py failed" | tee -a "$out"
    status=1
  fi
done
exit $status
