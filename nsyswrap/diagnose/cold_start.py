"""COLD_START: the first instance(s) of a repeated range are far slower than the rest
(lazy module loading, cuBLAS/cuDNN handles and autotuning, allocator growth, JIT)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from ..analysis import Analysis
from ..analysis.per_run import PerRun
from ..common.units import fmt_ns, listed, plural
from .finding import WARNING, Finding, Thresholds, range_label

CODE = "COLD_START"
METRICS = (("gpu_busy_ns", "GPU busy time"), ("gpu_span_ns", "GPU span"),
           ("cpu_ns", "wall time"))
HARNESS_METRICS = (("gpu_busy_ns", "kernel time"), ("event_ns", "event time"))


def leading_outliers(values: np.ndarray, factor: float, min_excess: float) -> int:
    """How many leading values exceed `factor` x the median of the rest of the series.

    Each step's median (of values[k + 1:]) is read from the series sorted once, skipping
    the values already stepped over: a median taken afresh per step cost a partition of the
    whole series each (2 s for 364 cold windows of half a million). The same numbers as
    np.median: the middle value, or the mean of the middle two."""
    n = len(values)
    values = np.asarray(values, dtype="float64")
    if np.isnan(values).any():  # np.median's NaN; never so for the checks' series
        return _leading_outliers_afresh(values, factor, min_excess)
    rest = values[1:]
    order = np.argsort(rest, kind="stable")
    ordered = rest[order]
    rank = np.empty(len(rest), "int64")
    rank[order] = np.arange(len(rest))
    gone: list[int] = []  # the ranks of rest[:k], sorted

    def nth(j: int) -> float:
        """The j-th smallest (from 0) of rest[k:]: the first rank p with j + 1 ranks up
        to it left."""
        lo, hi = j, j + len(gone)
        while lo < hi:
            mid = (lo + hi) // 2
            if mid + 1 - bisect.bisect_right(gone, mid) >= j + 1:
                hi = mid
            else:
                lo = mid + 1
        return float(ordered[lo])

    k = 0
    while k < n // 2:
        m = len(rest) - k
        low, high = nth((m - 1) // 2), nth(m // 2)
        median = low if m % 2 else (low + high) / 2
        v = values[k]
        if not (v > factor * median and v - median >= min_excess):
            break
        bisect.insort(gone, int(rank[k]))
        k += 1
    return k


def _leading_outliers_afresh(values: np.ndarray, factor: float, min_excess: float) -> int:
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


@dataclass(frozen=True)
class _Cold:
    """The leading outliers of one metric of a series of instances."""

    count: int
    words: str
    first_ns: list[float]
    median_rest_ns: float


def _cold_metrics(g, metrics, t: Thresholds) -> dict[str, _Cold]:
    """Per metric (column, words) of the instances `g` in time order: its cold start."""
    cold = {}
    for col, words in metrics:
        values = g[col].to_numpy(dtype="float64")
        if np.isnan(values).any() or not values.any():
            continue
        k = leading_outliers(values, t.cold_factor, t.cold_min_excess_ns)
        if k:
            cold[col] = _Cold(k, words, [float(v) for v in values[:k]],
                              float(np.median(values[k:])))
    return cold


def _evidence(cold: dict[str, _Cold], skip: int, instances: int) -> dict:
    return {"skip": skip, "instances": instances,
            "metrics": {c: {"cold_instances": x.count, "first_ns": x.first_ns,
                            "median_rest_ns": x.median_rest_ns} for c, x in cold.items()}}


def _harness_runs(a: Analysis, t: Thresholds) -> list[Finding]:
    """Timed windows that are still warming up: the harness's warmup was too short, or the
    program's own timing starts cold."""
    findings = []
    for tw in a.timed_windows():
        per = PerRun(tw.iterations)
        names, run_ids = per.first_of("benchmark"), per.first_of("run")
        for k in _maybe_cold(per, t):
            name, run = names[k], int(run_ids[k])
            if not tw.judged(run):
                continue
            g = per.frame(k, [c for c, _ in HARNESS_METRICS])
            cold = _cold_metrics(g, HARNESS_METRICS, t)
            if not cold:
                continue
            label = tw.label(name)
            if tw.source == "harness":
                findings.append(_cold_harness_run(label, tw.config(run), cold, len(g)))
            else:
                findings.append(_cold_user_run(label, cold, len(g)))
    return findings


