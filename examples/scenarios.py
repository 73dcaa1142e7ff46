"""The scenario suite: each timing pathology nsyswrap diagnoses, planted next to a clean
control, all timed with the nsyswrap harness.

    nsyswrap run examples/scenarios.py          # on a CUDA machine with nsys
    # or by hand:
    nsys profile -t cuda,nvtx,osrt --sample=none --cpuctxsw=none -o scenarios \\
        python examples/scenarios.py && nsys export --type sqlite scenarios.nsys-rep
    nsyswrap compare scenarios.sqlite

`PLANTED` names the finding code each benchmark was built to trigger; controls have None
and must get no finding at all. tests/test_scenarios.py checks the committed report
(examples/reports/scenarios-h100.sqlite) against it. A planted benchmark may get other true
findings besides its own (a pageable copy is also host work); the README lists them.
"""

from __future__ import annotations

import time

# benchmark name -> the finding code it plants (None: a clean control)
PLANTED: dict[str, str | None] = {
    "control_linear": None,
    "control_linear_hot": None,
    "control_tiny_graph": None,
    "softmax_interleave": "CACHE_EFFECT",
    "launch_overhead_tiny": "LAUNCH_OVERHEAD",
    "launch_overhead_linear_hot": "LAUNCH_OVERHEAD",
    "host_work": "HOST_WORK_IN_WINDOW",
    "host_pause": "HOST_BOUND",
    "transfer": "TRANSFER_IN_WINDOW",
    "sync": "SYNC_IN_WINDOW",
    "cache_effect": "CACHE_EFFECT",
    "cold_start": "COLD_START",
    "uncovered_stream": "UNCOVERED_STREAM",
    "clock_sustained": "CLOCK_VARIATION",
}


def spin(seconds: float) -> None:
    """Busy host work (a sleep would let the OS schedule; this is Python doing things)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main() -> None:
    import torch
    import torch.nn.functional as F

    import nsyswrap

    dev = torch.device("cuda")
    torch.manual_seed(0)
    # The seed article's F.linear: 20x8192 activations, 5120x8192 fp16 weights (80 MiB).
    a = torch.rand(20, 8192, dtype=torch.float16, device=dev)
    b = torch.rand(5120, 8192, dtype=torch.float16, device=dev)
    a_host = a.cpu()
    t = torch.zeros(16, device=dev)
    side = torch.cuda.Stream()
    big = torch.rand(4096, 4096, dtype=torch.bfloat16, device=dev)
    huge = torch.rand(8192, 8192, dtype=torch.bfloat16, device=dev)

    def linear():
        return F.linear(a, b)

    def tiny():
        for _ in range(50):
            t.add_(1.0)

    common = dict(iters=30, warmup=5)

    # Controls: the recipe done right.
    nsyswrap.benchmark(linear, name="control_linear", flush_l2="all", **common)
    nsyswrap.benchmark(linear, name="control_linear_hot", flush_l2="none", **common)
    nsyswrap.benchmark(tiny, name="control_tiny_graph", cuda_graph=1, flush_l2="none",
                       **common)
    # CACHE_EFFECT, and no LAUNCH_OVERHEAD: a 12 µs kernel whose events add only their own
    # ~2.5 µs (the floor the harness measures), flushed and hot.
    scores = torch.rand(2048, 2048, device=dev)  # 16 MiB
    nsyswrap.benchmark(lambda: torch.softmax(scores, -1), name="softmax_interleave",
                       flush_l2="interleave", **common)

    # LAUNCH_OVERHEAD: launch-bound loops and a hot kernel timed without back-pressure.
    nsyswrap.benchmark(tiny, name="launch_overhead_tiny", backpressure=False,
                       flush_l2="none", **common)
    nsyswrap.benchmark(linear, name="launch_overhead_linear_hot", backpressure=False,
                       flush_l2="none", **common)

    # HOST_WORK_IN_WINDOW: Python work between two kernels inside the timed function.
    def host_work():
        F.linear(a, b)
        spin(300e-6)
        return F.linear(a, b)

    nsyswrap.benchmark(host_work, name="host_work", backpressure=False, **common)

    # HOST_BOUND: 800 µs of host time between two GEMMs; back-pressure keeps the GPU busy
    # while the host works, so the events agree with the kernels, but a loop of this
    # function runs at the host's pace.
    def host_pause():
        F.linear(a, b)
        time.sleep(800e-6)
        return F.linear(a, b)

    nsyswrap.benchmark(host_pause, name="host_pause", **common)

    # TRANSFER_IN_WINDOW: the input comes from (pageable) host memory on every call.
    nsyswrap.benchmark(lambda: F.linear(a_host.to(dev), b), name="transfer",
                       backpressure=False, **common)

    # SYNC_IN_WINDOW: reading a value back inside the timed function.
    nsyswrap.benchmark(lambda: F.linear(a, b).sum().item(), name="sync", **common)

    # CACHE_EFFECT: flushed and hot iterations interleaved in one run.
    nsyswrap.benchmark(linear, name="cache_effect", flush_l2="interleave", iters=40, warmup=5)

    # COLD_START: the first calls do lazy set-up work (as a JIT or autotuner would).
    calls = {"n": 0}

    def lazy():
        if calls["n"] < 2:
            for _ in range(20):
                big @ big
        calls["n"] += 1
        return F.linear(a, b)

    nsyswrap.benchmark(lazy, name="cold_start", warmup=0, iters=30)

    # UNCOVERED_STREAM: half the work goes to a side stream the events do not wait for.
    def uncovered():
        with torch.cuda.stream(side):
            big @ big
        return F.linear(a, b)

    nsyswrap.benchmark(uncovered, name="uncovered_stream", **common)
    torch.cuda.synchronize()

    # CLOCK_VARIATION: sustained heavy GEMMs drive the GPU into its power limit.
    def sustained():
        for _ in range(8):
            huge @ huge

    nsyswrap.benchmark(sustained, name="clock_sustained", iters=40, warmup=20,
                       flush_l2="none")
    torch.cuda.synchronize()
    print("scenarios done")


if __name__ == "__main__":
    main()
