"""One report boiled down to what the cross-report analyses need, small enough to send back
from a worker process: per rank (a process with GPU work), its range-family instances with
host and GPU times split into compute and communication, and its NCCL kernels in order.

Workers call `summarize(path)`; the parent never holds more than these summaries, so many
reports cost the memory of the few being analysed at once (nsyswrap/multi/parallel.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.families import family_numbers
from ..analysis.union import union_length, union_stats
from ..comparison.document import document
from ..comparison.result import Comparison
from ..comparison.single import compare
from ..diagnose import Thresholds
from .identify import identify_ranks

# NCCL names its device kernels ncclKernel_* (up to 2.18) and ncclDevKernel_* (2.19 on);
# RCCL keeps the prefix. Communication is what these kernels do; everything else is compute.
NCCL_PREFIX = "nccl"

INSTANCE_COLUMNS = ["family", "domain", "index", "start_ns", "end_ns", "cpu_ns", "work_ns",
                    "gpu_busy_ns", "gpu_span_ns", "compute_ns", "comm_ns", "exposed_comm_ns"]
COLLECTIVE_COLUMNS = ["name", "ordinal", "start_ns", "end_ns", "launch_ns", "step"]


@dataclass
class RankSummary:
    """One rank: a process that ran GPU work, with times on its report's session clock."""

    source: str
    pid: int
    devices: list[int]
    rank: int | None  # None until the combining side numbers ranks it could not identify
    identified_by: str  # how the rank was found ("RANK in the environment nsys recorded", ...)
    session_start_utc_ns: int | None
    instances: pd.DataFrame  # INSTANCE_COLUMNS: the user's own range instances
    collectives: pd.DataFrame  # COLLECTIVE_COLUMNS: NCCL kernels in start order
    step_family: str | None  # the outermost repeated family ("train_step")
    gpu_busy_ns: int = 0  # over the steps (or the whole report without steps)
    window_ns: int = 0


@dataclass
class ReportSummary:
    source: str
    document: dict[str, Any]  # the report's own nsyswrap.compare/1 document
    ranks: list[RankSummary] = field(default_factory=list)
    gpus: list[str] = field(default_factory=list)
    nsys_version: str | None = None
    driver_version: str | None = None
    text_note: str | None = None  # ReportInfo.text_note: names that were not UTF-8
    # Samples for `nsyswrap diff` (nsyswrap/multi/samples.py), when asked for.
    samples: Any = None


def summarize(path: str | os.PathLike, thresholds: Thresholds | None = None,
              compare_options: dict | None = None, *, samples: bool = False,
              load_options: dict | None = None) -> ReportSummary:
    """Analyse one report (load, compare) and keep its summary: what a worker returns."""
    from ..read.loader import load

    report = load(path, **(load_options or {}))
    c = compare(report, thresholds, **(compare_options or {}))
    return summary_of(c, kernels=report.kernels if samples else None)


def summary_of(c: Comparison, *, kernels: pd.DataFrame | None = None) -> ReportSummary:
    """The summary of an analysis already made (`nsyswrap run --ranks` has them)."""
    info = c.info
    out = ReportSummary(source=str(info.source), document=document(c),
                        gpus=[g.name for g in info.gpus], nsys_version=info.nsys_version,
                        driver_version=info.driver_version, text_note=info.text_note)
    processes = c.analysis.processes
    # A rank is a process that ran GPU kernels; in a report without any (CPU-only ranks, no
    # CUDA trace), a process with NVTX ranges: host-side stragglers still show.
    procs = processes[processes["kernels"] > 0]
    if procs.empty:
        procs = processes[processes["nvtx_ranges"] > 0]
    identities = identify_ranks(info, procs)
    for row, (rank, how) in zip(procs.itertuples(), identities, strict=True):
        out.ranks.append(_rank_summary(c, int(row.pid), list(row.devices), rank, how))
    if kernels is not None:
        from .samples import diff_samples  # only `nsyswrap diff` needs them

        out.samples = diff_samples(c, kernels)
    return out


def is_nccl(names: pd.Series | np.ndarray) -> np.ndarray:
    return pd.Series(np.asarray(names, dtype=object)).astype(str).str.lower().str.startswith(
        NCCL_PREFIX).to_numpy()


