"""Size sweeps, as people write them:

- `sweep(sizes)`: one function, one pair of record() lines, a loop over sizes inside it
  (the size is a local, not an argument: only the GPU work tells the windows apart);
- `bench(n)`: one function called per size from a loop (the argument tells them apart).

Each size is timed 6 times (a matmul of n×n fp16, a relu). Prints n and the median (ms).
`python torch_user_sweep.py [SIZE ...]` sweeps those sizes (default 512 1024 2048 4096).
Profiled, unmodified, by scripts/make_fixtures_gpu.sh through `nsyswrap run`.
"""

import statistics
import sys

import torch

SIZES = [int(n) for n in sys.argv[1:]] or [512, 1024, 2048, 4096]


def sweep(sizes, repeats=6):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for n in sizes:
        x = torch.randn(n, n, device="cuda", dtype=torch.float16)
        values = []
        for _ in range(repeats):
            start.record()
            x @ x
            end.record()
            end.synchronize()
            values.append(start.elapsed_time(end))
        print(f"sweep n={n}: {statistics.median(values):.4f} ms")


def bench(n, repeats=6):
    x = torch.randn(n, n, device="cuda", dtype=torch.float16)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    values = []
    for _ in range(repeats):
        start.record()
        torch.relu(x)
        end.record()
        end.synchronize()
        values.append(start.elapsed_time(end))
    print(f"bench n={n}: {statistics.median(values):.4f} ms")


if __name__ == "__main__":
    sweep(SIZES)
    for n in SIZES:
        bench(n)
