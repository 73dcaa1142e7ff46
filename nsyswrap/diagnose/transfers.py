"""TRANSFER_IN_RANGE: host<->device copies inside a range, pageable memory called out.

A warning when a copy uses pageable memory (the CPU stages it and the host waits), or when
copies take transfer_share of the range; otherwise information. Copies from pinned memory
run asynchronously, often past the range's CPU end, so their share is of the range's wall
time including the GPU work it launched. Copies in a minority of instances that take
little of them (DDP's one-off set-up copies in the first step) are left out."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..common.units import fmt_bytes, fmt_ns, fmt_share, plural
from .finding import INFO, WARNING, Finding, Thresholds, range_label

CODE = "TRANSFER_IN_RANGE"


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    copies = a.attribution.host_copies
    copies = copies[copies["range_id"].isin(a.judged_instances(["range_id"])["range_id"])]
    if copies.empty:
        return []
    inst = a.instances
    # Each copy's instance row: only those rows' columns are taken (a copy of the instance
    # frame, or a groupby over its text columns, is seconds at millions of ranges).
    row = a.instance_rows(copies["range_id"])

    def at(column: str) -> np.ndarray:
        return np.asarray(inst.values(column, row))

    # The range's wall time: its start to end on the host, or to its last GPU work if later.
    wall = np.fmax(at("end_ns"), at("gpu_last_end_ns")) - at("start_ns")
    copies = copies.drop(columns="name").assign(
        domain=at("domain"), family=at("family"), family_id=at("family_id"), wall_ns=wall,
        copy_ns=copies["end_ns"] - copies["start_ns"],
        pageable=(copies["src_kind"] == "pageable") | (copies["dst_kind"] == "pageable"),
    )
    counts = np.bincount(inst["family_id"].to_numpy())  # instances per family
    # Per instance with copies, then per family, each a grouped pass over all of them: a
    # groupby per family cost milliseconds each (every range a family of its own).
    per_instance = copies.groupby("range_id").agg(copy_ns=("copy_ns", "sum"),
                                                  wall_ns=("wall_ns", "first"),
                                                  family_id=("family_id", "first"))
    per_family = per_instance.assign(
        share=per_instance["copy_ns"] / per_instance["wall_ns"]).groupby("family_id").agg(
        share=("share", "median"), copy_ns=("copy_ns", "median"),
        instances=("copy_ns", "size"))
    findings = []
    # Families in order of first appearance among the copies, each with its copies' rows.
    rows_of = copies.groupby("family_id").indices
    for family_id in pd.unique(copies["family_id"]).tolist():
        share, copy_ns, instances = per_family.loc[family_id]
        share, instances = float(share), int(instances)
        total = int(counts[family_id])
        if instances < 0.5 * total and share < t.transfer_share:
            continue  # a one-off in a few instances, and small there
        g = copies.iloc[rows_of[family_id]]
        domain, name = g["domain"].iat[0], g["family"].iat[0]
        kinds = g["copy_kind"].astype(str).value_counts()
        pageable = int(g["pageable"].sum())
        label = range_label(domain, name)
        what = ", ".join(f"{n} {k}" for k, n in kinds.items())
        per_copy_bytes = float(g["bytes"].median())
        findings.append(Finding(
            code=CODE,
            severity=WARNING if (pageable or share >= t.transfer_share) else INFO,
            range=label,
            message=(
                f"{label}: {plural(len(g), 'host-device copy', 'host-device copies')} ({what}; "
                f"median {fmt_bytes(per_copy_bytes)}) in {instances} of "
                f"{plural(total, 'instance')}, "
                f"{fmt_ns(float(copy_ns))} of copy time per instance "
                f"({fmt_share(share)} of the range)"
                + (f"; {pageable} from/to pageable memory, which the CPU stages and the "
                   "host waits for" if pageable else "")
            ),
            evidence={
                "copies": len(g),
                "kinds": {str(k): int(v) for k, v in kinds.items()},
                "bytes_total": int(g["bytes"].sum()),
                "pageable_copies": pageable,
                "copy_median_ns": float(copy_ns),
                "copy_share_median": share,
                "instances_with_copies": instances,
            },
            suggestion=(
                "Move inputs to the GPU before the timed region; if copies belong to the "
                "workload, copy from pinned memory (tensor.pin_memory()) with "
                "non_blocking=True so they overlap compute."
            ),
        ))
    return findings
