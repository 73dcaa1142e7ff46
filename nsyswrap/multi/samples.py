"""What `nsyswrap diff` compares, from one side: per-instance samples of each kernel (by
name), each range family of the user's, each harness benchmark and each group of the
program's own timings (by call sites), with the facts that decide whether two runs are
comparable. From a report, or from an `analysis.json` (nsyswrap.compare/1) where the
samples are what the document holds: the `samples` section `nsyswrap run` writes
(sample_rows: each item's samples as a diff of the report would use them), else the rows of
--instances, else summary numbers only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..common.errors import BadInputError
from ..comparison.document import range_families
from ..comparison.result import SCHEMA, Comparison
from ..diagnose.finding import range_label
from ..read.json_input import all_of, is_text, parse, real, whole
from .stats import cap_samples

# torch.cuda._sleep, the harness's back-pressure: its length is chosen by the harness from
# the host's enqueue time, so it says nothing about the workload's speed.
HARNESS_KERNELS = frozenset({"spin_kernel"})


@dataclass
class Item:
    """One thing to compare: samples (per instance, ns), or only summary numbers."""

    kind: str  # kernel | range | benchmark | timing
    name: str
    metric: str  # duration | gpu_busy | cpu | busy_per_call | event_per_call | measured_per_call
    samples: np.ndarray | None
    median_ns: float
    count: int
    mean_ns: float | None = None
    std_ns: float | None = None
    # A range family's GPU operations per instance (median; None: not traced): what one
    # instance does, which decides whether two runs' instances can be compared (diff.py).
    ops_per_instance: float | None = None
    # What matches a program's timing group between two runs (its stable key,
    # user_timings.groups[*].key); None: the name matches.
    key: str | None = None


@dataclass
class DiffSide:
    source: str
    gpus: list[str]
    driver_version: str | None
    nsys_version: str | None
    clock_mhz: float | None  # median SM clock (GPU metrics or the harness's samples)
    items: dict[tuple[str, str, str], Item] = field(default_factory=dict)
    findings: list[dict[str, Any]] = field(default_factory=list)


def _add(side: DiffSide, kind: str, name: str, metric: str, values,
         ops_per_instance: float | None = None, key: str | None = None) -> None:
    """An item of the finite `values`: their median and count, and at most
    stats.MAX_SAMPLES of them as its samples (cap_samples). Matched by `key` where given,
    else by name."""
    v = np.asarray(values, dtype="float64")
    v = v[np.isfinite(v)]
    if len(v):
        side.items[(kind, key or name, metric)] = Item(kind, name, metric, cap_samples(v),
                                                       float(np.median(v)), len(v),
                                                       ops_per_instance=ops_per_instance,
                                                       key=key)


def diff_samples(c: Comparison, kernels: pd.DataFrame | None = None) -> DiffSide:
    """From an analysis; `kernels`: the report's kernel rows (name, start_ns, end_ns)."""
    a = c.analysis
    info = c.info
    side = DiffSide(str(info.source), [g.name for g in info.gpus], info.driver_version,
                    info.nsys_version, _clock(c))
    if kernels is not None and len(kernels):
        k = pd.DataFrame({"name": kernels["name"].astype(str).to_numpy(),
                          "short": kernels["short_name"].astype(str).to_numpy(),
                          "ns": (kernels["end_ns"] - kernels["start_ns"]).to_numpy()})
        if a.runs:
            k = k[~k["short"].isin(HARNESS_KERNELS)]
        for name, g in k.groupby("name", sort=False, observed=True):
            _add(side, "kernel", str(name), "duration", g["ns"])
    inst = _listed_instances(c)
    for (domain, family), g in inst.groupby(["domain", "family"], sort=False, observed=True):
        _add_range(side, range_label(domain, family), g)
    _add_benchmarks(side, a.iterations)
    _add_timings(side, a.user_timings.intervals)
    side.findings = [{"code": f.code, "severity": f.severity, "range": f.range,
                      "message": f.message} for f in c.findings]
    return side


def _listed_instances(c: Comparison) -> pd.DataFrame:
    """The user's instances of the range families the document lists (the heaviest
    MAX_RANGE_FAMILIES, document.range_families), with what _add_range reads: a program
    that names each range after what it serves makes a family of every range, and a step
    per family of a million took minutes."""
    a = c.analysis
    rows = a.user_rows()
    listed, left_out = range_families(c)
    if left_out:
        names = a.instances.rows(rows, ["domain", "family"])
        maybe = names["family"].isin(listed["name"].unique()).to_numpy()
        pairs = pd.MultiIndex.from_frame(listed[["domain", "name"]].astype(str))
        rows = rows[maybe][pd.MultiIndex.from_frame(
            names[maybe].astype(str)).isin(pairs)]
    return a.instances.rows(rows, ["domain", "family", "gpu_busy_ns", "cpu_ns", "gpu_ops"])


