#!/usr/bin/env bash
# Re-make the multi-GPU fixtures (a DDP job over NCCL) on a host with 2 or more GPUs, nsys on
# PATH and the `nvtx` package importable:
#   bash scripts/make_fixtures_multigpu.sh [OUTDIR] [NPROC]     (default tests/data, 2)
# Three captures of scripts/workloads/torch_ddp_train.py:
#   TAG_ddp_straggler.rankN.sqlite  one report per rank (nsyswrap run --ranks), where the
#                                   last rank does 5 ms of host work before each backward;
#   TAG_ddp_control.rankN.sqlite    the same job without a straggler;
#   TAG_ddp_straggler_one.sqlite    the straggler job with every rank in one report
#                                   (nsys around torchrun).
# Keep NCCL's NVLink multicast off where the host asks for it (NCCL_NVLS_ENABLE=0 is passed
# through the environment untouched).
set -euo pipefail
out=${1:-tests/data}
nproc=${2:-2}
tag=${FIXTURE_TAG:-h200x$nproc}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$(dirname "$here")${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d)
last=$((nproc - 1))
workload="$here/workloads/torch_ddp_train.py"

for kind in straggler control; do
  extra=()
  [ "$kind" = straggler ] && extra=(--straggler "$last" --delay-ms 5)
  python3 -m nsyswrap run --ranks "$nproc" --trace cuda,nvtx -o "$work/$kind" --force \
    --format json "$workload" "${extra[@]}" > "$work/$kind.json"
  for ((r = 0; r < nproc; r++)); do
    cp "$work/$kind/torch_ddp_train.rank$r.sqlite" "$out/${tag}_ddp_$kind.rank$r.sqlite"
  done
done

nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -f true -o "$work/one" \
  python3 -m torch.distributed.run --nproc-per-node "$nproc" "$workload" \
  --straggler "$last" --delay-ms 5
nsys export --type sqlite --force-overwrite true -o "$out/${tag}_ddp_straggler_one.sqlite" \
  "$work/one.nsys-rep"
ls -la "$out"
