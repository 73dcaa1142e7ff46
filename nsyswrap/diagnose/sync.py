"""SYNC_IN_RANGE: the host blocked on the GPU inside a range (explicit or implicit sync)."""

from __future__ import annotations

from ..analysis import Analysis
from ..cuda_api import SYNC_ORIGIN, sync_kind
from ..units import fmt_ns, fmt_share, plural
from .finding import INFO, WARNING, Finding, Thresholds, range_label

CODE = "SYNC_IN_RANGE"


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    calls = a.attribution.blocking_calls
    calls = calls[calls["range_id"].isin(a.user_instances(["range_id"])["range_id"])]
    if calls.empty:
        return []
    inst = a.instances
    # Each call's instance row: only those rows' columns are decoded and taken.
    row = a.instance_rows(calls["range_id"])
    calls = calls.assign(domain=inst.values("domain", row), family=inst.values("family", row),
                         cpu_ns=inst.values("cpu_ns", row))
    calls = calls.assign(blocked_ns=calls["end_ns"] - calls["start_ns"])
    counts = inst[["domain", "family"]].groupby(["domain", "family"], observed=True).size()
    findings = []
    for (domain, name), g in calls.groupby(["domain", "family"], sort=False, observed=True):
        per_instance = g.groupby("range_id").agg(blocked_ns=("blocked_ns", "sum"),
                                                 cpu_ns=("cpu_ns", "first"))
        share = float((per_instance["blocked_ns"] / per_instance["cpu_ns"]).median())
        blocked = float(per_instance["blocked_ns"].median())
        apis = g["api"].value_counts()
        kinds = sorted({sync_kind(api) for api in apis.index})
        total = int(counts[(domain, name)])
        origin = "; ".join(SYNC_ORIGIN.get(api, api) for api in apis.index)
        findings.append(Finding(
            code=CODE,
            severity=WARNING if share >= t.sync_share else INFO,
            range=range_label(domain, name),
            message=(
                f"{range_label(domain, name)}: the host waits for the GPU in "
                f"{', '.join(apis.index)} ({' and '.join(kinds)}) in "
                f"{len(per_instance)} of {plural(total, 'instance')}, {fmt_ns(blocked)} per "
                f"instance ({fmt_share(share)} of the range)"
            ),
            evidence={
                "apis": {str(k): int(v) for k, v in apis.items()},
                "kinds": kinds,
                "likely_source": origin,
                "instances_with_sync": len(per_instance),
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
