"""Before and after: two runs of the same workload, item by item (kernels by name, the
user's range families, harness benchmarks, the program's own timings by call sites), each
with a verdict that survives noise.

Comparability comes first. Different GPUs make every verdict inconclusive; clocks apart by
more than `clock_tolerance` too; runs whose matched kernels hold too little of either run's
kernel time are different workloads. A different driver or nsys version is a caution.
Counts may change where the work of one instance does not (docs/analyses.md, "What makes
two runs comparable"). A range family is the user's unit of work (a step): it is compared
instance by instance whatever its count (4 steps against 5); where its instances ran a
different number of GPU operations, the row says so beside its verdict. A kernel's count
may change as far as the counts of the user's range families did (the run's repetitions:
steps, epochs), and no further: a kernel called a different number of times per step ran
different work under one name (one GEMM kernel for two layers' shapes, mixed anew), and
its row is inconclusive. Without range families a kernel's count may change by
count_tolerance.

A row is slower (faster) only when the whole bootstrap interval of its median change lies
above (below) zero *and* the change is at least the noise floor (2%): the samples' own
noise and the day-to-day drift of a machine both stay "no significant change".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .samples import DiffSide, Item
from .stats import METHOD, median_change_ci
from .thresholds import DiffThresholds

SLOWER, FASTER, SAME, INCONCLUSIVE = "slower", "faster", "no significant change", "inconclusive"
ADDED, REMOVED = "added", "removed"
COMPARABLE, CAUTION, NOT_COMPARABLE = "comparable", "comparable with caution", "not comparable"
ROW_COLUMNS = ["kind", "name", "key", "metric", "base_count", "new_count", "base_median_ns",
               "new_median_ns", "change", "ci_low", "ci_high", "method", "verdict", "reason",
               "total_change_ns"]


@dataclass
class Diff:
    base: DiffSide
    new: DiffSide
    rows: pd.DataFrame  # ROW_COLUMNS
    comparability: dict[str, Any]
    findings_appeared: list[dict[str, Any]] = field(default_factory=list)
    findings_disappeared: list[dict[str, Any]] = field(default_factory=list)
    thresholds: DiffThresholds = field(default_factory=DiffThresholds)

    def regressions(self, pct: float) -> pd.DataFrame:
        """Rows significantly slower by at least pct percent."""
        r = self.rows
        return r[(r["verdict"] == SLOWER) & (r["change"] >= pct / 100)]


def diff(base: DiffSide, new: DiffSide, thresholds: DiffThresholds | None = None) -> Diff:
    t = thresholds or DiffThresholds()
    comparability = _comparability(base, new, t)
    comparability["repetitions"] = _repetitions(base, new)
    rows = []
    for key in list(base.items) + [k for k in new.items if k not in base.items]:
        if key[2] == "event_per_call" and (key not in base.items or key not in new.items):
            continue  # an analysis.json without iterations has no event samples
        rows.append(_row(base.items.get(key), new.items.get(key), comparability, t))
    frame = pd.DataFrame(rows, columns=ROW_COLUMNS)
    # Ranges, the program's timings, benchmarks, then kernels; within each the biggest
    # change in total first.
    frame["_kind"] = frame["kind"].map({"range": 0, "timing": 1, "benchmark": 2, "kernel": 3})
    frame["_size"] = -frame["total_change_ns"].abs()
    frame = frame.sort_values(["_kind", "_size", "name", "metric"], kind="stable",
                              ignore_index=True).drop(columns=["_kind", "_size"])
    b = {(f["code"], f["range"]) for f in base.findings}
    n = {(f["code"], f["range"]) for f in new.findings}
    return Diff(base, new, frame, comparability,
                findings_appeared=[f for f in new.findings if (f["code"], f["range"]) not in b],
                findings_disappeared=[f for f in base.findings
                                      if (f["code"], f["range"]) not in n],
                thresholds=t)


def _comparability(base: DiffSide, new: DiffSide, t: DiffThresholds) -> dict[str, Any]:
    reasons, cautions = [], []
    if base.gpus and new.gpus and sorted(base.gpus) != sorted(new.gpus):
        reasons.append(f"different GPUs: {', '.join(base.gpus)} against {', '.join(new.gpus)}")
    if base.clock_mhz and new.clock_mhz:
        apart = abs(new.clock_mhz / base.clock_mhz - 1)
        if apart > t.clock_tolerance:
            reasons.append(f"GPU clocks apart: {base.clock_mhz:.0f} MHz against "
                           f"{new.clock_mhz:.0f} MHz (median)")
    elif bool(base.clock_mhz) != bool(new.clock_mhz):
        cautions.append("clocks sampled in one run only")
    if base.driver_version != new.driver_version:
        cautions.append(f"driver {base.driver_version} against {new.driver_version}")
    if base.nsys_version != new.nsys_version:
        cautions.append(f"nsys {base.nsys_version} against {new.nsys_version}")
    # Workload shape: which share of each run's kernel launches have a name the other run
    # also has. Counted in launches, not time: a slower kernel that replaced another (the
    # very change a diff is for) may hold most of the new run's time.
    matched = {k[1] for k in base.items if k[0] == "kernel"} & {
        k[1] for k in new.items if k[0] == "kernel"}
    shares = []
    for side in (base, new):
        total = sum(i.count for k, i in side.items.items() if k[0] == "kernel")
        inside = sum(i.count for k, i in side.items.items()
                     if k[0] == "kernel" and k[1] in matched)
        shares.append(inside / total if total else 1.0)
    if min(shares) < t.matched_share:
        reasons.append(f"different workloads: {shares[0]:.0%} of the base's and "
                       f"{shares[1]:.0%} of the new run's kernel launches have a match")
    elif min(shares) < 0.95:
        cautions.append(f"workload shape changed: {shares[0]:.0%} of the base's and "
                        f"{shares[1]:.0%} of the new run's kernel launches have a match")
    level = NOT_COMPARABLE if reasons else CAUTION if cautions else COMPARABLE
    return {"level": level, "reasons": reasons, "cautions": cautions,
            "matched_kernel_share": {"base": shares[0], "new": shares[1]},
            "clock_mhz": {"base": base.clock_mhz, "new": new.clock_mhz},
            "gpus": {"base": base.gpus, "new": new.gpus},
            "driver": {"base": base.driver_version, "new": new.driver_version},
            "nsys": {"base": base.nsys_version, "new": new.nsys_version},
            "method": METHOD, "noise_floor": t.noise_floor, "confidence": t.confidence}


def _other_work(b: Item, n: Item, t: DiffThresholds) -> str | None:
    """A range family whose instances ran a different number of GPU operations (median,
    beyond count_tolerance): what to say beside its verdict."""
    before, after = b.ops_per_instance, n.ops_per_instance
    if before is None or after is None or before == after or (
            before and abs(after / before - 1) <= t.count_tolerance):
        return None
    return f"GPU operations per instance {before:.3g} → {after:.3g}"


def _repetitions(base: DiffSide, new: DiffSide) -> dict[str, Any]:
    """How far the run's repetitions changed: the least and greatest count ratio (new /
    base) of the user's range families in both runs, and 1 (work done once). The families
    whose count changed are named."""
    low = high = 1.0
    changed = []
    for key, b in base.items.items():
        n = new.items.get(key)
        if key[0] != "range" or n is None or not b.count:
            continue
        ratio = n.count / b.count
        low, high = min(low, ratio), max(high, ratio)
        if n.count != b.count:
            changed.append({"name": b.name, "base_count": b.count, "new_count": n.count})
    return {"low": low, "high": high, "ranges": changed}


def _count_change(b: Item, n: Item, comp: dict[str, Any], t: DiffThresholds) -> str | None:
    """Why a kernel's count change makes its row inconclusive, if it does."""
    rep = comp.get("repetitions") or {"low": 1.0, "high": 1.0, "ranges": []}
    ratio = n.count / b.count if b.count else float("inf")
    if rep["low"] * (1 - t.count_tolerance) <= ratio <= rep["high"] * (1 + t.count_tolerance):
        return None
    if not rep["ranges"]:
        return f"count changed {b.count} → {n.count}: different work under one name"
    steps = ", ".join(f"{r['name']} {r['base_count']} → {r['new_count']}"
                      for r in rep["ranges"][:2])
    return (f"count changed {b.count} → {n.count}, unlike the ranges' ({steps}): called a "
            "different number of times per repetition")


