#!/usr/bin/env bash
# "Where in your code" on the GPU, in one go: the fixtures made through `nsyswrap run` (their
# lines traced), what nsys's own backtraces give for the same program, and what the trace of
# lines costs (scripts/bench_lines.py: the seed article's program and two training loops).
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
FIXTURE_TAG=$tag FIXTURES="${FIXTURES:-user_lines_train user_lines_seed}" \
  bash scripts/make_fixtures_gpu.sh "$out" >"$out/text/fixtures.log" 2>&1
tail -3 "$out/text/fixtures.log"
for f in "$out"/*.sqlite; do
  name=$(basename "$f" .sqlite)
  python3 -m nsyswrap compare "$f" >"$out/text/$name.txt" 2>&1
  python3 -m nsyswrap compare "$f" --format json >"$out/text/$name.json" 2>"$out/text/$name.err"
  head -c 3000 "$out/text/$name.txt" | tail -c 1500
done
echo "== nsys's own backtraces of the same loop"; date
bt="$out/text/backtrace"
nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none --cudabacktrace=all:0 \
  --python-backtrace=cuda -f true -o "$bt" python3 scripts/workloads/torch_lines_train.py 3 \
  >"$out/text/backtrace.log" 2>&1
nsys export --type sqlite -f true -o "$bt.sqlite" "$bt.nsys-rep" >>"$out/text/backtrace.log" 2>&1
python3 - "$bt.sqlite" >"$out/text/backtrace_summary.txt" 2>&1 <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
tables = [r[0] for r in db.execute("select name from sqlite_master where type='table'")]
print("tables:", [t for t in tables if "CALLCHAIN" in t or "PYTHON" in t or "BACKTRACE" in t])
for t in tables:
    if "CALLCHAIN" in t or "PYTHON" in t:
        cols = [r[1] for r in db.execute(f"pragma table_info({t})")]
        print(t, cols, db.execute(f"select count(*) from {t}").fetchone())
runtime = db.execute("select count(*), count(callchainId) from CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
print("runtime calls, with a callchain:", runtime)
try:
    rows = db.execute("""select s.value, m.value, count(*) from CUDA_CALLCHAINS c
        left join StringIds s on s.id = c.symbol left join StringIds m on m.id = c.module
        group by 1, 2 order by 3 desc limit 60""").fetchall()
    for r in rows: print(r)
    py = db.execute("""select count(*) from CUDA_CALLCHAINS c join StringIds s on s.id = c.symbol
        where s.value like '%.py%'""").fetchone()
    print("frames naming a .py:", py)
except Exception as e:
    print("query failed:", e)
PY
cat "$out/text/backtrace_summary.txt" | head -40
rm -f "$bt.nsys-rep" "$bt.sqlite"
echo "== the trace's cost"; date
python3 scripts/bench_lines.py --rounds 5 scripts/workloads/torch_seed_timings.py -- \
  scripts/workloads/torch_lines_train.py 400 -- scripts/workloads/torch_train.py \
  >"$out/text/bench_lines.json" 2>&1
cat "$out/text/bench_lines.json"
tar -czf "$out/text.tar.gz" -C "$out" text && rm -rf "$out/text"
gzip -f "$out"/*.sqlite
ls -la "$out"; date
