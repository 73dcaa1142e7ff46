"""What CUDA-event windows hold besides the GPU work: the harness's, and the program's own
timings that `nsyswrap run` recorded (Analysis.timed_windows):

LAUNCH_OVERHEAD      the window is longer than the GPU work, spread over launch gaps
HOST_WORK_IN_WINDOW  one host stall inside the window (CPU work, staging a pageable copy)
TRANSFER_IN_WINDOW   host<->device copies inside the window
SYNC_IN_WINDOW       the host blocked on the GPU inside the window
UNCOVERED_STREAM     GPU work of the window ran on streams the events do not order
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..analysis import Analysis, TimedWindows
from ..analysis.per_run import PerRun
from ..analysis.timing_groups import BACKPRESSURE_MIN_NS
from ..common.units import fmt_bytes, fmt_ns, fmt_share
from .finding import INFO, WARNING, Finding, Thresholds

LAUNCH = "LAUNCH_OVERHEAD"
HOST = "HOST_WORK_IN_WINDOW"
TRANSFER = "TRANSFER_IN_WINDOW"
SYNC = "SYNC_IN_WINDOW"
UNCOVERED = "UNCOVERED_STREAM"
CODES = (LAUNCH, HOST, TRANSFER, SYNC, UNCOVERED)


# Per run: medians per call (the window's median over its calls), and plain medians.
_PER_CALL = ("event_ns", "gpu_busy_ns", "gpu_span_ns", "overhead_ns", "edge_ns",
             "internal_idle_ns", "max_gap_ns", "sync_ns", "copy_ns")
_PLAIN = ("host_lead_ns", "gaps", "gpu_ops", "kernels", "launch_latency_ns")


class _RunNumbers:
    """What the checks read of every run, found for all runs at once (per_run.PerRun): a
    frame and fourteen pandas medians per run took ~2.5 ms each, and reports hold a
    harness run in every training step. run(k) is run k's medians as one run's own
    `_medians` would give them; its frame is made only for the few checks that read
    more of it."""

    def __init__(self, windows: pd.DataFrame):
        self.per = per = PerRun(windows)
        self.calls = per.first_of("calls").astype("float64") if per.count else np.zeros(0)
        self.medians = {c: per.median(per.column(c)) / self.calls for c in _PER_CALL}
        self.medians.update({c: per.median(per.column(c)) for c in _PLAIN})
        self.medians["streams"] = per.maximum(per.column("streams"))
        self.medians["copy_bytes"] = per.median(per.column("copy_bytes"))
        self.no_gpu = per.any_count(~np.isnan(per.column("gpu_busy_ns").astype(
            "float64", copy=False))) == 0
        self.synced = per.any_count(per.column("syncs") > 0)
        self.copied = per.any_count(per.column("copies") > 0)
        self.pageable = per.total(per.column("pageable_copies"))
        # Work on streams the end event does not wait for: the program's own windows only
        # (None for the harness's).
        self.uncovered = self.uncovered_busy = None
        if "uncovered_busy_ns" in windows:
            self.uncovered = per.any_count(per.column("uncovered_ops") > 0)
            self.uncovered_busy = per.median(per.column("uncovered_busy_ns"))

    def run(self, k: int) -> dict[str, float]:
        return {c: float(v[k]) for c, v in self.medians.items()}


# What to do, where the harness's advice (its options) does not apply to a program's own
# timing code.
_USER_ADVICE = {
    "LAUNCH": "Trust the kernel time; or queue GPU work ahead of start.record(), time "
              "more work per window, or replay a CUDA graph (nsyswrap.benchmark does both).",
}


def _after_copies(g: pd.DataFrame) -> str:
    """', in the first window after 80.0 MiB of host-to-device copies that ended 12 µs
    before start.record(): not in the window' where the program's own windows follow host
    copies on their stream (people take the slow window for the copy's time)."""
    if "copies_before_bytes" not in g or not (g["copies_before_bytes"] > 0).mean() >= 0.5:
        return ""
    return (f", in windows that follow {fmt_bytes(float(g['copies_before_bytes'].median()))} "
            f"of host-device copies, which ended "
            f"{fmt_ns(float(g['copies_before_gap_ns'].median()))} before the start record "
            "and are not in the window")


def _missed_on_other_streams(numbers: _RunNumbers, k: int, event: float,
                             t: Thresholds) -> float:
    """The program's own windows: the median GPU time of work launched between the records
    on streams the end event does not wait for, where it is in most windows and not small
    (0: none to speak of). The harness's rule (events shorter than the span) catches only
    windows where the missed work outlasts the timed one."""
    if numbers.uncovered is None or not numbers.uncovered[k] / numbers.per.sizes[k] >= 0.5:
        return 0.0
    missed = float(numbers.uncovered_busy[k])
    return missed if missed >= max(t.overhead_min_ns, t.uncovered_tolerance * event) else 0.0


def _queued_ahead(g: pd.DataFrame, evidence: dict) -> str:
    """For the program's own windows: whether the GPU still had earlier work queued when the
    start was recorded (the start event then waits for it, and launching the window's
    work is not timed). A place where that holds in some windows only reads two numbers."""
    if "prior_busy_ns" not in g or g["prior_busy_ns"].isna().all():
        return ""
    queued = (g["prior_busy_ns"] >= BACKPRESSURE_MIN_NS).to_numpy()
    evidence["windows_with_work_queued_ahead"] = int(queued.sum())
    if not queued.any():
        return "; nothing was queued at the start record, so launching is timed"
    if queued.all():
        return ""
    ahead, idle = g[queued], g[~queued]
    return (f"; in {int(queued.sum())} of {len(g)} windows the GPU still had earlier work "
            f"queued when the start was recorded: those read "
            f"{fmt_ns(float(ahead['event_ns'].median()))}, the others "
            f"{fmt_ns(float(idle['event_ns'].median()))}")


def _operations(m: dict[str, float], calls: float) -> str:
    """Where the window's time went between operations: per call where one window times
    many calls (a Timer measurement, a harness iteration of N calls), whose edge and gap
    counts would otherwise read as one call's ('9999 gaps between 10000 operations')."""
    if calls <= 1:
        return (f"{fmt_ns(m['edge_ns'])} before the first GPU operation, "
                f"{m['gaps']:.0f} gaps between {m['gpu_ops']:.0f}")
    return (f"{_count(m['gpu_ops'] / calls, 'GPU operation')} and "
            f"{_count(m['gaps'] / calls, 'gap')} between operations per call "
            f"({calls:.0f} calls per timed window)")


def _count(x: float, word: str) -> str:
    text = f"{x:.1f}".removesuffix(".0")
    return f"{text} {word if text == '1' else word + 's'}"


def check(a: Analysis, t: Thresholds) -> Iterator[Finding]:
    """The findings one at a time: a report may hold a harness run in every training step,
    each with a finding or three, which diagnose merges as they come
    (checks.merge_alike) rather than holding them all (~1.5 KB each)."""
    for windows in a.timed_windows():
        yield from _check_windows(windows, t)


def _check_windows(tw: TimedWindows, t: Thresholds) -> Iterator[Finding]:
    numbers = _RunNumbers(tw.iterations)
    per = numbers.per
    # What _after_copies and _queued_ahead read is in the program's own windows only: the
    # harness's runs get a frame without those columns, not a frame each.
    no_rows = tw.iterations.iloc[:0]

    def frame(k: int, columns: list[str]) -> pd.DataFrame:
        return per.frame(k, columns) if columns[0] in tw.iterations else no_rows

    labels: dict[str, str] = {}

    names, run_ids = (per.first_of("benchmark"), per.first_of("run")) if per.count else ((), ())
    for k in range(per.count):
        name, run = names[k], int(run_ids[k])
        if numbers.no_gpu[k] or not tw.judged(run):
            continue  # no CUDA trace: nothing to reconcile against
        m = numbers.run(k)
        windows = int(per.sizes[k])
        floor, floor_source = tw.floor(run)
        label = labels.setdefault(name, tw.label(name))  # one text a name: merged, kept
        by = tw.measured_by(run)
        event, busy, span, overhead = m["event_ns"], m["gpu_busy_ns"], m["gpu_span_ns"], \
            m["overhead_ns"]
        base = {"iterations": windows, "event_median_ns": event, "gpu_busy_median_ns": busy,
                "gpu_span_median_ns": span}
        if event < (1 - t.uncovered_tolerance) * span:
            yield Finding(
                UNCOVERED, WARNING, label,
                f"{label}: {by} read {fmt_ns(event)} but the GPU work launched in the "
                f"window spans {fmt_ns(span)} on {m['streams']:.0f} streams: part of it ran on "
                "a stream the events do not wait for, so the timer misses it",
                {**base, "streams": m["streams"]},
                "Make the timed stream wait for side streams before end.record() "
                "(torch.cuda.current_stream().wait_stream(side)), or record events on every "
                f"stream; the GPU really worked {fmt_ns(busy)}.",
            )
            continue
        missed = _missed_on_other_streams(numbers, k, event, t)
        if missed:
            yield Finding(
                UNCOVERED, WARNING, label,
                f"{label}: {fmt_ns(missed)} of GPU work launched between the records ran on "
                f"another stream that the end event does not wait for (in "
                f"{int(numbers.uncovered[k])} of {windows} windows): {by} read "
                f"{fmt_ns(event)} without it, so whatever they read, they do not time it",
                {**base, "uncovered_busy_median_ns": missed},
                "Make the timed stream wait for side streams before end.record() "
                "(torch.cuda.current_stream().wait_stream(side)), or time each stream with "
                "its own events.",
            )
        synced = numbers.synced[k] / windows >= 0.5
        if synced:
            blocked = m["sync_ns"]
            yield Finding(
                SYNC, WARNING, label,
                f"{label}: the host waits for the GPU inside the timed window in "
                f"{int(numbers.synced[k])} of {windows} iterations; what follows the sync "
                f"is issued late, so {by} read {fmt_ns(event)} against "
                f"{fmt_ns(busy)} of GPU work ({fmt_ns(overhead)} of idle window)",
                {**base, "blocked_median_ns": blocked, "overhead_median_ns": overhead,
                 "iterations_with_sync": int(numbers.synced[k])},
                "Remove .item()/.cpu()/synchronize() from the timed function, or time up to "
                "the sync only.",
            )
        if numbers.copied[k] / windows >= 0.5:
            pageable = int(numbers.pageable[k])
            share = m["copy_ns"] / event if event else 0.0
            yield Finding(
                TRANSFER, WARNING if (pageable or share >= t.transfer_share) else INFO, label,
                f"{label}: {fmt_ns(m['copy_ns'])} of host-device copies "
                f"({fmt_bytes(m['copy_bytes'])} per iteration) run inside the "
                f"{fmt_ns(event)} window ({fmt_share(share)})"
                + (", from pageable memory" if pageable else ""),
                {**base, "copy_median_ns": m["copy_ns"],
                 "copy_bytes_median": m["copy_bytes"],
                 "pageable_copies": pageable, "copy_share_median": share},
                "Create inputs on the GPU before timing; if the copy is part of what you "
                "measure, use pinned memory and non_blocking=True.",
            )
        # Gaps that short between dependent kernels are the GPU's own dispatch (a CUDA
        # graph leaves them too), and the events cost their floor (measured by the harness
        # in the same run) whatever they time; only the rest is overhead the host added.
        calls = float(numbers.calls[k])
        gaps_per_call = m["gaps"] / calls
        device_gaps = (m["internal_idle_ns"] if gaps_per_call and
                       m["internal_idle_ns"] / gaps_per_call < t.dispatch_gap_ns else 0.0)
        host_overhead = overhead - device_gaps - floor
        if synced or host_overhead < max(t.overhead_min_ns, t.overhead_share * event):
            continue  # a sync explains the idle window on its own
        # One long host stall, between GPU operations or before the first one, is host work;
        # shorter ones are the framework's dispatch per launch (PyTorch takes tens of µs per
        # op under nsys), which is launch overhead.
        stall_inside = (m["max_gap_ns"] >= t.host_work_min_ns
                        and m["max_gap_ns"] >= t.stall_share * overhead)
        host_before = (m["host_lead_ns"] >= t.host_work_min_ns
                       and m["edge_ns"] >= t.stall_share * overhead)
        evidence = {**base, "overhead_median_ns": overhead, "edge_median_ns": m["edge_ns"],
                    "internal_idle_median_ns": m["internal_idle_ns"],
                    "max_gap_median_ns": m["max_gap_ns"], "gaps_median": m["gaps"],
                    "host_lead_median_ns": m["host_lead_ns"], "gpu_ops_median": m["gpu_ops"],
                    "device_gap_median_ns": device_gaps, "event_floor_ns": floor,
                    "event_floor_source": floor_source,
                    "overhead_beyond_floor_ns": host_overhead}
        if stall_inside or host_before:
            where = (f"a {fmt_ns(m['max_gap_ns'])} gap between GPU operations" if stall_inside
                     else f"{fmt_ns(m['host_lead_ns'])} of host time before the first launch")
            g = frame(k, ["copies_before_bytes", "copies_before_gap_ns"])
            after_copies = _after_copies(g)
            if after_copies:
                where += after_copies
                evidence["copies_before_bytes_median"] = float(
                    g["copies_before_bytes"].median())
                evidence["copies_before_gap_median_ns"] = float(
                    g["copies_before_gap_ns"].median())
            yield Finding(
                HOST, WARNING, label,
                f"{label}: {by} read {fmt_ns(event)} but the GPU was busy "
                f"{fmt_ns(busy)}; most of the {fmt_ns(overhead)} difference is {where}: host "
                "work inside the timed window",
                evidence,
                "Move host work (tensor creation on the CPU, Python logic, data preparation) "
                f"out of the timed function; the kernels take {fmt_ns(busy)}.",
            )
        else:
            queued = _queued_ahead(frame(k, ["prior_busy_ns", "event_ns"]), evidence)
            yield Finding(
                LAUNCH, WARNING, label,
                f"{label}: {by} read {fmt_ns(event)} but the GPU was busy only "
                f"{fmt_ns(busy)} (+{fmt_share(overhead / busy if busy else 1.0)}): "
                + (f"{fmt_ns(host_overhead)} of launch overhead (past the events' own "
                   f"{fmt_ns(floor)}), " if floor else f"{fmt_ns(overhead)} of launch overhead, ")
                + _operations(m, calls) + queued,
                evidence,
                _USER_ADVICE["LAUNCH"] if tw.source == "user" else
                "Trust the kernel time, or make the events agree: back-pressure "
                "(backpressure=True), a CUDA graph (cuda_graph=N), or more work per "
                "iteration.",
            )
