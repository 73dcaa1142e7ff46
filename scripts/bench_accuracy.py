"""Accuracy of GPU timers against the kernels nsys recorded in the same run.

For GEMMs of about 5 µs, 50 µs, 500 µs and 5 ms (bf16), time the same call with the
nsyswrap harness in each mode, triton.testing.do_bench and torch.utils.benchmark.Timer.
Each method runs inside its own NVTX range; the truth for a method is the median duration
of the GEMM kernels launched inside its range (flush/fill kernels excluded), so every timer
is compared with the kernels it actually ran, cache state included.

On a CUDA machine with nsys (2 steps: measure under nsys, then tabulate):
    nsys profile -t cuda,nvtx --sample=none --cpuctxsw=none -o acc -f true \
        python scripts/bench_accuracy.py measure acc.json
    nsys export --type sqlite -o acc.sqlite --force-overwrite true acc.nsys-rep
    python scripts/bench_accuracy.py table acc.sqlite acc.json
"""

from __future__ import annotations

import json
import statistics
import sys

# (label, M, N, K): bf16 GEMM shapes chosen for the target kernel times on an H100.
SHAPES = [
    ("~5 µs", 1024, 1024, 1024),
    ("~50 µs", 4096, 4096, 1024),
    ("~500 µs", 8192, 8192, 2560),
    ("~5 ms", 16384, 16384, 6144),
]
HARNESS_MODES = {
    "nsyswrap (flushed, back-pressure)": dict(flush_l2="all"),
    "nsyswrap (hot, back-pressure)": dict(flush_l2="none"),
    "nsyswrap (hot, no back-pressure)": dict(flush_l2="none", backpressure=False),
    "nsyswrap (CUDA graph x10)": dict(flush_l2="none", cuda_graph=10),
}
# Kernels that are not the GEMM: L2 flushes and fills from the timers themselves.
NOT_GEMM = ("FillFunctor", "fill_kernel", "zero", "elementwise")


def measure(out_path: str) -> None:
    import torch
    import triton.testing
    from torch.utils.benchmark import Timer

    import nsyswrap

    results = []
    for label, m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)

        def gemm(a=a, b=b):
            return a @ b

        for method, options in HARNESS_MODES.items():
            rng = f"acc|{label}|{method}"
            with nsyswrap.annotate(rng, domain="accuracy"):
                r = nsyswrap.benchmark(gemm, name=rng, iters=50, warmup=10, **options)
            results.append({"shape": label, "method": method, "range": rng,
                            "reported_ns": r.median_ns})
        rng = f"acc|{label}|triton do_bench"
        with nsyswrap.annotate(rng, domain="accuracy"):
            ms = triton.testing.do_bench(gemm, warmup=25, rep=100, return_mode="median")
        results.append({"shape": label, "method": "triton.testing.do_bench", "range": rng,
                        "reported_ns": ms * 1e6})
        rng = f"acc|{label}|torch Timer"
        with nsyswrap.annotate(rng, domain="accuracy"):
            t = Timer(stmt="gemm()", globals={"gemm": gemm}).blocked_autorange(min_run_time=0.2)
        results.append({"shape": label, "method": "torch.utils.benchmark.Timer", "range": rng,
                        "reported_ns": t.median * 1e9})
        del a, b
        torch.cuda.empty_cache()
    with open(out_path, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "results": results}, f, indent=1)


def truth_per_range(report_path: str, ranges: list[str]) -> dict[str, float]:
    """Median GEMM kernel time (per call) of the kernels launched inside each range."""
    import nsyswrap
    from nsyswrap.analysis.ranges import attribute

    report = nsyswrap.load(report_path)
    att = attribute(report)
    outer = report.ranges[report.ranges["domain"] == "accuracy"].set_index("name")["range_id"]
    pairs = att.op_pairs.merge(att.gpu_ops, left_on="event", right_index=True)
    kernels = pairs[(pairs["kind"] == "kernel")
                    & ~pairs["name"].str.contains("|".join(NOT_GEMM), case=False)]
    out = {}
    for rng in ranges:
        mine = kernels[kernels["range_id"] == outer[rng]]
        durations = (mine["end_ns"] - mine["start_ns"]).tolist()
        out[rng] = statistics.median(durations) if durations else float("nan")
    return out


def table(report_path: str, results_path: str) -> None:
    with open(results_path) as f:
        data = json.load(f)
    results = data["results"]
    truth = truth_per_range(report_path, [r["range"] for r in results])
    print(f"Device: {data['device']}, torch {data['torch']}; truth = median nsys kernel "
          "time of the GEMMs each method launched (same run)\n")
    print("| kernel | method | reported | nsys kernel | error | error % |")
    print("|---|---|---:|---:|---:|---:|")
    for r in results:
        t = truth[r["range"]]
        err = r["reported_ns"] - t
        print(f"| {r['shape']} | {r['method']} | {r['reported_ns'] / 1e3:.2f} µs | "
              f"{t / 1e3:.2f} µs | {err / 1e3:+.2f} µs | {100 * err / t:+.1f}% |")


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "measure":
        measure(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "table":
        table(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
