"""CACHE_EFFECT: with a flushed and a hot L2 the kernels run at different speeds, beyond
noise (harness runs with flush_l2="interleave"); or, in a program's own timings, the same
kernels run at different speeds in different timed places (what ran before them differs:
the L2's contents)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..analysis.per_run import PerRun
from ..common.units import fmt_ns, fmt_share
from .finding import INFO, WARNING, Finding, Thresholds

CODE = "CACHE_EFFECT"
MIN_PER_MODE = 3


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    return _harness(a, t) + _same_work(a, t)


def _same_work(a: Analysis, t: Thresholds) -> list[Finding]:
    """Groups of the program's own timings whose windows hold the same operations (by name,
    in order), with kernel times apart beyond noise and cache_min_share."""
    it = a.user_timings.intervals
    if it.empty or it["gpu_busy_ns"].isna().all():
        return []
    # The columns read here only: a copy of every column of half a million windows was 200 MB.
    it = it[[c for c in ("kind", "work", "uncovered_ops", "joined_ops", "work_signature",
                         "label", "pid", "gpu_busy_ns") if c in it]]
    judged = it[it["kind"].isin(["events", "do_bench"]) & (it["work"] != "")]
    # Windows whose kernels shared the GPU with other streams' work: that work, not what
    # the L2 held, may be what slowed them.
    judged = judged[(judged["uncovered_ops"] == 0) & (judged["joined_ops"] == 0)]
    if "work_signature" in judged:
        # The same kernels on other sizes are other work: their launch grids (in the
        # signature) tell them apart where the names do not.
        judged = judged.assign(work=_work_shapes(judged))
    by_group = []
    for (label, pid), g in judged.groupby(["label", "pid"], sort=False):
        work = g["work"].mode()
        if len(work) and len(g) >= MIN_PER_MODE:
            busy = g.loc[g["work"] == work.iloc[0], "gpu_busy_ns"].dropna()
            if len(busy) >= MIN_PER_MODE:
                by_group.append((label, pid, work.iloc[0], float(busy.median()), _iqr(busy)))
    findings = []
    for (_pid, work), same in _by_work(by_group).items():
        if len(same) < 2:
            continue
        fast, slow = min(same, key=lambda x: x[3]), max(same, key=lambda x: x[3])
        diff = slow[3] - fast[3]
        noise = max(fast[4], slow[4])
        if diff < t.cache_min_share * fast[3] or diff <= 2 * noise:
            continue
        # The places apart from the fastest (and it): the others time it as it does.
        others = [x[0] for x in same if x is fast or
                  x[3] - fast[3] >= max(t.cache_min_share * fast[3], 2 * noise)]
        findings.append(Finding(
            CODE, INFO, None,
            f"the same GPU work ({_short(work)}) takes {fmt_ns(fast[3])} at {fast[0]} and "
            f"{fmt_ns(slow[3])} at {slow[0]} (+{fmt_share(diff / fast[3])}, beyond the "
            f"{fmt_ns(noise)} spread): what ran before it differs (L2 contents, clocks)",
            {"work": _names(work), "by_place": {x[0]: {"kernels_median_ns": x[3], "iqr_ns": x[4]}
                                        for x in same},
             "relative_difference": diff / fast[3], "noise_iqr_ns": noise},
            "Quote the number your workload resembles: fast for inputs just written that fit "
            "in L2, slow for data streamed from memory once per step.",
            ranges=others,
        ))
    return findings


def _work_shapes(windows: pd.DataFrame) -> pd.Categorical:
    """Each window's work and signature as "names #signature", each distinct pair written
    once; the categories in text order, so that a mode's ties go as they go for text."""
    # Each column numbered on its own, then the pairs of numbers: a MultiIndex of the two
    # factorized as tuples, one per window (60 MB at half a million windows).
    work_code, works = pd.factorize(windows["work"])
    signature_code, signatures = pd.factorize(windows["work_signature"])
    n = max(len(signatures), 1)
    code, distinct = pd.factorize(work_code.astype("int64") * n + signature_code)
    texts = np.array([f"{works[p // n]} #{signatures[p % n]}" for p in distinct], dtype=object)
    order = np.argsort(texts, kind="stable")
    rank = np.empty(len(order), "int64")
    rank[order] = np.arange(len(order))
    return pd.Categorical.from_codes(rank[code], categories=texts[order])


def _by_work(groups: list[tuple]) -> dict[tuple, list[tuple]]:
    out: dict[tuple, list[tuple]] = {}
    for g in groups:
        out.setdefault((g[1], g[2]), []).append(g)
    return out


def _names(work: str) -> str:
    """A window's work as named: without the shape's signature (" #123")."""
    return work.rsplit(" #", 1)[0]


def _short(work: str) -> str:
    names = _names(work).split(" | ")
    head = ", ".join(n[:40] for n in names[:3])
    return head + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _harness(a: Analysis, t: Thresholds) -> list[Finding]:
    findings = []
    # Only runs with both modes, MIN_PER_MODE of each, can show it: those found for all runs
    # at once (per_run.PerRun) and only theirs read, where a groupby's frame per run took
    # ~1 ms each of thousands of runs that flush the L2 never or always.
    per = PerRun(a.iterations)
    if per.count == 0:
        return findings
    cache = per.column("cache")
    both = np.minimum(per.any_count(cache == "flushed"), per.any_count(cache == "hot"))
    names = per.first_of("benchmark")
    for k in np.flatnonzero(both >= MIN_PER_MODE):
        name, g = names[k], per.frame(k, ["calls", "cache", "gpu_busy_ns", "event_ns"])
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
