#!/usr/bin/env bash
# The GPU side of the program's own timings, in one go: the timing fixtures made through
# `nsyswrap run`, the runner's hook cost, and `compare` on a report with a million records
# (this checkout against an earlier one in OLD, alternated: the machines drift ±20%).
#   bash scripts/gpu_timings_batch.sh OUTDIR [OLD]
# FIXTURES="user_sweep ..." makes only those (FIXTURES= none); MILLION=0 skips the million.
# On the project's lent GPU, first: source .gpu/setup.sh (puts nsys on PATH, adds libdw).
set -uo pipefail
out=${1:?usage: gpu_timings_batch.sh OUTDIR [OLD]}
old=${2:-}
mkdir -p "$out"
here=$PWD
export PYTHONUNBUFFERED=1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) tag=h200 ;; *H100*) tag=h100 ;; *) tag=gpu ;; esac
echo "== $gpu ($(nproc) cores): fixtures tagged $tag"; date
if [ -n "${FIXTURES-x}" ]; then
PYTHONPATH="$here:${PYTHONPATH:-}" FIXTURE_TAG=$tag \
  FIXTURES="${FIXTURES:-user_variants user_timed user_sweep user_sweep_more user_harness user_two_procs}" \
  bash scripts/make_fixtures_gpu.sh "$out/fixtures" >"$out/fixtures.log" 2>&1
grep -v "^\(Generating\|Processing\|Saving\|Collecting\|Exporting\|\[\)" "$out/fixtures.log" | tail -20
ls -la "$out/fixtures"
fi

echo "== the runner's cost per record() (new, then old)"; date
PYTHONPATH="$here:${PYTHONPATH:-}" python3 scripts/bench_user_events.py >"$out/hook_new.json" 2>&1
cat "$out/hook_new.json"
if [ -n "$old" ]; then
  (cd "$old" && PYTHONPATH="$old:${PYTHONPATH:-}" python3 scripts/bench_user_events.py) >"$out/hook_old.json" 2>&1
  cat "$out/hook_old.json"
fi

if [ "${MILLION:-1}" = 0 ]; then exit 0; fi
echo "== a million records through nsyswrap run"; date
work=$(mktemp -d)
# Made by this checkout's runner, and by OLD's (whose compare reads only its own records).
for side in new ${old:+old}; do
  root=$here; [ "$side" = old ] && root=$old
  (cd "$root" && PYTHONPATH="$root:${PYTHONPATH:-}" python3 -m nsyswrap run -o "$work/million_$side" \
     --format json scripts/workloads/torch_event_million.py >/dev/null \
     2>"$out/million_run_$side.log")
  echo "$side runner: exit $?"; tail -2 "$out/million_run_$side.log"
done
measure() {  # measure CODE REPORT: compare's time and peak memory
  local root=$here; [ "$1" = old ] && root=$old
  /usr/bin/time -f "$1 code, $2 report: %e s %M KiB" env PYTHONPATH="$root:${PYTHONPATH:-}" python3 -m \
    nsyswrap compare "$work/million_$2"/*.sqlite --format json >/dev/null \
    2>>"$out/million_compare.txt"
}
for round in 1 2; do
  if [ -n "$old" ]; then measure old old; measure new old; fi
  measure new new
done
grep "code," "$out/million_compare.txt"
rm -rf "$work"
date
