"""Vega-Lite specifications of the HTML report's pictures, as plain dicts.

Every name from the report travels as data, never inside a Vega expression or as markup:
Vega draws data as text on a canvas and its tooltip escapes HTML. Row labels of timelines
(the only text inside an expression, `labelExpr`) are built from numbers and fixed words
and JSON-quoted all the same.
"""

from __future__ import annotations

import json
from typing import Any

from ..common.names import capped
from .timeline import (
    KIND_COPY_DEVICE,
    KIND_COPY_HOST,
    KIND_EVENTS,
    KIND_GAP,
    KIND_GRAPH,
    KIND_KERNEL,
    KIND_LAUNCH,
    KIND_MEMSET,
    KIND_NVTX,
    KIND_OTHER,
    KIND_RECORD,
    KIND_SYNC,
    KIND_TIMER,
    KINDS,
    Window,
)

SCHEMA = "https://vega.github.io/schema/vega-lite/v6.json"  # an identifier; never fetched
KIND_COLORS = {
    KIND_NVTX: "#5b8db8", KIND_EVENTS: "#e3b23c", KIND_TIMER: "#a98bd4",
    KIND_RECORD: "#b5179e", KIND_LAUNCH: "#444444",
    KIND_SYNC: "#d1495b", KIND_KERNEL: "#2e86ab", KIND_COPY_HOST: "#f18f01",
    KIND_COPY_DEVICE: "#c7a26b", KIND_MEMSET: "#8e6c8a", KIND_GRAPH: "#3c9d6e",
    KIND_OTHER: "#b8b8b8", KIND_GAP: "#f4b6b6",
}
EVENTS_MEASURE, KERNELS_MEASURE = "CUDA events", "kernels (nsys)"
MEASURE_COLORS = {EVENTS_MEASURE: "#e3b23c", KERNELS_MEASURE: "#2e86ab"}
PART_COLORS = {"GPU busy (kernels)": "#2e86ab", "GPU busy (copies)": "#f18f01",
               "GPU idle": "#f4b6b6", "host blocked (sync)": "#d1495b"}
ROW_HEIGHT_PX = 26
_BAR_HALF = 0.38  # of a row


def chart_config() -> dict[str, Any]:
    """The Vega-Lite `config` every chart of the pages shares (no view border, font sizes,
    legends on top)."""
    return {"view": {"stroke": None}, "axis": {"labelFontSize": 11, "titleFontSize": 11},
            "legend": {"labelFontSize": 11, "titleFontSize": 11, "orient": "top",
                       "direction": "horizontal", "titleOrient": "left"}}