def _row(b: Item | None, n: Item | None, comp: dict[str, Any], t: DiffThresholds) -> dict:
    one = b or n
    row = _blank_row(b, n)
    if b is None or n is None:
        row["verdict"] = ADDED if b is None else REMOVED
        return row
    row["change"] = n.median_ns / b.median_ns - 1 if b.median_ns else None
    why = _interval(b, n, t, row)
    if why is None and comp["level"] == NOT_COMPARABLE:
        why = "; ".join(comp["reasons"])
    if why is None and one.kind == "kernel":
        why = _count_change(b, n, comp, t)
    if why is not None:
        return {**row, "verdict": INCONCLUSIVE, "reason": why}
    row["verdict"], row["reason"] = _verdict(row, t)
    if one.kind == "range" and (other := _other_work(b, n, t)):
        row["reason"] = f"{row['reason']}; {other}" if row["reason"] else other
    return row


def _blank_row(b: Item | None, n: Item | None) -> dict:
    """The row's names and both sides' counts and medians, nothing judged yet."""
    one = b or n
    return {"kind": one.kind, "name": one.name, "key": one.key, "metric": one.metric,
            "base_count": b.count if b else 0, "new_count": n.count if n else 0,
            "base_median_ns": b.median_ns if b else None,
            "new_median_ns": n.median_ns if n else None, "change": None, "ci_low": None,
            "ci_high": None, "method": None, "verdict": None, "reason": "",
            # What the row adds to the run in all (median x count): orders the changes.
            "total_change_ns": (n.median_ns * n.count if n else 0)
            - (b.median_ns * b.count if b else 0)}


