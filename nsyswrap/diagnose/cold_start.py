"""COLD_START: the first instance(s) of a repeated range are far slower than the rest
(lazy module loading, cuBLAS/cuDNN handles and autotuning, allocator growth, JIT)."""

from __future__ import annotations

import numpy as np

from ..analysis import Analysis
from ..units import fmt_ns, plural
from .finding import WARNING, Finding, Thresholds, range_label

CODE = "COLD_START"
METRICS = (("gpu_busy_ns", "GPU busy time"), ("gpu_span_ns", "GPU span"),
           ("cpu_ns", "CPU time"))


def leading_outliers(values: np.ndarray, factor: float, min_excess: float) -> int:
    """How many leading values exceed `factor` x the median of the rest of the series."""
    n = len(values)
    k = 0
    while k < n // 2:
        rest = np.median(values[k + 1:])
        v = values[k]
        if not (v > factor * rest and v - rest >= min_excess):
            break
        k += 1
    return k


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    return _user_ranges(a, t) + _harness_runs(a, t)


def _harness_runs(a: Analysis, t: Thresholds) -> list[Finding]:
    """Timed harness iterations that are still warming up: warmup was too short."""
    findings = []
    for (name, run), g in a.iterations.groupby(["benchmark", "run"], sort=False):
        if len(g) < t.cold_min_instances:
            continue
        cold = {}
        for col, words in (("gpu_busy_ns", "kernel time"), ("event_ns", "event time")):
            values = g[col].to_numpy(dtype="float64")
            if np.isnan(values).any():
                continue
            k = leading_outliers(values, t.cold_factor, t.cold_min_excess_ns)
            if k:
                cold[col] = (k, words, values[:k], float(np.median(values[k:])))
        if not cold:
            continue
        label = f"nsyswrap:{name}"
        warmup = a.runs[run].get("config", {}).get("warmup_iters")
        skip = max(k for k, *_ in cold.values())
        col, (k, words, first, rest) = next(iter(cold.items()))
        findings.append(Finding(
            code=CODE, severity=WARNING, range=label,
            message=(
                f"{label}: the first {'timed iteration' if k == 1 else f'{k} timed iterations'}"
                f" took {', '.join(fmt_ns(v) for v in first)} of {words} against a median of "
                f"{fmt_ns(rest)}: the warmup of {warmup} iteration(s) was too short, "
                f"skip {skip} more"
            ),
            evidence={"skip": skip, "warmup_iters": warmup, "instances": len(g),
                      "metrics": {c: {"cold_instances": kk, "first_ns": [float(v) for v in ff],
                                      "median_rest_ns": rr}
                                  for c, (kk, _, ff, rr) in cold.items()}},
            suggestion=f"Use warmup={(warmup or 0) + skip} or more, or warmup='auto'.",
        ))
    return findings


def _user_ranges(a: Analysis, t: Thresholds) -> list[Finding]:
    findings = []
    inst = a.user_instances().sort_values("start_ns")
    for (domain, name), g in inst.groupby(["domain", "name"], sort=False):
        if len(g) < t.cold_min_instances:
            continue
        cold = {}
        for col, words in METRICS:
            values = g[col].to_numpy(dtype="float64")
            if np.isnan(values).any() or not values.any():
                continue
            k = leading_outliers(values, t.cold_factor, t.cold_min_excess_ns)
            if k:
                cold[col] = (k, words, values[:k], float(np.median(values[k:])))
        if not cold:
            continue
        label = range_label(domain, name)
        skip = max(k for k, *_ in cold.values())
        col, (k, words, first, rest) = next(iter(cold.items()))
        firsts = ", ".join(fmt_ns(v) for v in first)
        findings.append(Finding(
            code=CODE,
            severity=WARNING,
            range=label,
            message=(
                f"{label}: the first {'instance' if k == 1 else f'{k} instances'} took "
                f"{firsts} of {words} against "
                f"a median of {fmt_ns(rest)} for the rest ({first[0] / rest:.0f}x): "
                f"skip {plural(skip, 'warmup iteration')} of {len(g)}"
            ),
            evidence={
                "skip": skip,
                "instances": len(g),
                "metrics": {
                    c: {"cold_instances": kk, "first_ns": [float(v) for v in ff],
                        "median_rest_ns": rr}
                    for c, (kk, _, ff, rr) in cold.items()
                },
            },
            suggestion=(
                f"Run at least {skip} warmup iteration(s) before timing, or drop the first "
                f"{skip} sample(s); the harness's warmup='auto' does this for you."
            ),
        ))
    return findings
