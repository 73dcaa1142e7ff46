#!/usr/bin/env bash
# "Where in your code" on the GPU, in one go: the fixtures made through `nsyswrap run` (their
# lines traced), and what the trace of lines costs (scripts/bench_lines.py: the seed
# article's program and two training loops in one process; WHOLE=1: whole processes too).
#   bash scripts/gpu_lines_batch.sh OUTDIR
# On the project's lent GPU, first: source .gpu/setup.sh (puts nsys on PATH, adds libdw).
set -uo pipefail
out=${1:?usage: gpu_lines_batch.sh OUTDIR}
mkdir -p "$out/text"
here=$PWD
export PYTHONUNBUFFERED=1 PYTHONPATH="$here:${PYTHONPATH:-}"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) tag=h200 ;; *H100*) tag=h100 ;; *) tag=gpu ;; esac
echo "== $gpu ($(nproc) cores), $(python3 --version)"; date
FIXTURE_TAG=$tag FIXTURES="${FIXTURES:-user_lines_train user_lines_seed user_lines_emit}" \
  bash scripts/make_fixtures_gpu.sh "$out" >"$out/text/fixtures.log" 2>&1
tail -3 "$out/text/fixtures.log"
for f in "$out"/*.sqlite; do
  name=$(basename "$f" .sqlite)
  python3 -m nsyswrap compare "$f" >"$out/text/$name.txt" 2>&1
  python3 -m nsyswrap compare "$f" --format json >"$out/text/$name.json" 2>"$out/text/$name.err"
  head -c 3000 "$out/text/$name.txt" | tail -c 1500
done
if [ "${BENCH:-1}" != 0 ]; then
echo "== the trace's cost"; date
w=scripts/workloads
python3 scripts/bench_lines.py --rounds 15 --in-process $w/torch_seed_timings.py:copied \
  --in-process $w/torch_seed_timings.py:on_gpu --in-process $w/torch_seed_timings.py:flushed \
  --in-process $w/torch_train.py:train:200 --in-process $w/torch_lines_train.py:main:100 \
  >"$out/text/bench_lines.json" 2>&1
if [ -n "${WHOLE:-}" ]; then
  python3 scripts/bench_lines.py --rounds 5 $w/torch_seed_timings.py -- \
    $w/torch_lines_train.py 400 -- $w/torch_train.py >"$out/text/bench_whole.json" 2>&1
fi
cat "$out/text/bench_lines.json"
fi
tar -czf "$out/text.tar.gz" -C "$out" text && rm -rf "$out/text"
gzip -f "$out"/*.sqlite
ls -la "$out"; date
