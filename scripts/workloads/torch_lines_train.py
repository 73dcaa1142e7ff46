"""A small training loop as people write it, for "where in your code": which line of it
launched each kernel, copy and memset, and where the host's time went.

Each line that launches GPU work opens an NVTX range named after its own line number
(`with at(): ...` on the same line): the tests' truth, independent of nsyswrap's trace, is
the innermost "line N" range around each launching call in the report (SQL). What it plants:
  - forward: the model's own lines (fc1, relu, fc2), called through nn.Module;
  - backward: kernels launched by autograd's thread (pt_autograd_0), not a line of ours;
  - the optimizer's step and zero_grad: library code called from one line each;
  - a copy from pageable host memory (`.to("cuda")` of a plain CPU tensor);
  - an fp32 matmul with TF32 off (CUDA cores);
  - `.item()`: a blocking copy that waits for the GPU;
  - host work the GPU waits for: a sleep between steps (the idle it causes).

With --emit-nvtx the loop runs under torch.autograd.profiler.emit_nvtx(): every op an NVTX
range with its sequence number, which ties each backward kernel to the forward op (and so
the line) that made it.

Profiled by scripts/make_fixtures_gpu.sh through `nsyswrap run` (h200_user_lines_train.sqlite;
h200_user_lines_emit.sqlite with --emit-nvtx).
"""

import contextlib
import sys
import time

import nvtx
import torch
from torch import nn

# Steps: the first argument (the fixtures: 12); --emit-nvtx: every op an NVTX range.
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 12
EMIT_NVTX = "--emit-nvtx" in sys.argv


def at():
    """An NVTX range named after the line that opens it."""
    return nvtx.annotate(f"line {sys._getframe(1).f_lineno}", domain="lines")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1024, 4096)
        self.fc2 = nn.Linear(4096, 1024)

    def forward(self, x):
        with at(): h = self.fc1(x)  # noqa: E701
        with at(): h = torch.relu(h)  # noqa: E701
        with at(): return self.fc2(h)  # noqa: E701


def main(steps: int = STEPS):
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = MLP().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(512, 1024)  # pageable
    w = torch.randn(2048, 2048, device="cuda")
    ops = torch.autograd.profiler.emit_nvtx() if EMIT_NVTX else contextlib.nullcontext()
    with ops:
        loop(model, opt, data, w, steps)


def loop(model, opt, data, w, steps):
    for step in range(steps):
        with at(): x = data.to("cuda")  # noqa: E701
        with at(): loss = model(x).pow(2).mean()  # noqa: E701
        with at(): loss.backward()  # noqa: E701
        with at(): opt.step()  # noqa: E701
        with at(): opt.zero_grad(set_to_none=False)  # noqa: E701
        with at(): y = w @ w  # noqa: E701
        with at(): value = loss.item()  # noqa: E701
        time.sleep(0.002)  # host work: the GPU waits
    torch.cuda.synchronize()
    print(f"loss {value:.4f}, {y.shape}")


if __name__ == "__main__":
    main()
