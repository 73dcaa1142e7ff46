"""The seed article's timing code (shared/seeds/002_c4ec176d315b77a3.txt) as people write it
once they have three variants: ONE function, `test(variant)`, called for each variant from
one loop. Each call times three `F.linear` calls on the same inputs between their own pairs
of CUDA events, ten times, and prints t1, t2, t3 (ms).

  variant 1  inputs made on the host and copied to the GPU (`.cuda()`) before each iteration
  variant 2  inputs made on the GPU
  variant 3  inputs made on the GPU, and a 40 MiB buffer zeroed before each window (L2 flush)

The same three record() pairs serve all three variants: only the argument tells them apart.
Profiled, unmodified, by scripts/make_fixtures_gpu.sh through `nsyswrap run`.
"""

import torch
import torch.nn.functional as F

A_SIZE = (20, 8192)
B_SIZE = (5120, 8192)
ITERATIONS = 10
flush_buffer = torch.empty(int(40 * (1024**2)), dtype=torch.int8, device="cuda")


def inputs(variant):
    if variant == 1:
        return (torch.rand(A_SIZE, dtype=torch.float16).cuda(),
                torch.rand(B_SIZE, dtype=torch.float16).cuda())
    return (torch.rand(A_SIZE, dtype=torch.float16, device="cuda"),
            torch.rand(B_SIZE, dtype=torch.float16, device="cuda"))


def flush_cache(variant):
    if variant == 3:
        flush_buffer.zero_()


def test(variant):
    events = [[torch.cuda.Event(enable_timing=True) for _ in range(6)] for _ in range(50)]
    for _ in range(10):  # warm up
        a, b = inputs(variant)
        c = F.linear(a, b)
    for i in range(ITERATIONS):
        a, b = inputs(variant)
        flush_cache(variant)
        events[i][0].record()
        c = F.linear(a, b)
        events[i][1].record()
        flush_cache(variant)
        events[i][2].record()
        c = F.linear(a, b)
        events[i][3].record()
        flush_cache(variant)
        events[i][4].record()
        c = F.linear(a, b)
        events[i][5].record()
    torch.cuda.synchronize()
    for i in range(ITERATIONS):
        print(f"variant {variant} {i}: t1:{events[i][0].elapsed_time(events[i][1]):.4f}, "
              f"t2:{events[i][2].elapsed_time(events[i][3]):.4f}, "
              f"t3:{events[i][4].elapsed_time(events[i][5]):.4f}")
    return c


if __name__ == "__main__":
    for variant in (1, 2, 3):
        test(variant)
