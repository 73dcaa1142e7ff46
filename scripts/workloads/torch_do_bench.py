"""`triton.testing.do_bench`, as people call it, on three kernels: a large fp16 GEMM, a tiny
elementwise op (where do_bench's figure is mostly its own overhead) and `F.linear` with
return_mode="median". Prints what do_bench returned. Profiled unmodified through
`nsyswrap run` by scripts/make_fixtures_gpu.sh."""

import torch
import torch.nn.functional as F
from triton.testing import do_bench

a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
x = torch.randn(1 << 16, device="cuda")
inp = torch.rand(20, 8192, device="cuda", dtype=torch.float16)
weight = torch.rand(5120, 8192, device="cuda", dtype=torch.float16)

gemm_ms = do_bench(lambda: a @ b)
print(f"do_bench gemm 4096: {gemm_ms * 1e3:.1f} us")
tiny_ms = do_bench(lambda: x * 2)
print(f"do_bench x*2 (64k floats): {tiny_ms * 1e3:.2f} us")
linear_ms = do_bench(lambda: F.linear(inp, weight), return_mode="median")
print(f"do_bench F.linear median: {linear_ms * 1e3:.1f} us")
