#!/usr/bin/env bash
# Everything in nsyswrap that needs a GPU, in one go: the scenario report (through
# `nsyswrap run`), doctor, the missing-libdw case, the accuracy table, the GPU test fixtures
# and the GPU-only tests. Needs CUDA, PyTorch, triton and nsys.
#   bash scripts/gpu_batch.sh OUTDIR
# On the project's lent H100, first: source .gpu/setup.sh (puts nsys on PATH, adds libdw).
set -uo pipefail
out=${1:?usage: gpu_batch.sh OUTDIR}
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
nsyswrap() { python3 -m nsyswrap "$@"; }

echo "== doctor"; date
nsyswrap doctor >"$out/doctor.txt" 2>&1; cat "$out/doctor.txt"

echo "== scenarios via nsyswrap run"; date
nsyswrap run --trace cuda,nvtx -o "$out/scenarios" --force examples/scenarios.py \
  >"$out/scenarios.txt" 2>&1
echo "exit $?"; tail -5 "$out/scenarios.txt"

echo "== nsyswrap run without libdw (the bare Nsight Compute nsys)"; date
(unset LD_LIBRARY_PATH; nsyswrap run --trace cuda,nvtx -o "$out/nolibdw" --force \
   tests/workloads/annotated.py; echo "exit $?"; ls "$out/nolibdw"; nsyswrap doctor) \
  >"$out/nolibdw.txt" 2>&1
cat "$out/nolibdw.txt" | grep -v "^annotated"

echo "== accuracy"; date
work=$(mktemp -d)
nsys profile -t cuda,nvtx --cuda-graph-trace=node --sample=none --cpuctxsw=none -f true \
  -o "$work/accuracy" python3 scripts/bench_accuracy.py measure "$out/accuracy.json" \
  >"$out/accuracy.profile.log" 2>&1
nsys export --type sqlite --force-overwrite true -o "$out/accuracy.sqlite" \
  "$work/accuracy.nsys-rep" >/dev/null 2>&1
python3 scripts/bench_accuracy.py table "$out/accuracy.sqlite" "$out/accuracy.json" \
  >"$out/accuracy.md" 2>&1
cat "$out/accuracy.md"

echo "== fixtures"; date
FIXTURE_TAG=h100 bash scripts/make_fixtures_gpu.sh "$out/fixtures" >"$out/fixtures.log" 2>&1
ls -la "$out/fixtures"

echo "== training loop: nsyswrap's ranges against SQL (backward on autograd threads)"; date
nsyswrap run --trace cuda,nvtx -o "$out/train" --force scripts/workloads/torch_train.py \
  >"$out/train.txt" 2>&1
echo "exit $?"
python3 scripts/check_training_attribution.py "$out/train/torch_train.sqlite" \
  | tee "$out/train_check.txt"

echo "== interrupted runs: what each way of stopping keeps (docs/nsys-quirks.md)"; date
timeout 500 python3 scripts/probe_interrupt.py "$out/interrupt" --seconds 8 \
  >"$out/interrupt.txt" 2>&1
echo "exit $?"; tail -12 "$out/interrupt.txt"

echo "== nsyswrap run --harness-only"; date
nsyswrap run --harness-only --trace cuda,nvtx -o "$out/harness_only" --force --format json \
  scripts/workloads/torch_harness_clock.py >"$out/harness_only.json" 2>"$out/harness_only.log"
echo "exit $?"; tail -3 "$out/harness_only.log"

echo "== annotate overhead (no profiler)"; date
python3 scripts/bench_annotate.py >"$out/annotate.md" 2>&1; cat "$out/annotate.md"

echo "== bench_compare (nsys stats vs nsyswrap compare)"; date
timeout 420 python3 scripts/bench_compare.py --timeout 150 --workdir /tmp/nsyswrap-bench \
  >"$out/bench_compare.md" 2>&1; cat "$out/bench_compare.md"

echo "== gpu tests"; date
python3 -m pytest -q -m gpu tests >"$out/gpu-tests.log" 2>&1
tail -3 "$out/gpu-tests.log"
date
