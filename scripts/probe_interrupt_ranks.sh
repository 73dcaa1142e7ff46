#!/usr/bin/env bash
# Interrupt `nsyswrap run --ranks 2` (torch_ddp_train.py, no straggler, two GPUs) with SIGTERM,
# then SIGINT, after DELAY seconds, and count what each rank's report kept
# (docs/nsys-quirks.md, "Ranks").
#   bash scripts/probe_interrupt_ranks.sh OUTDIR [DELAY]
set -uo pipefail
out=${1:?usage: probe_interrupt_ranks.sh OUTDIR [DELAY]}; delay=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
for sig in TERM INT; do
  python3 -m nsyswrap run --ranks 2 -o "$out/$sig" --force \
    "$here/workloads/torch_ddp_train.py" --steps 100000 > "$out/$sig.txt" 2> "$out/$sig.err" &
  pid=$!
  sleep "$delay"; kill -"$sig" "$pid"; wait "$pid"; echo "SIG$sig: nsyswrap exited $?"
  for r in 0 1; do
    f="$out/$sig/torch_ddp_train.rank$r.sqlite"
    if [ -f "$f" ]; then
      python3 - "$f" "$r" <<'PY'
import sqlite3, sys
c = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
tables = {r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='table'")}
k = c.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] \
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables else 0
print(f"  rank {sys.argv[2]}: {k} kernels")
PY
    else
      echo "  rank $r: no report"
    fi
  done
done
echo "nsys processes left: $(pgrep -c nsys || true)"