def _maybe_cold(per: PerRun, t: Thresholds) -> np.ndarray:
    """The runs with cold_min_instances windows or more whose first window, in some metric,
    is the first of leading_outliers (above cold_factor x the median of the rest, by
    cold_min_excess_ns): found for all runs at once (per_run.PerRun), so that only those
    are read one by one. A report may hold a harness run in every training step."""
    if per.count == 0:
        return np.zeros(0, "int64")
    first = np.zeros(len(per.windows), dtype=bool)
    first[per.first] = True
    maybe = np.zeros(per.count, dtype=bool)
    for col, _ in HARNESS_METRICS:
        values = per.column(col).astype("float64", copy=False)
        rest = per.median(values, where=~first)
        head = values[per.first]
        with np.errstate(invalid="ignore"):
            maybe |= (head > t.cold_factor * rest) & (head - rest >= t.cold_min_excess_ns)
    return np.flatnonzero(maybe & (per.sizes >= t.cold_min_instances))


def _cold_user_run(label: str, cold: dict[str, _Cold], n: int) -> Finding:
    skip = max(x.count for x in cold.values())
    first = next(iter(cold.values()))
    what = "measurement" if first.count == 1 else f"{first.count} measurements"
    return _cold_window_finding(
        label, cold, n, what,
        f"for the other {n - first.count}: they time start-up work (library handles, "
        "autotuning, allocation, clocks ramping up), not the steady state", {},
        f"Warm up before timing (run the timed code {skip} or more times first), or leave "
        f"out the first {skip} measurement(s).")


def _cold_harness_run(label: str, config: dict, cold: dict[str, _Cold], n: int) -> Finding:
    warmup = config.get("warmup_iters")
    skip = max(x.count for x in cold.values())
    first = next(iter(cold.values()))
    what = "timed iteration" if first.count == 1 else f"{first.count} timed iterations"
    return _cold_window_finding(
        label, cold, n, what,
        f": the warmup of {warmup} iteration(s) was too short, skip {skip} more",
        {"warmup_iters": warmup},
        f"Use warmup={(warmup or 0) + skip} or more, or warmup='auto'.")


def _cold_window_finding(label: str, cold: dict[str, _Cold], n: int, what: str, why: str,
                         evidence: dict, advice: str) -> Finding:
    """COLD_START on timed windows: the first `what` took ... against the median, `why`."""
    first = next(iter(cold.values()))
    skip = max(x.count for x in cold.values())
    joint = " " if why.startswith("for") else ""
    return Finding(
        code=CODE, severity=WARNING, range=label,
        message=(f"{label}: the first {what} took "
                 f"{listed([fmt_ns(v) for v in first.first_ns])} of {first.words} against "
                 f"a median of {fmt_ns(first.median_rest_ns)}{joint}{why}"),
        evidence={**_evidence(cold, skip, n), **evidence},
        suggestion=advice,
    )


def _user_ranges(a: Analysis, t: Thresholds) -> list[Finding]:
    findings = []
    user = a.judged_rows(by_start=True)
    # Families with fewer instances skipped at once, not one step each.
    for (domain, name), at in a.user_families(user, min_size=t.cold_min_instances):
        # This family's columns only, decoded at its rows.
        g = a.instances.rows(user[at], ["family_id", "start_ns", *(c for c, _ in METRICS)])
        cold = _cold_metrics(g, METRICS, t)
        if not cold:
            continue
        label = range_label(domain, name)
        skip = max(x.count for x in cold.values())
        first = next(iter(cold.values()))
        # The rest may have a median of 0 (the first instance alone launched GPU work).
        ratio = (f" ({first.first_ns[0] / first.median_rest_ns:.0f}x)"
                 if first.median_rest_ns > 0 else "")
        findings.append(Finding(
            code=CODE,
            severity=WARNING,
            range=label,
            message=(
                f"{label}: the first "
                f"{'instance' if first.count == 1 else f'{first.count} instances'} took "
                f"{listed([fmt_ns(v) for v in first.first_ns])} of {first.words} against a "
                f"median of {fmt_ns(first.median_rest_ns)} for the rest{ratio}: "
                f"skip {plural(skip, 'warmup iteration')} of {len(g)}"
            ),
            evidence=_evidence(cold, skip, len(g)),
            suggestion=(
                f"Run at least {skip} warmup iteration(s) before timing, or drop the first "
                f"{skip} sample(s); the harness's warmup='auto' does this for you."
            ),
        ))
    return findings
