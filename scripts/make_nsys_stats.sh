#!/usr/bin/env bash
# NVIDIA's own call summaries of fixtures, the independent reference of tests/test_summaries.py:
#   bash scripts/make_nsys_stats.sh [REPORT.sqlite ...]    (default: the fixtures below)
# writes REPORT.nsys_stats_{cuda_api_sum,osrt_sum,cuda_gpu_mem_time_sum,cuda_gpu_mem_size_sum}.csv
# beside each report, for the tables it has (a CPU capture has no CUDA trace). nsys 2022.x
# names these reports cudaapisum, osrtsum, gpumemtimesum, gpumemsizesum; the files take the
# names of 2023 and later. nsys reads a copy of each report: nothing else is written.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
data=$(cd "$here/../tests/data" && pwd)
if [ $# -eq 0 ]; then
  set -- "$data/cpu2022_nvtx.sqlite" "$data/h100_torch_mix.sqlite" "$data/h100_torch_train.sqlite"
fi
modern=(cuda_api_sum osrt_sum cuda_gpu_mem_time_sum cuda_gpu_mem_size_sum)
if nsys stats --help-reports 2>&1 | grep -q '^ *cuda_api_sum'; then
  names=("${modern[@]}")
else
  names=(cudaapisum osrtsum gpumemtimesum gpumemsizesum)
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for report in "$@"; do
  stem=$(basename "$report" .sqlite)
  cp "$report" "$work/$stem.sqlite"
  for i in "${!names[@]}"; do
    rm -f "$work"/out_*.csv
    nsys stats -q -f csv -r "${names[$i]}" -o "$work/out" "$work/$stem.sqlite" >/dev/null 2>&1 || true
    made=("$work"/out_*.csv)
    if [ -s "${made[0]}" ]; then
      cp "${made[0]}" "$(dirname "$report")/$stem.nsys_stats_${modern[$i]}.csv"
      echo "made $(dirname "$report")/$stem.nsys_stats_${modern[$i]}.csv"
    fi
  done
  rm -f "$work/$stem.sqlite"
done
