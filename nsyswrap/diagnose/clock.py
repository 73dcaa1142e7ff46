"""CLOCK_VARIATION: the GPU clock sat below its maximum or moved during the timed windows.

Clock samples come from nsys GPU metrics (--gpu-metrics-devices: the GPC clock) when they
were captured, else from the harness, which reads the SM clock through NVML after each
timed iteration while the GPU is still busy with it."""

from __future__ import annotations

import numpy as np

from ..analysis import Analysis
from ..common.units import fmt_share
from .finding import WARNING, Finding, Thresholds

CODE = "CLOCK_VARIATION"
CLOCK_METRIC = "GPC Clock"


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    metrics = a.gpu_metrics
    clock = metrics[metrics["metric"] == CLOCK_METRIC] if not metrics.empty else metrics
    gpu_max = max((g.max_clock_mhz for g in a.info.gpus if g.max_clock_mhz), default=None)
    samples = _Samples(clock)
    findings = []
    for tw in a.timed_windows():
        b = tw.benchmarks
        if b.empty:
            continue
        # Columns, not a tuple per row: a report may hold a harness run in every step.
        for run, name, first, last in zip(*(b[c].tolist() for c in (
                "run", "benchmark", "first_start_ns", "last_end_ns")), strict=True):
            if not tw.judged(run):
                continue
            config = tw.config(run)
            values = samples.between(first, last)
            source = "nsys GPU metrics (GPC clock)"
            ref = gpu_max or (float(clock["value"].max()) if not clock.empty else None)
            if len(values) < 2 and tw.source == "harness":
                values = np.array([v for v in tw.runs[run].get("clock_mhz") or [] if v],
                                  dtype="float64")
                source = "NVML after each iteration (SM clock)"
                ref = config.get("max_clock_mhz") or gpu_max
            if len(values) >= 2 and ref:
                f = _evaluate(values, float(ref), tw.label(name), source, config, t)
                if f:
                    findings.append(f)
    return findings


class _Samples:
    """The clock samples in time order, found for each run by a binary search: a mask
    over every sample (and the samples' period found again) per run was O(runs x
    samples). A run's samples come in time order, not the table's: the statistics taken
    of them do not depend on the order."""

    def __init__(self, clock):
        times = clock["time_ns"].to_numpy() if not clock.empty else np.zeros(0, "int64")
        self.period = float(np.median(np.diff(times))) if len(times) > 1 else 0.0
        order = np.argsort(times, kind="stable")
        # As float64, as the comparisons with a float bound took them.
        self.times = times[order].astype("float64")
        self.values = (clock["value"].to_numpy(dtype="float64")[order] if not clock.empty
                       else np.zeros(0))

    def between(self, first_ns, last_ns) -> np.ndarray:
        """The samples from first_ns to last_ns, widened by one sample period: a short
        benchmark may fall between samples."""
        lo = np.searchsorted(self.times, first_ns - self.period, side="left")
        hi = np.searchsorted(self.times, last_ns + self.period, side="right")
        return self.values[lo:max(lo, hi)]


def _evaluate(values: np.ndarray, ref: float, label: str, source: str, config: dict,
              t: Thresholds) -> Finding | None:
    median = float(np.median(values))
    p10, p90 = (float(x) for x in np.percentile(values, [10, 90]))
    low = median < t.clock_min_share * ref
    varied = (p90 - p10) / median > t.clock_spread
    if not (low or varied):
        return None
    what = []
    if low:
        what.append(f"ran at a median {median:.0f} MHz, {fmt_share(median / ref)} of its "
                    f"{ref:.0f} MHz maximum")
    if varied:
        what.append(f"moved between {p10:.0f} and {p90:.0f} MHz (p10-p90)")
    locked = config.get("locked_clock_mhz")
    return Finding(
        CODE, WARNING, label,
        f"{label}: during the timed iterations the GPU clock {' and '.join(what)} "
        f"({len(values)} samples): kernel times scale with the clock",
        {"samples": len(values), "clock_median_mhz": median, "clock_p10_mhz": p10,
         "clock_p90_mhz": p90, "clock_max_mhz": ref, "source": source,
         "locked_clock_mhz": locked},
        "Compare runs only at equal clocks and report the clock with the time; lock clocks "
        "where you may (benchmark(..., lock_clocks='max'), needs root). Sustained heavy "
        "kernels hit the power limit and slow down: short benchmarks flatter them.",
    )
