"""The pages for many reports (ranks side by side, a diff): one offline file like the
single-report page, escaped, and drawn in headless Chromium. Expected counts come from SQL
on the fixtures or from the JSON document of the same data."""

from __future__ import annotations

import html
import json
import re
import shutil

import pytest
from browser import load_page
from click.testing import CliRunner
from conftest import CPU_HOSTILE, DATA, needs_browser, sql
from test_html import HOSTILE_NAMES, _outside_vendor

from nsyswrap.cli import main
from nsyswrap.multi import compare_ranks, diff_reports
from nsyswrap.render.multi import render_diff, render_ranks
from nsyswrap.render.multi.document import diff_document, ranks_document

STRAGGLER = [DATA / f"h200x2_ddp_straggler.rank{r}.sqlite" for r in (0, 1)]
BASE = DATA / "h100_diff_base.sqlite"
AGAIN = DATA / "h100_diff_base_again.sqlite"
SLOW = DATA / "h100_diff_slow.sqlite"
HOSTILE_FILE = "<img src=x onerror=alert(1)>.rank0.sqlite"


def _specs(page: str) -> dict:
    return json.loads(re.search(r'id="nsyswrap-specs">(.*?)</script>', page, re.S).group(1))


def _rows(page: str, table_id: str) -> int:
    table = re.search(rf'<table class="sortable" id="{table_id}">.*?<tbody>(.*?)</tbody>',
                      page, re.S)
    return table.group(1).count("<tr") if table else 0


