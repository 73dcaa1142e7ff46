"""triton.testing.do_bench's signature and recipe (estimate, warmup by time, repetitions,
statistics), timed with the host clock: a stand-in for machines without a GPU."""

import statistics
import time


def _summary(times, quantiles, return_mode):
    if quantiles is not None:
        ordered = sorted(times)
        values = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.mean,
            "median": statistics.median}[return_mode](times)


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """fn's time in ms: `warmup` ms of calls, then as many timed calls as fit in `rep` ms."""
    assert return_mode in ("min", "max", "mean", "median", "all")
    fn()
    begin = time.perf_counter()
    for _ in range(5):
        fn()
    estimate_ms = max((time.perf_counter() - begin) * 1e3 / 5, 1e-6)
    for _ in range(max(1, int(warmup / estimate_ms))):
        fn()
    times = []
    for _ in range(max(1, int(rep / estimate_ms))):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        begin = time.perf_counter()
        fn()
        times.append((time.perf_counter() - begin) * 1e3)
    return _summary(times, quantiles, return_mode)
