#!/usr/bin/env bash
# Re-make the GPU test fixtures (real nsys exports of small PyTorch workloads).
# Run on a CUDA machine with nsys on PATH and the `nvtx` Python package importable:
#   bash scripts/make_fixtures_gpu.sh [OUTDIR]      (default tests/data)
# Each workload gives NAME.sqlite; `nsys stats` CSVs beside it are NVIDIA's own numbers
# (an independent reference for the tests). Captures use --sample=none --cpuctxsw=none to
# stay small.
set -euo pipefail
out=${1:-tests/data}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# The workloads import nsyswrap from this checkout.
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
tag=${FIXTURE_TAG:-h100}
common=(--sample=none --cpuctxsw=none -f true)

profile() {  # profile NAME TRACE [extra nsys args...] -- script
  local name=$1 trace=$2; shift 2
  local extra=()
  while [ "$1" != "--" ]; do extra+=("$1"); shift; done; shift
  local base="$out/${tag}_$name"
  nsys profile -t "$trace" "${common[@]}" "${extra[@]}" -o "$base" python3 "$@"
  nsys export --type sqlite --force-overwrite true -o "$base.sqlite" "$base.nsys-rep"
  rm -f "$base.nsys-rep"
}

profile torch_mix cuda,nvtx,osrt -- "$here/workloads/torch_mix.py"
profile torch_mix_nonvtx cuda,osrt -- "$here/workloads/torch_mix.py"
profile torch_mix_nocuda nvtx,osrt -- "$here/workloads/torch_mix.py"
profile torch_graph cuda,nvtx --cuda-graph-trace=node -- "$here/workloads/torch_graph.py"
profile torch_graph_graphlevel cuda,nvtx -- "$here/workloads/torch_graph.py"
profile holdout_cnn cuda,nvtx -- "$here/workloads/torch_holdout.py"
profile harness_clock cuda,nvtx --gpu-metrics-devices=all --gpu-metrics-frequency=100 -- "$here/workloads/torch_harness_clock.py"
# NVIDIA's own summaries of two fixtures, an independent reference for the tests.
for name in torch_mix torch_graph; do
  nsys stats -q -f csv -r cuda_gpu_kern_sum,nvtx_gpu_proj_sum \
    -o "$out/${tag}_$name.nsys_stats" "$out/${tag}_$name.sqlite" >/dev/null
done
ls -la "$out"
