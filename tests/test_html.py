"""The HTML report: self-contained, escaped, capped, and drawn as a person sees it (headless
Chromium with the network off). Expected counts come from SQL on the fixtures."""

from __future__ import annotations

import functools
import html
import json
import os
import re

import pytest
from browser import load_page
from click.testing import CliRunner
from conftest import CPU_HOSTILE, DATA, DEMO, GPU_MIX, USER_SEED, needs_browser, sql

from nsyswrap import compare
from nsyswrap.cli import main
from nsyswrap.render import html as html_renderer
from nsyswrap.render import render
from nsyswrap.render.html import MAX_FAMILY_BARS, MAX_FAMILY_TIMELINES, MAX_USER_GROUPS
from nsyswrap.render.views import attribution_line, event_records_hint, timing_notes

LOST = DATA / "h100_interrupted_lost.sqlite"
TRAIN = DATA / "h100_torch_train.sqlite"

HOSTILE_NAMES = [
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(2)</script>",
    "quote\" apos' amp& lt< gt> back\\slash",
    "a|b||c | `code` *star* [link](x)",
]
HOSTILE_DOMAIN = "<b onmouseover=alert(3)>dom</b>"


def _harness_runs(path) -> int:
    """Harness runs recorded in a report: its JSON marks in the nsyswrap domain."""
    return sql(path, "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s ON "
                     "s.id = e.textId WHERE e.eventType = 34 AND coalesce(e.text, s.value) "
                     "LIKE '{\"nsyswrap\":\"nsyswrap.benchmark/1\"%'")[0][0]


def _user_range_families(path) -> int:
    """(domain, name) pairs of push/pop and start/end ranges outside the harness's domain."""
    return sql(path, "SELECT count(*) FROM (SELECT DISTINCT e.domainId, "
                     "coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
                     "ON s.id = e.textId WHERE e.eventType IN (59, 60) AND e.domainId NOT IN "
                     "(SELECT domainId FROM NVTX_EVENTS d WHERE d.eventType = 75 "
                     "AND d.text = 'nsyswrap'))")[0][0]


@functools.cache
def compared(path):
    """compare(path), once per report in this module (a worker's): the tests that take it
    only render and read it, and rendering leaves a comparison as it was."""
    return compare(path)


