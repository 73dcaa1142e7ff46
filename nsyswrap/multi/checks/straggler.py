"""STRAGGLER: one rank is consistently slower in a phase of the step, beyond the run's own
step-to-step jitter, and the other ranks wait for it in the collectives that follow.

Per repeated range family, instances are paired across ranks by index (the Nth `forward`
of every rank is the same step). Two measures of a phase: host work (wall time less the
time blocked on the GPU: a rank waiting for a straggler blocks in syncs, so its ranges
lengthen by waiting, not by working) and GPU compute (busy time of everything but NCCL
kernels, which include the wait). The rank with the highest median is the candidate; its
per-step excess over the median of the others must be consistent (in most steps), large
(a share of the step and an absolute floor) and beyond the spread of those per-step
differences (their IQR): two ranks whose hosts differ by a few hundred µs in one step and
the other way round in the next are jitter, which every DDP run shows, not a straggler.
Where collectives were matched, the candidate must also be the last to arrive in most of
them: a slow phase that nobody waits for costs nothing.
"""

from __future__ import annotations

import numpy as np

from ...common.units import fmt_ns, fmt_share
from ...diagnose.finding import WARNING, Finding
from ..ranks import RankAnalysis
from ..thresholds import RankThresholds

CODE = "STRAGGLER"
MEASURES = {"work_ns": "host work", "compute_ns": "GPU compute"}


def candidates(a: RankAnalysis, t: RankThresholds) -> list[dict]:
    """Every (family, measure) where one rank is slower beyond the thresholds."""
    out = []
    if len(a.ranks) < 2 or a.instances.empty:
        return out
    step_ns = float(a.steps["cpu_ns"].median()) if len(a.steps) else np.nan
    # Only families with three instances or more on every rank can be paired across ranks
    # in three steps: the others found at once, not by a pivot each (a name per range
    # makes a family of every range: 6 ms each).
    sizes = a.instances.groupby(["family", "rank"], sort=False, observed=True).size()
    ranks = sizes[sizes >= 3].reset_index().groupby("family", sort=False,
                                                    observed=True)["rank"].nunique()
    inst = a.instances[a.instances["family"].isin(ranks.index[ranks >= len(a.ranks)])]
    for family, g in inst.groupby("family", sort=False, observed=True):
        for measure, label in MEASURES.items():
            m = g.pivot_table(index="index", columns="rank", values=measure, aggfunc="first")
            m = m.dropna()
            if m.shape[1] < len(a.ranks) or len(m) < 3:
                continue
            rank = int(m.median().idxmax())
            others = m.drop(columns=rank).median(axis=1)
            excess = (m[rank] - others).to_numpy(dtype="float64")
            median = float(np.median(excess))
            q25, q75 = np.percentile(excess, [25, 75])
            slower = float((excess > 0).mean())
            base = step_ns if np.isfinite(step_ns) else float(others.median())
            if (median >= max(t.straggler_min_ns, t.straggler_share * base)
                    and median >= t.straggler_spread * (q75 - q25)
                    and slower >= t.straggler_consistency):
                out.append({"family": family, "measure": measure, "label": label,
                            "rank": rank, "excess_median_ns": median,
                            "excess_iqr_ns": float(q75 - q25), "slower_share": slower,
                            "steps": len(m), "step_median_ns": base,
                            "by_rank_median_ns": {int(r): float(v)
                                                  for r, v in m.median().items()}})
    return out


def check(a: RankAnalysis, t: RankThresholds, _earlier: list[Finding]) -> list[Finding]:
    found = candidates(a, t)
    coll = a.collectives
    if len(coll):
        last = coll[coll["step"] >= 0].groupby("rank")["last"].mean()
        found = [c for c in found if last.get(c["rank"], 0) >= 0.5]
    findings = []
    for rank in sorted({c["rank"] for c in found}):
        mine = [c for c in found if c["rank"] == rank]
        # The phase: the biggest excess among the step's parts; the step itself only when
        # no part of it shows the loss.
        parts = [c for c in mine if c["family"] != a.step_family] or mine
        phase = max(parts, key=lambda c: c["excess_median_ns"])
        evidence = {
            "rank": rank, "phase": phase["family"], "measure": phase["label"],
            "excess_median_ns": phase["excess_median_ns"],
            "excess_iqr_ns": phase["excess_iqr_ns"], "slower_share": phase["slower_share"],
            "steps": phase["steps"], "step_median_ns": phase["step_median_ns"],
            "by_rank_median_ns": phase["by_rank_median_ns"],
        }
        cost = ""
        if len(coll):
            waits = a.steps[a.steps["rank"] != rank].groupby("rank")["comm_wait_ns"].median()
            arrivals = coll[(coll["rank"] == rank) & (coll["step"] >= 0)]["last"].mean()
            evidence["others_wait_median_ns"] = {int(r): float(w) for r, w in waits.items()}
            evidence["last_arrival_share"] = float(arrivals)
            if len(waits):
                cost = (f"; the other ranks wait {fmt_ns(waits.median())} per step (median) "
                        f"in collectives, where rank {rank} arrives last in "
                        f"{fmt_share(arrivals)} of them")
        others = {r: v for r, v in phase["by_rank_median_ns"].items() if r != rank}
        findings.append(Finding(
            code=CODE, severity=WARNING, range=phase["family"],
            message=(f"rank {rank} is the straggler: its {phase['label']} in "
                     f"{phase['family']} takes {fmt_ns(phase['by_rank_median_ns'][rank])} "
                     f"per step against {fmt_ns(float(np.median(list(others.values()))))} on "
                     f"the others, {fmt_ns(phase['excess_median_ns'])} more "
                     f"({fmt_share(phase['excess_median_ns'] / phase['step_median_ns'])} of "
                     f"the step) in {fmt_share(phase['slower_share'])} of "
                     f"{phase['steps']} steps{cost}"),
            evidence=evidence,
            suggestion=(f"find what rank {rank} does in {phase['family']} that the others do "
                        "not (data loading, logging, a slower GPU or host core, uneven "
                        "batches); every rank runs at the straggler's pace"),
        ))
    return findings
