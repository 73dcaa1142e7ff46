"""Accuracy of GPU timers against the kernels nsys recorded in the same run.

One kernel per call (an elementwise add sized to run about 5 µs, 50 µs and 500 µs, and a
torch.cuda._sleep spin kernel of about 5 ms; sizes are found by timing a CUDA graph of 20
calls, which has no launch gaps),
timed with the nsyswrap harness in each mode, triton.testing.do_bench and
torch.utils.benchmark.Timer. The truth for each method is the nsys duration of the kernels
that method itself ran: for the harness, the GPU busy time of its timed iterations
(reconciled per iteration by nsyswrap compare); for the others, the median duration of the
add kernels launched inside their NVTX range (their L2 flushes excluded).

On a CUDA machine with nsys (measure under nsys, then tabulate):
    nsys profile -t cuda,nvtx --cuda-graph-trace=node --sample=none --cpuctxsw=none \
        -o acc -f true python scripts/bench_accuracy.py measure acc.json
    nsys export --type sqlite -o acc.sqlite --force-overwrite true acc.nsys-rep
    python scripts/bench_accuracy.py table acc.sqlite acc.json
"""

from __future__ import annotations

import json
import statistics
import sys

TARGETS_US = (5, 50, 500, 5000)
HARNESS_MODES = {
    "nsyswrap (flushed L2, back-pressure)": dict(flush_l2="all"),
    "nsyswrap (hot L2, back-pressure)": dict(flush_l2="none"),
    "nsyswrap (hot L2, no back-pressure)": dict(flush_l2="none", backpressure=False),
    "nsyswrap (CUDA graph of 10 calls)": dict(flush_l2="none", cuda_graph=10),
    "nsyswrap (10 calls per window, hot L2)": dict(flush_l2="none", calls=10),
}
# Demangled-name fragments of the measured kernels (torch.add, torch.cuda._sleep).
KERNELS = "CUDAFunctor_add|spin_kernel"


# Beyond 2**29 float32 elements (2 GiB) PyTorch splits an add into two kernels (32-bit
# indexing), and one add that large runs about 1.4 ms on an H100: the 5 ms point uses
# torch.cuda._sleep, a single spin kernel whose length is set in clock cycles.
MAX_ELEMENTS = 1 << 29


def _graph_us(torch, op, calls: int = 20) -> float:
    """Per-call time of `op` replayed from a CUDA graph (no launch gaps), for sizing."""
    op()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            op()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def _sized_kernel(torch, target_us: float):
    """(size, op name, a no-argument call) for one kernel of about `target_us`."""
    if target_us > 1000:
        def make(cycles):
            return lambda: torch.cuda._sleep(cycles)
        name, size = "sleep", int(target_us * 1e3)  # start from 1 cycle per ns
    else:
        def make(n):
            x = torch.rand(n, device="cuda")
            y = torch.empty_like(x)
            return lambda: torch.add(x, x, out=y)
        name, size = "add", 1 << 20
    for _ in range(8):
        us = _graph_us(torch, make(size))
        if abs(us - target_us) < 0.1 * target_us:
            break
        size = max(1 << 10, int(size * target_us / us))
        if name == "add":
            size = min(size, MAX_ELEMENTS)
    return size, name, make(size)


def measure(out_path: str) -> None:
    import torch
    import triton.testing
    from torch.utils.benchmark import Timer

    import nsyswrap

    results = []
    for target in TARGETS_US:
        n, op_name, add = _sized_kernel(torch, target)
        label = f"~{target} µs" if target < 1000 else f"~{target // 1000} ms"
        for method, options in HARNESS_MODES.items():
            name = f"acc|{label}|{method}"
            with nsyswrap.annotate(name, domain="accuracy"):
                r = nsyswrap.benchmark(add, name=name, iters=50, warmup=10, **options)
            results.append({"size": label, "op": op_name, "elements": n, "method": method,
                            "range": name,
                            "reported_ns": r.median_ns, "harness": name})
        name = f"acc|{label}|do_bench"
        with nsyswrap.annotate(name, domain="accuracy"):
            ms = triton.testing.do_bench(add, warmup=25, rep=100, return_mode="median")
        results.append({"size": label, "op": op_name, "elements": n,
                        "method": "triton.testing.do_bench",
                        "range": name, "reported_ns": ms * 1e6})
        name = f"acc|{label}|Timer"
        with nsyswrap.annotate(name, domain="accuracy"):
            t = Timer(stmt="add()", globals={"add": add}).blocked_autorange(min_run_time=0.5)
        results.append({"size": label, "op": op_name, "elements": n,
                        "method": "torch.utils.benchmark.Timer",
                        "range": name, "reported_ns": t.median * 1e9})
        torch.cuda.empty_cache()
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "triton": triton.__version__, "results": results}, f, indent=1)


def truths(report_path: str, results: list[dict]) -> dict[str, float]:
    import nsyswrap
    from nsyswrap.analysis import analyze

    report = nsyswrap.load(report_path)
    a = analyze(report)
    out = {}
    iters = a.iterations
    for r in results:
        if "harness" in r:
            g = iters[iters["benchmark"] == r["harness"]]
            out[r["range"]] = float((g["gpu_busy_ns"] / g["calls"]).median())
    att = a.attribution
    outer = a.instances[a.instances["domain"] == "accuracy"].set_index("name")["range_id"]
    pairs = att.op_pairs  # one row per (range, GPU operation), with the operation's times
    # gpu_ops lists the report's kernels first, in the same order: row i is kernel i.
    names = report.kernels["name"].astype(str)
    ops_are_add = pairs["event"].isin(report.kernels.index[names.str.contains(KERNELS)])
    for r in results:
        if "harness" not in r:
            mine = pairs[(pairs["range_id"] == outer[r["range"]]) & ops_are_add]
            out[r["range"]] = statistics.median((mine["end_ns"] - mine["start_ns"]).tolist())
    return out


def table(report_path: str, results_path: str) -> None:
    with open(results_path) as f:
        data = json.load(f)
    results = data["results"]
    truth = truths(report_path, results)
    print(f"{data['device']}, torch {data['torch']}, triton {data['triton']}. Truth: the nsys "
          "kernel time of the calls each method timed (same run).\n")
    print("| size (target) | method | reported (median) | nsys kernel | error | error % |")
    print("|---|---|---:|---:|---:|---:|")
    for r in results:
        t = truth[r["range"]]
        err = r["reported_ns"] - t
        print(f"| {r['size']} ({r['op']}) | {r['method']} | {r['reported_ns'] / 1e3:.2f} µs | "
              f"{t / 1e3:.2f} µs | {err / 1e3:+.2f} µs | {100 * err / t:+.1f}% |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "measure":
        measure(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