def _add_range(side: DiffSide, label: str, g: pd.DataFrame) -> None:
    """A range family by the GPU work it launched. Its host time only where the GPU's is
    unknown: in an asynchronous program a range's host time is the time to enqueue, which
    moved by 18-25% between two identical runs of the diff fixture (h100_diff_base and
    _again) while their GPU busy times agreed within 1%."""
    busy = pd.to_numeric(g["gpu_busy_ns"], errors="coerce")
    ops = pd.to_numeric(g["gpu_ops"], errors="coerce") if "gpu_ops" in g else None
    per_instance = float(ops.median()) if ops is not None and ops.notna().any() else None
    if busy.notna().any():
        _add(side, "range", label, "gpu_busy", busy, per_instance)
    else:
        _add(side, "range", label, "cpu", g["cpu_ns"], per_instance)


def _add_benchmarks(side: DiffSide, its: pd.DataFrame) -> None:
    if its is None or its.empty:
        return
    calls = its["calls"].where(its["calls"] > 0, 1) if "calls" in its else 1
    its = its.assign(busy=its["gpu_busy_ns"] / calls, event=its["event_ns"] / calls)
    for name, g in its.groupby("benchmark", sort=False, observed=True):
        _add(side, "benchmark", str(name), "busy_per_call", g["busy"])
        _add(side, "benchmark", str(name), "event_per_call", g["event"])


# "... [pid 4321]": how an analysis of an earlier version told apart two processes timing
# the same lines (its groups have no key): matched by call sites alone, as the pids of two
# runs differ.
_PID_SUFFIX = re.compile(r" \[pid \d+\]$")
# do_bench's own estimate of how many calls to make is not a figure it returns.
_NOT_COMPARED = frozenset({"do_bench estimate"})


def _add_timings(side: DiffSide, intervals: pd.DataFrame) -> None:
    """The program's timing groups, matched by their key, per instance and per call: the
    GPU work between the records (busy_per_call) and what the program's timer read
    (measured_per_call). `intervals`: analysis.user_timings.intervals, or an analysis.json's
    `user_timing_instances`."""
    if intervals is None or intervals.empty or "label" not in intervals:
        return
    i = intervals[~intervals["kind"].isin(_NOT_COMPARED)]
    calls = pd.to_numeric(i["calls"], errors="coerce").fillna(1).clip(lower=1)
    busy = pd.to_numeric(i["gpu_busy_ns"], errors="coerce") / calls
    value = pd.to_numeric(i["value_ns"], errors="coerce") / calls
    names = i["label"].astype(str).str.replace(_PID_SUFFIX, "", regex=True)
    keys = i["key"].astype(str) if "key" in i else names
    for key, rows in keys.groupby(keys, sort=False).groups.items():
        name, key = str(names[rows[0]]), (str(key) if "key" in i else None)
        _add(side, "timing", name, "busy_per_call", busy[rows], key=key)
        _add(side, "timing", name, "measured_per_call", value[rows], key=key)


def _timing_summaries(side: DiffSide, groups: list[dict]) -> None:
    """Groups of an analysis.json written without --instances: medians and counts only."""
    for g in groups:
        if g.get("kind") in _NOT_COMPARED:
            continue
        name = _PID_SUFFIX.sub("", str(g.get("label")))
        key = g.get("key")
        for metric, median in (("busy_per_call", "kernels_median_ns"),
                               ("measured_per_call", "value_median_ns")):
            if g.get(median) is not None and (("timing", key or name, metric)
                                              not in side.items):
                side.items[("timing", key or name, metric)] = Item(
                    "timing", name, metric, None, float(g[median]),
                    int(g.get("instances") or 0), key=key)


def _clock(c: Comparison) -> float | None:
    m = c.analysis.gpu_metrics
    if m is not None and len(m):
        gpc = m[m["metric"].astype(str).str.contains("GPC|SM", case=False, regex=True)]
        if len(gpc):
            return float(gpc["value"].median())
    clocks = [x for run in c.analysis.runs for x in (run.get("clock_mhz") or [])
              if isinstance(x, (int, float)) and x > 0]
    return float(np.median(clocks)) if clocks else None


