"""A program timing a GEMM with CUDA events in a loop that runs until it is interrupted
(Ctrl-C or SIGTERM): what it recorded up to the interrupt must be kept and reconciled.
Profiled through `nsyswrap run`, stopped after a few seconds, by scripts/make_fixtures_gpu.sh."""

import time

import torch

a = torch.randn(2048, 2048, device="cuda")
step = 0
while True:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    a @ a
    end.record()
    end.synchronize()
    print(f"step {step}: {start.elapsed_time(end):.3f} ms", flush=True)
    step += 1
    time.sleep(0.005)  # a few hundred steps a second: a small report
