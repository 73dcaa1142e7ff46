"""CACHE_EFFECT: with a flushed and a hot L2 the kernels run at different speeds, beyond
noise (harness runs with flush_l2="interleave")."""

from __future__ import annotations

from ..analysis import Analysis
from ..units import fmt_ns, fmt_share
from .finding import INFO, WARNING, Finding, Thresholds

CODE = "CACHE_EFFECT"
MIN_PER_MODE = 3


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    findings = []
    for (name, _run), g in a.iterations.groupby(["benchmark", "run"], sort=False, observed=True):
        calls = float(g["calls"].iloc[0])
        flushed, hot = g[g["cache"] == "flushed"], g[g["cache"] == "hot"]
        if min(len(flushed), len(hot)) < MIN_PER_MODE or g["gpu_busy_ns"].isna().all():
            continue
        bf, bh = flushed["gpu_busy_ns"] / calls, hot["gpu_busy_ns"] / calls
        ef, eh = flushed["event_ns"] / calls, hot["event_ns"] / calls
        diff = float(bf.median() - bh.median())
        noise = max(_iqr(bf), _iqr(bh))
        rel = diff / float(bh.median())
        if abs(rel) < t.cache_min_share or abs(diff) <= 2 * noise:
            continue
        inverted = (float(ef.median()) - float(eh.median())) * diff < 0
        label = f"nsyswrap:{name}"
        l2 = next((gpu.l2_bytes for gpu in a.info.gpus if gpu.l2_bytes), None)
        l2_text = f" ({l2 / 2**20:.0f} MiB here)" if l2 else ""
        message = (
            f"{label}: the kernels take {fmt_ns(bf.median())} with a flushed L2 and "
            f"{fmt_ns(bh.median())} hot ({'+' if diff > 0 else ''}{fmt_share(rel)} flushed, "
            f"beyond the {fmt_ns(noise)} spread)"
        )
        if inverted:
            message += (f"; the events say the opposite ({fmt_ns(ef.median())} flushed, "
                        f"{fmt_ns(eh.median())} hot) because launch overhead hides the effect")
        findings.append(Finding(
            CODE, WARNING if inverted else INFO, label, message,
            {"busy_flushed_ns": float(bf.median()), "busy_hot_ns": float(bh.median()),
             "event_flushed_ns": float(ef.median()), "event_hot_ns": float(eh.median()),
             "relative_difference": rel, "noise_iqr_ns": noise, "events_inverted": inverted},
            "Quote the number your workload resembles: hot when the inputs were just written "
            "by the previous op and fit in L2" + l2_text + ", flushed when weights or inputs "
            "stream from memory once per step (large layers, the first use in a step).",
        ))
    return findings


def _iqr(s) -> float:
    return float(s.quantile(0.75) - s.quantile(0.25)) if len(s) > 1 else 0.0