def _kernel_processes(path) -> int:
    return sql(path, "SELECT count(DISTINCT globalPid) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]


@pytest.fixture(scope="module")
def straggler():
    return compare_ranks(STRAGGLER, jobs=1)


@pytest.fixture(scope="module")
def slow():
    return diff_reports(BASE, SLOW, jobs=1)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The hostile-name export as two ranks, one of them in a file named like markup."""
    folder = tmp_path_factory.mktemp("hostile")
    shutil.copyfile(CPU_HOSTILE, folder / HOSTILE_FILE)
    shutil.copyfile(CPU_HOSTILE, folder / "b.rank1.sqlite")
    return folder


def test_ranks_page_is_one_offline_file_with_the_documents_rows(straggler):
    page = render_ranks(straggler, "html")
    doc = ranks_document(straggler)
    assert len(page.encode()) < 2 * 2**20
    ours = _outside_vendor(page)
    assert page.count("<script>!function") == 3  # the Vega bundles, inlined
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", ours)
    ranks = sum(_kernel_processes(p) for p in STRAGGLER)
    assert len(doc["ranks"]) == ranks == 2
    assert _rows(page, "ranks-table") == _rows(page, "steps-table") == ranks
    assert _rows(page, "families-table") == len({f["family"] for f in doc["families"]})
    assert _rows(page, "collectives-table") == len(doc["collectives"])
    assert page.count('<article class="finding') == len(doc["findings"]) == 2
    specs = _specs(page)
    # One stacked bar per rank (five parts each), a tick per rank for the host step.
    bars, host = (layer["data"]["values"] for layer in specs["rank-steps"]["layer"])
    assert sorted({b["rank_label"] for b in bars}) == [f"rank {r['rank']}" for r in doc["ranks"]]
    assert len(bars) == 5 * ranks and len(host) == ranks
    # Grouped family bars: one bar per (family, rank) with a value.
    fam = specs["families-work_median_ns"]["data"]["values"]
    assert len(fam) == len(doc["families"])
    # The straggler's evidence per rank: one column per rank.
    straggle = re.search(r'<article class="finding warning" id="f0">(.*?)</article>', page,
                         re.S).group(1)
    assert "<th>rank 0</th><th>rank 1</th>" in straggle and "STRAGGLER" in straggle
    # How ranks were identified is said, per rank and in the header.
    for r in doc["ranks"]:
        assert html.escape(r["identified_by"]) in page


def test_ranks_page_links_each_ranks_own_page(tmp_path, straggler):
    runs = tmp_path / "runs"
    runs.mkdir()
    copies = []
    for src in STRAGGLER:
        copies.append(runs / src.name)
        shutil.copyfile(src, copies[-1])
    # What `nsyswrap run --ranks` leaves beside rank 0's report; none beside rank 1's.
    own = runs / f"report.{STRAGGLER[0].name.removesuffix('.sqlite')}.html"
    own.write_text("<!DOCTYPE html>", encoding="utf-8")
    out = tmp_path / "pages" / "ranks.html"
    out.parent.mkdir()
    res = CliRunner().invoke(main, ["compare", *map(str, copies), "-j", "1", "--format",
                                    "html", "-o", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text(encoding="utf-8")
    links = re.findall(r'<td class="t"><a href="([^"]+)">', page)
    assert links == ["../runs/" + own.name]
    assert (out.parent / html.unescape(links[0])).resolve() == own.resolve()
    assert "1 found beside the reports" in page


def test_diff_page_shows_comparability_first_and_every_row(slow):
    page = render_diff(slow, "html")
    doc = diff_document(slow)
    assert len(page.encode()) < 2 * 2**20
    level = doc["comparability"]["level"]
    banner = re.search(r'<div class="banner (\S+)" id="comparability"[^>]*><h2>(.*?)</h2>',
                       page)
    assert banner.group(1) == "caution" and banner.group(2) == level.capitalize()
    assert page.index('id="comparability"') < page.index('id="changes"')
    added = [r for r in doc["rows"] if r["verdict"] == "added"]
    removed = [r for r in doc["rows"] if r["verdict"] == "removed"]
    assert _rows(page, "diff-table") == len(doc["rows"]) - len(added) - len(removed)
    assert _rows(page, "added-table") == len(added) == 2
    assert _rows(page, "removed-table") == len(removed) == 0
    # Interval bars: one chart per kind, a row for each matched row with a change.
    specs = _specs(page)
    for kind in ("range", "benchmark", "kernel"):
        rows = [r for r in doc["rows"] if r["kind"] == kind and r["change"] is not None]
        band, zero, marks = specs[f"changes-{kind}"]["layer"]
        assert len(marks["data"]["values"]) == len(rows)
        assert band["data"]["values"] == [{"change_pct": -2.0, "high_pct": 2.0}]  # the floor
        assert len({v["label"] for v in marks["data"]["values"]}) == len(rows)  # no merging
    appeared = doc["findings"]["appeared"]
    assert page.count('<article class="finding') == len(appeared) == 1
    # The counts by verdict, as the JSON has them.
    for verdict, n in doc["verdicts"].items():
        assert f">{n} {html.escape(verdict)}</span>" in page


def test_identical_builds_page_shows_no_slower_or_faster():
    page = render_diff(diff_reports(BASE, AGAIN, jobs=1), "html")
    assert not re.search(r'<tr class="(slower|faster)"', page)
    assert '<span class="pill slower">' not in page


def test_hostile_names_are_escaped_on_both_pages(hostile):
    ranks = render_ranks(compare_ranks(sorted(hostile.glob("*.sqlite")), jobs=1), "html")
    diff = render_diff(diff_reports(hostile / HOSTILE_FILE, hostile / "b.rank1.sqlite",
                                    jobs=1), "html")
    for page in (ranks, diff):
        ours = _outside_vendor(page)
        for name in HOSTILE_NAMES[:3]:
            assert name not in ours, name
        assert "<img" not in ours
        assert html.escape(HOSTILE_NAMES[0]) in ours
        data = re.search(r'id="nsyswrap-specs">(.*?)</script>', page, re.S).group(1)
        assert "<" not in data and ">" not in data
    assert html.escape(HOSTILE_FILE) in ranks  # the file name, as text


def test_cli_html_for_ranks_and_diff(tmp_path):
    for args in (["compare", *map(str, STRAGGLER)], ["diff", str(BASE), str(SLOW)]):
        out = tmp_path / f"{args[0]}.html"
        res = CliRunner().invoke(main, [*args, "-j", "1", "--format", "html", "-o", str(out)])
        assert res.exit_code == 0, res.output
        assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
        assert res.stderr.strip() == f"nsyswrap: wrote html to {out}"
    res = CliRunner().invoke(main, ["compare", *map(str, STRAGGLER), "--format", "trace",
                                    "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 2 and "--format trace shows one report" in res.stderr


# -- in a browser ----------------------------------------------------------------------------

@pytest.mark.browser
@needs_browser
def test_ranks_page_in_chromium(tmp_path, straggler, chromium):
    path = tmp_path / "ranks.html"
    path.write_text(render_ranks(straggler, "html"), encoding="utf-8")
    load = load_page(path, tmp_path / "ranks.png", chromium=chromium)
    assert load.errors == [] and load.requests == [] and load.dialogs == []
    facts, doc = load.facts, ranks_document(straggler)
    assert facts["failed"] == 0
    assert facts["charts_by_kind"] == {"ranks": 1, "families": 2}
    assert facts["drawn_by_kind"] == {"ranks": 1, "families": 2, "interval": 0}
    assert facts["findings"] == len(doc["findings"])
    assert facts["table_rows"]["steps-table"] == len(doc["ranks"])
    assert facts["table_rows"]["collectives-table"] == len(doc["collectives"])


@pytest.mark.browser
@needs_browser
def test_diff_page_in_chromium(tmp_path, slow, chromium):
    path = tmp_path / "diff.html"
    path.write_text(render_diff(slow, "html"), encoding="utf-8")

    def filter_rows(page):
        page.fill('input.filter[data-table="diff-table"]', "nsyswrap:")
        page.wait_for_timeout(100)
        filter_rows.visible = page.evaluate(
            "() => Array.from(document.querySelectorAll('#diff-table tbody tr'))"
            ".filter(r => r.style.display !== 'none').length")

    load = load_page(path, actions=filter_rows, chromium=chromium)
    assert load.errors == [] and load.requests == [] and load.dialogs == []
    doc = diff_document(slow)
    kinds = {r["kind"] for r in doc["rows"] if r["change"] is not None}
    assert load.facts["drawn_by_kind"]["interval"] == len(kinds) == 3
    assert load.facts["table_rows"]["diff-table"] == sum(
        r["verdict"] not in ("added", "removed") for r in doc["rows"])
    assert filter_rows.visible == sum(r["name"].startswith("nsyswrap:") and r["verdict"] not in
                                      ("added", "removed") for r in doc["rows"])


@pytest.mark.browser
@needs_browser
def test_hostile_names_show_as_text_in_chromium(tmp_path, hostile, chromium):
    for name, page in (
            ("ranks", render_ranks(compare_ranks(sorted(hostile.glob("*.sqlite")), jobs=1),
                                   "html")),
            ("diff", render_diff(diff_reports(hostile / HOSTILE_FILE,
                                              hostile / "b.rank1.sqlite", jobs=1), "html"))):
        path = tmp_path / f"{name}.html"
        path.write_text(page, encoding="utf-8")
        load = load_page(path, chromium=chromium)
        assert load.dialogs == [] and load.errors == [] and load.requests == []
        assert load.facts["images"] == 0 and load.facts["failed"] == 0
        assert HOSTILE_NAMES[0] in load.facts["text"]
        assert HOSTILE_NAMES[1] in load.facts["text"]

