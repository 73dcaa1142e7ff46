"""EXPOSED_COMM: communication that no compute of the step overlaps, as a share of the
step's GPU span. The time spent waiting for other ranks (COMM_WAIT) is left out: it is a
straggler's cost, not communication that better overlap (bucket sizes, prefetching the
next layer's all-gather) would hide."""

from __future__ import annotations

import numpy as np

from ...common.units import fmt_ns, fmt_share
from ...diagnose.finding import WARNING, Finding
from ..ranks import RankAnalysis
from ..thresholds import RankThresholds

CODE = "EXPOSED_COMM"


def check(a: RankAnalysis, t: RankThresholds, _earlier: list[Finding]) -> list[Finding]:
    s = a.steps.dropna(subset=["exposed_comm_ns", "gpu_span_ns"])
    if s.empty:
        return []
    s = s.assign(exposed=np.clip(s["exposed_comm_ns"] - s["comm_wait_ns"].fillna(0), 0, None))
    s = s.assign(share=s["exposed"] / s["gpu_span_ns"].where(s["gpu_span_ns"] > 0))
    g = s.groupby("rank")
    per = {int(r): {"exposed_comm_median_ns": float(g.get_group(r)["exposed"].median()),
                    "comm_median_ns": float(g.get_group(r)["comm_ns"].median()),
                    "exposed_share_median": float(g.get_group(r)["share"].median())}
           for r in g.groups}
    hit = {r: e for r, e in per.items() if e["exposed_share_median"] >= t.exposed_comm_share}
    if not hit:
        return []
    ranks = ", ".join(f"rank {r} {fmt_ns(e['exposed_comm_median_ns'])} "
                      f"({fmt_share(e['exposed_share_median'])})" for r, e in hit.items())
    return [Finding(
        code=CODE, severity=WARNING, range=a.step_family,
        message=(f"communication that no compute overlaps, waits left out: {ranks} of the "
                 "step's GPU span per step (median)"),
        evidence={"by_rank": per},
        suggestion=("overlap it: DDP buckets (bucket_cap_mb) so all-reduces start during "
                    "backward, FSDP prefetch, or fewer, larger collectives"),
    )]
