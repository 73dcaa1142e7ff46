"""A plain PyTorch training loop annotated the usual way, and threads that launch GPU work
while another thread holds a range: the fixture for range attribution across threads.

Profiled on a GPU by scripts/make_fixtures_gpu.sh (h100_torch_train.sqlite). What it plants,
each checked against SQL by tests/test_attribution.py:
  - train_step > forward / backward / optimizer, 12 steps: backward's kernels are launched by
    PyTorch's autograd device thread while `backward` is open on the main thread;
  - main_waits: the main thread holds a range while a helper thread with no range of its
    own launches kernels (they belong to main_waits under --attribution process);
  - main_beside_worker: a helper thread launches kernels inside its own range worker_own
    (they stay worker_own's alone);
  - main_beside_library: a helper thread launches kernels inside a range of the "NCCL"
    NVTX domain (a library's own range is no ownership: they belong to main_beside_library).
"""

import threading

import nvtx
import torch
from torch import nn

import nsyswrap


def train(steps: int = 12) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 4096), nn.GELU(),
        nn.Linear(4096, 1024),
    ).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    batch = torch.randn(256, 1024).pin_memory()
    for step in range(steps):
        with nsyswrap.annotate("train_step"):
            x = batch.to("cuda", non_blocking=True)
            with nsyswrap.annotate("forward"):
                loss = model(x).float().pow(2).mean()
            with nsyswrap.annotate("backward"):
                loss.backward()
            with nsyswrap.annotate("optimizer"):
                opt.step()
                opt.zero_grad()
    torch.cuda.synchronize()


def _launch(a: torch.Tensor, n: int) -> None:
    for _ in range(n):
        a @ a


def threads() -> None:
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()

    def bare():  # no range of its own
        _launch(a, 8)
        torch.cuda.synchronize()

    def own():  # its own range: its work is its own
        with nsyswrap.annotate("worker_own"):
            _launch(a, 8)
        torch.cuda.synchronize()

    def library():  # only a library's range (as NCCL opens around each collective)
        with nvtx.annotate("ncclAllReduce", domain="NCCL"):
            _launch(a, 8)
        torch.cuda.synchronize()

    for name, target in (("main_waits", bare), ("main_beside_worker", own),
                         ("main_beside_library", library)):
        for _ in range(3):
            with nsyswrap.annotate(name):
                t = threading.Thread(target=target)
                t.start()
                t.join()


if __name__ == "__main__":
    train()
    threads()
    print("torch_train done")
