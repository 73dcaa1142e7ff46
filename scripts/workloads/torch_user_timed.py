"""One timing helper shared by a suite of benchmarks, as people write it:

    def timed(name, fn): start.record(); fn(); end.record(); ... elapsed_time

used for seven workloads, each with its own reason for what the events read:

  uncovered   the work runs on a side stream the events' stream never waits for
  sync        a `.item()` inside the window: the host waits for the GPU mid-window
  graph       a CUDA graph of 20 kernels replayed (one launch)
  launches    200 tiny kernels: the host's launches, not the GPU, set the pace
  gemm        one large fp16 GEMM: the kernel is the window
  host_first  2 ms of host work (a sleep) before the kernel is launched
  joined      side-stream work joined back with wait_stream (torch records an event
              itself): the events cover it (no work missed)

Each is timed 15 times by the same three lines, after a sync (each window starts on an
idle GPU, so launching is in it). Prints each workload's median (ms).
Profiled, unmodified, by scripts/make_fixtures_gpu.sh through `nsyswrap run`.
"""

import statistics
import time

import torch

main = torch.cuda.current_stream()
side = torch.cuda.Stream()
a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
x = torch.randn(1 << 16, device="cuda")
small = torch.randn(256, 256, device="cuda")


def timed(name, fn, repeats=15):
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    values = []
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        values.append(start.elapsed_time(end))
    torch.cuda.synchronize()
    print(f"{name}: {statistics.median(values):.4f} ms")


def uncovered():
    with torch.cuda.stream(side):
        a @ b
    small.add_(1)


def sync():
    small.add_(1)
    (a @ b).sum().item()


graph = torch.cuda.CUDAGraph()
torch.cuda.synchronize()
with torch.cuda.graph(graph):
    for _ in range(20):
        small.mul_(1.0001)


def replay():
    graph.replay()


def launches():
    for _ in range(200):
        x.add_(1)


def gemm():
    a @ b


def host_first():
    time.sleep(0.002)
    x.add_(1)


def joined():
    side.wait_stream(main)
    with torch.cuda.stream(side):
        a @ b
    main.wait_stream(side)


WORKLOADS = [("uncovered", uncovered), ("sync", sync), ("graph", replay),
             ("launches", launches), ("gemm", gemm), ("host_first", host_first),
             ("joined", joined)]

if __name__ == "__main__":
    for _ in range(3):  # warm up every workload first
        for _, fn in WORKLOADS:
            fn()
    torch.cuda.synchronize()
    for name, fn in WORKLOADS:
        timed(name, fn)
