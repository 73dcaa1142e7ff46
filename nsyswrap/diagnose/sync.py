"""SYNC_IN_RANGE: the host blocked on the GPU inside a range (explicit or implicit sync)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..common.units import fmt_ns, fmt_share, plural
from ..read.cuda_api import SYNC_ORIGIN, sync_kind
from .finding import INFO, WARNING, Finding, Thresholds, range_label

CODE = "SYNC_IN_RANGE"


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    calls = a.attribution.blocking_calls
    calls = calls[calls["range_id"].isin(a.judged_instances(["range_id"])["range_id"])]
    if calls.empty:
        return []
    inst = a.instances
    # Each call's instance row: only those rows' columns are decoded and taken.
    row = a.instance_rows(calls["range_id"])
    calls = calls.assign(domain=inst.values("domain", row), family=inst.values("family", row),
                         family_id=inst.values("family_id", row),
                         cpu_ns=inst.values("cpu_ns", row))
    calls = calls.assign(blocked_ns=calls["end_ns"] - calls["start_ns"])
    # Instances per family, by the integer family id: a groupby of the two text columns
    # hashed every instance's (a name per range: a million distinct names).
    counts = np.bincount(inst["family_id"].to_numpy())
    # Per instance with a sync, then per family, each a grouped pass over all of them: a
    # groupby per family cost 4 ms each (every range a family of its own: 1,000 judged).
    per_instance = calls.groupby("range_id").agg(blocked_ns=("blocked_ns", "sum"),
                                                 cpu_ns=("cpu_ns", "first"),
                                                 family_id=("family_id", "first"))
    per_family = per_instance.assign(
        share=per_instance["blocked_ns"] / per_instance["cpu_ns"]).groupby("family_id").agg(
        share=("share", "median"), blocked=("blocked_ns", "median"),
        instances=("blocked_ns", "size"))
    findings = []
    # Families in order of first appearance among the calls, each with its calls' rows.
    rows_of = calls.groupby("family_id").indices
    api, domains, families = calls["api"], calls["domain"].to_numpy(), calls["family"].to_numpy()
    for family_id in pd.unique(calls["family_id"]).tolist():
        at = rows_of[family_id]
        domain, name = domains[at[0]], families[at[0]]
        share, blocked, instances = per_family.loc[family_id]
        share, blocked = float(share), float(blocked)
        apis = api.iloc[at].value_counts()
        kinds = sorted({sync_kind(api) for api in apis.index})
        total = int(counts[family_id])
        origin = "; ".join(SYNC_ORIGIN.get(api, api) for api in apis.index)
        findings.append(Finding(
            code=CODE,
            severity=WARNING if share >= t.sync_share else INFO,
            range=range_label(domain, name),
            message=(
                f"{range_label(domain, name)}: the host waits for the GPU in "
                f"{', '.join(apis.index)} ({' and '.join(kinds)}) in "
                f"{int(instances)} of {plural(total, 'instance')}, {fmt_ns(blocked)} per "
                f"instance ({fmt_share(share)} of the range)"
            ),
            evidence={
                "apis": {str(k): int(v) for k, v in apis.items()},
                "kinds": kinds,
                "likely_source": origin,
                "instances_with_sync": int(instances),
                "instances": total,
                "blocked_median_ns": blocked,
                "blocked_share_median": share,
            },
            suggestion=(
                "Keep syncs out of timed code: read results (.item(), .cpu(), print) after "
                "the loop, and time with CUDA events synchronised once at the end."
                if "explicit" not in kinds else
                "An explicit synchronize inside the range serialises host and GPU: move it "
                "after the timed region (CUDA events need one sync, at the end)."
            ),
        ))
    return findings
