"""The Python API: what `dir(nsyswrap)` shows, and a Comparison's repr, JSON, page and
notebook view, on the shipped demo report."""

from __future__ import annotations

import html
import json
import subprocess
import sys

import pytest
from conftest import DEMO, sql

import nsyswrap
from nsyswrap.common.errors import BadInputError


@pytest.fixture(scope="module")
def demo():
    return nsyswrap.compare(DEMO)


def test_dir_lists_the_lazy_names_without_loading_them():
    code = ("import sys, nsyswrap; names = dir(nsyswrap); "
            "print(sorted(n for n in names if not n.startswith('_'))); "
            "print(sorted(m for m in ('pandas', 'nvtx', 'nsyswrap.harness') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    names = eval(out[0])
    assert {"annotate", "benchmark", "compare", "load", "mark", "Comparison", "Report",
            "Thresholds", "BenchmarkResult"} <= set(names)
    assert not {"sys", "types", "importlib"} & set(names)
    assert eval(out[1]) == []  # dir() imported none of them


def test_repr_is_the_verdicts_in_a_few_lines(demo):
    text = repr(demo)
    lines = text.splitlines()
    assert len(lines) <= 14 and len(text) < 2000
    kernels = sql(DEMO, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert lines[0].startswith(f"<Comparison of {DEMO.name}: {kernels:,} kernels, ")
    assert all(f.code in lines[1] for f in demo.findings)
    assert lines[1].startswith(f"  findings ({len(demo.findings)}): ")
    shown = demo.benchmarks.head(5)
    for name, verdict in zip(shown["benchmark"], shown["verdict"], strict=True):
        assert any(line.startswith(f"  benchmark {name}: ") and line.endswith(f"; {verdict}")
                   for line in lines)
    if len(demo.benchmarks) > 5:
        assert f"... and {len(demo.benchmarks) - 5} more benchmarks" in text
    assert text.endswith(">") and str(demo) == text


def test_to_json_is_the_compare_document(demo, tmp_path):
    text = demo.to_json()

    def no_constants(name):
        raise AssertionError(f"{name} in strict JSON")

    doc = json.loads(text, parse_constant=no_constants)
    assert doc["schema"] == "nsyswrap.compare/1"
    cli = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(DEMO),
                          "--format", "json"], capture_output=True, text=True, check=True)
    assert json.loads(cli.stdout) == doc
    out = demo.to_json(tmp_path / "a.json")
    assert out == tmp_path / "a.json" and json.loads(out.read_text()) == doc
    assert [p.name for p in tmp_path.iterdir()] == ["a.json"]  # no temporary left
    with_rows = json.loads(demo.to_json(instances=True))
    assert len(with_rows["instances"]) == sql(DEMO, "SELECT count(*) FROM NVTX_EVENTS "
                                                    "WHERE eventType IN (59, 60)")[0][0]


def test_writing_over_the_report_is_refused(tmp_path):
    report = tmp_path / DEMO.name
    report.write_bytes(DEMO.read_bytes())
    c = nsyswrap.compare(report)
    before = report.read_bytes()
    for write in (c.to_json, c.save_html):
        with pytest.raises(BadInputError, match="never writes over its input"):
            write(report)
    assert report.read_bytes() == before


def test_save_html_is_the_whole_page_and_the_notebook_view_a_lighter_one(demo, tmp_path):
    page = demo.save_html(tmp_path / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and 'data-kind="timeline"' in page
    view = demo._repr_html_()
    assert view.startswith("<iframe") and "data-kind=&quot;timeline&quot;" not in view
    assert "Comparison.save_html(PATH)" in view and 'data-kind=&quot;benchmark&quot;' in view
    # The whole page in the iframe, as the notebook showed it: a fifth more.
    assert len(view) < 0.85 * len(html.escape(page, quote=True))
    assert demo._repr_html_() is view  # made once per Comparison
