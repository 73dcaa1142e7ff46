"""A small PyTorch workload that exercises what `nsyswrap compare` analyses.

Profiled on a GPU by scripts/make_fixtures_gpu.sh; the export becomes a test fixture.
Every part plants something a test checks against direct SQL:
  - nested push/pop ranges (step > forward / backward) in a user domain and the default domain;
  - overlapping kernels on two streams inside one range (GPU busy must be a union);
  - an explicit torch.cuda.synchronize() and an implicit one (.item()) inside ranges;
  - pageable and pinned host->device copies, a device->host copy;
  - many tiny kernels (launch-bound) and a host stall (time.sleep) inside ranges;
  - a repeated range whose first instance pays for cuBLAS/lazy-module initialisation;
  - fp32 GEMMs with TF32 off (SIMT kernels) next to bf16 ones;
  - a start/end range and a range on a second thread.
"""

import threading
import time

import nvtx
import torch

dev = torch.device("cuda")
app = nvtx.get_domain("app")


def rng(name, domain="app"):
    return nvtx.annotate(name, domain=domain)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    a32 = torch.randn(1024, 1024, device=dev)
    b32 = torch.randn(1024, 1024, device=dev)
    a16 = a32.bfloat16()
    b16 = b32.bfloat16()
    torch.cuda.synchronize()

    # Repeated range: the first instance carries cuBLAS handle creation and module loading.
    for i in range(6):
        with rng("gemm_fp32"):
            c = a32 @ b32
        with rng("gemm_bf16"):
            d = a16 @ b16
    torch.cuda.synchronize()

    # Nested ranges across the default and the user domain.
    w = torch.randn(1024, 1024, device=dev, requires_grad=True)
    for step in range(3):
        with nvtx.annotate("step"):
            with nvtx.annotate("forward"):
                y = (a32 @ w).relu().sum()
            with nvtx.annotate("backward"):
                y.backward()
            with nvtx.annotate("optimizer"):
                with torch.no_grad():
                    w -= 1e-3 * w.grad
                    w.grad = None

    # Two streams overlapping inside one range: single-thread sleep kernels leave the GPU
    # free to run both streams at once, so the union of busy time is less than the sum.
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    with rng("two_streams"):
        with torch.cuda.stream(s1):
            for _ in range(4):
                torch.cuda._sleep(100_000)
        with torch.cuda.stream(s2):
            for _ in range(4):
                torch.cuda._sleep(100_000)
        torch.cuda.synchronize()

    # Syncs: explicit and implicit.
    with rng("explicit_sync"):
        g = a16 @ b16
        torch.cuda.synchronize()
    with rng("item_sync"):
        v = (a16 @ b16).float().sum().item()

    # Copies: pageable H2D, pinned H2D, D2H.
    host = torch.randn(4096, 1024)
    pinned = host.pin_memory()
    with rng("copy_pageable"):
        x = host.to(dev)
    with rng("copy_pinned"):
        x2 = pinned.to(dev, non_blocking=True)
    with rng("copy_d2h"):
        back = x2.cpu()
    torch.cuda.synchronize()

    # Launch-bound: many tiny kernels; host-stall: one sleep between two kernels.
    t = torch.zeros(16, device=dev)
    for _ in range(3):
        with rng("tiny_kernels"):
            for _ in range(50):
                t.add_(1.0)
    torch.cuda.synchronize()
    for _ in range(3):
        with rng("host_stall"):
            g = a16 @ b16
            time.sleep(0.002)
            g = a16 @ b16
    torch.cuda.synchronize()

    # Start/end range (not tied to a thread stack) and a range on another thread.
    r = nvtx.start_range("startend_range", domain="app")
    h = a32 @ b32
    nvtx.end_range(r)

    def worker():
        with rng("worker_thread"):
            for _ in range(3):
                k = a16 @ b16
        torch.cuda.synchronize()

    th = threading.Thread(target=worker)
    th.start()
    th.join()
    nvtx.mark("done", domain="app")
    torch.cuda.synchronize()
    print("torch_mix done", v, float(back[0, 0]), float(c[0, 0]), float(d[0, 0]))


if __name__ == "__main__":
    main()
