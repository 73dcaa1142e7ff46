"""Ranks and diffs as plain rows and dicts: the JSON contracts `nsyswrap.ranks/1` and
`nsyswrap.diff/1`, and the rows the other formats lay out."""

from __future__ import annotations

from typing import Any

from ..._version import __version__
from ...comparison.document import plain, records
from ...multi import DIFF_SCHEMA, RANKS_SCHEMA, Diff, RankAnalysis
from ...multi.ranks import RANK_COLUMNS

FAMILY_FIELDS = ["family", "rank", "count", "cpu_median_ns", "work_median_ns",
                 "gpu_busy_median_ns", "compute_median_ns"]


def collective_rows(a: RankAnalysis) -> list[dict[str, Any]]:
    """Per (collective name, rank): how many, their time, the part spent waiting."""
    c = a.collectives
    if c.empty:
        return []
    g = c.groupby(["name", "rank"], sort=False, observed=True)
    out = g.agg(count=("ordinal", "size"), total_ns=("duration_ns", "sum"),
                wait_ns=("wait_ns", "sum"), last_arrivals=("last", "sum")).reset_index()
    return records(out, ["name", "rank", "count", "total_ns", "wait_ns", "last_arrivals"])


def ranks_section(a: RankAnalysis, section: str) -> list[dict[str, Any]]:
    if section == "ranks":
        return records(a.table, RANK_COLUMNS)
    if section == "families":
        return records(a.families, FAMILY_FIELDS)
    if section == "collectives":
        return collective_rows(a)
    if section == "findings":
        return [plain(f.to_dict()) for f in a.findings]
    raise ValueError(f"unknown section {section!r}")


def ranks_document(a: RankAnalysis) -> dict[str, Any]:
    return {
        "schema": RANKS_SCHEMA,
        "tool": {"name": "nsyswrap", "version": __version__},
        "step_family": a.step_family,
        "clock": plain(a.clock),
        "notes": list(a.notes),
        "thresholds": plain(a.thresholds.to_dict()),
        "ranks": ranks_section(a, "ranks"),
        "families": ranks_section(a, "families"),
        "collectives": ranks_section(a, "collectives"),
        "findings": ranks_section(a, "findings"),
        "reports": [s.document for s in a.summaries],
    }


DIFF_ROW_FIELDS = ["kind", "name", "key", "metric", "base_count", "new_count", "base_median_ns",
                   "new_median_ns", "change", "ci_low", "ci_high", "method", "verdict",
                   "reason", "total_change_ns"]


def _side(s) -> dict[str, Any]:
    return {"source": s.source, "gpus": s.gpus, "driver_version": s.driver_version,
            "nsys_version": s.nsys_version, "clock_mhz": s.clock_mhz}


def diff_section(d: Diff, section: str) -> list[dict[str, Any]]:
    if section == "rows":
        return records(d.rows, DIFF_ROW_FIELDS)
    if section == "findings":
        return ([{"change": "appeared", **f} for f in d.findings_appeared]
                + [{"change": "disappeared", **f} for f in d.findings_disappeared])
    raise ValueError(f"unknown section {section!r}")


def verdict_counts(d: Diff) -> dict[str, int]:
    return {str(k): int(v) for k, v in d.rows["verdict"].value_counts().items()}


def diff_document(d: Diff) -> dict[str, Any]:
    return plain({
        "schema": DIFF_SCHEMA,
        "tool": {"name": "nsyswrap", "version": __version__},
        "base": _side(d.base),
        "new": _side(d.new),
        "comparability": d.comparability,
        "thresholds": d.thresholds.to_dict(),
        "verdicts": verdict_counts(d),
        "rows": diff_section(d, "rows"),
        "findings": {"appeared": d.findings_appeared, "disappeared": d.findings_disappeared},
    })
