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
    findings = []
    for tw in a.timed_windows():
        for b in tw.benchmarks.itertuples():
            if not tw.judged(b.run):
                continue
            config = tw.config(b.run)
            values = _metric_samples(clock, b) if not clock.empty else np.array([])
            source = "nsys GPU metrics (GPC clock)"
            ref = gpu_max or (float(clock["value"].max()) if not clock.empty else None)
            if len(values) < 2 and tw.source == "harness":
                values = np.array([v for v in tw.runs[b.run].get("clock_mhz") or [] if v],
                                  dtype="float64")
                source = "NVML after each iteration (SM clock)"
                ref = config.get("max_clock_mhz") or gpu_max
            if len(values) >= 2 and ref:
                f = _evaluate(values, float(ref), tw.label(b.benchmark), source, config, t)
                if f:
                    findings.append(f)
    return findings


def _metric_samples(clock, b) -> np.ndarray:
    times = clock["time_ns"].to_numpy()
    period = float(np.median(np.diff(times))) if len(times) > 1 else 0.0
    # A short benchmark may fall between samples: widen the window by one sample period.
    inside = (times >= b.first_start_ns - period) & (times <= b.last_end_ns + period)
    return clock["value"].to_numpy(dtype="float64")[inside]


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
