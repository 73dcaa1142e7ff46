"""GPU_IDLE_IN_RANGE: the GPU waits inside a range's GPU span. Either many short GPU
operations with launch gaps (the host launches slower than the GPU runs), or one stall."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..common.units import fmt_ns, fmt_share
from .finding import WARNING, Finding, Thresholds, range_label

CODE = "GPU_IDLE_IN_RANGE"


def _idle_enough(a: Analysis, rows: np.ndarray, t: Thresholds) -> np.ndarray:
    """Per row, whether its family's median idle share may reach the threshold: found for
    every family at once (a grouped median), so that the check's own step runs only for
    those. A margin keeps any family whose median another summation order could put over
    the threshold; the check decides on each one's own median."""
    inst = a.instances
    span = inst.values("gpu_span_ns", rows)
    share = pd.Series((span - inst.values("gpu_device_busy_ns", rows)) / span)
    family = inst.values("family_id", rows)
    median = share.groupby(family).median()
    enough = median.isna() | (median >= t.idle_share - 1e-9)
    return enough.reindex(family).to_numpy(dtype=bool)


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    inst = a.instances
    user = a.judged_rows()
    span = inst.values("gpu_span_ns", user)
    if len(user) == 0 or np.isnan(span).all():
        return []
    # Each family's columns decoded at its kept rows, one family at a time: every kept
    # row's eight columns at once, then each family's, held ~110 MB at 10 M kernels (the
    # findings' peak there).
    keep = user[span >= t.idle_min_span_ns]
    del span
    findings = []
    for (domain, name), at in a.user_families(keep, keep=_idle_enough(a, keep, t)):
        rows = keep[at]

        span = inst.series("gpu_span_ns", rows)
        device_busy_all = inst.series("gpu_device_busy_ns", rows)
        # Idle means no work at all on the GPU, not just none of this range's: other
        # threads' kernels (autograd's backward, a data-loader stream) fill a range's gaps.
        share = float(((span - device_busy_all) / span).median())
        if share < t.idle_share:
            continue
        max_gaps = inst.series("max_gap_ns", rows)
        stall = bool((max_gaps >= t.stall_share * inst.series("gpu_idle_ns", rows)).mean() >= 0.5)
        span, device_busy = float(span.median()), float(device_busy_all.median())
        busy = float(inst.series("gpu_busy_ns", rows).median())
        ops = float(inst.series("gpu_ops", rows).median())
        gaps = float(inst.series("gaps", rows).median())
        max_gap = float(max_gaps.median())
        del device_busy_all, max_gaps
        label = range_label(domain, name)
        evidence = {
            "instances": len(rows),
            "idle_share_median": share,
            "gpu_span_median_ns": span,
            "gpu_busy_median_ns": busy,
            "gpu_device_busy_median_ns": device_busy,
            "gpu_ops_median": ops,
            "gaps_median": gaps,
            "max_gap_median_ns": max_gap,
            "cause": "host_stall" if stall else "launch_gaps",
        }
        if stall:
            message = (
                f"{label}: the GPU is idle {fmt_share(share)} of the range's GPU span "
                f"({fmt_ns(span - device_busy)} of {fmt_ns(span)}), mostly in one gap of "
                f"{fmt_ns(max_gap)} between GPU operations: a host stall (CPU work, a sync "
                "or data preparation) inside the range"
            )
            suggestion = (
                "Find what the host does in that gap (nsys timeline, -t osrt) and move it out "
                "of the timed range or overlap it with GPU work."
            )
        else:
            message = (
                f"{label}: the GPU is idle {fmt_share(share)} of the range's GPU span across "
                f"{gaps:.0f} gaps between {ops:.0f} GPU operations of "
                f"{fmt_ns(busy / max(ops, 1))} on average: launch-bound, the host issues work "
                "slower than the GPU runs it"
            )
            suggestion = (
                "Launch fewer, larger kernels (fuse ops, torch.compile), capture the sequence "
                "in a CUDA graph, or give each launch more work."
            )
        findings.append(Finding(CODE, WARNING, label, message, evidence, suggestion))
    return findings
