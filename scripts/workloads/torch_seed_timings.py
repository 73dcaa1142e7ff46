"""The timing code of the seed article (shared/seeds/002_c4ec176d315b77a3.txt), unchanged in
what it times: three `F.linear` calls on the same inputs, each between its own pair of CUDA
events, in ten iterations, printed as t1, t2, t3 (ms). The article's three variants, one
function each (their call sites tell them apart in nsyswrap's report):

  copied   inputs made on the host and copied to the GPU (`.cuda()`) before each iteration
  on_gpu   inputs made on the GPU
  flushed  inputs made on the GPU, and a 40 MiB buffer zeroed before each window (L2 flush)

Profiled, unmodified, by scripts/make_fixtures_gpu.sh through `nsyswrap run`.
"""

import torch
import torch.nn.functional as F

A_SIZE = (20, 8192)
B_SIZE = (5120, 8192)
ITERATIONS = 10


def report(name, events):
    for i in range(ITERATIONS):
        print(f"{name} {i}: t1:{events[i][0].elapsed_time(events[i][1]):.4f}, "
              f"t2:{events[i][2].elapsed_time(events[i][3]):.4f}, "
              f"t3:{events[i][4].elapsed_time(events[i][5]):.4f}")


def copied():
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(6)] for _ in range(50)]
    for _ in range(10):  # warm up
        a = torch.rand(A_SIZE, dtype=torch.float16).cuda()
        b = torch.rand(B_SIZE, dtype=torch.float16).cuda()
        c = F.linear(a, b)
    for i in range(ITERATIONS):
        a = torch.rand(A_SIZE, dtype=torch.float16).cuda()
        b = torch.rand(B_SIZE, dtype=torch.float16).cuda()
        events[i][0].record()
        c = F.linear(a, b)
        events[i][1].record()
        events[i][2].record()
        c = F.linear(a, b)
        events[i][3].record()
        events[i][4].record()
        c = F.linear(a, b)
        events[i][5].record()
    torch.cuda.synchronize()
    report("copied", events)


def on_gpu():
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(6)] for _ in range(50)]
    for _ in range(10):
        a = torch.rand(A_SIZE, dtype=torch.float16, device="cuda")
        b = torch.rand(B_SIZE, dtype=torch.float16, device="cuda")
        c = F.linear(a, b)
    for i in range(ITERATIONS):
        a = torch.rand(A_SIZE, dtype=torch.float16, device="cuda")
        b = torch.rand(B_SIZE, dtype=torch.float16, device="cuda")
        events[i][0].record()
        c = F.linear(a, b)
        events[i][1].record()
        events[i][2].record()
        c = F.linear(a, b)
        events[i][3].record()
        events[i][4].record()
        c = F.linear(a, b)
        events[i][5].record()
    torch.cuda.synchronize()
    report("on_gpu", events)


def flushed():
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(6)] for _ in range(50)]
    fc = torch.empty(int(40 * (1024**2)), dtype=torch.int8, device="cuda")

    def flush_cache():
        fc.zero_()

    for _ in range(10):
        a = torch.rand(A_SIZE, dtype=torch.float16, device="cuda")
        b = torch.rand(B_SIZE, dtype=torch.float16, device="cuda")
        c = F.linear(a, b)
    for i in range(ITERATIONS):
        a = torch.rand(A_SIZE, dtype=torch.float16, device="cuda")
        b = torch.rand(B_SIZE, dtype=torch.float16, device="cuda")
        flush_cache()
        events[i][0].record()
        c = F.linear(a, b)
        events[i][1].record()
        flush_cache()
        events[i][2].record()
        c = F.linear(a, b)
        events[i][3].record()
        flush_cache()
        events[i][4].record()
        c = F.linear(a, b)
        events[i][5].record()
    torch.cuda.synchronize()
    report("flushed", events)


if __name__ == "__main__":
    copied()
    on_gpu()
    flushed()
