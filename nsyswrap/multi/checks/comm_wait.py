"""COMM_WAIT: time ranks spend inside collectives waiting for the last rank to arrive (a
collective's duration on a rank minus its duration on the rank that arrived last), per
step, as a share of the step's GPU span.

Every DDP run has some: ranks reach each bucket's all-reduce a little apart, and the first
one spins in its NCCL kernel meanwhile (the control fixture's rank 0 waits 1.5 ms of a
3.6 ms step for a host that is 0.4 ms slower per step, within its step-to-step jitter).
So the wait is a warning only when a STRAGGLER explains it, a rank that is slower beyond
that jitter; otherwise it is reported as information.
"""

from __future__ import annotations

from ...common.units import fmt_ns, fmt_share
from ...diagnose.finding import INFO, WARNING, Finding
from ..ranks import RankAnalysis
from ..thresholds import RankThresholds

CODE = "COMM_WAIT"


def check(a: RankAnalysis, t: RankThresholds, earlier: list[Finding]) -> list[Finding]:
    table = a.table.dropna(subset=["comm_wait_share"])
    waiting = table[table["comm_wait_share"] >= t.comm_wait_share]
    if waiting.empty:
        return []
    stragglers = [f for f in earlier if f.code == "STRAGGLER"]
    worst = waiting.loc[waiting["comm_wait_share"].idxmax()]
    by_rank = {int(r.rank): {"comm_wait_median_ns": float(r.comm_wait_median_ns),
                             "comm_wait_share": float(r.comm_wait_share),
                             "step_gpu_span_median_ns": float(r.step_gpu_span_median_ns),
                             "last_arrival_share": float(r.last_arrival_share)}
               for r in table.itertuples()}
    last = int(table.loc[table["last_arrival_share"].idxmax(), "rank"])
    ranks = ", ".join(f"rank {int(r.rank)} {fmt_ns(r.comm_wait_median_ns)} "
                      f"({fmt_share(r.comm_wait_share)})" for r in waiting.itertuples())
    if stragglers:
        cause = f"; {stragglers[0].message.split(':')[0]} (STRAGGLER)"
        severity = WARNING
    else:
        cause = (f"; rank {last} arrives last most often, but no phase of it is slower "
                 "beyond the run's step-to-step jitter: ordinary arrival spread")
        severity = INFO
    return [Finding(
        code=CODE, severity=severity, range=a.step_family,
        message=(f"ranks wait inside collectives for the last one to arrive: {ranks} of "
                 f"the step's GPU span per step (median){cause}"),
        evidence={"by_rank": by_rank, "last_to_arrive": last,
                  "worst_rank": int(worst["rank"]), "clock": a.clock},
        suggestion=("the wait ends when the slowest rank arrives: make it faster (see "
                    "STRAGGLER), or balance the work per rank" if stragglers else
                    "nothing to fix unless it grows; compare with a run where ranks do "
                    "uneven work"),
    )]