def timeline(win: Window) -> dict[str, Any]:
    """Rows top to bottom; x in µs from the window's origin; zoom with the wheel, pan by
    dragging, hover for details. Instants (launch and record() calls) are ticks; the
    window's bands are shaded behind every row."""
    n = len(win.rows)
    # Names as data, capped (names.capped): a range named with megabytes would be carried
    # whole into the page by each of its marks.
    marks = [{**{k: capped(v) if isinstance(v, str) else v for k, v in m.items()},
              "y0": m["row"] - _BAR_HALF, "y1": m["row"] + _BAR_HALF,
              "dur_us": round(m["end_us"] - m["start_us"], 4)} for m in win.marks]
    flows = [{"x": f["x_us"], "x2": f["x2_us"], "y0": f["row"] + _BAR_HALF,
              "y1": f["row2"] - _BAR_HALF} for f in win.flows if f["row2"] is not None]
    lo, hi = win.span_us
    pad = max((hi - lo) * 0.02, 0.5)
    # room on the right for the label of an end record drawn at the window's end
    pad_right = max(pad, (hi - lo) * 0.07) if any(m["kind"] == KIND_RECORD
                                                  for m in win.marks) else pad
    labels = json.dumps(win.rows, ensure_ascii=True)
    x = {"field": "start_us", "type": "quantitative", "title": win.x_title,
         "scale": {"domain": [round(lo - pad, 3), round(hi + pad_right, 3)], "nice": False,
                   "zero": False}}
    y = {"field": "y0", "type": "quantitative", "title": None,
         "scale": {"domain": [n - 0.5, -0.5], "nice": False, "zero": False},
         "axis": {"values": list(range(n)), "labelExpr": f"{labels}[datum.value]",
                  "grid": False, "ticks": False, "domain": False, "labelLimit": 260}}
    color = {"field": "kind", "type": "nominal", "title": None,
             "scale": {"domain": KINDS, "range": [KIND_COLORS[k] for k in KINDS]},
             "legend": {"values": sorted({m["kind"] for m in marks}, key=KINDS.index),
                        "columns": 6, "symbolType": "square"}}
    tooltip = [{"field": "name", "title": "what"}, {"field": "detail", "title": "details"},
               {"field": "start_us", "title": "start (µs)", "format": ",.2f"},
               {"field": "dur_us", "title": "duration (µs)", "format": ",.2f"}]
    instant = f"datum.kind === '{KIND_LAUNCH}' || datum.kind === '{KIND_RECORD}'"
    layers: list[dict[str, Any]] = [
        {"mark": {"type": "rect", "strokeWidth": 0.6, "clip": True},
         "transform": [{"filter": f"!({instant})"}],
         "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]},
                     "bind": "scales"}],
         "encoding": {"x": x, "x2": {"field": "end_us"}, "y": y, "y2": {"field": "y1"},
                      "color": color,
                      "stroke": {**color, "condition": {"test": "datum.selected",
                                                        "value": "#1d232a"}},
                      "strokeWidth": {"condition": {"test": "datum.selected",
                                                    "value": 2}, "value": 0.6},
                      "tooltip": tooltip}},
        {"mark": {"type": "rule", "clip": True},
         "transform": [{"filter": instant}],
         "encoding": {"x": x, "y": y, "y2": {"field": "y1"}, "color": color,
                      "strokeWidth": {"condition": {"test": f"datum.kind === '{KIND_RECORD}'",
                                                    "value": 3}, "value": 1.2},
                      "tooltip": tooltip}},
        {"mark": {"type": "text", "align": "left", "baseline": "middle", "dx": 3,
                  "fontSize": 10, "clip": True,
                  # a label stays inside its bar at any zoom (cut with "…"); Vega reads a
                  # limit of 0 as none, hence at least 1 px; a record() call's stands beside it
                  "limit": {"expr": f"datum.kind === '{KIND_RECORD}' ? 120 : "
                                    "max(1, scale('x', datum.end_us) - "
                                    "scale('x', datum.start_us) - 5)"}},
         "transform": [{"filter": "datum.label"},
                       {"calculate": "(datum.y0 + datum.y1) / 2", "as": "ymid"}],
         "encoding": {"x": x, "y": {**y, "field": "ymid"}, "text": {"field": "label"},
                      "color": {"value": "#1a1a1a"}}},
    ]
    if flows:
        layers.insert(2, {
            "data": {"values": flows},
            "mark": {"type": "rule", "strokeWidth": 0.8, "opacity": 0.45, "color": "#555",
                     "clip": True},
            "encoding": {"x": {**x, "field": "x"}, "x2": {"field": "x2"},
                         "y": {**y, "field": "y0"}, "y2": {"field": "y1"}}})
    if win.bands:
        layers.insert(0, {
            "data": {"values": win.bands},
            "mark": {"type": "rect", "opacity": 0.22, "color": KIND_COLORS[KIND_GAP],
                     "clip": True},
            "encoding": {"x": {**x, "field": "start_us"}, "x2": {"field": "end_us"}}})
    return {
        "$schema": SCHEMA, "width": "container", "height": ROW_HEIGHT_PX * n + 10,
        "data": {"values": marks}, "layer": layers, "config": chart_config(),
        "resolve": {"scale": {"color": "shared"}},
    }


# The L2 states in the order the legend lists them.
CACHE_ORDER = ("flushed", "hot")


