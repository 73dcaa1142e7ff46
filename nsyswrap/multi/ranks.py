"""Ranks side by side: per-rank step times, GPU busy, compute against communication, and
the time each rank waits inside collectives for the last one to arrive.

Collectives are matched across ranks by their order: the Nth NCCL kernel of a name on one
rank is the Nth of that name on every other (NCCL requires every rank of a communicator to
call its collectives in the same order). A collective ends on all ranks at about the same
moment (none can finish before the last rank's data arrived), so the rank that arrived
last spends the least time inside it: its duration is the transfer itself, and what every
other rank spent beyond it is waiting. That needs no common clock. Where the reports carry
their capture's UTC start, the collectives' ends are also put on one clock to check that
they do end together (`clock`, docs/analyses.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..common.errors import BadInputError
from .identify import BY_ORDER
from .summary import RankSummary, ReportSummary
from .thresholds import RankThresholds

RANK_COLUMNS = ["rank", "identified_by", "source", "pid", "devices", "steps",
                "step_median_ns", "step_gpu_span_median_ns", "gpu_busy_share",
                "compute_median_ns", "comm_median_ns", "overlapped_comm_median_ns",
                "exposed_comm_median_ns", "comm_wait_median_ns", "comm_wait_share",
                "last_arrival_share", "collectives"]
STEP_COLUMNS = ["rank", "index", "cpu_ns", "work_ns", "gpu_span_ns", "compute_ns", "comm_ns",
                "exposed_comm_ns", "comm_wait_ns"]


@dataclass
class RankAnalysis:
    """Plain data for the cross-rank checks and the renderers."""

    summaries: list[ReportSummary]
    ranks: list[RankSummary]  # numbered, in rank order
    step_family: str | None
    table: pd.DataFrame  # RANK_COLUMNS, one row per rank
    steps: pd.DataFrame  # STEP_COLUMNS, one row per (rank, step instance) kept
    families: pd.DataFrame  # family, rank, count, cpu/work/gpu busy/compute medians
    instances: pd.DataFrame  # rank, family, index, work_ns, compute_ns (steps kept)
    collectives: pd.DataFrame  # name, ordinal, step, rank, duration_ns, wait_ns, last
    clock: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    thresholds: RankThresholds = field(default_factory=RankThresholds)
    findings: list = field(default_factory=list)
    # Reports that could not be read (multi.parallel.ReportFailure), left out.
    failed: list = field(default_factory=list)


def analyze_ranks(summaries: list[ReportSummary],
                  thresholds: RankThresholds | None = None) -> RankAnalysis:
    thresholds = thresholds or RankThresholds()
    notes = [f"{s.source}: {s.text_note}" for s in summaries if s.text_note]
    ranks = _numbered([r for s in summaries for r in s.ranks], notes)
    if not ranks:
        raise BadInputError("no process with GPU kernels or NVTX ranges in these reports: "
                            "nothing to put side by side (profile with -t cuda,nvtx)")
    families = {r.step_family for r in ranks}
    step = ranks[0].step_family if len(families) == 1 else None
    if len(families) > 1:
        notes.append("ranks disagree on the step (the outermost repeated range: "
                     f"{', '.join(sorted(str(f) for f in families))}): no per-step view")
    coll, clock = _collectives(ranks, notes)
    steps = _steps(ranks, step, coll, thresholds)
    inst = _kept_instances(ranks, thresholds)
    return RankAnalysis(
        summaries=summaries, ranks=ranks, step_family=step,
        table=_table(ranks, steps, coll), steps=steps, families=_families(inst),
        instances=inst, collectives=coll, clock=clock, notes=notes, thresholds=thresholds)


def _numbered(ranks: list[RankSummary], notes: list[str]) -> list[RankSummary]:
    """Ranks the reports named keep their number; the rest (and duplicates) get the lowest
    free numbers in the order given, and say so."""
    seen: set[int] = set()
    later = []
    for r in ranks:
        if r.rank is None or r.rank in seen:
            if r.rank is not None:
                notes.append(f"rank {r.rank} appears twice ({r.source}): numbered by order")
            later.append(r)
        else:
            seen.add(r.rank)
    free = (n for n in range(len(ranks) + len(seen) + 1) if n not in seen)
    for r in later:
        r.rank, r.identified_by = next(free), BY_ORDER
    return sorted(ranks, key=lambda r: r.rank)


def _collectives(ranks: list[RankSummary], notes: list[str]
                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    cols = ["name", "ordinal", "step", "rank", "duration_ns", "wait_ns", "last", "end_abs_ns"]
    frames = []
    for r in ranks:
        c = r.collectives
        if c.empty:
            continue
        offset = r.session_start_utc_ns
        frames.append(pd.DataFrame({
            "name": c["name"], "ordinal": c["ordinal"], "step": c["step"], "rank": r.rank,
            "duration_ns": c["end_ns"] - c["start_ns"],
            "end_abs_ns": (c["end_ns"] + offset) if offset is not None else np.nan,
        }))
    clock = {"rule": "durations: the last rank to arrive spends the least time in a "
                     "collective", "checked": False}
    if len(ranks) < 2 or len(frames) < len(ranks):
        if len(ranks) >= 2 and frames:
            notes.append("some ranks ran no NCCL kernels: no collective waits")
        return pd.DataFrame(columns=cols), clock
    all_c = pd.concat(frames, ignore_index=True)
    per = all_c.groupby(["name", "ordinal"], observed=True).size()
    complete = per[per == len(ranks)].index
    counts = all_c.groupby(["name", "rank"], observed=True).size().unstack()
    uneven = counts[counts.nunique(axis=1) > 1]
    for name, row in uneven.iterrows():
        notes.append(f"{name}: {', '.join(f'rank {r}: {int(n)}' for r, n in row.items())} "
                     f"kernels; the first {int(row.min())} of each are matched")
    keyed = all_c.set_index(["name", "ordinal"])
    m = keyed.loc[keyed.index.isin(complete)].reset_index()
    fastest = m.groupby(["name", "ordinal"], observed=True)["duration_ns"].transform("min")
    m["wait_ns"] = m["duration_ns"] - fastest
    m["last"] = m["duration_ns"] == fastest
    ends = m.groupby(["name", "ordinal"], observed=True)["end_abs_ns"]
    skew = (ends.max() - ends.min()).dropna()
    if len(skew):
        same = len({r.source for r in ranks}) == 1
        clock.update({
            "checked": True,
            "timebase": "one report" if same else "each report's UTC capture start "
                        "(TARGET_INFO_SESSION_START_TIME)",
            "end_skew_median_ns": float(skew.median()),
            "end_skew_p90_ns": float(skew.quantile(0.9)),
        })
        transfer = float(m.loc[m["last"], "duration_ns"].median())
        if clock["end_skew_median_ns"] > max(100_000, transfer):
            notes.append(f"matched collectives end {clock['end_skew_median_ns'] / 1e3:.0f} µs "
                         "apart (median) on the capture clocks: the reports' clocks may not "
                         "agree (other hosts?); waits come from durations, which need none")
    return m[cols], clock


def _keep(index: pd.Series, count: int, t: RankThresholds) -> np.ndarray:
    skip = t.skip_first_steps if count - t.skip_first_steps >= 4 else 0
    return (index >= skip).to_numpy()


def _steps(ranks: list[RankSummary], step: str | None, coll: pd.DataFrame,
           t: RankThresholds) -> pd.DataFrame:
    if step is None:
        return pd.DataFrame(columns=STEP_COLUMNS)
    wait = coll.groupby(["rank", "step"])["wait_ns"].sum() if len(coll) else pd.Series(
        dtype="float64")
    frames = []
    for r in ranks:
        s = r.instances[r.instances["family"] == step]
        s = s[_keep(s["index"], len(s), t)]
        w = wait.reindex(pd.MultiIndex.from_arrays([np.full(len(s), r.rank), s["index"]]))
        frames.append(pd.DataFrame({
            "rank": r.rank, "index": s["index"].to_numpy(), "cpu_ns": s["cpu_ns"].to_numpy(),
            "work_ns": s["work_ns"].to_numpy(), "gpu_span_ns": s["gpu_span_ns"].to_numpy(),
            "compute_ns": s["compute_ns"].to_numpy(), "comm_ns": s["comm_ns"].to_numpy(),
            "exposed_comm_ns": s["exposed_comm_ns"].to_numpy(),
            "comm_wait_ns": w.fillna(0).to_numpy() if len(coll) else np.nan,
        }))
    return pd.concat(frames, ignore_index=True)[STEP_COLUMNS]


def _kept_instances(ranks: list[RankSummary], t: RankThresholds) -> pd.DataFrame:
    """Each rank's instances that count (_keep: a family's first steps left out), family by
    family in order of first appearance, each family's in their order. Grouped once per
    rank, not a frame per family: a name per range made a step per range (272 s for two
    ranks of 30 k names)."""
    frames = []
    for r in ranks:
        inst = r.instances
        if inst.empty:
            continue
        family = inst.groupby(["domain", "family"], sort=False, observed=True).ngroup()
        family = family.to_numpy()
        sizes = np.bincount(family)
        skip = np.where(sizes - t.skip_first_steps >= 4, t.skip_first_steps, 0)[family]
        order = np.argsort(family, kind="stable")
        order = order[(inst["index"].to_numpy() >= skip)[order]]
        g = inst.iloc[order]
        frames.append(pd.DataFrame({
            "rank": np.full(len(g), r.rank), "family": np.asarray(g["family"], dtype=object),
            "index": g["index"].to_numpy(), "cpu_ns": g["cpu_ns"].to_numpy(),
            "work_ns": g["work_ns"].to_numpy(), "gpu_busy_ns": g["gpu_busy_ns"].to_numpy(),
            "compute_ns": g["compute_ns"].to_numpy()}))
    cols = ["rank", "family", "index", "cpu_ns", "work_ns", "gpu_busy_ns", "compute_ns"]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)


def _families(inst: pd.DataFrame) -> pd.DataFrame:
    if inst.empty:
        return pd.DataFrame(columns=["family", "rank", "count", "cpu_median_ns",
                                     "work_median_ns", "gpu_busy_median_ns",
                                     "compute_median_ns"])
    g = inst.groupby(["family", "rank"], sort=False, observed=True)
    out = g.agg(count=("index", "size"), cpu_median_ns=("cpu_ns", "median"),
                work_median_ns=("work_ns", "median"),
                gpu_busy_median_ns=("gpu_busy_ns", "median"),
                compute_median_ns=("compute_ns", "median")).reset_index()
    return out


def _table(ranks: list[RankSummary], steps: pd.DataFrame, coll: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for r in ranks:
        s = steps[steps["rank"] == r.rank]
        c = coll[coll["rank"] == r.rank] if len(coll) else coll
        span = s["gpu_span_ns"].median() if len(s) else np.nan
        wait = s["comm_wait_ns"].median() if len(s) else np.nan
        exposed = s["exposed_comm_ns"].median() if len(s) else np.nan
        comm = s["comm_ns"].median() if len(s) else np.nan
        rows.append({
            "rank": r.rank, "identified_by": r.identified_by, "source": r.source, "pid": r.pid,
            "devices": r.devices, "steps": len(s),
            "step_median_ns": s["cpu_ns"].median() if len(s) else np.nan,
            "step_gpu_span_median_ns": span,
            "gpu_busy_share": r.gpu_busy_ns / r.window_ns if r.window_ns else np.nan,
            "compute_median_ns": s["compute_ns"].median() if len(s) else np.nan,
            "comm_median_ns": comm,
            "overlapped_comm_median_ns": (s["comm_ns"] - s["exposed_comm_ns"]).median()
            if len(s) else np.nan,
            "exposed_comm_median_ns": exposed,
            "comm_wait_median_ns": wait,
            "comm_wait_share": wait / span if span and span > 0 else np.nan,
            "last_arrival_share": c["last"].mean() if len(c) else np.nan,
            "collectives": len(c),
        })
    return pd.DataFrame(rows, columns=RANK_COLUMNS)
