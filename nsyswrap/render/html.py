"""The HTML report: one self-contained page (scripts, styles and data inlined; it asks the
network for nothing), in the order a person reads it: what was profiled and the findings;
the program's own CUDA-event timings (per call-site pair: every instance, and the timelines
of a typical and of the worst one); each harness benchmark's iterations; timelines of one
representative iteration or range instance; range families as stacked bars; the kernel
table.

Pictures are Vega-Lite specifications (`charts.py`) drawn in the browser by the vendored
Vega bundles (`vendor/`, see docs/html-report.md for the choice). Every string that comes
from the report is escaped on its way into the markup (`Html`, markup.py) or travels as JSON
data inside the page (charts).
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd

from .._version import __version__
from ..common.units import fmt_ns, fmt_share
from ..comparison.document import (
    heaviest_families,
    range_families,
    range_fields,
    records,
    refuse_without_pairs,
    report_block,
    section_rows,
)
from ..comparison.result import Comparison
from ..diagnose import range_label
from . import charts
from .base import Renderer
from .markup import Html
from .page import (
    HtmlPage,
    empty_section,
    evidence_side_by_side,
    evidence_table,
    finite,
    num,
    sortable_table,
)
from .timeline import EVENTS_NOTE, WindowBuilder
from .views import (
    BENCHMARK_COLUMNS,
    FINDING_COLUMNS,
    RANGE_COLUMNS,
    TIMING_COLUMNS,
    TIMINGS_TITLE,
    Column,
    attribution_line,
    cells,
    event_records_hint,
    kernel_names,
    line_hint,
    line_section,
    no_findings_line,
    summary_sections,
    timing_notes,
)

# How much one page draws (a 1M-kernel report must stay a page a browser opens quickly).
MAX_BENCHMARK_PLOTS = 40  # benchmarks with a plot and a timeline (those with findings first)
MAX_BENCHMARK_ROWS = 500
MAX_USER_GROUPS = 12  # the program's timed places drawn (those with findings first)
MAX_USER_ROWS = 500
MAX_INSTANCE_POINTS = 1000  # per plot of a timed place, evenly spaced
MAX_FAMILY_TIMELINES = 6
MAX_FAMILY_BARS = 12
MAX_BAR_INSTANCES = 200
MAX_KERNEL_ROWS = 2000
KERNEL_NAME_WIDTH = 90  # kernel names shortened to this, told apart (names.short_names)
MAX_RANGE_ROWS = 300

# A row of the kernel table, one template for the row (up to 2,000 rows): the name (its
# whole signature on hover), the count, five times and the share, each with its number for
# sorting.
_KERNEL_ROW = (Html("<tr><td class=\"name\" title=\"{}\">{}</td><td data-v=\"{}\">{:,}</td>")
               + Html("<td data-v=\"{}\">{}</td>") * 6 + Html("</tr>"))


def _cold_counts(c: Comparison) -> dict[str, int]:
    """Leading cold instances per range label, as COLD_START found them (a merged finding
    keeps each range's numbers in evidence["by_range"])."""
    out: dict[str, int] = {}
    for f in c.findings:
        if f.code != "COLD_START":
            continue
        for label in f.ranges:
            evidence = f.evidence.get("by_range", {}).get(label, f.evidence)
            out[label] = max(out.get(label, 0), int(evidence.get("skip") or 0))
    return out


class _Page(HtmlPage):
    def __init__(self, c: Comparison, notebook: bool, full_names: bool = False):
        super().__init__()
        self.c = c
        self.notebook = notebook
        # A notebook shows the page on every display: it leaves out the timelines, whose
        # windows of GPU operations are most of the page's making and of its data.
        self.timelines = not notebook
        self.full_names = full_names
        self.cold = _cold_counts(c)
        self.windows = WindowBuilder(c)
        self.bench_anchor: dict[str, str] = {}  # "nsyswrap:NAME" -> timeline id
        self.family_anchor: dict[str, str] = {}  # range label -> timeline or bars id
        self.user_anchor: dict[str, str] = {}  # a timed place's label -> its block's id
        self.caps: list[str] = []
        self.families = self._families()
        self.plotted_runs = self._plotted_runs()
        # The shared rows of the timings table, with each group's number (its intervals' run).
        self.user_groups = [{**row, "run": int(run)} for row, run in zip(
            section_rows(c, "timings"), c.user_timings.get("run", []), strict=True)]
        self.drawn_groups = self._drawn_groups()

    # -- data choices ---------------------------------------------------------------------

    def _families(self) -> list[dict[str, Any]]:
        """The user range families drawn (MAX_FAMILY_BARS of them, those with timelines
        among them), the busiest on the GPU first (wall time without CUDA), each with its
        instances in start order; sets `family_count`, and `undrawn_families`: the labels
        of families the findings name that are not drawn. One grouped pass over the
        instances: the rows of every family picked by a comparison per family were
        quadratic in families (61 s for a report of 30 k range names)."""
        a = self.c.analysis
        self.family_count, self.undrawn_families = 0, set()
        rows = a.user_rows()
        if len(rows) == 0:
            return []
        inst = a.instances
        # Labels worked out once per family (two families may share one: a domain "a" with
        # a range "b" and the default domain's "a:b"), then each row's label by its family.
        family, firsts = _first_appearances(inst.values("family_id", rows))
        names = inst.rows(rows[firsts], ["domain", "family"])
        labels = [range_label(d or "", str(n)) for d, n in
                  zip(names["domain"].fillna(""), names["family"].astype(str), strict=True)]
        label_of_family, labels = pd.factorize(np.asarray(labels, dtype=object))
        label = label_of_family[family]  # numbered in order of first appearance
        self.family_count = len(labels)
        sums = (pd.DataFrame({"label": label, "busy": inst.values("gpu_busy_ns", rows),
                              "cpu": inst.values("cpu_ns", rows)})
                .assign(busy=lambda f: f["busy"].fillna(0))
                .groupby("label", sort=False).agg(busy=("busy", "sum"), cpu=("cpu", "sum"))
                .sort_values(["busy", "cpu"], ascending=False))
        drawn = sums.index.to_numpy()[:max(MAX_FAMILY_BARS, MAX_FAMILY_TIMELINES)]
        named = {name for f in self.c.findings for name in f.ranges}
        if named:
            undrawn = np.ones(len(labels), dtype=bool)
            undrawn[drawn] = False
            self.undrawn_families = set(labels[undrawn & pd.Index(labels).isin(named)])
        return [{"label": labels[k], "instances": inst.rows(rows[label == k])
                 .sort_values("start_ns"), "anchor": f"r{i}"}
                for i, k in enumerate(drawn.tolist())]

    def _plotted_runs(self) -> set[int]:
        """The benchmark runs drawn: those with findings first, then in run order."""
        b = self.c.benchmarks
        if b.empty:
            return set()
        flagged = b["codes"].map(bool).to_numpy()
        order = list(b["run"][flagged]) + list(b["run"][~flagged])
        return {int(run) for run in order[:MAX_BENCHMARK_PLOTS]}

    def _drawn_groups(self) -> set[int]:
        """The program's timed places drawn: those with findings first, then in order."""
        groups = self.user_groups
        order = [g for g in groups if g["codes"]] + [g for g in groups if not g["codes"]]
        return {int(g["run"]) for g in order[:MAX_USER_GROUPS]}

    def _representative(self, frame: pd.DataFrame, value: str, label: str) -> pd.Series:
        """The instance whose `value` is closest to the median of the warm instances."""
        warm = frame.iloc[self.cold.get(label, 0):]
        warm = warm if len(warm) else frame
        vals = warm[value].astype("float64")
        if vals.notna().any():
            return warm.iloc[int((vals - vals.median()).abs().fillna(np.inf).argmin())]
        return warm.iloc[len(warm) // 2]

    # -- page -----------------------------------------------------------------------------

    def render(self) -> str:
        body = [self._header(), self._findings(), self._user_timings(), self._lines(),
                self._benchmarks(),
                self._timelines(),
                self._range_families(), self._kernels(), self._summaries(), self._footer()]
        return self.document(f"nsyswrap · {self.c.info.source.name}", body)

    def _header(self) -> Html:
        c, rep = self.c, report_block(self.c)
        info = c.info
        gpus = ", ".join(f"{g['name']} (GPU {g['device_id']})" for g in rep["gpus"]) or "–"
        procs = ", ".join(f"{p['name']} [{p['pid']}]" for p in rep["processes"]) or "–"
        traced = ", ".join(k for k, v in rep["traced"].items() if v) or "nothing"
        counts = rep["counts"]
        attribution = attribution_line(c)
        facts = [
            ("Command", " ".join(info.command) if info.command else None),
            ("Report", rep["source"] + ("" if rep["source"] == rep["path"]
                                        else f" (read from {rep['path']})")),
            ("Nsight Systems", f"{rep['nsys_version'] or '?'} (export schema "
                               f"{rep['schema_version'] or '?'})"),
            ("GPUs", gpus), ("Processes", procs), ("Traced", traced),
            ("Contents", f"{counts['kernels']:,} kernels, {counts['gpu_ops']:,} GPU "
                         f"operations, {counts['nvtx_ranges']:,} NVTX ranges over "
                         f"{fmt_ns(rep['duration_ns'])}"),
            # whose GPU work a range's numbers include (docs/analyses.md, attribution)
            ("Attribution", attribution.removeprefix("attribution: ") if attribution
             else f"{rep['attribution']}: ranges own the GPU work launched from inside them"),
        ]
        dl = Html("").join(Html("<dt>{}</dt><dd>{}</dd>").format(k, v) for k, v in facts if v)
        # Alerts change what the numbers mean (a lost GPU trace): first, and loud.
        alerts = Html("").join(Html("<div class=\"alert\" role=\"alert\"><strong>Warning:"
                                    "</strong> {}</div>").format(a) for a in info.alerts)
        notes = Html("").join(Html("<li>{}</li>").format(n) for n in rep["notes"]
                              if n not in info.alerts)
        return Html("<header><h1>nsyswrap <span class=\"muted\">·</span> {}</h1>"
                    "<p class=\"lede\">CUDA-event timings next to the GPU work Nsight "
                    "Systems recorded, and what distorts them.</p>{}"
                    "<dl class=\"facts\">{}</dl>{}{}</header>").format(
            info.source.name, alerts, dl,
            Html("<ul class=\"notes\">{}</ul>").format(notes) if notes else "", self._toc())

    def _toc(self) -> Html:
        items = [("findings", f"Findings ({len(self.c.findings)})")]
        if self._has_user_section():
            items.append(("user-timings", TIMINGS_TITLE))
        items.append(("lines", "By line"))
        if not self.c.benchmarks.empty:
            items.append(("benchmarks", "Harness benchmarks"))
        items.append(("timelines", "Timelines"))
        if self.families:
            items.append(("ranges", "Range families"))
        items.append(("kernels", "Kernels"))
        if summary_sections(self.c):
            items.append(("calls", "Calls and marks"))
        links = Html(" · ").join(Html("<a href=\"#{}\">{}</a>").format(a, t) for a, t in items)
        return Html("<nav>{}</nav>").format(links)

    # -- 1. findings ----------------------------------------------------------------------

    def _findings(self) -> Html:
        # Anchors are decided by the sections below; fill them in first.
        self._plan_anchors()
        rows = section_rows(self.c, "findings")
        if not rows:
            return empty_section("findings", "Findings", no_findings_line(self.c), tone="ok")
        return Html("<section id=\"findings\"><h2>Findings ({})</h2>{}</section>").format(
            len(rows), Html("").join(self._finding(i, f, row) for i, (f, row)
                                     in enumerate(zip(self.c.findings, rows, strict=True))))

    def _finding(self, i: int, f, row: dict[str, Any]) -> Html:
        severity, code, _, message = cells(FINDING_COLUMNS, row)
        several = len(f.ranges) > 1
        # Each range the finding names links to the picture that shows it.
        names, links = [], []
        for label in f.ranges:
            anchor = (self.bench_anchor.get(label) or self.family_anchor.get(label)
                      or self.user_anchor.get(label))
            names.append(Html("<a href=\"#{}\">{}</a>").format(anchor, label)
                         if anchor and several else label)
            if anchor and not several:
                what = ("timeline" if anchor.startswith("tl-") else
                        "timings" if label in self.user_anchor else
                        "plot" if label in self.bench_anchor else "bars")
                links.append(Html("<a href=\"#{}\">{} ↓</a>").format(anchor, what))
        by_range = f.evidence.get("by_range") if several else None
        evidence = (evidence_side_by_side(by_range) if by_range
                    else evidence_table(row["evidence"] or {}))
        return Html("<article class=\"finding {}\" id=\"f{}\">"
                    "<div class=\"fhead\"><span class=\"sev\">{}</span> "
                    "<code>{}</code> <span class=\"range\">{}</span>"
                    "<span class=\"links\">{}</span></div>"
                    "<p>{}</p>"
                    "<p class=\"suggestion\">→ {}</p>{}</article>").format(
            severity, i, severity, code, Html(", ").join(names) or "whole report",
            Html(" ").join(links), message, row["suggestion"],
            Html("<details><summary>evidence</summary>{}</details>").format(evidence)
            if evidence else "")

    def _plan_anchors(self) -> None:
        b = self.c.benchmarks
        for run, name in zip(b["run"].tolist(), b["benchmark"].tolist(), strict=True):
            if run in self.plotted_runs:
                self.bench_anchor.setdefault(f"nsyswrap:{name}",
                                             f"tl-b{run}" if self.timelines else f"b{run}")
        for i, fam in enumerate(self.families):
            if i < MAX_FAMILY_TIMELINES and self.timelines:
                self.family_anchor[fam["label"]] = f"tl-{fam['anchor']}"
            else:
                self.family_anchor[fam["label"]] = fam["anchor"]
        for label in self.undrawn_families:  # in the range table (or left out of it)
            self.family_anchor[label] = "ranges"
        for g in self.user_groups:
            run = int(g["run"])
            self.user_anchor[g["label"]] = f"u{run}" if run in self.drawn_groups \
                else "user-timings"

    # -- 2. the program's own timings -----------------------------------------------------

    def _has_user_section(self) -> bool:
        return bool(self.user_groups) or bool(self.c.analysis.user_timings) or bool(
            event_records_hint(self.c))

    def _lines(self) -> Html:
        """Where in the program's code (analysis/code_lines.py): the By line table, and the
        program's own files as they ran, each line with its GPU time, host time and the
        GPU idle beside its source."""
        s = line_section(self.c, MAX_LINE_ROWS)
        if s is None:
            return empty_section("lines", "By line", line_hint(self.c))
        out = [Html("<section id=\"lines\"><h2>By line</h2><p class=\"explain\">Each "
                    "kernel, copy and memset on the line of the program that launched it, and "
                    "the host's time on the lines it ran, from the runner's trace of the "
                    "program's lines. Backward kernels run on autograd's thread. "
                    "<i>Idle</i> is the GPU time with nothing to run while the host was on "
                    "that line.</p>"), sortable_table(s.columns, s.rows, "lines-table")]
        if s.note:
            out.append(Html("<p class=\"cap\">{}</p>").format(s.note))
        out.append(self._source())
        out.append(Html("</section>"))
        return Html("").join(out)

    def _source(self) -> Html:
        """The program's files whose source the report holds, the lines that ran in order."""
        rows = [r for r in section_rows(self.c, "lines") if r["line"] and r["text"]]
        files: dict[str, dict[int, dict[str, Any]]] = {}
        for r in rows:  # a line run by two code objects (a class statement and its body): one
            line = files.setdefault(r["file"], {}).setdefault(
                r["line"], {"line": r["line"], "text": r["text"], "gpu_ns": 0, "host_ns": 0,
                            "idle_ns": 0})
            for k in ("gpu_ns", "host_ns", "idle_ns"):
                line[k] += r[k]
        out = []
        for file, by_number in list(files.items())[:MAX_SOURCE_FILES]:
            lines = sorted(by_number.values(), key=lambda r: r["line"])
            body = Html("").join(Html(
                "<tr><td class=\"num\">{}</td><td class=\"num\">{}</td>"
                "<td class=\"num\">{}</td><td class=\"num\">{}</td>"
                "<td><code>{}</code></td></tr>").format(
                r["line"], fmt_ns(r["gpu_ns"]) if r["gpu_ns"] else "",
                fmt_ns(r["host_ns"]) if r["host_ns"] else "",
                fmt_ns(r["idle_ns"]) if r["idle_ns"] else "", r["text"])
                for r in lines[:MAX_SOURCE_LINES])
            out.append(Html("<h3>{}</h3><table class=\"source\"><thead><tr><th>Line</th>"
                            "<th>GPU</th><th>Host</th><th>Idle</th><th>Source</th></tr>"
                            "</thead><tbody>{}</tbody></table>").format(file, body))
        return Html("").join(out)

    def _user_timings(self) -> Html:
        if not self._has_user_section():
            return Html("")
        head = Html("<section id=\"user-timings\"><h2>{}</h2>").format(TIMINGS_TITLE)
        hint = event_records_hint(self.c)
        if hint:
            return head + Html("<p class=\"muted\">{}</p></section>").format(hint)
        groups = self.user_groups
        drawn = [g for g in groups if g["run"] in self.drawn_groups]
        out = [head, Html("<p class=\"explain\">What the program's own timing code measured "
               "(<code>torch.cuda.Event.elapsed_time</code>, triton's <code>do_bench</code>, "
               "torch's <code>Timer</code>), grouped by call site (start record → end record), "
               "per call. Your timer is what it read; the kernels are the GPU busy time nsys "
               "recorded between the two records on the timed stream (the number to trust). "
               "Each plot shows every instance; dashed lines are the medians. The timelines "
               "show a typical instance (the median figure) and the worst (the largest figure "
               "less its kernels): the two record() calls on the recording thread, the "
               "events' window where the trace places it, the GPU work launched between the "
               "records, the GPU idle before its first and after its last operation shaded."
               "</p>")]
        if groups:
            out.append(sortable_table(TIMING_COLUMNS, groups[:MAX_USER_ROWS],
                                      "user-timings-table",
                                      link=lambda g: f"u{g['run']}"
                                      if g["run"] in self.drawn_groups else None))
        notes = Html("").join(Html("<li>{}</li>").format(line) for line in timing_notes(self.c))
        if notes:
            out.append(Html("<ul class=\"notes\">{}</ul>").format(notes))
        if len(drawn) < len(groups):
            cap = _drawn_cap(len(drawn), len(groups), "timed places", MAX_USER_ROWS)
            self.caps.append(cap)
            out.append(Html("<p class=\"cap\">{}</p>").format(cap))
        codes = _codes_by_label(self.c)
        intervals = self.c.analysis.user_timings.intervals
        for g in drawn:
            out.append(self._user_group(g, intervals[intervals["label"] == g["label"]],
                                        codes.get(g["label"], [])))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _user_group(self, g: dict[str, Any], ivs: pd.DataFrame,
                    codes: list[tuple[str, int]]) -> Html:
        """One timed place: its numbers, every instance against its kernels, and the
        timelines of a typical and of the worst instance."""
        run, label = int(g["run"]), g["label"]
        ivs = ivs.sort_values("iteration")
        calls = ivs["calls"].clip(lower=1).astype("float64")
        per_call = pd.DataFrame({"iteration": ivs["iteration"].astype(int),
                                 "value": ivs["event_ns"] / calls,
                                 "kernels": ivs["gpu_busy_ns"] / calls})
        note = ""
        if len(per_call) > MAX_INSTANCE_POINTS:
            keep = np.unique(np.linspace(0, len(per_call) - 1, MAX_INSTANCE_POINTS)
                             .round().astype(int))
            note = (f"{len(per_call):,} instances: {len(keep):,} drawn, evenly spaced in "
                    "time.")
            per_call = per_call.iloc[keep]
        points = [{"iteration": int(p.iteration), "cache": "unknown",
                   "event_us": _round_us(p.value), "kernels_us": _round_us(p.kernels)}
                  for p in per_call.itertuples(index=False)]
        medians = {USER_MEASURE: _round_us(g["value_median_ns"]),
                   charts.KERNELS_MEASURE: _round_us(g["kernels_median_ns"])}
        # data-key: the group's stable key (the same in another run of the program).
        out = [Html("<div class=\"ugroup\" id=\"u{}\"><h3 data-key=\"{}\">{} "
                    "<span class=\"verdict {}\">{}</span></h3>").format(
                   run, str(g.get("key", "")), label, _verdict_class(g), g["verdict"]),
               Html("<p class=\"stats\">{}</p>").format(_user_stats(g))]
        went = _user_parts(g)
        if went:
            out.append(Html("<p class=\"stats\">{}</p>").format(went))
        if codes:
            out.append(Html("<p class=\"codes\">Findings: {}</p>").format(_code_links(codes)))
        out.append(self.chart(f"user-{run}", charts.iterations(
            points, medians, measured=USER_MEASURE, x_title="instance", cache=False),
            "user", f"instances of {label}"))
        if note:
            out.append(Html("<p class=\"cap\">{}</p>").format(note))
        typical = self._representative(ivs, "event_ns", label)
        excess = (ivs["event_ns"] - ivs["gpu_busy_ns"].fillna(0)).to_numpy("float64")
        worst = ivs.iloc[int(np.nanargmax(excess))] if np.isfinite(excess).any() else typical
        same = int(worst["iteration"]) == int(typical["iteration"])
        for which, iv in (("typical", typical), ("worst", worst)):
            if which == "worst" and same or not self.timelines:
                continue
            what = ("typical and worst" if same else which)
            title = (f"{label} · {what}: instance {int(iv['iteration'])} of {len(ivs):,}, "
                     f"{fmt_ns(iv['event_ns'])} against {fmt_ns(iv['gpu_busy_ns'])} of kernels")
            anchor = f"tl-u{run}" + ("-worst" if which == "worst" else "")
            win = self.windows.build_interval(iv, anchor, title)
            out.append(self._timeline_block(win, [], f"#u{run}"))
        out.append(Html("</div>"))
        return Html("").join(out)

    # -- 3. harness benchmarks ------------------------------------------------------------

    def _benchmarks(self) -> Html:
        b = self.c.benchmarks
        if b.empty:
            return Html("")
        rows = section_rows(self.c, "benchmarks")
        # The shared columns with the spreads beside the medians.
        columns = [*BENCHMARK_COLUMNS[:4],
                   Column("Events IQR", lambda r: fmt_ns(r["event_iqr_ns"]),
                          title="spread of the event times (interquartile range)"),
                   BENCHMARK_COLUMNS[4],
                   Column("Kernels IQR", lambda r: fmt_ns(r["busy_iqr_ns"]),
                          title="spread of the kernel times"),
                   *BENCHMARK_COLUMNS[5:]]
        plotted = [r for r in rows if r["run"] in self.plotted_runs]
        cap = ""
        if len(plotted) < len(rows):
            cap = _drawn_cap(len(plotted), len(rows), "benchmark runs", MAX_BENCHMARK_ROWS)
            self.caps.append(cap)
        table = sortable_table(columns, rows[:MAX_BENCHMARK_ROWS], "benchmarks-table",
                       link=lambda r: f"b{r['run']}" if r["run"] in self.plotted_runs
                       else None)
        out = [Html("<section id=\"benchmarks\"><h2>Harness benchmarks</h2>"),
               Html("<p class=\"explain\">Per call. The events are what a CUDA-event timer "
                    "reports; the kernels are the GPU busy time nsys recorded for the same "
                    "iterations (the number to trust). Each plot shows every timed iteration; "
                    "dashed lines are the medians; triangles are hot-L2 iterations.</p>"),
               table,
               Html("<p class=\"cap\">{}</p>").format(cap) if cap else "",
               Html("<div class=\"grid\">")]
        its = self.c.analysis.iterations
        for r in plotted:
            run = r["run"]
            g = its[its["run"] == run]
            calls = max(int(r.get("calls") or 1), 1)
            points = [{"iteration": int(it.iteration), "cache": str(it.cache),
                       "event_us": _round_us(it.event_ns / calls),
                       "kernels_us": _round_us(it.gpu_busy_ns / calls)}
                      for it in g.itertuples(index=False)]
            medians = {"CUDA events": _round_us(r["event_median_ns"]),
                       "kernels (nsys)": _round_us(r["busy_median_ns"])}
            out.append(Html(
                "<div class=\"bench\" id=\"b{}\"><h3>{} <span class=\"verdict {}\">{}</span>"
                "</h3><p class=\"stats\">{}{}</p>{}</div>").format(
                run, r["benchmark"], _verdict_class(r), r["verdict"], _bench_stats(r),
                Html(" · <a href=\"#tl-b{}\">timeline ↓</a>").format(run)
                if self.timelines else "",
                self.chart(f"bench-{run}", charts.iterations(points, medians), "benchmark",
                           f"iterations of {r['benchmark']}")))
        out.append(Html("</div></section>"))
        return Html("").join(out)

    # -- 4. timelines ---------------------------------------------------------------------

    def _timelines(self) -> Html:
        if not self.timelines:
            return Html("<section id=\"timelines\"><h2>Timelines</h2><p class=\"muted\">Left "
                        "out of the notebook view: <code>Comparison.save_html(PATH)</code> "
                        "writes the whole page, with a timeline of a representative iteration "
                        "of each benchmark and instance of the busiest range families.</p>"
                        "</section>")
        out = [Html("<section id=\"timelines\"><h2>Timelines</h2>"),
               Html("<p class=\"explain\">One representative iteration of each benchmark (its "
                    "event time closest to the median) and one instance of the busiest range "
                    "families (wall time closest to the median, cold instances left out). "
                    "Rows: the NVTX ranges and the CUDA-event window, each launching thread's "
                    "calls (ticks, with a line to the GPU operation they launched) and syncs, "
                    "the GPU operations per stream, and the idle gaps between the range's own "
                    "GPU operations. Scroll to zoom, drag to pan, double-click to reset, hover "
                    "for details. {}</p>").format(EVENTS_NOTE)]
        codes = _codes_by_label(self.c)
        drawn = 0
        its = self.c.analysis.iterations
        instances = self.c.analysis.instances.frame()
        for r in section_rows(self.c, "benchmarks"):
            run = r["run"]
            if run not in self.plotted_runs:
                continue
            g = its[its["run"] == run]
            if g.empty:
                continue
            label = f"nsyswrap:{r['benchmark']}"
            it = self._representative(g, "event_ns", label)
            if it["range_id"] not in instances.index:
                continue
            title = f"{r['benchmark']} · timed iteration {int(it['iteration'])}"
            win = self.windows.build(instances.loc[it["range_id"]], f"tl-b{run}", title,
                                     finite(it["event_ns"]))
            out.append(self._timeline_block(win, codes.get(label, []), f"#b{run}"))
            drawn += 1
        for fam in self.families[:MAX_FAMILY_TIMELINES]:
            inst = self._representative(fam["instances"], "cpu_ns", fam["label"])
            title = f"{fam['label']} · instance {int(inst['index'])} of {len(fam['instances'])}"
            win = self.windows.build(inst, f"tl-{fam['anchor']}", title)
            out.append(self._timeline_block(win, codes.get(fam["label"], []),
                                             f"#{fam['anchor']}"))
            drawn += 1
        if self.family_count > MAX_FAMILY_TIMELINES:
            self.caps.append(f"Timelines are drawn for the {MAX_FAMILY_TIMELINES} busiest of "
                             f"{self.family_count:,} range families.")
            out.append(Html("<p class=\"cap\">Timelines of the {} busiest of {:,} range "
                            "families.</p>").format(MAX_FAMILY_TIMELINES, self.family_count))
        if not drawn:
            out.append(Html("<p class=\"muted\">No harness iterations or NVTX ranges to "
                            "draw.</p>"))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _timeline_block(self, win, codes: list[tuple[str, int]], back: str) -> Html:
        notes = Html("").join(Html("<li>{}</li>").format(n) for n in win.notes)
        return Html("<div class=\"timeline\" id=\"{}\"><h3>{}</h3>{}{}{}"
                    "<p class=\"back\"><a href=\"{}\">numbers ↑</a></p></div>").format(
            win.anchor, win.title,
            Html("<p class=\"codes\">Findings: {}</p>").format(_code_links(codes))
            if codes else "",
            self.chart(f"chart-{win.anchor}", charts.timeline(win), "timeline",
                       f"timeline of {win.title}"),
            Html("<ul class=\"notes\">{}</ul>").format(notes) if notes else "", back)

    # -- 5. range families ----------------------------------------------------------------

    def _range_families(self) -> Html:
        if not self.families:
            return Html("")
        ranges, left_out = range_families(self.c)
        total = len(ranges) + (left_out["families"] if left_out else 0)
        cap = Html("")
        if total > MAX_RANGE_ROWS:
            cap = Html("<p class=\"cap\">The {} range families with the most GPU time (then "
                       "wall time) of {:,}; <code>--format json --instances</code> lists every "
                       "one.</p>").format(MAX_RANGE_ROWS, total)
            ranges = ranges.iloc[heaviest_families(ranges, MAX_RANGE_ROWS)]
        rows = records(ranges, range_fields(self.c))
        out = [Html("<section id=\"ranges\"><h2>Range families</h2>"),
               Html("<p class=\"explain\">Every NVTX range with the GPU work it launched "
                    "(nested ranges included). Bars: per instance, GPU busy time (kernels, "
                    "copies) and idle time stacked to the GPU span; the red tick is the time "
                    "the host blocked in syncs. Cold instances (COLD_START) are paler and "
                    "marked.</p>"),
               sortable_table(RANGE_COLUMNS, rows, "ranges-table"), cap]
        for fam in self.families[:MAX_FAMILY_BARS]:
            out.append(self._family_bars(fam))
        if self.family_count > MAX_FAMILY_BARS:
            out.append(Html("<p class=\"cap\">Bars for the {} busiest of {:,} range families."
                            "</p>").format(MAX_FAMILY_BARS, self.family_count))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _family_bars(self, fam: dict[str, Any]) -> Html:
        """One family's instances as stacked bars, with its numbers above them."""
        inst = fam["instances"]
        cold = self.cold.get(fam["label"], 0)
        note = ""
        if len(inst) > MAX_BAR_INSTANCES:
            # the cold ones (up to half the bars), then evenly spaced from the first
            leading = min(cold, MAX_BAR_INSTANCES // 2)
            spaced = np.linspace(0, len(inst) - 1, MAX_BAR_INSTANCES - leading)
            keep = np.unique(np.r_[np.arange(leading), spaced.round().astype(int)])
            note = (f"{len(inst):,} instances: {len(keep)} drawn, evenly spaced in time "
                    "(the cold ones included).")
            inst = inst.iloc[keep]
        bars = _family_rows(inst, cold)
        y_max = _bars_cut_us(bars)
        link = (Html(" · <a href=\"#tl-{}\">timeline ↑</a>").format(fam["anchor"])
                if self.family_anchor.get(fam["label"], "").startswith("tl-") else "")
        return Html("<div class=\"family\" id=\"{}\"><h3>{}</h3><p class=\"stats\">{:,} "
                    "instances{}{}</p>{}{}{}</div>").format(
            fam["anchor"], fam["label"], len(fam["instances"]),
            Html(", the first {} cold").format(cold) if cold else "", link,
            self.chart(f"family-{fam['anchor']}", charts.family_bars(bars, y_max), "family",
                       f"instances of {fam['label']}")
            if bars else Html("<p class=\"muted\">No GPU work launched from these ranges, "
                              "and no syncs.</p>"),
            Html("<p class=\"cap\">The axis stops at {}: longer instances are cut, their "
                 "total written above them.</p>").format(fmt_ns(y_max * 1e3)) if y_max else "",
            Html("<p class=\"cap\">{}</p>").format(note) if note else "")

    # -- 6. kernels -----------------------------------------------------------------------

    def _kernels(self) -> Html:
        rows = section_rows(self.c, "kernels")
        if not rows:
            return empty_section("kernels", "Kernels", "No kernels in this report.")
        total = len(rows)
        rows = rows[:MAX_KERNEL_ROWS]
        names = kernel_names(rows, KERNEL_NAME_WIDTH, self.full_names)
        body = Html("").join(_KERNEL_ROW.format(
            r["name"], names[r["name"]], r["count"], r["count"],
            *[x for k in ("total_ns", "median_ns", "mean_ns", "min_ns", "max_ns")
              for x in (num(r[k]), fmt_ns(r[k]))],
            num(r["share"]), fmt_share(r["share"])) for r in rows)
        head = Html("").join(Html("<th data-type=\"{}\">{}</th>").format(t, h) for h, t in (
            ("Kernel", "text"), ("Count", "num"), ("Total", "num"), ("Median", "num"),
            ("Mean", "num"), ("Min", "num"), ("Max", "num"), ("Share", "num")))
        cap = (Html("<p class=\"cap\">The {:,} kernels with the most time of {:,}; the JSON "
                    "and CSV outputs list all.</p>").format(MAX_KERNEL_ROWS, total)
               if total > MAX_KERNEL_ROWS else "")
        return Html("<section id=\"kernels\"><h2>Kernels</h2><p class=\"explain\">Grouped by "
                    "name, as nsys's cuda_gpu_kern_sum. Click a heading to sort; hover a name "
                    "for the full signature.</p>"
                    "<input type=\"search\" class=\"filter\" data-table=\"kernels-table\" "
                    "placeholder=\"filter kernels…\" aria-label=\"filter kernels\"> "
                    "<span class=\"count\" data-count-for=\"kernels-table\"></span>"
                    "<table class=\"sortable\" id=\"kernels-table\"><thead><tr>{}</tr>"
                    "</thead><tbody>{}</tbody></table>{}</section>").format(head, body, cap)

    # -- 7. calls and marks ----------------------------------------------------------------

    def _summaries(self) -> Html:
        """The call summaries and the program's marks (views.summary_sections), a sortable
        table each."""
        sections = summary_sections(self.c)
        if not sections:
            return Html("")
        out = [Html("<section id=\"calls\"><h2>Calls and marks</h2><p class=\"explain\">"
                    "What the report's calls add up to, as nsys stats' cuda_api_sum, "
                    "cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum, and osrt_sum; and the "
                    "program's own NVTX marks. The JSON and CSV outputs list every row.</p>")]
        for i, s in enumerate(sections):
            out.append(Html("<h3>{}</h3>{}{}").format(
                s.title, sortable_table(s.columns, s.rows, f"calls-table-{i}"),
                Html("<p class=\"cap\">{}</p>").format(s.note) if s.note else ""))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _footer(self) -> Html:
        caps = Html("").join(Html("<li>{}</li>").format(x) for x in self.caps)
        return Html("<footer><p>Made by nsyswrap {}. Times are per call for benchmarks; a "
                    "range counts the GPU work launched from inside it (nested ranges "
                    "included) and, under the process rule, what other threads of its "
                    "process launched while it was open (Attribution, at the top, names the "
                    "rule). A finding names what distorts a timing, with its evidence and "
                    "what to do; <code>nsyswrap compare --help</code> lists the thresholds "
                    "that decide each finding and how to change them.</p>{}</footer>").format(
            __version__, Html("<ul>{}</ul>").format(caps) if caps else "")


# The By line table's rows on the page, the files and lines of the source view.
MAX_LINE_ROWS = 50
MAX_SOURCE_FILES = 20
MAX_SOURCE_LINES = 2_000


# -- helpers --------------------------------------------------------------------------------

def _round_us(ns: Any) -> float | None:
    f = finite(ns)
    return None if f is None else round(f / 1e3, 4)


def _verdict_class(r: dict[str, Any]) -> str:
    v = str(r.get("verdict") or "")
    if r.get("kind") == "do_bench estimate":  # listed, not judged
        return "note"
    return "agree" if v.startswith("agree") and not r.get("codes") else (
        "note" if v.startswith("agree") else "off")


USER_MEASURE = "your timer"


def _signed_ns(ns: Any) -> str:
    f = finite(ns)
    return "–" if f is None else ("+" if f >= 0 else "−") + fmt_ns(abs(f))


def _user_difference(r: dict[str, Any]) -> str:
    share = finite(r.get("difference_share"))
    return _signed_ns(r.get("difference_ns")) + (
        f" ({'+' if share >= 0 else ''}{fmt_share(share)})" if share is not None else "")


def _user_stats(g: dict[str, Any]) -> str:
    parts = [f"{g['instances']:,} instances",
             f"your timer {fmt_ns(g['value_median_ns'])} (IQR {fmt_ns(g['value_iqr_ns'])})",
             f"kernels {fmt_ns(g['kernels_median_ns'])} (IQR {fmt_ns(g['kernels_iqr_ns'])})",
             f"difference {_user_difference(g)}"]
    if finite(g.get("tool_value_ns")) is not None:
        statistic = str(g.get("tool_statistic") or "?")
        parts.append(f"do_bench returned {fmt_ns(g['tool_value_ns'])} ({statistic}), the "
                     f"kernels' {statistic} {fmt_ns(g['tool_kernels_ns'])}")
    if g["kind"] != "timer" and finite(g.get("floor_ns")) is not None:
        parts.append(f"the events' own cost {fmt_ns(g['floor_ns'])} "
                     f"({g.get('floor_source') or '?'})")
    if finite(g.get("host_median_ns")) is not None:
        parts.append(f"host {fmt_ns(g['host_median_ns'])} "
                     + ("a measurement" if g["kind"] == "timer" else "between the records"))
    return " · ".join(parts)


def _user_parts(g: dict[str, Any]) -> str:
    """Where the difference went, as medians per instance (the non-zero ones)."""
    parts = [(key, text) for key, text in (
        ("lead_idle_median_ns", "the timed stream idle before its first operation"),
        ("tail_idle_median_ns", "GPU idle after the last operation"),
        ("prior_busy_median_ns", "the start event waited for earlier work"),
        ("uncovered_median_ns", "work on streams the end event does not wait for"),
        ("sync_median_ns", "host blocked in syncs"),
        ("copy_median_ns", "host↔device copies")) if (finite(g.get(key)) or 0) > 0]
    if not parts:
        return ""
    return "Medians: " + " · ".join(f"{text} {fmt_ns(g[key])}" for key, text in parts)


def _bench_stats(r: dict[str, Any]) -> str:
    parts = [f"{r['iterations']} iterations",
             f"events {fmt_ns(r['event_median_ns'])} (IQR {fmt_ns(r['event_iqr_ns'])})",
             f"kernels {fmt_ns(r['busy_median_ns'])} (IQR {fmt_ns(r['busy_iqr_ns'])})"]
    if r.get("event_flushed_ns") is not None and r.get("event_hot_ns") is not None:
        parts.append(f"flushed {fmt_ns(r['busy_flushed_ns'])} / hot {fmt_ns(r['busy_hot_ns'])}"
                     " of kernels")
    extra = r.get("floor_ns")
    if extra is not None:
        parts.append(f"event floor {fmt_ns(extra)}")
    host = r.get("host_median_ns")
    if host is not None:
        parts.append(f"host {fmt_ns(host)} to issue")
    return " · ".join(parts)


def _code_links(codes: list[tuple[str, int]]) -> Html:
    """Links to the findings (code, index) a picture shows."""
    return Html(" ").join(Html("<a href=\"#f{}\"><code>{}</code></a>").format(i, code)
                          for code, i in codes)


def _codes_by_label(c: Comparison) -> dict[str, list[tuple[str, int]]]:
    """Range label -> [(code, index of the finding)]: a timeline links back to them."""
    out: dict[str, list[tuple[str, int]]] = {}
    for i, f in enumerate(c.findings):
        for label in f.ranges:
            out.setdefault(label, []).append((f.code, i))
    return out


def _bars_cut_us(rows: list[dict[str, Any]]) -> float | None:
    """Where to stop the bars' axis: at 1.5x the largest warm total when a cold instance
    is more than 4x that (it would flatten the others); else None."""
    warm = [r["total_us"] for r in rows if not r["cold"]]
    cold = [r["total_us"] for r in rows if r["cold"]]
    if not warm or not cold or max(warm) <= 0 or max(cold) <= 4 * max(warm):
        return None
    return round(1.5 * max(warm), 4)


def _first_appearances(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row's number, each number's first row) for `ids`, numbered in order of first
    appearance (as groupby(sort=False) numbers groups)."""
    numbers, distinct = pd.factorize(ids)
    firsts = np.full(len(distinct), len(ids), dtype="int64")
    np.minimum.at(firsts, numbers, np.arange(len(ids)))
    return numbers, firsts


def _family_rows(inst: pd.DataFrame, cold: int) -> list[dict[str, Any]]:
    """Stacked parts per instance; nothing when the family has no GPU work and no syncs."""
    if not (inst["gpu_span_ns"].fillna(0) > 0).any() and not inst["sync_ns"].any():
        return []
    rows = []
    for pos, r in enumerate(inst.itertuples(index=False)):
        busy = finite(r.gpu_busy_ns) or 0.0
        copies = min(float(r.copy_ns or 0), busy)
        idle = finite(r.gpu_idle_ns) or 0.0
        label = f"{int(r.index)}" + (" cold" if int(r.index) < cold else "")
        is_cold = int(r.index) < cold
        total = busy + idle
        for part, ns in (("GPU busy (kernels)", busy - copies), ("GPU busy (copies)", copies),
                         ("GPU idle", idle), ("host blocked (sync)", float(r.sync_ns or 0))):
            rows.append({"instance": label, "order": pos, "part": part,
                         "us": round(ns / 1e3, 4), "cold": is_cold,
                         "total_us": round(total / 1e3, 4), "total_text": fmt_ns(total)})
    return rows


class HtmlRenderer(Renderer):
    def render(self, c: Comparison, *, notebook: bool = False, full_names: bool = False,
               **_) -> str:
        refuse_without_pairs(c, "the HTML page")
        return _Page(c, notebook, full_names).render()


def notebook_html(c: Comparison, height_px: int = 760) -> str:
    """The page inside an iframe, for Jupyter: its scripts run in any notebook front end
    that shows HTML, and its styles stay inside it."""
    page = HtmlRenderer().render(c, notebook=True)
    # The whole page as the attribute's text: escaped whole (the escape of a report's
    # fields would cap it and show its newlines as escapes).
    return str(Html("<iframe srcdoc=\"{}\" style=\"width:100%;height:{}px;border:1px solid "
                    "#ddd\" title=\"nsyswrap report\" sandbox=\"allow-scripts\"></iframe>")
               .format(Html(html.escape(page, quote=True)), height_px))


def _drawn_cap(drawn: int, total: int, what: str, max_rows: int) -> str:
    """What the page leaves out of a section's plots and table, in a line."""
    return (f"Plots and timelines for {drawn} of {total:,} {what} (those with findings "
            "first)" + (f"; the table lists the first {max_rows:,}" if total > max_rows else "")
            + "; the JSON output lists all.")