def iterations(rows: list[dict[str, Any]], medians: dict[str, float], *,
               measured: str = EVENTS_MEASURE, x_title: str = "timed iteration",
               cache: bool = True) -> dict[str, Any]:
    """Each timed iteration's event time next to its kernel time (per call), flushed and
    hot iterations told apart by shape; dashed lines at the medians. `measured` names the
    timer's points (and its median's key in `medians`); `cache`: whether shapes tell the
    L2's state (the program's own timings do not know it)."""
    values = []
    for r in rows:
        for measure, key in ((measured, "event_us"), (KERNELS_MEASURE, "kernels_us")):
            # a log axis has no place for 0 (a window without GPU work)
            if r.get(key) is not None and r[key] > 0:
                values.append({"iteration": r["iteration"], "cache": r["cache"],
                               "measure": measure, "us": r[key]})
    color = {"field": "measure", "type": "nominal", "title": None,
             "scale": {"domain": [measured, KERNELS_MEASURE],
                       "range": list(MEASURE_COLORS.values())}}
    rules = [{"measure": m, "us": v} for m, v in medians.items() if v]
    # Flushed, hot, then any other state by name: sorted on a key alone, the two tied and
    # kept the set's order, which a string's hash sets anew in each process.
    caches = sorted({v["cache"] for v in values},
                    key=lambda c: (CACHE_ORDER.index(c) if c in CACHE_ORDER else
                                   len(CACHE_ORDER), c))
    return {
        "$schema": SCHEMA, "width": "container", "height": 150, "config": chart_config(),
        "layer": [
            {"data": {"values": values},
             "mark": {"type": "point", "filled": True, "size": 42, "opacity": 0.85},
             "params": [{"name": "zoom", "select": {"type": "interval", "encodings": ["y"]},
                         "bind": "scales"}],
             "encoding": {
                 "x": {"field": "iteration", "type": "quantitative", "title": x_title,
                       "axis": {"tickMinStep": 1, "format": "d"}},
                 "y": {"field": "us", "type": "quantitative", "title": "µs per call (log)",
                       "scale": {"type": "log", "zero": False}},
                 "color": color,
                 **({"shape": {"field": "cache", "type": "nominal", "title": "L2",
                               "scale": {"domain": ["flushed", "hot", "unknown"],
                                         "range": ["circle", "triangle-up", "square"]},
                               "legend": {"values": caches}}} if cache else {}),
                 "tooltip": [{"field": "iteration", "title": x_title},
                             *([{"field": "cache", "title": "L2"}] if cache else []),
                             {"field": "measure"},
                             {"field": "us", "title": "µs per call", "format": ",.2f"}]}},
            {"data": {"values": rules},
             "mark": {"type": "rule", "strokeDash": [4, 3], "strokeWidth": 1.2},
             "encoding": {"y": {"field": "us", "type": "quantitative"}, "color": color,
                          "tooltip": [{"field": "measure", "title": "median of"},
                                      {"field": "us", "title": "µs", "format": ",.2f"}]}},
        ],
    }


def family_bars(rows: list[dict[str, Any]], y_max_us: float | None = None) -> dict[str, Any]:
    """Per instance: GPU busy (kernels, copies) and idle stacked to the GPU span; the
    host's blocked time as a tick beside them; cold instances labelled on the axis.
    `y_max_us` cuts the axis (a cold instance 1000x the rest would flatten them): bars
    beyond it are clipped and carry their total as text."""
    stacked = [r for r in rows if r["part"] != "host blocked (sync)"]
    ticks = [r for r in rows if r["part"] == "host blocked (sync)" and r["us"] > 0]
    parts = list(PART_COLORS)
    present = [p for p in parts if any(r["part"] == p and r["us"] > 0 for r in rows)]
    color = {"field": "part", "type": "nominal", "title": None,
             "scale": {"domain": parts, "range": list(PART_COLORS.values())},
             "legend": {"values": present or parts}}
    x = {"field": "instance", "type": "ordinal", "title": "instance (time order)",
         "sort": None, "axis": {"labelAngle": 0, "labelOverlap": True}}
    tooltip = [{"field": "instance"}, {"field": "part"},
               {"field": "us", "title": "µs", "format": ",.2f"}]
    y_scale = {"domain": [0, y_max_us]} if y_max_us else {}
    layers: list[dict[str, Any]] = [
        {"data": {"values": stacked}, "mark": {"type": "bar", "clip": True},
         "encoding": {"x": x, "y": {"field": "us", "type": "quantitative", "stack": "zero",
                                    "title": "µs", "scale": y_scale},
                      "color": color,
                      "opacity": {"condition": {"test": "datum.cold", "value": 0.55},
                                  "value": 1},
                      "tooltip": tooltip}},
    ]
    if ticks:
        layers.append({"data": {"values": ticks},
                       "mark": {"type": "tick", "thickness": 2.5, "clip": True},
                       "encoding": {"x": x, "y": {"field": "us", "type": "quantitative"},
                                    "color": color, "tooltip": tooltip}})
    clipped = [{"instance": r["instance"], "text": f"↑ {r['total_text']}",
                "us": y_max_us} for r in stacked
               if y_max_us and r["part"] == "GPU idle" and r["total_us"] > y_max_us]
    if clipped:
        layers.append({"data": {"values": clipped},
                       "mark": {"type": "text", "baseline": "top", "dy": 3, "fontSize": 10},
                       "encoding": {"x": x, "y": {"field": "us", "type": "quantitative"},
                                    "text": {"field": "text"}}})
    return {"$schema": SCHEMA, "width": "container", "height": 150, "config": chart_config(),
            "layer": layers}
