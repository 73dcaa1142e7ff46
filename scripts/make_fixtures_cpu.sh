#!/usr/bin/env bash
# Re-make the CPU-only fixtures with Debian's Nsight Systems 2022.4 (no GPU needed):
#   sudo apt install nsight-systems nsight-systems-target   (Debian non-free)
#   bash scripts/make_fixtures_cpu.sh [OUTDIR]               (default tests/data)
# Debian's nsys looks for its importer where the package does not install it, so
# `nsys profile` leaves a .qdstrm; we import it with the packaged QdstrmImporter.
set -euo pipefail
out=${1:-tests/data}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
nsys_bin=$(command -v nsys)
nvtx_include=$(dirname "$(readlink -f "$nsys_bin")")/nvtx/include
[ -d "$nvtx_include" ] || nvtx_include=/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nvtx/include
importer=${QDSTRM_IMPORTER:-/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for prog in cpu_nvtx cpu_holdout cpu_families cpu_hostile cpu_not_utf8; do
  gcc -O1 -o "$work/$prog" "$here/workloads/$prog.c" -I"$nvtx_include" -ldl -lpthread
done

profile() {  # profile NAME TRACE command...
  local name=$1 trace=$2; shift 2
  local base="$work/$(basename "$name")"
  nsys profile -t "$trace" --sample=none --cpuctxsw=none -f true -o "$base" "$@" || true
  if [ ! -f "$base.nsys-rep" ]; then
    "$importer" -i "$base.qdstrm" >/dev/null
  fi
  nsys export --type sqlite -o "$out/$name.sqlite" --force-overwrite true "$base.nsys-rep" >/dev/null
  echo "made $out/$name.sqlite"
}

profile cpu2022_nvtx nvtx,osrt "$work/cpu_nvtx"
# A report as nsys saves it, for tests of .nsys-rep input (exported on the fly).
profile cpu2022_families nvtx "$work/cpu_families"
cp "$work/cpu2022_nvtx.nsys-rep" "$out/cpu2022_nvtx.nsys-rep"
# Hostile names (markup, </script>, quotes, newlines, pipes; formula-like names and control
# characters): the escaping tests of HTML, Markdown, CSV and the terminal.
profile cpu2022_hostile nvtx "$work/cpu_hostile"
# Names that are not UTF-8 (Latin-1, a character cut in two): read with U+FFFD, and said.
profile cpu2022_not_utf8 nvtx "$work/cpu_not_utf8"
# Held out: checked only by tests/test_holdout.py, against SQL.
mkdir -p "$out/holdout"
profile holdout/cpu2022_holdout nvtx,osrt "$work/cpu_holdout"