def _outside_vendor(page: str) -> str:
    """The page without the inlined Vega bundles (their code is not ours to scan)."""
    return re.sub(r"<script>!function.*?</script>", "", page, flags=re.S)


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "demo.html"
    path.write_text(render(compared(DEMO), "html"), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hostile_page(tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "hostile.html"
    path.write_text(render(compared(CPU_HOSTILE), "html"), encoding="utf-8")
    return path


def test_demo_page_is_one_offline_file_under_5_mb(demo_page):
    page = demo_page.read_text(encoding="utf-8")
    assert demo_page.stat().st_size < 5 * 2**20
    # Nothing to fetch: no external scripts, styles, images, fonts or frames.
    ours = _outside_vendor(page)
    assert page.count("<script>!function") == 3  # the three Vega bundles, inlined
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", ours)
    assert "url(" not in re.sub(r"<script>.*?</script>", "", ours, flags=re.S)
    for bundle in ("vega", "vegaLite", "vegaEmbed"):
        assert f".{bundle}=" in page or f"{bundle}=" in page
    specs = json.loads(re.search(r'<script type="application/json" id="nsyswrap-specs">'
                                 r"(.*?)</script>", page, re.S).group(1))
    runs = _harness_runs(DEMO)
    assert runs == 14
    assert page.count('data-kind="benchmark"') == runs
    assert sum(k.startswith("bench-") for k in specs) == runs
    assert page.count('data-kind="timeline"') == runs + min(_user_range_families(DEMO),
                                                            MAX_FAMILY_TIMELINES)


def test_kernel_table_lists_every_kernel_name():
    page = render(compared(GPU_MIX), "html")
    (names,) = sql(GPU_MIX, "SELECT count(DISTINCT demangledName) "
                            "FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    table = re.search(r'<table class="sortable" id="kernels-table">(.*?)</table>', page, re.S)
    assert table.group(1).count("<tr>") - 1 == names  # less the heading row


def test_findings_link_to_what_shows_them():
    c = compared(DEMO)
    page = render(c, "html")
    assert page.count('<article class="finding') == len(c.findings)
    for anchor in set(re.findall(r'<article class="finding.*?href="#([\w-]+)"', page, re.S)):
        assert f'id="{anchor}"' in page


def test_report_names_are_escaped_in_the_markup(hostile_page):
    page = hostile_page.read_text(encoding="utf-8")
    ours = _outside_vendor(page)
    for name in [*HOSTILE_NAMES[:3], HOSTILE_DOMAIN]:  # those with markup characters
        assert name not in ours, name
    assert HOSTILE_NAMES[3] in ours  # pipes and backticks are plain text in HTML
    assert "<img" not in ours and "<b onmouseover" not in ours
    assert html.escape(HOSTILE_NAMES[0]) in ours  # shown, as text
    assert html.escape(f"{HOSTILE_DOMAIN}:{HOSTILE_NAMES[0]}") in ours  # the finding's range
    # Inside the JSON of the charts nothing can close the script element.
    data = re.search(r'id="nsyswrap-specs">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data
    assert "\\u003cimg src=x onerror=alert(1)\\u003e" in data


def test_cli_writes_html_and_says_where(tmp_path):
    out = tmp_path / "r.html"
    res = CliRunner().invoke(main, ["compare", str(GPU_MIX), "--format", "html", "-o",
                                    str(out)])
    assert res.exit_code == 0, res.output
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert f"wrote html to {out}" in res.stderr


def test_unwritable_output_is_one_line_exit_2(tmp_path):
    for fmt in ("html", "trace", "json"):
        res = CliRunner().invoke(main, ["compare", str(GPU_MIX), "--format", fmt, "-o",
                                        str(tmp_path / "missing" / "dir" / "x")])
        assert res.exit_code == 2
        assert res.stderr.count("\n") == 1 and "cannot write" in res.stderr


def test_several_reports_make_the_ranks_page_and_a_trace_is_per_report(tmp_path):
    res = CliRunner().invoke(main, ["compare", str(GPU_MIX), str(DEMO), "-j", "1",
                                    "--format", "html", "-o", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    assert "ranks side by side" in (tmp_path / "r.html").read_text(encoding="utf-8")
    res = CliRunner().invoke(main, ["compare", str(GPU_MIX), str(DEMO), "--format", "trace",
                                    "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "--format trace shows one report" in res.stderr
    assert not (tmp_path / "t.json").exists()


def test_html_to_a_pipe_works_and_says_o_is_usual():
    res = CliRunner().invoke(main, ["compare", str(GPU_MIX), "--format", "html"])
    assert res.exit_code == 0 and res.stdout.startswith("<!DOCTYPE html>")
    assert "-o FILE.html" in res.stderr


def test_notebook_repr_is_the_page_in_an_iframe():
    c = compared(CPU_HOSTILE)
    fragment = c._repr_html_()
    assert fragment.startswith("<iframe srcdoc=\"") and fragment.endswith("</iframe>")
    srcdoc = re.search(r'srcdoc="(.*?)" style=', fragment, re.S).group(1)
    assert '"' not in srcdoc and "<" not in srcdoc  # all of it an attribute value
    assert html.unescape(srcdoc).startswith("<!DOCTYPE html>")
    assert not c.analysis.ranges.empty  # the DataFrames are still there


def test_alerts_come_first_and_loud():
    # The lost GPU trace: CUDA launches in the report, no GPU activity at all.
    assert sql(LOST, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0] > 0
    assert not sql(LOST, "SELECT name FROM sqlite_master WHERE name = "
                         "'CUPTI_ACTIVITY_KIND_KERNEL'") or \
        sql(LOST, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] == 0
    c = compare(LOST)
    page = render(c, "html")
    assert c.info.alerts
    alerts = re.findall(r'<div class="alert" role="alert">(.*?)</div>', page, re.S)
    assert alerts == [f"<strong>Warning:</strong> {html.escape(a)}" for a in c.info.alerts]
    assert page.index('role="alert"') < page.index('<dl class="facts">')  # before the facts
    notes = re.search(r'<ul class="notes">(.*?)</ul>', page, re.S)
    assert not notes or html.escape(c.info.alerts[0]) not in notes.group(1)  # said once


def test_attribution_rule_is_stated():
    for rule in ("process", "thread"):
        c = compare(TRAIN, attribution=rule)
        line = attribution_line(c)
        assert line  # the training loop has autograd threads: either rule is worth a line
        assert (f"<dt>Attribution</dt><dd>{html.escape(line.removeprefix('attribution: '))}"
                "</dd>") in render(c, "html")


def test_a_merged_finding_links_each_range_and_shows_its_numbers():
    c = compared(DEMO)
    page = render(c, "html")
    merged = [(i, f) for i, f in enumerate(c.findings) if len(f.ranges) > 1]
    assert merged
    for i, f in merged:
        article = re.search(rf'<article class="finding [^"]*" id="f{i}">(.*?)</article>', page,
                            re.S).group(1)
        for label in f.ranges:
            anchor = re.search(rf'<a href="#([\w-]+)">{re.escape(html.escape(label))}</a>',
                               article).group(1)
            assert f'<div class="timeline" id="{anchor}">' in page
        head = re.search(r'<table class="kv by-range"><thead>(.*?)</thead>', article).group(1)
        assert head == "<tr><th></th>" + "".join(f"<th>{html.escape(label)}</th>"
                                                 for label in f.ranges) + "</tr>"


def test_caps_are_stated_on_the_page(monkeypatch):
    monkeypatch.setattr(html_renderer, "MAX_BENCHMARK_PLOTS", 3)
    monkeypatch.setattr(html_renderer, "MAX_BAR_INSTANCES", 2)
    demo = compared(DEMO)
    page = render(demo, "html")
    runs = _harness_runs(DEMO)
    assert page.count('data-kind="benchmark"') == 3
    assert page.count('data-kind="timeline"') == 3
    assert f"Plots and timelines for 3 of {runs} benchmark runs" in page
    # The capped ones are those with findings.
    drawn = [int(r) for r in re.findall(r'<div class="bench" id="b(\d+)">', page)]
    assert all(demo.benchmarks.set_index("run").loc[r, "codes"] for r in drawn)
    mix = compared(GPU_MIX)
    page = render(mix, "html")
    shown = re.findall(r'<div class="family" id="r\d+"><h3>.*?</h3><p class="stats">(\d+) '
                       r"instances", page)
    assert len(shown) == min(_user_range_families(GPU_MIX), MAX_FAMILY_BARS)
    assert page.count("drawn, evenly spaced in time") == sum(int(n) > 2 for n in shown) > 0


# -- the program's own timings (nsyswrap run's records) --------------------------------------

@pytest.fixture(scope="module")
def seed():
    return compare(USER_SEED)


@pytest.fixture(scope="module")
def seed_page(seed, tmp_path_factory):
    path = tmp_path_factory.mktemp("html") / "seed.html"
    path.write_text(render(seed, "html"), encoding="utf-8")
    return path


def _cells(row: str) -> list[str]:
    return [html.unescape(re.sub(r"<[^>]+>", "", c))
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_user_timings_come_after_the_findings_one_row_per_timed_place(seed, seed_page):
    page = seed_page.read_text(encoding="utf-8")
    assert page.index('id="findings"') < page.index('id="user-timings"') < page.index(
        'id="timelines"')
    assert '<a href="#user-timings">Your CUDA-event timings</a>' in page
    table = re.search(r'<table class="sortable" id="user-timings-table">.*?<tbody>(.*?)'
                      r"</tbody>", page, re.S).group(1)
    rows = [_cells(r) for r in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]
    groups = seed.user_timings
    assert len(groups) == 9  # the seed's three variants, three timings each
    assert [(r[0], r[1], r[5]) for r in rows] == [
        (g.label, str(g.instances), g.verdict) for g in groups.itertuples()]
    # Where the events read more than the kernels by more than their own cost, it says so:
    # at least every window after the copies (the GPU idle at each start record; which
    # other windows the queue ran dry in depends on the run).
    inflated = [r[0] for r in rows if r[5].startswith("events inflated")]
    assert {f"copied at torch_seed_timings.py:{a}→{b}"
            for a, b in ((37, 39), (40, 42), (43, 45))} <= set(inflated)
    assert not [label for label in inflated if label.startswith("on_gpu ")
                and ":59→" in label]  # behind torch.rand's queued kernels: they agree
    # Each timed place drawn: its instances, a typical and the worst instance's timeline.
    assert len(groups) <= MAX_USER_GROUPS
    for run in groups["run"]:
        block = re.search(rf'<div class="ugroup" id="u{run}">(.*?)</div><(div class="ugroup"|'
                          r"/section)", page, re.S).group(1)
        assert block.count('data-kind="user"') == 1
        assert f'id="tl-u{run}"' in block and f'id="tl-u{run}-worst"' in block
    # The lines under the table, as the other formats write them (a cold first instance).
    notes = timing_notes(seed)
    assert any(line.startswith("Cold start: flushed at torch_seed_timings.py:87→89")
               for line in notes)
    assert all(f"<li>{html.escape(line)}</li>" in page for line in notes)


def test_findings_link_to_the_timed_places_they_name(seed, seed_page):
    page = seed_page.read_text(encoding="utf-8")
    run_of = dict(zip(seed.user_timings["label"], seed.user_timings["run"], strict=True))
    named = [f for f in seed.findings if f.ranges]
    assert {f.code for f in named} >= {"HOST_WORK_IN_WINDOW", "LAUNCH_OVERHEAD",
                                       "CACHE_EFFECT"}
    for i, f in enumerate(seed.findings):
        article = re.search(rf'<article class="finding[^"]*" id="f{i}">(.*?)</article>',
                            page, re.S).group(1)
        links = re.findall(r'href="#(u\d+)"', article)
        assert links == [f"u{run_of[label]}" for label in f.ranges]
        if len(f.ranges) == 1:
            assert "timings ↓</a>" in article
        for anchor in links:
            assert f'<div class="ugroup" id="{anchor}">' in page


def test_timed_place_names_are_escaped(seed):
    hostile = HOSTILE_NAMES[0] + ".py:3→4 " + HOSTILE_NAMES[1]
    first = seed.user_timings["label"].iloc[0]
    groups = seed.user_timings.assign(label=seed.user_timings["label"].replace(first, hostile))
    intervals = seed.analysis.user_timings.intervals
    seed.analysis.user_timings.intervals = intervals.assign(
        label=intervals["label"].astype(object).replace(first, hostile))
    try:
        c = type(seed)(seed.analysis, [f for f in seed.findings], seed.thresholds,
                       seed.benchmarks, groups)
        page = render(c, "html")
    finally:
        seed.analysis.user_timings.intervals = intervals
    ours = _outside_vendor(page)
    assert hostile not in ours and "<img" not in ours
    assert html.escape(hostile) in ours  # in the table, the block's heading, the timelines'
    assert ours.count(html.escape(hostile)) >= 4
    data = re.search(r'id="nsyswrap-specs">(.*?)</script>', page, re.S).group(1)
    assert "<" not in data and ">" not in data


def test_user_timing_caps_are_stated(seed, monkeypatch):
    monkeypatch.setattr(html_renderer, "MAX_USER_GROUPS", 2)
    monkeypatch.setattr(html_renderer, "MAX_INSTANCE_POINTS", 4)
    page = render(seed, "html")
    drawn = [int(r) for r in re.findall(r'<div class="ugroup" id="u(\d+)">', page)]
    assert len(drawn) == 2
    flagged = seed.user_timings[seed.user_timings["codes"].map(bool)]
    assert drawn == list(flagged["run"][:2])  # those with findings first
    assert f"Plots and timelines for 2 of {len(seed.user_timings)} timed places" in page
    assert page.count("10 instances: 4 drawn, evenly spaced in time.") == 2
    # A finding naming a timed place that is not drawn links to the section.
    assert 'href="#user-timings">' in re.search(r'<section id="findings">(.*?)</section>',
                                               page, re.S).group(1)


def test_a_report_without_the_runners_records_says_nsyswrap_run_reconciles_them():
    (records,) = sql(GPU_MIX, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN "
                              "StringIds s ON s.id = r.nameId WHERE s.value LIKE "
                              "'cudaEventRecord%'")[0]
    assert records > 0
    mix = compared(GPU_MIX)
    page = render(mix, "html")
    section = re.search(r'<section id="user-timings">(.*?)</section>', page, re.S).group(1)
    assert f"This report holds {records} CUDA event record" in section
    assert html.escape(event_records_hint(mix)) in section
    # The harness's own events are its benchmarks: no such section beside them.
    assert 'id="user-timings"' not in render(compared(DEMO), "html")


# -- in a browser ----------------------------------------------------------------------------

def _table_rows(page, table_id: str, then: str):
    """`then` (JavaScript) applied to the array of a table's body rows, in the page."""
    return page.evaluate(f"() => Array.from(document.querySelectorAll('#{table_id} tbody tr'))"
                         + then)


@pytest.mark.browser
@needs_browser
def test_demo_page_in_chromium_offline(demo_page, tmp_path, chromium):
    shot = tmp_path / "demo.png"
    load = load_page(demo_page, shot, chromium=chromium)
    assert load.errors == []
    assert load.requests == []  # the page asked the network for nothing
    runs = _harness_runs(DEMO)
    facts = load.facts
    assert facts["failed"] == 0
    assert facts["benchmark_drawn"] == runs
    assert facts["timeline_drawn"] == runs + min(_user_range_families(DEMO),
                                                 MAX_FAMILY_TIMELINES)
    assert facts["findings"] == len(compared(DEMO).findings)
    assert shot.stat().st_size > 50_000


@pytest.mark.browser
@needs_browser
def test_range_families_in_chromium(tmp_path, chromium):
    path = tmp_path / "mix.html"
    path.write_text(render(compared(GPU_MIX), "html"), encoding="utf-8")
    load = load_page(path, chromium=chromium)
    assert load.errors == [] and load.requests == []
    families = _user_range_families(GPU_MIX)
    facts = load.facts
    assert facts["failed"] == 0
    assert facts["benchmark_drawn"] == _harness_runs(GPU_MIX) == 0
    assert facts["timeline_drawn"] == min(families, MAX_FAMILY_TIMELINES)
    # A family without GPU work or syncs has a sentence instead of bars.
    assert 0 < facts["family_drawn"] == facts["family_charts"]
    assert facts["family_blocks"] == min(families, MAX_FAMILY_BARS)


@pytest.mark.browser
@needs_browser
def test_benchmark_table_sorts_by_quantity(demo_page, chromium):
    def sort_by_events(page):
        page.click("#benchmarks-table th:nth-child(4)")  # Events, descending
        sort_by_events.names = _table_rows(page, "benchmarks-table",
                                           ".map(r => r.cells[0].textContent)")

    load = load_page(demo_page, actions=sort_by_events, chromium=chromium)
    assert load.errors == []
    b = compared(DEMO).benchmarks.sort_values("event_median_ns", ascending=False,
                                             kind="stable")
    assert sort_by_events.names == list(b["benchmark"])


@pytest.mark.browser
@needs_browser
def test_hostile_names_show_as_text_in_chromium(hostile_page, chromium):
    def hover_each_timeline(page):
        # Hover the middle of each timeline: the tooltip shows the hostile range name.
        tips = []
        for canvas in page.query_selector_all('.chart[data-kind="timeline"] canvas'):
            canvas.scroll_into_view_if_needed()
            box = canvas.bounding_box()
            for fraction in (0.35, 0.45, 0.55):
                page.mouse.move(box["x"] + box["width"] * 0.6,
                                box["y"] + box["height"] * fraction)
                page.wait_for_timeout(120)
                tips.append(page.evaluate(
                    "() => { const t = document.getElementById('vg-tooltip-element');"
                    " return t && t.classList.contains('visible') ? [t.innerText,"
                    " t.querySelectorAll('img,b,script').length] : null; }"))
        page.evaluate("(tips) => { window.__tips = tips; }", tips)
        hover_each_timeline.tips = tips

    load = load_page(hostile_page, actions=hover_each_timeline, chromium=chromium)
    assert load.dialogs == []  # no alert() ran
    assert load.errors == [] and load.requests == []
    assert load.facts["images"] == 0
    text = load.facts["text"]
    for name in [HOSTILE_NAMES[0], HOSTILE_NAMES[1], HOSTILE_DOMAIN]:
        assert name in text  # shown literally
    tips = [t for t in hover_each_timeline.tips if t]
    assert tips, "no tooltip appeared"
    assert all(elements == 0 for _, elements in tips)
    assert any(HOSTILE_NAMES[0] in t or HOSTILE_NAMES[1] in t for t, _ in tips)


@pytest.mark.browser
@needs_browser
def test_kernel_table_sorts_and_filters(tmp_path, chromium):
    path = tmp_path / "mix.html"
    path.write_text(render(compared(GPU_MIX), "html"), encoding="utf-8")

    def use_table(page):
        page.fill("input.filter", "gemm")
        page.wait_for_timeout(100)
        use_table.visible = _table_rows(page, "kernels-table",
                                        ".filter(r => r.style.display !== 'none').length")
        page.fill("input.filter", "")
        page.click("#kernels-table th:nth-child(2)")  # Count, descending
        use_table.counts = _table_rows(
            page, "kernels-table", ".map(r => parseFloat(r.cells[1].getAttribute('data-v')))")

    load = load_page(path, actions=use_table, chromium=chromium)
    assert load.errors == []
    (gemm,) = sql(GPU_MIX, "SELECT count(DISTINCT s.value) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                           "k JOIN StringIds s ON s.id = k.demangledName "
                           "WHERE lower(s.value) LIKE '%gemm%'")[0]
    assert use_table.visible == gemm
    assert use_table.counts == sorted(use_table.counts, reverse=True)


@pytest.mark.browser
@needs_browser
def test_user_timings_in_chromium(seed, seed_page, tmp_path, chromium):
    shot = tmp_path / "timings.png"
    load = load_page(seed_page, shot, element="#u0", chromium=chromium)
    assert load.errors == [] and load.requests == [] and load.dialogs == []
    facts = load.facts
    groups = seed.user_timings
    assert facts["failed"] == 0
    assert facts["charts_by_kind"]["user"] == facts["user_drawn"] == len(groups)
    assert facts["timeline_drawn"] == facts["timeline_charts"] == 2 * len(groups)
    assert facts["table_rows"]["user-timings-table"] == len(groups)
    text = facts["text"]
    assert "Your CUDA-event timings" in text
    for g in groups.itertuples():
        assert g.label in text and g.verdict in text
    assert shot.stat().st_size > 20_000


def test_the_l2_legend_is_the_same_in_every_process():
    """The iterations chart lists flushed, then hot, then other L2 states, whatever order
    a set of them takes: that order follows each string's hash, set anew in each process
    (PYTHONHASHSEED), and the page differed from run to run."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("from nsyswrap.render import charts\n"
            "rows = [{'iteration': i, 'cache': c, 'event_us': 1.0, 'kernels_us': 1.0}\n"
            "        for i, c in enumerate(['hot', 'flushed', 'unknown'])]\n"
            "print(charts.iterations(rows, {})['layer'][0]['encoding']['shape']['legend']"
            "['values'])\n")
    root = Path(__file__).resolve().parent.parent
    legends = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, cwd=root,
                              env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout.strip()
               for seed in range(4)}
    assert legends == {"['flushed', 'hot', 'unknown']"}
