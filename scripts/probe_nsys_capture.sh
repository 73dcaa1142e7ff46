#!/usr/bin/env bash
# What nsys does that `nsyswrap run` relies on (docs/nsys-quirks.md, "Where nsys writes the
# capture first" and "Exit codes, output, signals"): its exit codes, where it writes the raw
# capture first (TMPDIR), what a full disk leaves, whether QdstrmImporter changes the
# .qdstrm it reads, and what a signal does while nsys writes the report; then `nsyswrap
# run` itself on a CUDA loop, interrupted twice, and through the sh wrapper.
#   bash scripts/probe_nsys_capture.sh OUTDIR    (root for the full-disk part; a GPU for the
#                                                 CUDA parts, which are skipped without one)
set -u
out=${1:?usage: probe_nsys_capture.sh OUTDIR}
mkdir -p "$out" && out=$(cd "$out" && pwd)
work=$(mktemp -d)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
prof() { nsys profile -t nvtx --sample=none --cpuctxsw=none "$@"; }

echo "== version"; nsys --version
echo "== exit codes (the workload's, 128 + N for signal N; nsys's own failures)"
for c in "exit 0" "exit 42" "exit 255" 'kill -INT $$' 'kill -TERM $$' 'kill -KILL $$' \
         'kill -SEGV $$'; do
  prof -f true -o "$work/rc" sh -c "$c" >"$work/rc.log" 2>&1
  echo "$c -> $? $(grep -i 'exit code' "$work/rc.log")"
done
prof -o "$work/bad" --no-such-option true >/dev/null 2>&1; echo "unknown option -> $?"
prof -o "$work/missing" "$work/no-such-program" >/dev/null 2>&1; echo "missing program -> $?"

echo "== the raw capture goes to TMPDIR first"
mkdir -p "$work/tmpdir"
TMPDIR="$work/tmpdir" prof -o "$work/t" sh -c 'exit 0' 2>&1 | grep -i "generat\|qdstrm\|rep"

echo "== a full disk at -o"
mkdir -p "$work/disk"
if mount -t tmpfs -o size=64k tmpfs "$work/disk"; then
  prof -o "$work/disk/r" sh -c 'exit 3' >"$work/full.log" 2>&1
  echo "rc $?"; cat "$work/full.log"; ls -la "$work/disk"
  left=$(grep -o "/[^' ]*nsys-report-[0-9a-f]*\.qdstrm" "$work/full.log" | head -1)
  ls -la "$left"
  umount "$work/disk"
  echo "== QdstrmImporter on that raw capture: does it change what it reads?"
  imp=$(ls /opt/nvidia/nsight-compute/*/host/linux-desktop-glibc_2_11_3-x64/QdstrmImporter \
           /opt/nvidia/nsight-systems/*/host-linux-x64/QdstrmImporter \
           /usr/lib/nsight-systems/host-linux-x64/QdstrmImporter 2>/dev/null | head -1)
  "$imp" --help 2>&1 | head -12
  cp "$left" "$work/c.qdstrm" && cp "$left" "$work/c0.qdstrm" && rm -f "$left"
  "$imp" -i "$work/c.qdstrm" -o "$work/c.nsys-rep" >/dev/null 2>&1; echo "import rc $?"
  ls -l "$work"/c*.qdstrm "$work/c.nsys-rep"
  cmp "$work/c.qdstrm" "$work/c0.qdstrm" && echo "the .qdstrm read is unchanged"
else
  echo "(no tmpfs: not root?)"
fi

if ! python3 -c "import torch, sys; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  echo "== no CUDA: the rest needs a GPU"; exit 0
fi
loop="$work/loop.py"
cat >"$loop" <<'EOF'
import sys, torch
a = torch.randn(2048, 2048, device="cuda")
print("running", flush=True)
try:
    while True:
        (a @ a).sum().item()
except KeyboardInterrupt:
    sys.exit(130)
EOF
echo "== SIGINT to the workload, then to nsys 0.3 s later (it is writing)"
nsys profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -o "$work/sig" python3 "$loop" \
  >"$work/sig.log" 2>&1 &
nsys_pid=$!
until grep -q running "$work/sig.log"; do sleep 0.2; done
sleep 3
pkill -INT -f -x "python3 $loop"; sleep 0.3; kill -INT "$nsys_pid"
wait "$nsys_pid"; echo "rc $?"; cat "$work/sig.log"; ls -la "$work"/sig.*

echo "== nsyswrap run, SIGINT twice 0.5 s apart"
python3 -m nsyswrap run --trace cuda,nvtx -o "$out/twice" "$loop" >"$out/twice.txt" 2>&1 &
pid=$!
until grep -q running "$out/twice.txt"; do sleep 0.2; done
sleep 3; kill -INT "$pid"; sleep 0.5; kill -INT "$pid"
wait "$pid"; echo "exit $?"; grep "^nsyswrap" "$out/twice.txt"; ls "$out/twice"
python3 - "$out/twice"/*.sqlite <<'EOF'
import sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print("kernels:", con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
EOF

echo "== nsyswrap run -- env python3 LOOP (the sh wrapper), SIGTERM"
python3 -m nsyswrap run --trace cuda,nvtx -o "$out/wrapped" -- env python3 "$loop" \
  >"$out/wrapped.txt" 2>&1 &
pid=$!
until grep -q running "$out/wrapped.txt"; do sleep 0.2; done
sleep 3; kill -TERM "$pid"
wait "$pid"; echo "exit $?"; grep "^nsyswrap" "$out/wrapped.txt"; ls "$out/wrapped"
python3 - "$out/wrapped"/*.sqlite <<'EOF'
import sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print("kernels:", con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
EOF
rm -rf "$work"
