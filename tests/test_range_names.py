"""A name per range: a program that names each NVTX range after what it serves (`request
81723`) makes a range family of every range. Every format lists or draws the heaviest
families and says what the rest add up to (`--instances` lists all), and what each format
and the analysis do per family stays a constant amount of Python: a step per family made
30 k names a 92 s run and a million names a 690 MB document.

The reports are scripts/make_range_report.py's, one range around each tiny kernel, named
`request <id>`; the expected values come from SQL on them."""

from __future__ import annotations

import cProfile
import json
import pstats
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CPU_2022, sql

import nsyswrap
from nsyswrap.comparison.document import MAX_RANGE_FAMILIES
from nsyswrap.render import renderer
from nsyswrap.render.html import MAX_FAMILY_BARS, MAX_FAMILY_TIMELINES, MAX_RANGE_ROWS

MAKE = Path(__file__).parents[1] / "scripts" / "make_range_report.py"
# Twice MAX_RANGE_FAMILIES names, so that the formats list half of them; more only costs time.
NAMES = 2000
RANGES = 2400  # the first 400 names name two ranges each


def make_report(path: Path, ranges: int, names: int) -> Path:
    """`ranges` ranges named with `names` names, a kernel and a cudaDeviceSynchronize in
    each (a SYNC_IN_RANGE finding for every family)."""
    subprocess.run([sys.executable, str(MAKE), str(path), "--kernels", str(ranges),
                    "--nesting", "1", "--names", str(names), "--syncs"], check=True,
                   capture_output=True)
    return path


@pytest.fixture(scope="module")
def named(tmp_path_factory) -> Path:
    """NAMES families of one or two ranges, each range's kernel of its own length (1-7 µs,
    every one different), so that the families' GPU time sets them apart."""
    path = make_report(tmp_path_factory.mktemp("names") / "names.sqlite", RANGES, NAMES)
    con = sqlite3.connect(path)
    con.execute('UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + 1000 '
                "+ (correlationId * 7919) % 6000")
    con.commit()
    con.close()
    return path


@pytest.fixture(scope="module")
def families(named) -> dict[str, tuple[int, int, int]]:
    """Per range name from SQL: (GPU busy, wall, instances). Each range owns the kernel
    its own thread launched inside it."""
    rows = sql(named, """
        WITH busy AS (
            SELECT n.rowid AS range_row, sum(k."end" - k.start) AS ns
            FROM NVTX_EVENTS n
            JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.globalTid = n.globalTid
                AND r.start >= n.start AND r."end" <= n."end"
            JOIN CUPTI_ACTIVITY_KIND_KERNEL k ON k.correlationId = r.correlationId
            GROUP BY n.rowid)
        SELECT n.text, coalesce(sum(b.ns), 0), sum(n."end" - n.start), count(*)
        FROM NVTX_EVENTS n LEFT JOIN busy b ON b.range_row = n.rowid
        GROUP BY n.text""")
    assert len(rows) == NAMES
    return {name: (busy, wall, count) for name, busy, wall, count in rows}


@pytest.fixture(scope="module")
def comparison(named):
    return nsyswrap.compare(named)


def heaviest(families: dict, n: int) -> list[str]:
    """The `n` heaviest names by GPU busy time, then wall time (SQL's numbers)."""
    return sorted(families, key=lambda k: (-families[k][0], -families[k][1]))[:n]


def check_heaviest(families: dict, listed: set[str]) -> None:
    """`listed` are heavier than every other family: by GPU busy, then wall time."""
    rest = set(families) - listed
    assert min((families[k][0], families[k][1]) for k in listed) >= max(
        (families[k][0], families[k][1]) for k in rest)


