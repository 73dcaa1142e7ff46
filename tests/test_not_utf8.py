"""Names that are not UTF-8. tests/data/cpu2022_not_utf8.sqlite is a real nsys 2022.4 capture
of scripts/workloads/cpu_not_utf8.c (scripts/make_fixtures_cpu.sh), a C program that passes
NVTX Latin-1 text (a range, a domain, a registered string, a mark, its thread's name) and a
UTF-8 name cut mid-character; nsys stores the bytes as they came. Every command reads them
with U+FFFD in place of the bytes that are not UTF-8, and says so in a note. The expected
names come from the export's bytes through sqlite3, decoded here."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CPU_2022, DATA, GPU_MIX, needs_nsys

import nsyswrap
from nsyswrap.cli import main
from nsyswrap.read.loader import load

NOT_UTF8 = DATA / "cpu2022_not_utf8.sqlite"
WORKLOAD = Path(__file__).parents[1] / "scripts" / "workloads" / "cpu_not_utf8.c"
NVTX_INCLUDE = "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nvtx/include"
NOTE = "name(s) were not UTF-8"


def raw_rows(path: Path, query: str) -> list[tuple]:
    """A query's rows with text as the bytes the export holds."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = bytes
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def range_labels(path: Path) -> dict[str, int]:
    """domain:name (the default domain without a prefix) -> instances, from SQL, each name
    decoded with U+FFFD."""
    rows = raw_rows(path, """
        SELECT d.text, coalesce(e.text, s.value) FROM NVTX_EVENTS AS e
        LEFT JOIN StringIds AS s ON s.id = e.textId
        LEFT JOIN NVTX_EVENTS AS d ON d.eventType = 75 AND d.domainId = e.domainId
        WHERE e.eventType IN (59, 60) AND e."end" IS NOT NULL""")
    labels: dict[str, int] = {}
    for domain, name in rows:
        text = name.decode("utf-8", "replace")
        if domain is not None:
            text = domain.decode("utf-8", "replace") + ":" + text
        labels[text] = labels.get(text, 0) + 1
    return labels


def not_utf8(path: Path) -> set[bytes]:
    """The distinct names the report's reader reads that are not UTF-8: NVTX text (its own,
    or registered in StringIds), thread and process names."""
    values = raw_rows(path, """
        SELECT text FROM NVTX_EVENTS UNION SELECT s.value FROM NVTX_EVENTS AS e
        JOIN StringIds AS s ON s.id = e.textId UNION SELECT s.value FROM ThreadNames AS t
        JOIN StringIds AS s ON s.id = t.nameId UNION SELECT name FROM PROCESSES""")
    bad = set()
    for (value,) in values:
        try:
            value is None or value.decode("utf-8")
        except UnicodeDecodeError:
            bad.add(value)
    return bad


def compare(*args) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["compare", *map(str, args)])
    assert "internal error" not in res.output, res.output
    return res.exit_code, res.output


def test_the_fixture_holds_what_the_workload_passed():
    bad = not_utf8(NOT_UTF8)
    assert {b"caf\xe9", b"na\xc3", b"d\xe9p\xf4t", b"r\xe9gl\xe9", b"march\xe9",
            b"th\xe9\xe2tre"} == bad
    assert range_labels(NOT_UTF8)["caf\ufffd"] == 4


def test_json_shows_every_range_with_replacement_and_says_how_many():
    code, out = compare(NOT_UTF8, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    labels = {(r["domain"] + ":" if r["domain"] else "") + r["name"]: r["count"]
              for r in doc["ranges"]}
    assert labels == range_labels(NOT_UTF8)
    assert [m["text"] for m in doc["marks"]] == ["march\ufffd"]
    note = next(n for n in doc["report"]["notes"] if NOTE in n)
    assert note.startswith(f"{len(not_utf8(NOT_UTF8))} {NOTE}")
    assert "caf\\xe9" in note  # the bytes the program passed, as Python writes them


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "html", "trace"])
def test_every_format_shows_the_names(tmp_path, fmt):
    out = tmp_path / f"out.{fmt}"
    code, said = compare(NOT_UTF8, "--format", fmt, "-o", out)
    assert code == 0, said
    text = out.read_text(encoding="utf-8")
    if fmt == "trace":
        text = json.dumps(json.loads(text), ensure_ascii=False)
    assert "caf\ufffd" in text and "na\ufffd" in text
    if fmt in ("table", "markdown", "html"):
        assert NOTE in text


