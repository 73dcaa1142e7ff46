"""Pages for many reports, built like the single-report page (`render/page.py`: one
offline file, the same styles and scripts, every name escaped on its way into the markup,
`Html`, or carried as chart data):

- ranks side by side (`nsyswrap.ranks/1`): the cross-rank findings with each rank's
  numbers, how ranks were identified (with links to each rank's own page where one lies
  beside its report), a stacked bar of each rank's step, range families per rank as
  grouped bars, and the tables;
- a diff (`nsyswrap.diff/1`): the comparability verdict first, each change's confidence
  interval as a bar around 0 with the noise floor as a band, the change table, added and
  removed rows, and the findings that appeared or disappeared.

Rows come from `document.py` (the JSON of the same data) and cells from `views.py`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..._version import __version__
from ...common.names import capped
from ...common.units import fmt_ns, fmt_share
from ..base import Renderer
from ..markup import Html
from ..page import (
    HtmlPage,
    empty_section,
    evidence_side_by_side,
    evidence_table,
    finite,
    sortable_table,
)
from ..views import Column, ns_cell
from . import charts
from .document import diff_section, ranks_section, verdict_counts
from .views import (
    RANK_COLUMNS,
    ci_cell,
    diff_columns,
    diff_names,
    family_rows,
    metric_suffix,
    pct_cell,
)

# How much one page draws: hundreds of ranks or thousands of kernels stay a page that
# opens quickly; the JSON output lists everything.
MAX_STEP_BARS = 64  # ranks with a stacked step bar
MAX_GROUPED_RANKS = 16  # ranks drawn in the family groups (the flagged ones first)
MAX_FAMILIES = 12
MAX_INTERVALS = 40  # rows per kind drawn as interval bars (significant ones first)
MAX_DIFF_ROWS = 2000

_CSS = Html("""
.banner{border:1px solid var(--line);border-left:8px solid var(--muted);border-radius:4px;
padding:10px 16px;margin:14px 0;background:var(--bg-soft)}.banner h2{border:0;margin:0;
padding:0;font-size:20px}.banner ul{margin:6px 0 0;padding-left:20px}
.banner.comparable{border-left-color:var(--ok);background:#eef8f1}
.banner.caution{border-left-color:#d4a017;background:#fff8e5}
.banner.not-comparable{border-left-color:#c0392b;background:#fdeeee}
.pills{display:flex;gap:8px;flex-wrap:wrap;margin:8px 0}.pill{padding:2px 10px;
border-radius:11px;font-size:12.5px;background:var(--bg-soft);border:1px solid var(--line)}
.pill.slower,tr.slower td:last-child{color:#c0392b}.pill.faster,tr.faster td:last-child{
color:var(--ok)}.pill.inconclusive,tr.inconclusive td:last-child{color:#a07800}
tr.slower td:last-child,tr.faster td:last-child{font-weight:600}
table.sides td,table.sides th{text-align:left;white-space:normal}
table.sides td.differs{background:#fff4e0;font-weight:600}
.two{display:grid;grid-template-columns:repeat(auto-fit,minmax(480px,1fr));gap:4px 28px}
tr.flagged td:first-child{font-weight:600;color:var(--warn)}
#diff-table td:last-child{min-width:240px;white-space:normal}
""")


def _ms(ns: Any) -> float:
    f = finite(ns)
    return 0.0 if f is None else round(max(f, 0.0) / 1e6, 4)


def _href(path: str) -> str:
    """A relative path as an href (spaces, '#', '?' quoted; escaped where it goes into the
    attribute)."""
    return quote(path)


def _articles(findings: list[dict[str, Any]], prefix: str, evidence=None,
              links=None) -> Html:
    """Findings as on the single-report page: severity, code, range, message, suggestion,
    and the evidence open below."""
    out = []
    for i, f in enumerate(findings):
        ev = evidence(f) if evidence else ""
        out.append(Html(
            "<article class=\"finding {}\" id=\"{}{}\"><div class=\"fhead\">"
            "<span class=\"sev\">{}</span> <code>{}</code> <span class=\"range\">{}</span>"
            "<span class=\"links\">{}</span></div><p>{}</p>{}{}</article>").format(
            f.get("severity"), prefix, i, f.get("severity"), f.get("code"),
            f.get("range") or "whole run", links(f) if links else "", f.get("message"),
            Html("<p class=\"suggestion\">→ {}</p>").format(f["suggestion"])
            if f.get("suggestion") else "",
            Html("<details open><summary>evidence</summary>{}</details>").format(ev)
            if ev else ""))
    return Html("").join(out)


def _footer(caps: list[str], what: str, command: str) -> Html:
    """`command`: the nsyswrap command whose --help lists the thresholds behind the page."""
    items = Html("").join(Html("<li>{}</li>").format(x) for x in caps)
    return Html("<footer><p>Made by nsyswrap {}. {} <code>nsyswrap {} --help</code> lists the "
                "thresholds that decide each finding and verdict, and how to change them.</p>"
                "{}</footer>").format(__version__, what, command,
                                      Html("<ul>{}</ul>").format(items) if items else "")


# -- ranks side by side -------------------------------------------------------------------

def rank_evidence(evidence: dict[str, Any]) -> Html:
    """A cross-rank finding's evidence: its scalars as a table, and every number it keeps
    per rank (`by_rank`, or any {rank: value}) in one column per rank."""
    per: dict[str, dict[str, Any]] = {}
    scalars: dict[str, Any] = {}
    for key, value in evidence.items():
        if key == "by_rank" and isinstance(value, dict):
            for rank, numbers in value.items():
                per.setdefault(str(rank), {}).update(numbers)
        elif isinstance(value, dict) and value and all(str(k).isdigit() for k in value):
            for rank, v in value.items():
                per.setdefault(str(rank), {})[key] = v
        elif isinstance(value, dict):  # the clock check: its fields, one row each
            scalars.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            scalars[key] = value
    per = dict(sorted(per.items(), key=lambda kv: int(kv[0])))
    return (evidence_table(scalars)
            + (evidence_side_by_side(per, heading=lambda r: f"rank {r}") if per else ""))


def _step_bars(ranks: list[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """Per rank, its step's GPU span split into parts (medians of the rank table, so the
    parts add up to about the span, not exactly), and its host step time."""
    bars, host = [], []
    for r in ranks:
        label = f"rank {r['rank']}"
        compute, overlap = _ms(r["compute_median_ns"]), _ms(r["overlapped_comm_median_ns"])
        exposed, wait = _ms(r["exposed_comm_median_ns"]), _ms(r["comm_wait_median_ns"])
        wait = min(wait, exposed)  # the wait shown is the exposed part of it
        span = _ms(r["step_gpu_span_median_ns"])
        used = max(compute - overlap, 0) + overlap + exposed
        for order, (part, ms) in enumerate(zip(charts.STEP_PARTS, (
                max(compute - overlap, 0), overlap, exposed - wait, wait,
                max(span - used, 0)), strict=True)):
            bars.append({"rank_label": label, "part": part, "ms": round(ms, 4),
                         "order": order})
        if finite(r["step_median_ns"]) is not None:
            host.append({"rank_label": label, "what": charts.HOST_STEP,
                         "ms": _ms(r["step_median_ns"])})
    return bars, host


class _RanksPage(HtmlPage):
    def __init__(self, a, pages: dict[str, str] | None):
        super().__init__()
        self.a = a
        self.pages = pages or {}
        self.ranks = ranks_section(a, "ranks")
        self.findings = ranks_section(a, "findings")
        self.flagged = {int(f["evidence"]["rank"]) for f in self.findings
                        if isinstance(f.get("evidence"), dict)
                        and isinstance(f["evidence"].get("rank"), int)}
        self.caps: list[str] = []

    def render(self) -> str:
        body = [self._header(), self._findings(), self._identity(), self._steps(),
                self._families(), self._collectives(),
                _footer(self.caps, "Per-rank numbers are medians over the steps kept (the first "
                        "left out as start-up); waits come from collective durations.",
                        "compare")]
        return self.document(f"nsyswrap · {len(self.ranks)} ranks side by side", body, _CSS)

    def _findings(self) -> Html:
        if not self.findings:
            return empty_section("findings", "Cross-rank findings",
                                 "No cross-rank findings: no straggler, no long waits in "
                                 "collectives, no exposed communication at the current "
                                 "thresholds.", tone="ok")
        return Html("<section id=\"findings\"><h2>Cross-rank findings ({})</h2>"
                    "<p class=\"explain\">Each with its numbers per rank.</p>{}"
                    "</section>").format(
            len(self.findings),
            _articles(self.findings, "f", lambda f: rank_evidence(f.get("evidence") or {}),
                      self._links))

    def _links(self, f: dict[str, Any]) -> Html:
        out = []
        if f["code"] == "STRAGGLER" and f.get("range"):
            out.append(Html("<a href=\"#families\">families ↓</a>"))
        out.append(Html("<a href=\"#steps\">per-rank steps ↓</a>"))
        return Html(" ").join(out)

    def _header(self) -> Html:
        a, n = self.a, len(self.ranks)
        reports = len(a.summaries)
        how = sorted({r["identified_by"].split(" (")[0] if r["identified_by"].startswith(
            "file name") else r["identified_by"] for r in self.ranks})
        clock = a.clock
        clock_text = ("collectives matched by order per name; waits from their durations"
                      + (f"; on {clock['timebase']} matched collectives end "
                         f"{fmt_ns(clock['end_skew_median_ns'])} apart (median)"
                         if clock.get("checked") else ""))
        facts = [("Reports", f"{reports} report{'s' if reports > 1 else ''}, {n} ranks"),
                 ("Step", a.step_family or "no common step (the outermost repeated range)"),
                 ("Ranks identified by", "; ".join(how)),
                 ("Collectives", clock_text)]
        dl = Html("").join(Html("<dt>{}</dt><dd>{}</dd>").format(k, v) for k, v in facts)
        notes = Html("").join(Html("<li>{}</li>").format(x) for x in a.notes)
        nav = Html(" · ").join(Html("<a href=\"#{}\">{}</a>").format(i, t) for i, t in (
            ("findings", f"Cross-rank findings ({len(self.findings)})"),
            ("ranks", "Ranks"), ("steps", "Per step"), ("families", "Range families"),
            ("collectives", "Collectives")))
        return Html("<header><h1>nsyswrap <span class=\"muted\">·</span> {} ranks side by "
                    "side</h1><p class=\"lede\">Which rank holds the job back, where it "
                    "loses time, and what the others spend waiting for it.</p>"
                    "<dl class=\"facts\">{}</dl>{}<nav>{}</nav></header>").format(
            n, dl, Html("<ul class=\"notes\">{}</ul>").format(notes) if notes else "", nav)

    def _identity(self) -> Html:
        docs = {s.source: s.document for s in self.a.summaries}
        rows = []
        for r in self.ranks:
            page = self.pages.get(r["source"])
            report = (Html("<a href=\"{}\">{}</a>").format(_href(page), r["source"]) if page
                      else r["source"])
            codes = [f["code"] for f in docs.get(r["source"], {}).get("findings", [])]
            counts = ", ".join(f"{c}×{codes.count(c)}" if codes.count(c) > 1 else c
                               for c in dict.fromkeys(codes)) or "–"
            css = Html(" class=\"flagged\"") if r["rank"] in self.flagged else ""
            rows.append(Html("<tr id=\"rank-{}\"{}><td>{}</td><td class=\"t\">{}</td>"
                             "<td class=\"t\">{}</td><td>{}</td><td>{}</td>"
                             "<td class=\"t\">{}</td></tr>").format(
                r["rank"], css, r["rank"], report, r["identified_by"], r["pid"],
                ",".join(map(str, r["devices"])), counts))
        linked = sum(1 for r in self.ranks if self.pages.get(r["source"]))
        note = (Html("The report names link to each rank's own page ({} found beside the "
                     "reports).").format(linked) if linked else
                Html("No rank's own page lies beside its report (<code>nsyswrap run</code> "
                     "writes one; <code>nsyswrap compare REPORT --format html -o FILE</code> "
                     "makes one)."))
        return Html("<section id=\"ranks\"><h2>Ranks</h2><p class=\"explain\">How each rank "
                    "was identified, and the findings of its own report. {}</p>"
                    "<table class=\"sortable\" id=\"ranks-table\"><thead><tr>"
                    "<th data-type=\"num\">Rank</th><th data-type=\"text\">Report</th>"
                    "<th data-type=\"text\">Identified by</th><th data-type=\"num\">PID</th>"
                    "<th data-type=\"text\">GPU</th><th data-type=\"text\">Its own findings"
                    "</th></tr></thead><tbody>{}</tbody></table></section>").format(
            note, Html("").join(rows))

    def _steps(self) -> Html:
        ranks = self.ranks
        drawn = ranks
        if len(ranks) > MAX_STEP_BARS:
            drawn = ([r for r in ranks if r["rank"] in self.flagged]
                     + [r for r in ranks if r["rank"] not in self.flagged])[:MAX_STEP_BARS]
            drawn.sort(key=lambda r: r["rank"])
            self.caps.append(f"Step bars for {len(drawn)} of {len(ranks)} ranks (flagged "
                             "ones first, then by number).")
        bars, host = _step_bars(drawn)
        chart = (self.chart("rank-steps", charts.rank_steps(bars, host), "ranks",
                            "each rank's step split into compute and communication")
                 if any(b["ms"] > 0 for b in bars) else
                 Html("<p class=\"muted\">No GPU work in the steps: nothing to split.</p>"))
        cap = (Html("<p class=\"cap\">{}</p>").format(self.caps[-1]) if len(drawn) < len(ranks)
               else "")
        return Html("<section id=\"steps\"><h2>Per rank, per step</h2><p class=\"explain\">"
                    "Medians over the steps{}. Each bar is one rank's GPU span of a step: "
                    "compute alone, communication (NCCL kernels) overlapped with compute, "
                    "exposed communication split into the transfer and the wait for the last "
                    "rank to arrive, and GPU idle time. The black tick is the host's step time. "
                    "Medians of parts add up to about the span, not exactly.</p>{}{}{}"
                    "</section>").format(
            Html(" (<code>{}</code>)").format(self.a.step_family) if self.a.step_family
            else "", chart, cap,
            sortable_table(RANK_COLUMNS, ranks, "steps-table",
                           row_class=lambda r: "flagged" if r["rank"] in self.flagged
                           else None))

    def _families(self) -> Html:
        families = ranks_section(self.a, "families")
        ranks = [r["rank"] for r in self.ranks]
        cols, rows = family_rows(families, ranks)
        if not rows:
            return empty_section("families", "Range families per rank",
                                 "No repeated NVTX ranges in these reports.")
        names = [r["family"] for r in rows][:MAX_FAMILIES]
        shown = ranks
        if len(ranks) > MAX_GROUPED_RANKS:
            shown = sorted(([r for r in ranks if r in self.flagged]
                            + [r for r in ranks if r not in self.flagged])[:MAX_GROUPED_RANKS])
            self.caps.append(f"Family bars for {len(shown)} of {len(ranks)} ranks (flagged "
                             "ones first); the tables list all.")
        if len(rows) > MAX_FAMILIES:
            self.caps.append(f"Family bars for the first {MAX_FAMILIES} of {len(rows)} "
                             "range families.")
        pick = [f for f in families if f["family"] in names and f["rank"] in shown]
        pick.sort(key=lambda f: (names.index(f["family"]), f["rank"]))
        out = [Html("<section id=\"families\"><h2>Range families per rank</h2>"
                    "<p class=\"explain\">Median per instance. Host work is wall time less the "
                    "time blocked in syncs (a rank that waits for a straggler blocks, it does "
                    "not work); GPU compute is the GPU time of the family's work other than "
                    "NCCL kernels. A straggler's family stands out on the left; its cost shows "
                    "on the others as waits.</p><div class=\"two\">")]
        for key, measure, title in (("work_median_ns", "host work", "host work, ms"),
                                    ("compute_median_ns", "GPU compute", "GPU compute, ms")):
            data = [{"family": capped(f["family"]), "rank_label": f"rank {f['rank']}",
                     "ms": _ms(f[key])} for f in pick if finite(f[key]) is not None]
            out.append(Html("<div><h3>{}</h3>{}</div>").format(
                measure[0].upper() + measure[1:],
                self.chart(f"families-{key}", charts.family_groups(data, title), "families",
                           f"{measure} per range family and rank")
                if data else Html("<p class=\"muted\">Not recorded.</p>")))
        out.append(Html("</div>"))
        out += [Html("<p class=\"cap\">{}</p>").format(c) for c in self.caps
                if c.startswith("Family")]
        out.append(sortable_table(cols, rows, "families-table"))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _collectives(self) -> Html:
        rows = ranks_section(self.a, "collectives")
        if not rows:
            return empty_section("collectives", "Collectives",
                                 "No NCCL kernels matched across ranks.")
        cols = [Column("Collective", lambda r: r["name"], numeric=False),
                Column("Rank", lambda r: str(r["rank"])),
                Column("Count", lambda r: str(r["count"])),
                Column("Total", ns_cell("total_ns"), title="time inside these kernels"),
                Column("Wait", ns_cell("wait_ns"),
                       title="of which waiting for the last rank to arrive"),
                Column("Wait share", lambda r: fmt_share(
                    r["wait_ns"] / r["total_ns"] if r["total_ns"] else None)),
                Column("Last", lambda r: str(r["last_arrivals"]),
                       title="times this rank arrived last")]
        return Html("<section id=\"collectives\"><h2>Collectives</h2><p class=\"explain\">"
                    "NCCL kernels matched across ranks by their order per name. The last rank "
                    "to arrive spends the least time inside a collective; what the others "
                    "spend beyond it is waiting.</p>{}</section>").format(
            sortable_table(cols, rows, "collectives-table"))


class RanksHtml(Renderer):
    def render(self, a, *, pages: dict[str, str] | None = None, **_) -> str:
        """`pages`: report source -> href of that rank's own page (relative to this page)."""
        return _RanksPage(a, pages).render()


# -- diff ---------------------------------------------------------------------------------

KERNEL_NAME_WIDTH = 70  # kernel names shortened to this, told apart (names.short_names)

def _label(r: dict[str, Any]) -> str:
    # A kernel's name as _DiffPage shortened it (told apart from the others); a range's
    # name is cut, never rewritten.
    name = r["name"]
    name = (r["shown_name"] if r["kind"] == "kernel"
            else name if len(name) <= 90 else name[:89] + "…")
    return name + metric_suffix(r)


def _pct_of(v: Any) -> float | None:
    return None if v is None else round(100 * v, 4)


def _interval_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out, seen = [], {}
    for r in rows:
        label = _label(r)
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:  # two kernels that shorten alike stay two rows
            label = f"{label} [{seen[label]}]"
        out.append({
            "label": label, "name": capped(r["name"]), "verdict": r["verdict"],
            "change_pct": _pct_of(r["change"]), "low_pct": _pct_of(r["ci_low"]),
            "high_pct": _pct_of(r["ci_high"]),
            "change_text": pct_cell("change")(r), "ci_text": ci_cell(r) + (
                f" ({r['method']})" if r.get("method") else ""),
            "medians": f"{fmt_ns(r['base_median_ns'])} → {fmt_ns(r['new_median_ns'])}",
            "counts": f"{r['base_count']}/{r['new_count']}"})
    return out


def _full_name(r: dict[str, Any]) -> str:
    return r["name"] + metric_suffix(r)


# The terminal's diff columns, the name first (it carries the hover and the filter) and
# shortened here only as kernel signatures need.
_TERMINAL = diff_columns({})
DIFF_HTML_COLUMNS = [Column("Name", _label, numeric=False), _TERMINAL[0], *_TERMINAL[2:]]
SIDE_COLUMNS = [
    Column("Name", _label, numeric=False),
    Column("Kind", lambda r: r["kind"], numeric=False),
    Column("N", lambda r: str(r["base_count"] or r["new_count"]), title="instances"),
    Column("Median", lambda r: fmt_ns(r["new_median_ns"] if r["base_median_ns"] is None
                                      else r["base_median_ns"])),
    Column("Total", lambda r: fmt_ns(abs(r["total_change_ns"] or 0)),
           title="median × instances: what it adds to or takes from the run"),
]
DIFFERS = Html("<td class=\"differs\">")
_LEVEL_CLASS = {"comparable": "comparable", "comparable with caution": "caution",
                "not comparable": "not-comparable"}


class _DiffPage(HtmlPage):
    def __init__(self, d, full_names: bool = False):
        super().__init__()
        self.d = d
        self.comp = d.comparability
        self.rows = diff_section(d, "rows")
        names = diff_names(self.rows, KERNEL_NAME_WIDTH, full_names)
        for r in self.rows:
            if r["kind"] == "kernel":
                r["shown_name"] = names[r["name"]]
        self.caps: list[str] = []

    def render(self) -> str:
        d = self.d
        matched = [r for r in self.rows if r["verdict"] not in ("added", "removed")]
        sides = [r for r in self.rows if r["verdict"] in ("added", "removed")]
        body = [self._header(), self._changes(matched), self._sides(sides),
                self._findings(),
                _footer(self.caps, f"Intervals: {self.comp['method']}; a change counts when "
                        "its whole interval lies on one side of 0 and it clears the noise "
                        f"floor ({self.comp['noise_floor']:.0%}).", "diff")]
        return self.document(f"nsyswrap diff · {_name(d.base.source)} → "
                             f"{_name(d.new.source)}", body, _CSS)

    def _header(self) -> Html:
        d, comp = self.d, self.comp
        level = comp["level"]
        why = Html("").join(Html("<li>{}</li>").format(x)
                            for x in comp["reasons"] + comp["cautions"])
        meaning = {"comparable": "same GPU, clocks, driver, nsys and workload shape: the "
                   "verdicts below stand.",
                   "comparable with caution": "the verdicts stand, but read them with this "
                   "in mind:",
                   "not comparable": "every verdict is inconclusive: a comparison here would "
                   "mislead."}.get(level, "")
        banner = Html("<div class=\"banner {}\" id=\"comparability\" role=\"status\">"
                      "<h2>{}</h2><p>{}</p>{}</div>").format(
            _LEVEL_CLASS.get(level, "caution"), level.capitalize(), meaning,
            Html("<ul>{}</ul>").format(why) if why else "")
        share = comp.get("matched_kernel_share") or {}
        facts = [("Report", d.base.source, d.new.source),
                 ("GPUs", ", ".join(d.base.gpus) or "–", ", ".join(d.new.gpus) or "–"),
                 ("Driver", d.base.driver_version or "–", d.new.driver_version or "–"),
                 ("Nsight Systems", d.base.nsys_version or "–", d.new.nsys_version or "–"),
                 ("GPU clock (median)", _mhz(d.base.clock_mhz), _mhz(d.new.clock_mhz)),
                 ("Kernel launches with a match", fmt_share(share.get("base")),
                  fmt_share(share.get("new")))]
        sides = Html("").join(
            Html("<tr><th>{}</th>{}</tr>").format(k, Html("").join(
                Html("{}{}</td>").format(DIFFERS if b != n and k != "Report" else Html("<td>"),
                                         v) for v in (b, n))) for k, b, n in facts)
        counts = verdict_counts(d)
        order = ["slower", "faster", "no significant change", "inconclusive", "added",
                 "removed"]
        pills = Html("").join(Html("<span class=\"pill {}\">{} {}</span>").format(
            v.split()[0], counts[v], v) for v in order if counts.get(v))
        nav = Html(" · ").join(Html("<a href=\"#{}\">{}</a>").format(i, t) for i, t in (
            ("changes", "Changes"), ("added-removed", "Added and removed"),
            ("findings", "Findings")))
        return Html("<header><h1>nsyswrap diff <span class=\"muted\">·</span> {} → {}</h1>"
                    "<p class=\"lede\">Before and after: what got slower or faster beyond the "
                    "noise, and whether the two runs can be compared at all.</p>{}"
                    "<table class=\"kv sides\"><thead><tr><th></th><th>base</th><th>new</th>"
                    "</tr></thead><tbody>{}</tbody></table>"
                    "<div class=\"pills\">{}</div>"
                    "<p class=\"explain\">{}, {:.0%} interval; noise floor {:.0%}.</p>"
                    "<nav>{}</nav></header>").format(
            _name(d.base.source), _name(d.new.source), banner, sides, pills, comp["method"],
            comp["confidence"], comp["noise_floor"], nav)

    def _changes(self, rows: list[dict[str, Any]]) -> Html:
        out = [Html("<section id=\"changes\"><h2>Changes</h2><p class=\"explain\">Each "
                    "matched item's change of its median (diamond) and the confidence interval "
                    "of that change (bar), new against base. The grey band is the noise "
                    "floor: a verdict needs the whole bar on one side of 0 and the diamond "
                    "outside the band. Inconclusive rows (different work under one name, too "
                    "few samples, runs not comparable) are drawn where they have an interval, "
                    "in amber.</p>")]
        kinds = (("range", "Range families"), ("timing", "Your timings (call sites)"),
                 ("benchmark", "Harness benchmarks"), ("kernel", "Kernels"))
        for kind, title in kinds:
            mine = [r for r in rows if r["kind"] == kind and r["change"] is not None]
            if mine:
                out.append(self._intervals(kind, title, mine))
        shown = rows[:MAX_DIFF_ROWS]
        if len(rows) > MAX_DIFF_ROWS:
            self.caps.append(f"The change table lists {MAX_DIFF_ROWS} of {len(rows)} rows.")
        out.append(Html("<h3>All matched rows</h3><input type=\"search\" class=\"filter\" "
                        "data-table=\"diff-table\" placeholder=\"filter by name…\" "
                        "aria-label=\"filter rows\"> <span class=\"count\" "
                        "data-count-for=\"diff-table\"></span>"))
        out.append(sortable_table(DIFF_HTML_COLUMNS, shown, "diff-table",
                                  row_class=lambda r: r["verdict"].split()[0],
                                  full_name=_full_name))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _intervals(self, kind: str, title: str, mine: list[dict[str, Any]]) -> Html:
        """One kind's changes as interval bars (MAX_INTERVALS of them, the significant
        ones first)."""
        cap = ""
        if len(mine) > MAX_INTERVALS:
            significant = [r for r in mine if r["verdict"] in ("slower", "faster")]
            rest = [r for r in mine if r["verdict"] not in ("slower", "faster")]
            keep = {id(r) for r in (significant + rest)[:MAX_INTERVALS]}
            cap = (f"{title}: intervals for {MAX_INTERVALS} of {len(mine)} rows "
                   "(significant ones first, then by change in total time); the table "
                   "lists all.")
            self.caps.append(cap)
            mine = [r for r in mine if id(r) in keep]
        return Html("<div class=\"changes\" id=\"changes-{}\"><h3>{}</h3>{}{}</div>").format(
            kind, title,
            self.chart(f"changes-{kind}", charts.change_intervals(
                _interval_rows(mine), self.comp["noise_floor"]), "interval",
                f"changes of {title.lower()} with their intervals"),
            Html("<p class=\"cap\">{}</p>").format(cap) if cap else "")

    def _sides(self, rows: list[dict[str, Any]]) -> Html:
        head = Html("<section id=\"added-removed\"><h2>Added and removed</h2>")
        if not rows:
            return head + Html("<p class=\"ok\">Every kernel, range family and benchmark of "
                               "one run has its match in the other.</p></section>")
        out = [head, Html("<p class=\"explain\">Items only one run has: new kernels (a layer "
                          "moved to another kernel), dropped ranges or benchmarks.</p>")]
        for verdict, title in (("added", "Added (only in the new run)"),
                               ("removed", "Removed (only in the base run)")):
            mine = [r for r in rows if r["verdict"] == verdict]
            if mine:
                out.append(Html("<h3>{}: {}</h3>{}").format(
                    title, len(mine), sortable_table(SIDE_COLUMNS, mine, f"{verdict}-table",
                                                     full_name=_full_name)))
        out.append(Html("</section>"))
        return Html("").join(out)

    def _findings(self) -> Html:
        changed = diff_section(self.d, "findings")
        if not changed:
            return empty_section("findings", "Findings", "The same findings in both runs.",
                                 tone="ok")
        out = [Html("<section id=\"findings\"><h2>Findings that changed ({})</h2>").format(
            len(changed))]
        for change in ("appeared", "disappeared"):
            mine = [f for f in changed if f["change"] == change]
            if mine:
                what = ("in the new run, not in the base" if change == "appeared"
                        else "in the base, gone from the new run")
                out.append(Html("<h3>{} ({}): {}</h3>{}").format(
                    change.capitalize(), what, len(mine), _articles(mine, f"{change}-")))
        out.append(Html("</section>"))
        return Html("").join(out)


def _name(source: str) -> str:
    return source.replace("\\", "/").rsplit("/", 1)[-1]


def _mhz(value: Any) -> str:
    f = finite(value)
    return "not sampled" if f is None else f"{f:,.0f} MHz"


class DiffHtml(Renderer):
    def render(self, d, *, full_names: bool = False, **_) -> str:
        return _DiffPage(d, full_names).render()