def test_json_lists_the_heaviest_families_and_what_the_rest_add_up_to(comparison, families):
    doc = json.loads(renderer("json")().render(comparison))
    listed = {r["name"] for r in doc["ranges"]}
    assert len(doc["ranges"]) == MAX_RANGE_FAMILIES
    check_heaviest(families, listed)
    for r in doc["ranges"]:
        busy, wall, count = families[r["name"]]
        assert (r["gpu_busy_total_ns"], r["cpu_total_ns"], r["count"]) == (busy, wall, count)
    rest = [v for k, v in families.items() if k not in listed]
    assert doc["ranges_left_out"] == {
        "families": NAMES - MAX_RANGE_FAMILIES, "count": sum(v[2] for v in rest),
        "cpu_total_ns": sum(v[1] for v in rest), "gpu_busy_total_ns": sum(v[0] for v in rest),
        "gpu_ops": sum(v[2] for v in rest), "kernels": sum(v[2] for v in rest)}


def test_instances_list_every_family(comparison, families):
    doc = json.loads(renderer("json")().render(comparison, instances=True))
    assert {r["name"]: (r["gpu_busy_total_ns"], r["cpu_total_ns"], r["count"])
            for r in doc["ranges"]} == families
    assert "ranges_left_out" not in doc
    assert len(doc["instances"]) == RANGES
    csv = renderer("csv")().render(comparison, section="ranges", instances=True)
    assert len(csv.splitlines()) == 1 + NAMES


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_text_tables_list_the_heaviest_families_and_say_how_many_are_left_out(
        comparison, families, fmt):
    text = renderer(fmt)().render(comparison, width=200)
    listed = set(re.findall(r"^\|? ?(request \d+) ", text, flags=re.M))
    assert len(listed) == MAX_RANGE_FAMILIES
    check_heaviest(families, listed)
    rest = [v for k, v in families.items() if k not in listed]
    said = " ".join(text.split())
    assert (f"The {MAX_RANGE_FAMILIES:,} range families with the most GPU busy time (then "
            f"wall time) of {NAMES:,}; the other {NAMES - MAX_RANGE_FAMILIES:,} "
            f"({sum(v[2] for v in rest):,} instances, ") in said
    assert "--instances lists every one" in said
    every = renderer(fmt)().render(comparison, width=200, instances=True)
    assert len(set(re.findall(r"^\|? ?(request \d+) ", every, flags=re.M))) == NAMES
    assert "left out" not in every


def test_csv_writes_the_heaviest_families_and_says_so(named, families, tmp_path):
    out = tmp_path / "ranges.csv"
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(named),
                           "--format", "csv", "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0].startswith("name,domain,names,")
    listed = {line.split(",")[0] for line in lines[1:]}
    assert len(listed) == len(lines) - 1 == MAX_RANGE_FAMILIES
    check_heaviest(families, listed)
    assert (f"csv ranges: the {MAX_RANGE_FAMILIES:,} range families with the most GPU busy "
            f"time (then wall time) of {NAMES:,}; the other {NAMES - MAX_RANGE_FAMILIES:,} "
            in proc.stderr)
    assert "--instances writes every one" in proc.stderr


