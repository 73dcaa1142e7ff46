"""A million record() calls (half a million measured pairs around a tiny kernel), for the
runner's memory and cost per record at scale. `python torch_event_million.py [PAIRS]`."""

import sys

import torch

pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
x = torch.zeros(1, device="cuda")
batch = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
         for _ in range(1000)]
total = 0.0
for done in range(0, pairs, len(batch)):
    for start, end in batch:
        start.record()
        x.add_(1)
        end.record()
    torch.cuda.synchronize()
    total += sum(s.elapsed_time(e) for s, e in batch)
print(f"{pairs} pairs timed, {total / pairs * 1e3:.2f} us per pair on average")
import resource  # noqa: E402

print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
