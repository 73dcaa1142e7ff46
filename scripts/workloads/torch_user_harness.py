"""A program that times with nsyswrap's own harness (`nsyswrap.benchmark`) and, beside it,
with CUDA events of its own: the harness's events are nsyswrap's, reconciled as its
benchmarks; only the program's own pair is the program's timing.
Profiled, unmodified, by scripts/make_fixtures_gpu.sh through `nsyswrap run`.
"""

import torch

import nsyswrap

a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
x = torch.randn(1 << 20, device="cuda")

print(nsyswrap.benchmark(lambda: a @ a, name="gemm2048", iters=30, warmup=5))
print(nsyswrap.benchmark(lambda: x.mul_(1.0001), name="scale", iters=30, warmup=5))

start = torch.cuda.Event(enable_timing=True)
end = torch.cuda.Event(enable_timing=True)
for _ in range(10):
    start.record()
    a @ a
    end.record()
    end.synchronize()
    print(f"own gemm: {start.elapsed_time(end):.4f} ms")