def sample_rows(side: DiffSide) -> list[dict[str, Any]]:
    """The items that have samples as plain rows, an analysis.json's `samples` section
    (docs/json.md): a diff of two such documents has what a diff of the two reports has
    (the samples are capped alike), kernels apart where the side was made without them."""
    rows = []
    for item in side.items.values():
        if item.samples is None:
            continue
        rows.append({"kind": item.kind, "name": item.name, "key": item.key,
                     "metric": item.metric,
                     "count": item.count, "median_ns": _number(item.median_ns),
                     "ops_per_instance": None if item.ops_per_instance is None
                     else _number(item.ops_per_instance),
                     "values_ns": [_number(v) for v in item.samples.tolist()]})
    return rows


def _number(v: float) -> int | float:
    return int(v) if float(v).is_integer() else float(v)


def _from_sample_rows(side: DiffSide, rows: list[dict[str, Any]]) -> None:
    for r in rows:
        ops = r.get("ops_per_instance")
        key = r.get("key")
        side.items[(r["kind"], key or r["name"], r["metric"])] = Item(
            r["kind"], r["name"], r["metric"],
            np.asarray(r["values_ns"], dtype="float64"), float(r["median_ns"]),
            int(r["count"]), ops_per_instance=None if ops is None else float(ops), key=key)


def _count(value) -> bool:
    return whole(value, 0)


# What from_analysis_json reads of each row of a section, and what each value must be (the
# fields it reads with [] are required; the rest may be absent or null): a document that
# says it is nsyswrap's but holds something else (text where a number is, a number past
# 64 bits, null where a section is) is refused here, not halfway through the diff.
_ROW_FIELDS: dict[str, dict[str, tuple[bool, Any]]] = {
    "kernels": {"name": (True, is_text), "median_ns": (True, real), "count": (True, _count),
                "short_name": (False, is_text), "total_ns": (False, real),
                "mean_ns": (False, real), "std_ns": (False, real)},
    "samples": {"kind": (True, is_text), "name": (True, is_text), "metric": (True, is_text),
                "median_ns": (True, real), "count": (True, _count),
                "values_ns": (True, lambda v: all_of(v, real)),
                "ops_per_instance": (False, real), "key": (False, is_text)},
    "ranges": {"name": (True, is_text), "count": (True, _count), "domain": (False, is_text),
               "gpu_busy_median_ns": (False, real), "cpu_median_ns": (False, real),
               "gpu_ops": (False, real)},
    "instances": {"name": (True, is_text), "domain": (False, is_text),
                  "family": (False, is_text), "cpu_ns": (False, real),
                  "gpu_busy_ns": (False, real), "gpu_ops": (False, real)},
    "benchmarks": {"benchmark": (True, is_text), "busy_median_ns": (False, real),
                   "iterations": (False, _count)},
    "iterations": {"benchmark": (True, is_text), "calls": (False, real),
                   "gpu_busy_ns": (False, real), "event_ns": (False, real)},
    "user_timing_instances": {"label": (True, is_text), "kind": (False, is_text),
                              "key": (False, is_text),
                              "calls": (False, real), "gpu_busy_ns": (False, real),
                              "value_ns": (False, real)},
    "findings": {"code": (False, is_text), "severity": (False, is_text),
                 "range": (False, is_text), "message": (False, is_text)},
}
# Sections from_analysis_json takes as empty when null (the others it iterates).
_MAY_BE_NULL = frozenset({"samples", "instances", "iterations", "user_timing_instances"})
_GROUP_FIELDS = {"label": (False, is_text), "kind": (False, is_text), "key": (False, is_text),
                 "kernels_median_ns": (False, real), "value_median_ns": (False, real),
                 "instances": (False, _count)}
_GPU_FIELDS = {"name": (False, is_text)}


def _rows_problem(section: str, rows: Any, fields: dict[str, tuple[bool, Any]]) -> str | None:
    if not isinstance(rows, list):
        return f"{section} is not a list"
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return f"{section}[{i}] is not an object"
        for name, (required, check) in fields.items():
            if name not in row:
                if required:
                    return f"{section}[{i}] has no {name}"
                continue
            if not (check(row[name]) or (not required and row[name] is None)):
                return f"{section}[{i}].{name} is {_shown(row[name])}"
    return None


def _shown(value: Any) -> str:
    """A value as the message shows it: its type, and itself where that is short."""
    if isinstance(value, int) and not isinstance(value, bool) and not whole(value):
        return "an integer past 64 bits"
    text = repr(value) if not isinstance(value, (list, dict)) else type(value).__name__
    return text if len(text) <= 40 else f"{type(value).__name__} of {len(text)} characters"


