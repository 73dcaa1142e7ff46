"""What every HTML page of nsyswrap shares: the page shell (styles, the vendored Vega
bundles, the script that draws the charts and sorts and filters the tables), the sortable
table of shared columns, and a finding's evidence as a small table.

The single-report page (`html.py`) and the many-report pages (`multi/html.py`) are built
from these, so they look and behave alike and escape the same way: every piece of a page is
`Html` (`markup.py`), which escapes each value put into it.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import numpy as np

from .._version import __version__
from ..common.units import fmt_bytes, fmt_ns
from .markup import Html
from .views import Column, cells, legend

VENDOR_FILES = ("vega.min.js", "vega-lite.min.js", "vega-embed.min.js")

# In JSON inside a script element: what could close the element, and the characters JSON
# leaves raw that a script or a terminal showing the file would act on (DEL, C1 controls,
# Unicode's line separators); each as its \uXXXX escape, which JSON reads back the same.
_SCRIPT_UNSAFE = re.compile("[&<>\x7f-\x9f\u2028\u2029]")


def json_for_script(data: Any) -> Html:
    """JSON inside <script type="application/json">: no '<' can close the element."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # Markup as it is: its own escapes make it safe inside the element, where HTML's
    # would be read as JSON's text.
    return Html(_SCRIPT_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def vendor_scripts() -> Html:
    folder = resources.files("nsyswrap.render") / "vendor"
    # The vendored bundles are code, inlined as they are (escaping would break them).
    return Html("\n").join(Html("<script>{}</script>").format(
        Html((folder / name).read_text(encoding="utf-8"))) for name in VENDOR_FILES)


def finite(x: Any) -> float | None:
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if np.isfinite(f) else None


def num(x: Any) -> str:
    f = finite(x)
    return "" if f is None else repr(f)


def empty_section(section_id: str, heading: str, message: str, tone: str = "muted") -> Html:
    """A section with nothing to show: its heading and one line saying why (tone "ok" when
    the emptiness is good news, "muted" when there was simply nothing)."""
    return Html("<section id=\"{}\"><h2>{}</h2><p class=\"{}\">{}</p></section>").format(
        section_id, heading, tone, message)


def evidence_table(evidence: dict[str, Any]) -> Html:
    rows = Html("").join(Html("<tr><th>{}</th><td>{}</td></tr>").format(
        k, evidence_value(k, v)) for k, v in evidence.items())
    return Html("<table class=\"kv\">{}</table>").format(rows) if rows else Html("")


def evidence_side_by_side(by: dict[str, dict[str, Any]], heading=str) -> Html:
    """Numbers of several things side by side (a merged finding's ranges, ranks): one
    column each, `heading(key)` on top."""
    labels = list(by)
    keys = list(dict.fromkeys(k for ev in by.values() for k in ev))
    head = Html("").join(Html("<th>{}</th>").format(heading(label)) for label in labels)
    body = Html("").join(
        Html("<tr><th>{}</th>{}</tr>").format(k, Html("").join(
            Html("<td>{}</td>").format(evidence_value(k, by[label].get(k)))
            for label in labels)) for k in keys)
    return Html("<table class=\"kv by-range\"><thead><tr><th></th>{}</tr></thead>"
                "<tbody>{}</tbody></table>").format(head, body)


def evidence_value(key: str, value: Any) -> str:
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    if key.endswith("_ns") and finite(value) is not None:
        return fmt_ns(value)
    if key.endswith("_bytes") and finite(value) is not None:
        return fmt_bytes(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    return "–" if value is None else str(value)


def sortable_table(columns: list[Column], rows: list[dict[str, Any]], table_id: str,
                   link=None, row_class=None, full_name=None) -> Html:
    """A sortable table of shared columns; short headers explained on hover and in a
    legend below, as the terminal table does. `link(row)`: an anchor on this page for the
    first cell; `row_class(row)`: a CSS class for the row (a verdict's colour);
    `full_name(row)`: the first cell's whole text, on hover and for the filter, where the
    cell shows it shortened (kernel signatures run to hundreds of characters)."""
    head = Html("").join(
        Html("<th data-type=\"{}\"{}>{}</th>").format(
            "num" if c.numeric else "text",
            Html(" title=\"{}\"").format(c.title) if c.title else "", c.header)
        for c in columns)
    # One template for every row (a format per row, not per cell: tables run to 2,000
    # rows): the row's opening, its first cell's opening and text, then the other cells.
    row = (Html("{}{}{}</td>")
           + Html("").join(Html("<td>{}</td>") if c.numeric else Html("<td class=\"t\">{}</td>")
                           for c in columns[1:])
           + Html("</tr>"))
    body = Html("").join(_sortable_row(row, columns, r, link, row_class, full_name)
                         for r in rows)
    caption = legend(columns)
    return (Html("<table class=\"sortable\" id=\"{}\"><thead><tr>{}</tr></thead>"
                 "<tbody>{}</tbody></table>").format(table_id, head, body)
            + (Html("<p class=\"legend\">{}</p>").format(caption) if caption else ""))


def _sortable_row(template: Html, columns: list[Column], r: dict[str, Any], link,
                  row_class, full_name) -> Html:
    values = cells(columns, r)
    anchor = link(r) if link else None
    css = row_class(r) if row_class else None
    return template.format(
        Html("<tr class=\"{}\">").format(css) if css else Html("<tr>"),
        Html("<td class=\"name\" title=\"{}\">").format(full_name(r)) if full_name
        else Html("<td>"),
        Html("<a href=\"#{}\">{}</a>").format(anchor, values[0]) if anchor else values[0],
        *values[1:])


class HtmlPage:
    """A page under construction: its charts' specifications by key, and the shell around
    its body. Charts are drawn by the page's script from the specs, never from markup."""

    def __init__(self) -> None:
        self.specs: dict[str, Any] = {}

    def chart(self, key: str, spec: dict[str, Any], kind: str, label: str) -> Html:
        self.specs[key] = spec
        return Html("<div class=\"chart\" data-spec=\"{}\" data-kind=\"{}\" "
                    "role=\"img\" aria-label=\"{}\"></div>").format(key, kind, label)

    def document(self, title: str, body: list[Html], css: Html | None = None) -> str:
        """The whole page, as text: `body` (markup; a plain text in it shows as text), the
        specs as JSON, the Vega bundles and the page script, all inline. `css` adds a
        page's own styles."""
        return str(Html("").join([
            Html("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
                 "<meta name=\"generator\" content=\"nsyswrap {}\">"
                 "<title>{}</title><style>{}{}</style></head><body>").format(
                __version__, title, CSS, css or ""),
            Html("<main>"), *body, Html("</main>"),
            Html("<script type=\"application/json\" id=\"nsyswrap-specs\">"),
            json_for_script(self.specs), Html("</script>"),
            vendor_scripts(), Html("<script>{}</script></body></html>\n").format(JS),
        ]))


CSS = Html("""
:root{--fg:#1d232a;--muted:#66707a;--line:#e3e6ea;--warn:#b35c00;--info:#2463a6;--ok:#2f7d4a;
--bg-soft:#f6f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,
sans-serif;color:var(--fg);background:#fff}
main{max-width:1280px;margin:0 auto;padding:20px 28px 60px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:34px 0 8px;padding-top:10px;
border-top:2px solid var(--line)}h3{font-size:15px;margin:22px 0 6px}
.muted{color:var(--muted)}.lede{color:var(--muted);margin:0 0 12px}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0 0 10px;
font-size:13px}.facts dt{color:var(--muted)}.facts dd{margin:0;overflow-wrap:anywhere}
nav{margin:10px 0 0;font-size:13px}a{color:#1f5fa8;text-decoration:none}a:hover{
text-decoration:underline}
.notes,.cap,.explain{color:var(--muted);font-size:12.5px}.explain{max-width:980px}
.finding{border-left:4px solid var(--info);background:var(--bg-soft);padding:8px 12px;
margin:8px 0;border-radius:3px}.finding.warning{border-color:var(--warn)}
.finding p{margin:4px 0}.fhead{display:flex;gap:10px;align-items:baseline;flex-wrap:wrap}
.fhead .links{margin-left:auto;font-size:12.5px}.fhead .range{color:var(--muted);
overflow-wrap:anywhere}
.sev{font-size:11px;text-transform:uppercase;letter-spacing:.04em;font-weight:600;
color:var(--info)}.warning .sev{color:var(--warn)}
.suggestion{color:#33506e}
details summary{cursor:pointer;color:var(--muted);font-size:12.5px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:right;
white-space:nowrap}th{background:var(--bg-soft);font-weight:600;position:sticky;top:0}
td:first-child,th:first-child,td.t,th[data-type="text"]{text-align:left}
td.t{white-space:normal}
.alert{border:1px solid #e0a800;border-left:6px solid var(--warn);background:#fff4e0;
padding:8px 12px;margin:10px 0;border-radius:3px;font-size:14px}
.alert strong{color:var(--warn)}
.legend{color:var(--muted);font-size:12px;margin:2px 0 10px}
.by-range thead th{text-align:left;font-weight:600}
table.sortable th{cursor:pointer;user-select:none}table.sortable th.asc::after{content:" ▲"}
table.sortable th.desc::after{content:" ▼"}
td.name{max-width:720px;overflow:hidden;text-overflow:ellipsis;font-family:ui-monospace,
SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
table.source td{padding:1px 8px}table.source td:last-child{text-align:left}
table.source td code{white-space:pre;font-size:12px}
table.source td.num{color:var(--muted);text-align:right}
.kv th{text-align:left;font-weight:500;background:none;position:static}.kv td{
text-align:left;white-space:normal;overflow-wrap:anywhere}
.verdict{font-size:12px;font-weight:500;padding:1px 8px;border-radius:10px;margin-left:6px;
background:#fdecd8;color:var(--warn)}.verdict.agree{background:#e1f2e6;color:var(--ok)}
.verdict.note{background:#e5eef9;color:var(--info)}
.stats{font-size:12.5px;color:var(--muted);margin:2px 0 6px}
.chart{width:100%;min-height:60px}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(540px,1fr));gap:4px 28px}
.grid .bench h3{margin-top:14px}.bench,.timeline,.family{margin-bottom:18px}
.codes code,.fhead code{font-weight:600}.back{font-size:12px;margin:2px 0 0}
.filter{font:inherit;padding:4px 8px;width:320px;border:1px solid #c9ced4;border-radius:4px}
.count{color:var(--muted);font-size:12px}.ok{color:var(--ok)}
footer{margin-top:40px;color:var(--muted);font-size:12px;border-top:1px solid var(--line)}
#vg-tooltip-element{font-size:12px;max-width:520px}
#vg-tooltip-element td.value{white-space:normal;overflow-wrap:anywhere}
""")

# Draws the charts (vegaEmbed), and makes the tables sortable and the kernel table
# searchable. Counts what it drew in data attributes on <body> (read by the browser tests).
JS = Html(r"""
(function () {
  var specs = JSON.parse(document.getElementById('nsyswrap-specs').textContent);
  var charts = document.querySelectorAll('.chart[data-spec]');
  var jobs = [];
  charts.forEach(function (el) {
    var spec = specs[el.getAttribute('data-spec')];
    jobs.push(vegaEmbed(el, spec, {actions: false, renderer: 'canvas'}).then(function () {
      el.setAttribute('data-rendered', 'yes');
    }, function (err) {
      el.textContent = 'This chart could not be drawn: ' + err;
      el.setAttribute('data-rendered', 'failed');
      console.error(err);
    }));
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute('data-charts-done', String(jobs.length));
  });

  // Cells read as the units module writes them ("43.7 µs", "720 ns", "+6.3%", "2 MiB"):
  // sort by the quantity, not by the digits.
  var UNITS = {ns: 1, 'µs': 1e3, ms: 1e6, s: 1e9, B: 1, KiB: 1024, MiB: 1048576,
               GiB: 1073741824};
  function readNumber(text) {
    var m = new RegExp('([+-]?[0-9][0-9,]*(?:\\.[0-9]+)?(?:e[+-]?[0-9]+)?)\\s*' +
                       '(ns|µs|ms|s|B|KiB|MiB|GiB)?(?![A-Za-z])').exec(text);
    if (!m) return -Infinity;
    return parseFloat(m[1].replace(/,/g, '')) * (UNITS[m[2]] || 1);
  }
  function cellValue(row, i, numeric) {
    var td = row.children[i];
    if (!td) return numeric ? -Infinity : '';
    if (numeric) {
      var v = td.getAttribute('data-v');
      var x = v === null ? readNumber(td.textContent) : parseFloat(v);
      return isNaN(x) ? -Infinity : x;
    }
    return td.textContent.toLowerCase();
  }
  document.querySelectorAll('table.sortable').forEach(function (table) {
    var heads = table.querySelectorAll('thead th');
    heads.forEach(function (th, i) {
      th.addEventListener('click', function () {
        var numeric = th.getAttribute('data-type') === 'num';
        var desc = !th.classList.contains('desc');
        heads.forEach(function (h) { h.classList.remove('asc', 'desc'); });
        th.classList.add(desc ? 'desc' : 'asc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = cellValue(a, i, numeric), y = cellValue(b, i, numeric);
          return (x < y ? -1 : x > y ? 1 : 0) * (desc ? -1 : 1);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
  document.querySelectorAll('input.filter').forEach(function (input) {
    var table = document.getElementById(input.getAttribute('data-table'));
    var counter = document.querySelector('[data-count-for="' + table.id + '"]');
    function apply() {
      var q = input.value.toLowerCase(), shown = 0, rows = table.tBodies[0].rows;
      for (var k = 0; k < rows.length; k++) {
        var name = rows[k].cells[0];
        var text = (name.getAttribute('title') || '') + ' ' + name.textContent;
        var hit = !q || text.toLowerCase().indexOf(q) >= 0;
        rows[k].style.display = hit ? '' : 'none';
        if (hit) shown++;
      }
      counter.textContent = shown + ' of ' + rows.length + ' shown';
    }
    input.addEventListener('input', apply);
    apply();
  });
})();
""")
