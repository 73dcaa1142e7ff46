"""Vega-Lite specifications of the pages for many reports (ranks side by side, a diff), as
plain dicts, with the rules of `render/charts.py`: names from reports travel as data and
are drawn as canvas text, never put inside an expression."""

from __future__ import annotations

from typing import Any

from ..charts import SCHEMA, chart_config

# Per rank, a step's GPU span split into what ran on the GPU, in the order of the bar.
STEP_PARTS = {
    "compute only": "#2e86ab",
    "communication overlapped with compute": "#7fb7d6",
    "exposed communication (transfer)": "#f18f01",
    "exposed communication: waiting for the last rank": "#d1495b",
    "GPU idle": "#e3e6ea",
}
HOST_STEP = "host step time (wall)"
VERDICT_COLORS = {"slower": "#c0392b", "faster": "#2f7d4a",
                  "no significant change": "#8a939c", "inconclusive": "#d4a017"}
BAR_PX = 30
GROUP_BAR_PX = 13


def rank_steps(rows: list[dict[str, Any]], host: list[dict[str, Any]]) -> dict[str, Any]:
    """One horizontal stacked bar per rank (`rows`: rank_label, part, ms, order), and the
    host's step time as a black tick on the same axis (`host`: rank_label, ms)."""
    labels = list(dict.fromkeys(r["rank_label"] for r in rows + host))
    y = {"field": "rank_label", "type": "nominal", "title": None, "sort": labels,
         "axis": {"labelLimit": 200}}
    parts = list(STEP_PARTS)
    present = [p for p in parts if any(r["part"] == p and r["ms"] > 0 for r in rows)]
    color = {"field": "part", "type": "nominal", "title": None,
             "scale": {"domain": parts, "range": list(STEP_PARTS.values())},
             "legend": {"values": present or parts, "columns": 3, "labelLimit": 320}}
    tooltip = [{"field": "rank_label", "title": "rank"}, {"field": "part"},
               {"field": "ms", "title": "ms per step (median)", "format": ",.3f"}]
    layers: list[dict[str, Any]] = [
        {"data": {"values": rows}, "mark": {"type": "bar", "height": {"band": 0.7}},
         "encoding": {"y": y, "x": {"field": "ms", "type": "quantitative", "stack": "zero",
                                    "title": "ms per step (medians)"},
                      "color": color, "order": {"field": "order"}, "tooltip": tooltip}},
    ]
    if host:
        layers.append(
            {"data": {"values": host},
             "mark": {"type": "tick", "thickness": 3, "color": "#1d232a",
                      "bandSize": BAR_PX},
             "encoding": {"y": y, "x": {"field": "ms", "type": "quantitative"},
                          "tooltip": [{"field": "rank_label", "title": "rank"},
                                      {"field": "what", "title": "what"},
                                      {"field": "ms", "title": "ms (median)",
                                       "format": ",.3f"}]}})
    return {"$schema": SCHEMA, "width": "container", "height": BAR_PX * len(labels) + 10,
            "config": chart_config(), "layer": layers,
            "resolve": {"scale": {"color": "independent"}}}


def family_groups(rows: list[dict[str, Any]], title: str) -> dict[str, Any]:
    """Range families as groups of bars, one bar per rank (`rows`: family, rank_label, ms)."""
    families = list(dict.fromkeys(r["family"] for r in rows))
    ranks = list(dict.fromkeys(r["rank_label"] for r in rows))
    return {
        "$schema": SCHEMA, "width": "container", "config": chart_config(),
        "height": len(families) * (GROUP_BAR_PX * len(ranks) + 10),
        "data": {"values": rows}, "mark": {"type": "bar"},
        "encoding": {
            "y": {"field": "family", "type": "nominal", "title": None, "sort": families,
                  "axis": {"labelLimit": 220}},
            "yOffset": {"field": "rank_label", "type": "nominal", "sort": ranks},
            "x": {"field": "ms", "type": "quantitative", "title": title,
                  "axis": {"tickCount": 6}},
            "color": {"field": "rank_label", "type": "nominal", "title": None,
                      "sort": ranks, "legend": {"columns": 8}},
            "tooltip": [{"field": "family", "title": "range family"},
                        {"field": "rank_label", "title": "rank"},
                        {"field": "ms", "title": "ms (median)", "format": ",.3f"}]},
    }


def _pct_ticks(lo: float, hi: float) -> list[float]:
    steps = [2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000]
    return sorted({0.0, *(-s for s in steps if -s >= lo), *(s for s in steps if s <= hi)})


def change_intervals(rows: list[dict[str, Any]], noise_floor: float) -> dict[str, Any]:
    """Each row's change (point) and its confidence interval (bar) in percent on a
    symmetric log axis (a +1500% change and a +3% one on one axis), around 0, with the
    noise floor as a grey band: a verdict needs the whole bar outside 0 and the point
    outside the band. `rows`: label, change_pct, low_pct, high_pct, verdict, and text."""
    floor = round(100 * noise_floor, 4)
    values = [v for r in rows for v in (r["change_pct"], r["low_pct"], r["high_pct"])
              if v is not None]
    # 1.4x on the symmetric log scale leaves room for the extreme diamonds
    lo = min([*values, -2 * floor, -5.0]) * 1.4
    hi = max([*values, 2 * floor, 5.0]) * 1.4
    labels = [r["label"] for r in rows]
    x_scale = {"type": "symlog", "constant": 1, "domain": [round(lo, 3), round(hi, 3)],
               "nice": False}
    x = {"field": "change_pct", "type": "quantitative", "scale": x_scale,
         "title": "change, % (symmetric log scale; negative is faster)",
         "axis": {"values": _pct_ticks(lo, hi), "labelOverlap": "greedy", "grid": True}}
    y = {"field": "label", "type": "nominal", "title": None, "sort": labels,
         "axis": {"labelLimit": 360}}
    color = {"field": "verdict", "type": "nominal", "title": None,
             "scale": {"domain": list(VERDICT_COLORS), "range": list(VERDICT_COLORS.values())},
             "legend": {"values": [v for v in VERDICT_COLORS
                                   if any(r["verdict"] == v for r in rows)]}}
    tooltip = [{"field": "name", "title": "what"}, {"field": "verdict"},
               {"field": "change_text", "title": "change"},
               {"field": "ci_text", "title": "interval"},
               {"field": "medians", "title": "base → new (median)"},
               {"field": "counts", "title": "instances base/new"}]
    band = [{"change_pct": -floor, "high_pct": floor}]
    return {
        "$schema": SCHEMA, "width": "container", "height": BAR_PX * len(rows) + 10,
        "config": chart_config(),
        "layer": [
            {"data": {"values": band}, "mark": {"type": "rect", "color": "#eef0f3"},
             "encoding": {"x": x, "x2": {"field": "high_pct"},
                          "tooltip": {"value": f"noise floor: ±{floor:g}%"}}},
            {"data": {"values": [{"change_pct": 0}]},
             "mark": {"type": "rule", "color": "#1d232a", "strokeWidth": 1},
             "encoding": {"x": x}},
            {"data": {"values": rows},
             "layer": [
                 {"transform": [{"filter": "isValid(datum.low_pct)"}],
                  "mark": {"type": "rule", "strokeWidth": 4, "opacity": 0.65},
                  "encoding": {"x": {**x, "field": "low_pct"}, "x2": {"field": "high_pct"},
                               "y": y, "color": color, "tooltip": tooltip}},
                 {"mark": {"type": "point", "filled": True, "size": 60, "shape": "diamond"},
                  "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip}},
             ]},
        ],
    }