def _document_problem(doc: dict[str, Any]) -> str | None:
    """What in a nsyswrap.compare/1 document from_analysis_json cannot read as its writer
    wrote it (render/json.py, pipeline.analysis_json), None when nothing."""
    rep = doc.get("report", {})
    if not isinstance(rep, dict):
        return "report is not an object"
    for name in ("source", "driver_version", "nsys_version"):
        if rep.get(name) is not None and not is_text(rep[name]):
            return f"report.{name} is {_shown(rep[name])}"
    checks = [("report.gpus", rep.get("gpus", []), _GPU_FIELDS)]
    checks += [(name, doc[name], fields) for name, fields in _ROW_FIELDS.items()
               if name in doc and not (name in _MAY_BE_NULL and doc[name] is None)]
    timings = doc.get("user_timings")
    if timings is not None:
        if not isinstance(timings, dict):
            return "user_timings is not an object"
        checks.append(("user_timings.groups", timings.get("groups") or [], _GROUP_FIELDS))
    for section, rows, fields in checks:
        problem = _rows_problem(section, rows, fields)
        if problem is not None:
            return problem
    return None


def from_analysis_json(path: Path) -> DiffSide:
    """A side from a nsyswrap.compare/1 document. Kernels have summary numbers only (count,
    median, mean, std); ranges, benchmarks and the program's timings have samples in the
    `samples` section of a run's analysis.json, or in the rows of a document written with
    --instances (instances, iterations, user_timing_instances)."""
    try:
        doc = parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # UnicodeDecodeError is a ValueError
        raise BadInputError(f"{path}: not readable as JSON ({e})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise BadInputError(f"{path}: not a {SCHEMA} document (nsyswrap compare --format "
                            "json, or a run's analysis.json)")
    problem = _document_problem(doc)
    if problem is not None:
        raise BadInputError(f"{path}: not a {SCHEMA} document as nsyswrap writes it: "
                            f"{problem}")
    rep = doc.get("report") or {}
    side = DiffSide(str(rep.get("source") or path), [g.get("name") for g in rep.get("gpus", [])],
                    rep.get("driver_version"), rep.get("nsys_version"), None)
    for k in doc.get("kernels", []):
        if k.get("short_name") in HARNESS_KERNELS and doc.get("benchmarks"):
            continue
        side.items[("kernel", k["name"], "duration")] = Item(
            "kernel", k["name"], "duration", None, float(k["median_ns"]), int(k["count"]),
            k.get("mean_ns"), k.get("std_ns"))
    if isinstance(doc.get("samples"), list):
        _from_sample_rows(side, doc["samples"])
    else:
        _from_document_rows(side, doc)
    side.findings = [{k: f.get(k) for k in ("code", "severity", "range", "message")}
                     for f in doc.get("findings", [])]
    return side


def _from_document_rows(side: DiffSide, doc: dict[str, Any]) -> None:
    """Ranges, benchmarks and timings of a document without a samples section: from its
    --instances rows where it has them, else summary numbers."""
    user = {(r.get("domain") or "", r["name"]) for r in doc.get("ranges", [])
            if not r.get("library")}
    inst = pd.DataFrame(doc.get("instances", []))
    if len(inst):
        inst["domain"] = inst["domain"].fillna("")
        fam = inst.get("family", inst["name"])
        inst = inst.assign(family=fam)
        mine = [(d, f) in user for d, f in zip(inst["domain"], inst["family"], strict=True)]
        families = inst[mine].groupby(["domain", "family"], sort=False, observed=True)
        for (domain, family), g in families:
            _add_range(side, range_label(domain, family), g.astype({"cpu_ns": "float64"}))
    else:
        for r in doc.get("ranges", []):
            if r.get("library"):
                continue
            label = range_label(r.get("domain") or "", r["name"])
            metric, col = (("gpu_busy", "gpu_busy_median_ns") if r.get("gpu_busy_median_ns")
                           is not None else ("cpu", "cpu_median_ns"))
            ops = r.get("gpu_ops")
            if r.get(col) is not None:
                # Operations per instance: the mean, where a document has no instances.
                side.items[("range", label, metric)] = Item(
                    "range", label, metric, None, float(r[col]), int(r["count"]),
                    ops_per_instance=ops / r["count"] if ops is not None and r["count"]
                    else None)
    its = pd.DataFrame(doc.get("iterations", []))
    if len(its):
        _add_benchmarks(side, its)
    else:
        for b in doc.get("benchmarks", []):
            if b.get("busy_median_ns") is not None:
                side.items[("benchmark", b["benchmark"], "busy_per_call")] = Item(
                    "benchmark", b["benchmark"], "busy_per_call", None,
                    float(b["busy_median_ns"]), int(b.get("iterations") or 0))
    timings = pd.DataFrame(doc.get("user_timing_instances", []))
    if len(timings):
        _add_timings(side, timings)
    else:
        _timing_summaries(side, (doc.get("user_timings") or {}).get("groups") or [])
