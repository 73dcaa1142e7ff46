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

# FIXTURES="torch_train diff_base" makes only those (default: all).
want() { [ -z "${FIXTURES:-}" ] || [[ " $FIXTURES " == *" $1 "* ]]; }

want torch_mix && profile torch_mix cuda,nvtx,osrt -- "$here/workloads/torch_mix.py"
want torch_mix_nonvtx && profile torch_mix_nonvtx cuda,osrt -- "$here/workloads/torch_mix.py"
want torch_mix_nocuda && profile torch_mix_nocuda nvtx,osrt -- "$here/workloads/torch_mix.py"
want torch_graph && profile torch_graph cuda,nvtx --cuda-graph-trace=node -- "$here/workloads/torch_graph.py"
want torch_graph_graphlevel && profile torch_graph_graphlevel cuda,nvtx -- "$here/workloads/torch_graph.py"
want holdout_cnn && profile holdout_cnn cuda,nvtx -- "$here/workloads/torch_holdout.py"
want harness_clock && profile harness_clock cuda,nvtx --gpu-metrics-devices=all --gpu-metrics-frequency=100 -- "$here/workloads/torch_harness_clock.py"
# A training loop (backward on autograd threads) and threads launching for each other.
want torch_train && profile torch_train cuda,nvtx -- "$here/workloads/torch_train.py"
# PyTorch's operator ranges (emit_nvtx), backward's on the autograd thread.
want torch_emit_nvtx && profile torch_emit_nvtx cuda,nvtx -- "$here/workloads/torch_emit_nvtx.py"
# `nsyswrap diff`: the same workload twice, and once with mlp2 made slower.
want diff_base && profile diff_base cuda,nvtx -- "$here/workloads/torch_diff.py"
want diff_base_again && profile diff_base_again cuda,nvtx -- "$here/workloads/torch_diff.py"
want diff_slow && profile diff_slow cuda,nvtx -- "$here/workloads/torch_diff.py" --slow
# The program's own timings, recorded by `nsyswrap run`'s runner: the workloads are run
# unmodified through nsyswrap (its runner hooks torch.cuda.Event, do_bench and Timer).
user_run() {  # user_run NAME [timeout -s SIG SECONDS] -- script [args...]
  local name=$1; shift
  local stop=()
  while [ "$1" != "--" ]; do stop+=("$1"); shift; done; shift
  local dir
  dir=$(mktemp -d)
  "${stop[@]}" python3 -m nsyswrap run -o "$dir/run" --format json "$@" >"$dir/out.json" \
    || echo "user_run $name: nsyswrap exited $?"
  cp "$dir"/run/*.sqlite "$out/${tag}_user_$name.sqlite"
  rm -rf "$dir"
}
want user_seed && user_run seed -- "$here/workloads/torch_seed_timings.py"
want user_do_bench && user_run do_bench -- "$here/workloads/torch_do_bench.py"
want user_timer && user_run timer -- "$here/workloads/torch_timer.py"
want user_loops && user_run loops -- "$here/workloads/torch_event_loops.py"
want user_edges && user_run edges -- "$here/workloads/torch_event_edges.py"
# What was timed, as people write it: one function per variant, one helper for many
# workloads, size sweeps, nsyswrap's own harness beside the program's events, two processes.
want user_variants && user_run variants -- "$here/workloads/torch_user_variants.py"
want user_timed && user_run timed -- "$here/workloads/torch_user_timed.py"
want user_sweep && user_run sweep -- "$here/workloads/torch_user_sweep.py"
# The same sweep again with one size more: `nsyswrap diff` matches the rows by key.
want user_sweep_more && user_run sweep_more -- "$here/workloads/torch_user_sweep.py" \
  512 1024 2048 4096 8192
want user_harness && user_run harness -- "$here/workloads/torch_user_harness.py"
want user_two_procs && user_run two_procs -- "$here/workloads/torch_user_two_procs.py"
# Where in the program's code: a training loop whose lines name themselves in NVTX ranges,
# and the seed article's program, their lines traced by the runner (Python 3.12+).
want user_lines_train && user_run lines_train -- "$here/workloads/torch_lines_train.py"
want user_lines_seed && user_run lines_seed -- "$here/workloads/torch_seed_timings.py"
want user_lines_emit && user_run lines_emit -- "$here/workloads/torch_lines_train.py" 12 --emit-nvtx
# Interrupted (Ctrl-C) once it has timed 200 steps: what was recorded up to then is kept.
if want user_interrupt; then
  dir=$(mktemp -d)
  python3 -m nsyswrap run -o "$dir/run" --format json \
    "$here/workloads/torch_event_interrupt.py" >"$dir/out.json" 2>"$dir/err" &
  pid=$!
  for _ in $(seq 1200); do grep -q "^step 200:" "$dir/err" && break; sleep 0.1; done
  kill -INT "$pid"
  wait "$pid" || echo "user_run interrupt: nsyswrap exited $?"
  cp "$dir"/run/*.sqlite "$out/${tag}_user_interrupt.sqlite"
  rm -rf "$dir"
fi
# NVIDIA's own summaries of some fixtures, an independent reference for the tests.
for name in torch_mix torch_graph torch_train; do
  want $name || continue
  nsys stats -q -f csv -r cuda_gpu_kern_sum,nvtx_gpu_proj_sum \
    -o "$out/${tag}_$name.nsys_stats" "$out/${tag}_$name.sqlite" >/dev/null
done
ls -la "$out"
