"""Columns of the rank and diff tables (terminal and Markdown)."""

from __future__ import annotations

from typing import Any

from ...common.names import printable
from ...common.units import fmt_ns, fmt_share
from ..views import Column, kernel_names, ns_cell


def pct_cell(key: str):
    """A Column's cell function: the row's `key`, a relative change, as a signed percent."""
    def cell(r: dict[str, Any]) -> str:
        v = r.get(key)
        return "–" if v is None else f"{100 * v:+.1f}%"
    return cell


def ci_cell(r: dict[str, Any]) -> str:
    """A diff row's confidence interval of the change (ci_low, ci_high) in percent."""
    lo, hi = r.get("ci_low"), r.get("ci_high")
    return "–" if lo is None or hi is None else f"[{100 * lo:+.1f}%, {100 * hi:+.1f}%]"


RANK_COLUMNS = [
    Column("Rank", lambda r: str(r["rank"])),
    Column("GPU", lambda r: ",".join(map(str, r["devices"])), numeric=False),
    Column("Steps", lambda r: str(r["steps"])),
    Column("Step", ns_cell("step_median_ns"), title="median step time (host)"),
    Column("GPU span", ns_cell("step_gpu_span_median_ns"), title="median GPU span of a step"),
    Column("Busy", lambda r: fmt_share(r["gpu_busy_share"]), title="GPU busy share"),
    Column("Compute", ns_cell("compute_median_ns"), title="compute per step"),
    Column("Comm", ns_cell("comm_median_ns"), title="NCCL kernels per step"),
    Column("Overlap", ns_cell("overlapped_comm_median_ns"),
           title="communication overlapped with compute per step"),
    Column("Exposed", ns_cell("exposed_comm_median_ns"),
           title="communication with no compute beside it per step"),
    Column("Wait", ns_cell("comm_wait_median_ns"),
           title="time in collectives waiting for the last rank per step"),
    Column("Last", lambda r: fmt_share(r["last_arrival_share"]),
           title="share of collectives it arrived last to"),
]
IDENTITY_COLUMNS = [
    Column("Rank", lambda r: str(r["rank"])),
    Column("Report", lambda r: r["source"], numeric=False),
    Column("Identified by", lambda r: r["identified_by"], numeric=False),
]


def family_rows(families: list[dict[str, Any]], ranks: list[int]) -> tuple[list[Column],
                                                                          list[dict]]:
    """One row per family, one column per rank: median host work (wall time less syncs) / GPU
    compute."""
    by: dict[str, dict[str, Any]] = {}
    for f in families:
        row = by.setdefault(f["family"], {"family": f["family"]})
        row[f["rank"]] = f
    cols = [Column("Range family", lambda r: r["family"], numeric=False)]
    for rank in ranks:
        cols.append(Column(f"r{rank} host", lambda r, k=rank: fmt_ns((r.get(k) or {}).get(
            "work_median_ns")), title=f"rank {rank}: median host work (wall less syncs)"))
        cols.append(Column(f"r{rank} GPU", lambda r, k=rank: fmt_ns((r.get(k) or {}).get(
            "compute_median_ns")), title=f"rank {rank}: median GPU compute (no NCCL)"))
    return cols, list(by.values())


DEFAULT_METRICS = ("duration", "gpu_busy", "busy_per_call")
# A metric named by what it measures: diff's `cpu` is a range's wall time (docs/json.md).
METRIC_WORDS = {"cpu": "wall"}


def metric_suffix(r: dict[str, Any]) -> str:
    """' (wall)' after a row's name, for a metric other than its kind's default."""
    metric = r["metric"]
    return "" if metric in DEFAULT_METRICS else f" ({METRIC_WORDS.get(metric, metric)})"


def diff_names(rows: list[dict[str, Any]], width: int, full: bool = False,
               cut: bool = True) -> dict[str, str]:
    """The kernels' names of diff rows as shown (views.kernel_names)."""
    return kernel_names([r for r in rows if r["kind"] == "kernel"], width, full, cut)


def diff_name(r: dict[str, Any], names: dict[str, str]) -> str:
    """A row's name as shown: a kernel's from `names` (diff_names); a range's, a
    benchmark's and a timing's call sites ('Timer(x * 2) at t.py:18') as they are; the
    metric after it where it is not the row's usual one."""
    name = names.get(r["name"], r["name"]) if r["kind"] == "kernel" else printable(r["name"])
    return name + metric_suffix(r)


def diff_columns(names: dict[str, str]) -> list[Column]:
    return [
        Column("Kind", lambda r: r["kind"], numeric=False),
        Column("Name", lambda r: diff_name(r, names), numeric=False),
        Column("N", lambda r: f"{r['base_count']}/{r['new_count']}",
               title="instances base/new"),
        Column("Base", ns_cell("base_median_ns"), title="base median"),
        Column("New", ns_cell("new_median_ns"), title="new median"),
        Column("Change", pct_cell("change")),
        Column("95% CI", ci_cell, title="confidence interval of the change"),
        Column("Verdict", lambda r: r["verdict"] + (f" ({r['reason']})" if r["reason"] else ""),
               numeric=False),
    ]
