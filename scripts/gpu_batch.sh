#!/usr/bin/env bash
# Everything in nsyswrap that needs a GPU, in one go: the scenario report, the accuracy
# table, the GPU test fixtures and the GPU-only tests. Needs CUDA, PyTorch, triton, nsys.
#   bash scripts/gpu_batch.sh OUTDIR
# (On the project's lent H100 the device kit puts nsys on PATH first: source .gpu/setup.sh.)
set -uo pipefail
out=${1:?usage: gpu_batch.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
work=$(mktemp -d)
opts=(--sample=none --cpuctxsw=none -f true)

profile() {  # profile NAME TRACE [nsys options...] -- command...
  local name=$1 trace=$2; shift 2
  local extra=()
  while [ "$1" != "--" ]; do extra+=("$1"); shift; done; shift
  nsys profile -t "$trace" "${opts[@]}" "${extra[@]}" -o "$work/$name" "$@" \
    >"$out/$name.profile.log" 2>&1
  nsys export --type sqlite --force-overwrite true -o "$out/$name.sqlite" \
    "$work/$name.nsys-rep" >/dev/null 2>&1
  ls -la "$out/$name.sqlite"
}

echo "== scenarios"; date
profile scenarios cuda,nvtx -- python3 examples/scenarios.py
python3 -m nsyswrap compare "$out/scenarios.sqlite" --top 5 >"$out/scenarios.txt" 2>&1
python3 -m nsyswrap compare "$out/scenarios.sqlite" --format json >"$out/scenarios.json" 2>&1

echo "== accuracy"; date
profile accuracy cuda,nvtx --cuda-graph-trace=node -- \
  python3 scripts/bench_accuracy.py measure "$out/accuracy.json"
python3 scripts/bench_accuracy.py table "$out/accuracy.sqlite" "$out/accuracy.json" \
  >"$out/accuracy.md" 2>&1

echo "== fixtures"; date
FIXTURE_TAG=h100 bash scripts/make_fixtures_gpu.sh "$out/fixtures" >"$out/fixtures.log" 2>&1

echo "== gpu tests"; date
python3 -m pytest -q -m gpu tests >"$out/gpu-tests.log" 2>&1
tail -3 "$out/gpu-tests.log"
date