def test_the_threads_name_is_decoded():
    """Thread names come through sqlite3 (the ranges' names through the ADBC driver)."""
    (tid, name), = raw_rows(NOT_UTF8, "SELECT t.globalTid, s.value FROM ThreadNames AS t "
                                      "JOIN StringIds AS s ON s.id = t.nameId "
                                      "WHERE s.value = CAST(X'7468E9E2747265' AS TEXT)")
    assert name.decode("utf-8", "replace") == "th\ufffd\ufffdtre"
    assert load(NOT_UTF8).info.threads[tid] == "th\ufffd\ufffdtre"


def test_blobs_where_names_belong_read_as_their_text(tmp_path):
    """Another tool rewrote text as BLOBs: the first ranges' names (the ADBC driver then makes
    the column binary), a registered string and the thread's name (sqlite3)."""
    edited = tmp_path / "blobs.sqlite"
    shutil.copy(NOT_UTF8, edited)
    con = sqlite3.connect(edited)
    con.execute("UPDATE NVTX_EVENTS SET text = CAST(text AS BLOB) WHERE text = 'good step'")
    con.execute("UPDATE StringIds SET value = CAST(value AS BLOB) WHERE id IN "
                "(SELECT textId FROM NVTX_EVENTS UNION SELECT nameId FROM ThreadNames)")
    con.commit()
    con.close()
    assert raw_rows(edited, "SELECT count(*) FROM NVTX_EVENTS WHERE typeof(text) = 'blob'") \
        == [(4,)]
    code, out = compare(edited, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    labels = {(r["domain"] + ":" if r["domain"] else "") + r["name"]: r["count"]
              for r in doc["ranges"]}
    assert labels == range_labels(NOT_UTF8)
    assert any(n.startswith(f"{len(not_utf8(NOT_UTF8))} {NOTE}") for n in doc["report"]["notes"])


@pytest.mark.parametrize("streamed", [True, False])
def test_a_kernel_name_that_is_not_utf8(tmp_path, streamed):
    """Kernel names come by id through sqlite3: the streamed analysis reads them after its
    operations, the loader before; the note counts them either way. GPU_MIX's commonest
    kernel's name with a Latin-1 byte at its end (no GPU here to make such a capture)."""
    edited = tmp_path / "kernel.sqlite"
    shutil.copy(GPU_MIX, edited)
    con = sqlite3.connect(edited)
    (name_id, name), = con.execute("""SELECT s.id, s.value FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
        JOIN StringIds AS s ON s.id = k.demangledName
        GROUP BY s.id ORDER BY count(*) DESC LIMIT 1""").fetchall()
    con.execute("UPDATE StringIds SET value = value || X'E9' WHERE id = ?", (name_id,))
    con.commit()
    con.close()
    kernels = raw_rows(edited, f"SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                               f"WHERE demangledName = {name_id}")[0][0]
    c = nsyswrap.compare(edited, operations=not streamed)
    mine = c.analysis.kernels[c.analysis.kernels["name"] == name + "\ufffd"]
    assert mine["count"].tolist() == [kernels]
    assert any(n.startswith(f"1 {NOTE}") for n in c.info.notes), c.info.notes


def test_compare_of_a_folder_with_one_such_report(tmp_path):
    folder = tmp_path / "reports"
    folder.mkdir()
    for report in (CPU_2022, NOT_UTF8):
        shutil.copy(report, folder / report.name)
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", folder, "--format",
                           "json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert sorted(Path(r["source"]).name for r in doc["ranks"]) == sorted(
        [CPU_2022.name, NOT_UTF8.name])
    assert any(n.startswith(f"{folder / NOT_UTF8.name}: {len(not_utf8(NOT_UTF8))} {NOTE}")
               for n in doc["notes"])


def test_diff_with_such_a_report(tmp_path):
    res = CliRunner().invoke(main, ["diff", str(CPU_2022), str(NOT_UTF8), "--format", "json",
                                    "--jobs", "1"])
    assert res.exit_code == 0, res.output
    added = {r["name"] for r in json.loads(res.output)["rows"] if r["verdict"] == "added"}
    assert {"caf\ufffd", "na\ufffd", "d\ufffdp\ufffdt:r\ufffdgl\ufffd"} <= added


@pytest.mark.nsys
@needs_nsys
def test_run_of_the_c_program_end_to_end(tmp_path):
    exe = tmp_path / "cpu_not_utf8"
    subprocess.run(["gcc", "-O1", "-o", exe, WORKLOAD, f"-I{NVTX_INCLUDE}", "-ldl", "-lpthread"],
                   check=True)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", out, "--trace", "nvtx",
                           "--", exe], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "caf\ufffd" in proc.stdout and NOTE in proc.stdout
    doc = json.loads((out / "analysis.json").read_text())
    labels = {(r["domain"] + ":" if r["domain"] else "") + r["name"]: r["count"]
              for r in doc["ranges"]}
    assert labels == range_labels(out / "cpu_not_utf8.sqlite")
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "caf\ufffd" in page and NOTE in page
