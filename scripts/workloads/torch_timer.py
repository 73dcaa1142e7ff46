"""`torch.utils.benchmark.Timer`, as people call it: `timeit` on a large fp16 GEMM and on a
tiny elementwise op, and `blocked_autorange` on `F.linear`. Timer times with the host
clock around a synchronize, so its figure holds launch and Python overhead per call. Prints
the Measurements. Profiled unmodified through `nsyswrap run` by
scripts/make_fixtures_gpu.sh."""

import torch
import torch.nn.functional as F
from torch.utils.benchmark import Timer

a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
x = torch.randn(1 << 16, device="cuda")
inp = torch.rand(20, 8192, device="cuda", dtype=torch.float16)
weight = torch.rand(5120, 8192, device="cuda", dtype=torch.float16)

print(Timer("a @ b", globals={"a": a, "b": b}).timeit(100))
print(Timer("x * 2", globals={"x": x}).timeit(200))
print(Timer("F.linear(inp, weight)", globals={"F": F, "inp": inp, "weight": weight})
      .blocked_autorange(min_run_time=0.02))