def test_the_page_draws_the_busiest_families_and_counts_them_all(comparison, families):
    page = renderer("html")().render(comparison)
    top = heaviest(families, MAX_FAMILY_BARS + 1)
    # The busiest families are set apart by their GPU time, the boundary included.
    assert len({families[k][0] for k in top}) == len(top)
    drawn = re.findall(r'<div class="family" id="r\d+"><h3>([^<]*)</h3>', page)
    assert drawn == top[:MAX_FAMILY_BARS]
    timelines = re.findall(r'<div class="timeline" id="tl-r\d+"><h3>([^<·]*) ·', page)
    assert [t.strip() for t in timelines] == top[:MAX_FAMILY_TIMELINES]
    table = page[page.index('id="ranges-table"'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r"<tr><td>(request \d+)</td>", table)
    assert len(rows) == MAX_RANGE_ROWS
    check_heaviest(families, set(rows))
    for line in (f"of {NAMES:,}; <code>--format json --instances</code> lists every one",
                 f"Bars for the {MAX_FAMILY_BARS} busiest of {NAMES:,} range families",
                 f"Timelines of the {MAX_FAMILY_TIMELINES} busiest of {NAMES:,} range "
                 "families"):
        assert line in page


def test_findings_judge_the_heaviest_families_and_say_so(comparison, families):
    """Every family syncs: the findings judge the heaviest MAX_RANGE_FAMILIES, one
    SYNC_IN_RANGE each (30 k families judged one by one took 106 s), and the report's
    notes say how many there were."""
    judged = {f.range for f in comparison.findings if f.code == "SYNC_IN_RANGE"}
    assert len(judged) == MAX_RANGE_FAMILIES
    check_heaviest(families, judged)
    assert (f"{NAMES:,} range families of the user's: the findings judge the "
            f"{MAX_RANGE_FAMILIES:,} with the most GPU busy time (then wall time)"
            in comparison.info.notes)


def _calls(work) -> int:
    """Python function calls `work()` makes."""
    profile = cProfile.Profile()
    profile.enable()
    try:
        work()
    finally:
        profile.disable()
    return pstats.Stats(profile).total_calls


SCALES = (1100, 2200)  # names (and ranges): both more than the formats list
# Families judged by the findings while counting: at both scales that many, each a finding
# every format writes, the same at both (a constant, not per family); fewer than the 1,000
# of MAX_RANGE_FAMILIES so that the counting runs a third as long.
JUDGED_WHILE_COUNTING = 100


@pytest.fixture(scope="module")
def scaled(tmp_path_factory) -> list[Path]:
    folder = tmp_path_factory.mktemp("scaled")
    return [make_report(folder / f"names_{n}.sqlite", n, n) for n in SCALES]


@pytest.fixture
def fewer_judged(monkeypatch) -> None:
    """JUDGED_WHILE_COUNTING families judged, where the analysis and the document read the
    cap."""
    import nsyswrap.analysis.result
    import nsyswrap.comparison.document

    for module in (nsyswrap.analysis.result, nsyswrap.comparison.document):
        monkeypatch.setattr(module, "MAX_RANGE_FAMILIES", JUDGED_WHILE_COUNTING)


def per_family(counts: list[dict[str, int]]) -> dict[str, float]:
    """Python calls per range family added between the two SCALES."""
    return {k: (counts[1][k] - counts[0][k]) / (SCALES[1] - SCALES[0]) for k in counts[0]}


def test_work_per_range_family_is_a_constant_amount_of_python(scaled, fewer_judged):
    """The analysis and every format make at most a few Python calls per range family, so
    that the Python work grows with the report, not with names × instances: 2,200 names
    against 1,100, in calls (not seconds: deterministic on a busy machine). A Python step
    per family costs 20 to 1,800 calls each."""
    warm = nsyswrap.compare(CPU_2022)  # imports and first-use set-up, not counted
    formats = ("json", "table", "markdown", "csv", "html")  # trace: an event per range
    for fmt in formats:
        renderer(fmt)().render(warm)
    counts = []
    for path in scaled:
        held = {}
        got = {"compare": _calls(lambda path=path, held=held: held.update(
            c=nsyswrap.compare(path)))}
        for fmt in formats:
            got[fmt] = _calls(lambda fmt=fmt, c=held["c"]: "".join(renderer(fmt)().pieces(c)))
        counts.append(got)
    assert all(v < 10 for v in per_family(counts).values()), sorted(per_family(counts).items())


def test_ranks_side_by_side_work_per_range_family_is_a_constant_amount_of_python(
        scaled, fewer_judged):
    """Two ranks of a name per range: what the analysis of `compare R1 R2` adds per family
    stays a few Python calls (a pivot per family for STRAGGLER, a frame per family for the
    steps, each thousands; 272 s for two ranks of 30 k names). Its document lists every
    family of every rank, as rows: not counted here."""
    from nsyswrap.multi import compare_ranks

    counts = []
    for path in scaled:
        other = path.with_name(f"other_{path.name}")
        other.write_bytes(path.read_bytes())
        counts.append({"ranks": _calls(lambda path=path, other=other: compare_ranks(
            [path, other], jobs=1))})
    assert per_family(counts)["ranks"] < 10, per_family(counts)
