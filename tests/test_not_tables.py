"""Exports whose tables are not tables. nsys writes plain tables; an edited export may hold a
view (a recursive one never ends), a virtual table or a generated column where nsyswrap
reads one, and reading any of them runs the SQL it is made of. Each is refused in one line,
exit 2, before a read starts (database._plain_tables); a trigger, which runs only on a
write, is left alone. The edits are made here, on copies of a real capture."""

from __future__ import annotations

import ast
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CPU_2022, CPU_HOSTILE, DATA, file_digest, sql

from nsyswrap.read.queries import READ_TABLES

PACKAGE = Path(__file__).parents[1] / "nsyswrap"
# A command that hangs before the fix must fail the test, not hold the suite: the refusal
# takes well under a second.
TIMEOUT_S = 30
ENDLESS = "WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r)"

EDITS = {
    # The issue's case: the ranges' table as an endless view of the real one's rows.
    "recursive view": ("NVTX_EVENTS is a view", f"""
        ALTER TABLE NVTX_EVENTS RENAME TO nvtx_kept;
        CREATE VIEW NVTX_EVENTS AS {ENDLESS} SELECT e.* FROM r, nvtx_kept AS e"""),
    # Read through sqlite3 (thread names) and joined by the ranges' Arrow read.
    "recursive view, lower case": ("stringids is a view", f"""
        ALTER TABLE StringIds RENAME TO strings_kept;
        CREATE VIEW stringids AS {ENDLESS} SELECT s.* FROM r, strings_kept AS s"""),
    "virtual table": ("PROCESSES is a virtual table", """
        DROP TABLE PROCESSES;
        CREATE VIRTUAL TABLE PROCESSES USING fts5(globalPid, pid, name)"""),
    # A column the reader reads, computed on each read: here 100 MB of zeros a row.
    "generated column": ("ThreadNames.globalTid is a generated column", """
        ALTER TABLE ThreadNames RENAME TO names_kept;
        CREATE TABLE ThreadNames (nameId INTEGER, tid INTEGER, globalTid INTEGER
            GENERATED ALWAYS AS (tid + 0 * length(zeroblob(100000000))) VIRTUAL);
        INSERT INTO ThreadNames (nameId, tid) SELECT nameId, globalTid FROM names_kept"""),
}


def edited(src: Path, folder: Path, script: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / src.name
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.executescript(script)
    con.close()
    return dst


def nsyswrap(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)],
                          capture_output=True, text=True, timeout=TIMEOUT_S)


@pytest.mark.parametrize("edit", list(EDITS))
def test_a_table_that_is_not_a_table_is_refused(tmp_path, edit):
    said, script = EDITS[edit]
    report = edited(CPU_2022, tmp_path, script)
    proc = nsyswrap("compare", report, "--format", "json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"nsyswrap: error: {report}: {said}")
    assert len(proc.stderr.splitlines()) == 1


def test_compare_of_a_folder_leaves_such_a_report_out(tmp_path):
    folder = tmp_path / "reports"
    edited(CPU_2022, folder, EDITS["recursive view"][1])
    shutil.copyfile(CPU_HOSTILE, folder / CPU_HOSTILE.name)
    proc = nsyswrap("compare", folder, "--format", "json")
    assert proc.returncode == 2  # a report was left out
    assert f'left out, not analysed: {folder / CPU_2022.name}: NVTX_EVENTS is a view' in \
        proc.stdout
    assert CPU_HOSTILE.name in proc.stdout


def test_a_trigger_is_left_alone(tmp_path):
    """A trigger runs on a write, and nothing here writes: the report reads as it was, and
    stays as it was."""
    report = edited(CPU_2022, tmp_path, """
        CREATE TRIGGER wipe AFTER INSERT ON NVTX_EVENTS BEGIN DELETE FROM StringIds; END""")
    before = file_digest(report)
    proc = nsyswrap("compare", report, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert file_digest(report) == before
    ranges = sql(report, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                         "AND \"end\" IS NOT NULL")[0][0]
    assert sum(r["count"] for r in json.loads(proc.stdout)["ranges"]) == ranges


def _tables_in_source() -> set[str]:
    """Every table name the package's SQL reads: the names after FROM and JOIN in its string
    literals, the values of its *_TABLE constants, and the names it looks up in
    `db.tables`."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(re.findall(r"\b(?:FROM|JOIN)\s+([A-Za-z_]\w*)", node.value))
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and any(
                    isinstance(t, ast.Name) and t.id.endswith("_TABLE") for t in node.targets):
                names.add(node.value.value)
            if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Attribute) and c.attr == "tables"
                    for c in node.comparators) and isinstance(node.left, ast.Constant):
                names.add(node.left.value)
    return names - {"sqlite_master"}  # the schema itself, read where the file is opened


def test_every_table_the_package_reads_is_checked():
    found = _tables_in_source()
    assert {"NVTX_EVENTS", "StringIds", "ThreadNames", "OSRT_API"} <= found
    assert found <= READ_TABLES, found - READ_TABLES


def test_every_fixture_is_plain_tables():
    """nsys's own exports, 2022.4 and 2025.3: no view, no virtual table anywhere."""
    for report in sorted(DATA.glob("*.sqlite")):
        kinds = sql(report, "SELECT DISTINCT type FROM sqlite_master WHERE type = 'view' OR "
                            "(type = 'table' AND rootpage = 0)")
        assert kinds == [], report