def _rank_summary(c: Comparison, pid: int, devices: list[int], rank: int | None, how: str
                  ) -> RankSummary:
    a = c.analysis
    ops = a.attribution.gpu_ops
    op_pid = np.where(ops["thread"].to_numpy() >= 0, (ops["thread"].to_numpy() >> 24) & 0xFFFFFF,
                      -1)
    nccl_op = is_nccl(ops["name"].to_numpy()) & (ops["kind"] == "kernel").to_numpy()
    inst = a.user_instances()
    inst = inst[inst["pid"] == pid]
    inst = _with_comm_split(inst, a.attribution, nccl_op)
    step = _step_family(inst)

    mine = op_pid == pid
    coll = ops[mine & nccl_op]
    coll = pd.DataFrame({
        "name": coll["name"].astype(str).to_numpy(),
        "start_ns": coll["start_ns"].to_numpy(dtype="int64"),
        "end_ns": coll["end_ns"].to_numpy(dtype="int64"),
        "launch_ns": coll["launch_start_ns"].to_numpy(dtype="int64"),
        "event": coll.index.to_numpy(),
    }).sort_values("start_ns", kind="stable", ignore_index=True)
    coll["ordinal"] = coll.groupby("name", sort=False, observed=True).cumcount()
    coll["step"] = _step_of(coll["event"].to_numpy(), inst, step, a.attribution.op_pairs)

    # GPU busy time over the steps' GPU window (the whole process's GPU activity without steps).
    own = ops[mine]
    lo, hi = ((int(own["start_ns"].min()), int(own["end_ns"].max())) if len(own) else (0, 0))
    if step is not None:
        steps = inst[inst["family"] == step]
        lo = int(np.nanmin(steps["start_ns"]))
        hi = max(hi, int(np.nanmax(steps["end_ns"])))
        last_gpu = a.attribution.op_pairs
        last_gpu = last_gpu[np.isin(last_gpu["range_id"], steps.index.to_numpy())]
        if len(last_gpu):
            hi = max(hi, int(a.attribution.pair_values("end_ns", last_gpu).max()))
    busy = _union_length(own[(own["end_ns"] > lo) & (own["start_ns"] < hi)])
    return RankSummary(
        source=str(c.info.source), pid=pid, devices=devices, rank=rank,
        identified_by=how, session_start_utc_ns=c.info.session_start_utc_ns,
        instances=inst[INSTANCE_COLUMNS].reset_index(drop=True),
        collectives=coll[COLLECTIVE_COLUMNS], step_family=step,
        gpu_busy_ns=busy, window_ns=hi - lo)


def _union_length(ops: pd.DataFrame) -> int:
    return union_length(ops["start_ns"].to_numpy(dtype="int64"),
                        ops["end_ns"].to_numpy(dtype="int64")) if len(ops) else 0


def _with_comm_split(inst: pd.DataFrame, att, nccl_op: np.ndarray) -> pd.DataFrame:
    """Per instance: host work (wall time not blocked on the GPU: a rank that waits for a
    straggler blocks in syncs, so its ranges lengthen by waiting, not by working), and its
    GPU work split into compute (every operation that is not an NCCL kernel) and
    communication, with the communication that ran while no compute of the range did."""
    inst = inst.set_index("range_id", drop=False).copy()
    inst["work_ns"] = inst["cpu_ns"] - inst["sync_ns"]
    pairs = att.op_pairs
    mine = pairs[np.isin(pairs["range_id"].to_numpy(), inst.index.to_numpy())]
    # Pairs carry only their operation's row (Attribution.pair_values): take the times.
    mine = pd.DataFrame({"range_id": mine["range_id"].to_numpy(),
                         "start_ns": att.pair_values("start_ns", mine),
                         "end_ns": att.pair_values("end_ns", mine)})
    comm_pair = nccl_op[pairs["event"].to_numpy()[
        np.isin(pairs["range_id"].to_numpy(), inst.index.to_numpy())]]
    for col, part in (("compute_ns", mine[~comm_pair]), ("comm_ns", mine[comm_pair])):
        inst[col] = union_stats(part, "range_id")["busy_ns"].reindex(inst.index).fillna(0)
    overlap = inst["compute_ns"] + inst["comm_ns"] - inst["gpu_busy_ns"].fillna(0)
    inst["exposed_comm_ns"] = (inst["comm_ns"] - overlap).clip(lower=0)
    if inst["gpu_busy_ns"].isna().all():  # no GPU trace: unknown, not zero
        inst[["compute_ns", "comm_ns", "exposed_comm_ns"]] = np.nan
    inst["index"] = family_numbers(inst["domain"], inst["family"])[1]
    return inst


def _step_family(inst: pd.DataFrame) -> str | None:
    """The step: the repeated family (3 instances or more) that holds the most host time
    and is not nested in another repeated family's instances."""
    counts = inst.groupby("family", observed=True)["cpu_ns"].agg(["size", "sum"])
    repeated = counts[counts["size"] >= 3].sort_values("sum", ascending=False)
    return str(repeated.index[0]) if len(repeated) else None


def _step_of(events: np.ndarray, inst: pd.DataFrame, step: str | None,
             pairs: pd.DataFrame) -> np.ndarray:
    """The step instance (its index) each GPU operation was launched in; -1 outside."""
    out = np.full(len(events), -1, dtype="int64")
    if step is None or not len(events):
        return out
    steps = inst[inst["family"] == step]
    p = pairs[np.isin(pairs["range_id"].to_numpy(), steps.index.to_numpy())]
    index_of = steps["index"]
    lookup = pd.Series(index_of.reindex(p["range_id"].to_numpy()).to_numpy(),
                       index=p["event"].to_numpy())
    lookup = lookup[~lookup.index.duplicated()]
    found = lookup.reindex(events)
    return np.where(found.notna(), found.fillna(-1), -1).astype("int64")
