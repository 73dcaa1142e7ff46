"""GPU_IDLE_IN_RANGE: the GPU waits inside a range's GPU span. Either many short GPU
operations with launch gaps (the host launches slower than the GPU runs), or one stall."""

from __future__ import annotations

from ..analysis import Analysis
from ..units import fmt_ns, fmt_share
from .finding import WARNING, Finding, Thresholds, range_label

CODE = "GPU_IDLE_IN_RANGE"


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    inst = a.user_instances(["family_id", "gpu_span_ns", "gpu_device_busy_ns",
                             "max_gap_ns", "gpu_idle_ns", "gpu_busy_ns", "gpu_ops", "gaps"])
    if inst.empty or inst["gpu_span_ns"].isna().all():
        return []
    inst = inst[inst["gpu_span_ns"] >= t.idle_min_span_ns].copy()
    # Idle means no work at all on the GPU, not just none of this range's: other threads'
    # kernels (autograd's backward, a data-loader stream) fill a range's own gaps.
    inst["idle_share"] = (inst["gpu_span_ns"] - inst["gpu_device_busy_ns"]) / inst["gpu_span_ns"]
    inst["stall"] = inst["max_gap_ns"] >= t.stall_share * inst["gpu_idle_ns"]
    findings = []
    for (domain, name), g in a.by_family(inst):
        share = float(g["idle_share"].median())
        if share < t.idle_share:
            continue
        label = range_label(domain, name)
        span = float(g["gpu_span_ns"].median())
        busy = float(g["gpu_busy_ns"].median())
        device_busy = float(g["gpu_device_busy_ns"].median())
        ops = float(g["gpu_ops"].median())
        gaps = float(g["gaps"].median())
        max_gap = float(g["max_gap_ns"].median())
        stall = bool(g["stall"].mean() >= 0.5)
        evidence = {
            "instances": len(g),
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