def _interval(b: Item, n: Item, t: DiffThresholds, row: dict) -> str | None:
    """The interval of the change written into `row` (change, ci_low, ci_high, method):
    bootstrapped from both sides' samples, else Welch's from their summary numbers. Where
    neither can be had, why not (the row is inconclusive)."""
    if b.samples is not None and n.samples is not None:
        if min(len(b.samples), len(n.samples)) < t.min_samples:
            return "too few samples"
        change, low, high = median_change_ci(b.samples, n.samples, confidence=t.confidence,
                                             resamples=t.resamples)
        row.update(change=change, ci_low=low, ci_high=high, method=METHOD)
    elif min(b.count, n.count) < t.min_samples:
        return "too few samples"
    elif b.std_ns is not None and n.std_ns is not None and b.mean_ns and n.mean_ns:
        low, high = _welch(b, n, t.confidence)
        row.update(ci_low=low, ci_high=high, method="welch (means; summary numbers only)")
    else:
        return ("no per-instance samples (a run's analysis.json has them; compare --format "
                "json needs --instances)")
    return None


def _verdict(row: dict, t: DiffThresholds) -> tuple[str, str]:
    """Slower or faster where the whole interval lies on one side of 0 and the change
    clears the noise floor; else no significant change (said to be below the floor where
    only the floor held it back). The verdict and the reason."""
    change = row["change"]
    if row["ci_low"] > 0 and change >= t.noise_floor:
        return SLOWER, row["reason"]
    if row["ci_high"] < 0 and change <= -t.noise_floor:
        return FASTER, row["reason"]
    if row["ci_low"] > 0 or row["ci_high"] < 0:
        return SAME, f"below the noise floor ({t.noise_floor:.0%})"
    return SAME, row["reason"]


def _welch(b: Item, n: Item, confidence: float) -> tuple[float, float]:
    """Interval of the relative change of means from counts, means and standard deviations
    (a normal approximation: an analysis.json has no kernel samples)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    se = np.sqrt(b.std_ns**2 / max(b.count, 1) + n.std_ns**2 / max(n.count, 1))
    d = n.mean_ns - b.mean_ns
    return float((d - z * se) / b.mean_ns), float((d + z * se) / b.mean_ns)
