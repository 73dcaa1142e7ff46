"""The same small model timed twice, or once with a planted change, for `nsyswrap diff`.

    python torch_diff.py            # the base
    python torch_diff.py --slow     # mlp2 runs in fp32 (someone dropped its bf16 cast)

Annotated steps (step > embed, mlp1, mlp2, head) and two harness benchmarks (mlp1, mlp2).
scripts/make_fixtures_gpu.sh profiles it three times: base, base again, slow. The diff of
the two base runs must find no significant change; base against slow must find exactly the
mlp2 change (and what contains it: step, the mlp2 benchmark, its kernels).
"""

import sys

import torch
import torch.nn.functional as F

import nsyswrap

slow = "--slow" in sys.argv[1:]
torch.manual_seed(0)
dev = "cuda"
tokens, width, hidden = 2048, 2048, 8192
x0 = torch.randn(tokens, width, device=dev, dtype=torch.bfloat16)
w1 = torch.randn(hidden, width, device=dev, dtype=torch.bfloat16) / width**0.5
w2 = torch.randn(width, hidden, device=dev, dtype=torch.bfloat16) / hidden**0.5
w2_fp32 = w2.float()
head_w = torch.randn(1024, width, device=dev, dtype=torch.bfloat16) / width**0.5
scale = torch.ones(width, device=dev, dtype=torch.bfloat16)


def embed(x):
    return x * scale + 1.0


def mlp1(x):
    return F.gelu(F.linear(x, w1))


def mlp2(h):
    if slow:
        return F.linear(h.float(), w2_fp32).to(torch.bfloat16)
    return F.linear(h, w2)


def head(x):
    return F.linear(x, head_w).float().softmax(-1)


for step in range(40):
    with nsyswrap.annotate("step"):
        with nsyswrap.annotate("embed"):
            x = embed(x0)
        with nsyswrap.annotate("mlp1"):
            h = mlp1(x)
        with nsyswrap.annotate("mlp2"):
            y = mlp2(h)
        with nsyswrap.annotate("head"):
            out = head(y)
torch.cuda.synchronize()
h = mlp1(x0)
nsyswrap.benchmark(lambda: mlp1(x0), name="mlp1", iters=40, warmup=10)
nsyswrap.benchmark(lambda: mlp2(h), name="mlp2", iters=40, warmup=10)
print("torch_diff done", "slow" if slow else "base", float(out[0, 0]))
