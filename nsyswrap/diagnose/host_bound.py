"""HOST_BOUND: the host needs longer to issue the work than the GPU needs to run it.

Harness benchmarks: back-pressure (a GPU sleep before each timed window, longer than the
host's enqueue) keeps host time out of the events on purpose, so the events and kernels
agree; but called in a loop, the function runs at the host's pace. Flagged when the host's
time to issue one call (the iteration's NVTX range, less any time blocked on the GPU) is
host_bound_factor times the GPU busy time and host_bound_min_ns more, and the events do not
show it already (they sit nearer the GPU time than the host time; otherwise LAUNCH_OVERHEAD
or HOST_WORK_IN_WINDOW says it).

Plain ranges: the range's host time (its wall time less syncs) against the GPU work it owns,
with the GPU idle (no work from anyone) for most of the range's wall time: host work starves the
GPU. Ranges whose idle time lies inside their GPU span are GPU_IDLE_IN_RANGE's. The first
instance is left out (set-up work: COLD_START's), so a range needs two more.

Host times are measured under the profiler, whose CUDA tracing adds a few µs to every API
call and slows the framework's dispatch; host_bound_min_ns keeps that from reading as a
finding (F.linear alone took ~130 µs of host time under nsys on the H100 host).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..analysis import Analysis
from ..analysis.per_run import PerRun
from ..common.units import fmt_ns, fmt_share
from .finding import WARNING, Finding, Thresholds, range_label

CODE = "HOST_BOUND"


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    return _harness(a, t) + _ranges(a, t)


def _host_bound(host: float, busy: float, t: Thresholds) -> bool:
    return host >= t.host_bound_factor * busy and host - busy >= t.host_bound_min_ns


def _harness(a: Analysis, t: Thresholds) -> list[Finding]:
    findings = []
    # Every run's medians at once (per_run.PerRun): a report may hold a harness run in
    # every training step, and a groupby's frame per run took ~0.6 ms each.
    per = PerRun(a.iterations)
    if per.count == 0:
        return findings
    calls = per.first_of("calls").astype("float64")
    hosts, busies, events = (per.median(per.column(c)) / calls
                             for c in ("host_ns", "gpu_busy_ns", "event_ns"))
    with_gpu = per.any_count(~np.isnan(per.column("gpu_busy_ns").astype("float64"))) > 0
    for k, name, run in zip(range(per.count), per.first_of("benchmark"),
                            per.first_of("run").tolist(), strict=True):
        if not with_gpu[k]:
            continue
        host, busy, event = float(hosts[k]), float(busies[k]), float(events[k])
        if not _host_bound(host, busy, t) or event > busy + (host - busy) / 2:
            continue
        config = a.runs[run].get("config", {})
        label = f"nsyswrap:{name}"
        if config.get("backpressure"):
            hid = (f"back-pressure (a {fmt_ns(config.get('sleep_ns'))} GPU sleep before each "
                   f"window) kept the host's time out of the events, which read "
                   f"{fmt_ns(event)}")
        else:
            hid = f"the events read {fmt_ns(event)}"
        findings.append(Finding(
            CODE, WARNING, label,
            f"{label}: the host takes {fmt_ns(host)} to issue one call and the GPU works "
            f"{fmt_ns(busy)} ({host / busy if busy else float('inf'):.1f}x): called in a "
            f"loop, this function runs at the host's pace; {hid}",
            {"host_median_ns": host, "gpu_busy_median_ns": busy, "event_median_ns": event,
             "ratio": host / busy if busy else None, "iterations": int(per.sizes[k]),
             "backpressure": bool(config.get("backpressure")),
             "backpressure_sleep_ns": config.get("sleep_ns")},
            "The kernel time stands; what a loop of this function achieves is the host's "
            "time. Cut host work per call (Python logic, tensor creation, .item() and "
            "prints), or capture it in a CUDA graph (cuda_graph=N) or torch.compile it.",
        ))
    return findings


def _ranges(a: Analysis, t: Thresholds) -> list[Finding]:
    inst = a.instances
    user = a.judged_rows(by_start=True)
    if len(user) == 0 or np.isnan(inst.values("gpu_busy_ns", user)).all():
        return []
    findings = []
    # Families found on one column, then each one's columns decoded at the rows it keeps,
    # a column or two at a time: the kept rows' nine columns at once held ~300 MB at 10 M
    # instances (the findings' peak there).
    # The instances with GPU work after each family's first, and the families with two
    # or more of them, found at once: a step per family of one instance each (a name
    # per range) took seconds.
    later = inst.values("gpu_ops", user) > 0
    later[np.unique(inst.values("family_id", user), return_index=True)[1]] = False
    for (domain, name), at in a.user_families(user, min_size=2, keep=later):
        rows = user[at]

        cpu_all = inst.series("cpu_ns", rows)
        host = float((cpu_all - inst.series("sync_ns", rows)).median())
        busy = float(inst.series("gpu_busy_ns", rows).median())
        cpu = cpu_all.where(cpu_all > 0)
        del cpu_all
        idle_cpu = float(((cpu - inst.series("gpu_device_busy_cpu_ns", rows)) / cpu).median())
        del cpu
        span = inst.series("gpu_span_ns", rows)
        span = span.where(span >= t.idle_min_span_ns)
        idle_span = ((span - inst.series("gpu_device_busy_ns", rows)) / span).median()
        del span
        if not _host_bound(host, busy, t) or not idle_cpu >= t.idle_share or (
                pd.notna(idle_span) and idle_span >= t.idle_share):
            continue
        label = range_label(domain, name)
        findings.append(Finding(
            CODE, WARNING, label,
            f"{label}: the host spends {fmt_ns(host)} per instance (not counting waits for the "
            f"GPU) on {fmt_ns(busy)} of GPU work ({host / busy:.1f}x), and the GPU runs "
            f"nothing for {fmt_share(idle_cpu)} of the range: host work starves the GPU",
            {"instances": len(rows), "host_median_ns": host, "gpu_busy_median_ns": busy,
             "ratio": host / busy, "gpu_idle_share_of_cpu_time": idle_cpu},
            "Find the host work in the range (nsys timeline with -t osrt, or --sample) and move "
            "it off the critical path: prepare data ahead (DataLoader workers, pinned memory, "
            "non_blocking copies), avoid per-step Python work and syncs, or capture the GPU "
            "part in a CUDA graph.",
        ))
    return findings
