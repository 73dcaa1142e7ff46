"""Reports are read without creating anything beside them, whatever their journal mode:
WAL-mode files (read immutable, or from a private copy when their log holds changes, or
through SQLite's WAL protocol while another process has them open), on a read-only mount,
and a file another process is writing is waited for, then named."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import contextmanager

import pytest
from conftest import CPU_2022, GPU_MIX, sql

import nsyswrap
from nsyswrap.common.errors import BadInputError

KERNELS = "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL"
RANGES = "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) AND end IS NOT NULL"


def _listing(folder):
    """Every file in `folder` with its size and modification time."""
    return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir())


def _wal_copy(src, folder):
    """A copy of a fixture switched to WAL mode: alone in `folder` once the switching
    connection closed (SQLite removes its -wal and -shm then)."""
    folder.mkdir(parents=True, exist_ok=True)
    dst = folder / src.name
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    assert con.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    con.close()
    assert dst.read_bytes()[18] == 2 and os.listdir(folder) == [dst.name]
    return dst


# A writer that commits into the log and dies before any checkpoint: the -wal holds the
# change, the file does not (the state a crashed tool leaves).
_DIE_AFTER_COMMIT = """
import os, sqlite3, sys
con = sqlite3.connect(sys.argv[1])
con.execute("PRAGMA wal_autocheckpoint=0")
con.execute("UPDATE StringIds SET value = value || '_logged' WHERE id IN "
            "(SELECT textId FROM NVTX_EVENTS WHERE textId IS NOT NULL)")
con.commit()
os._exit(0)
"""


def _logged_names(path, folder):
    """The range names as the file and its log hold them, read by plain sqlite3 from a copy
    of both (the reference: SQLite replays the log of its own copy)."""
    folder.mkdir()
    for suffix in ("", "-wal"):
        shutil.copyfile(f"{path}{suffix}", folder / f"r.sqlite{suffix}")
    con = sqlite3.connect(folder / "r.sqlite")
    try:
        return {name for (name,) in con.execute(
            "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS AS e "
            "LEFT JOIN StringIds AS s ON s.id = e.textId "
            "WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL")}
    finally:
        con.close()


def test_wal_report_read_immutable_nothing_beside_it(tmp_path):
    path = _wal_copy(GPU_MIX, tmp_path / "in")
    before = _listing(path.parent)
    report = nsyswrap.load(path, cache_dir=tmp_path / "cache")
    assert _listing(path.parent) == before  # no -wal, no -shm
    assert len(report.kernels) == sql(GPU_MIX, KERNELS)[0][0]
    assert len(report.ranges) == sql(GPU_MIX, RANGES)[0][0]
    assert not (tmp_path / "cache").exists()  # no copy was needed


def test_wal_log_with_changes_is_read_from_a_private_copy(tmp_path):
    path = _wal_copy(CPU_2022, tmp_path / "in")
    subprocess.run([sys.executable, "-c", _DIE_AFTER_COMMIT, str(path)], check=True)
    assert (path.parent / f"{path.name}-wal").stat().st_size > 32  # the change is in the log
    expected = _logged_names(path, tmp_path / "reference")
    assert any(n.endswith("_logged") for n in expected)
    before = _listing(path.parent)
    report = nsyswrap.load(path, cache_dir=tmp_path / "cache")
    assert _listing(path.parent) == before
    assert set(report.ranges["name"].astype(str)) == expected
    assert any("private copy" in n for n in report.info.notes)
    assert list((tmp_path / "cache" / "copies").iterdir()) == []  # removed after reading


@contextmanager
def _held_open(path, write: bool):
    """Another process that committed a change into the log and keeps `path` open (no
    checkpoint), reading; or in a write transaction."""
    code = (_DIE_AFTER_COMMIT.replace("os._exit(0)", "")
            + ("con.execute('BEGIN IMMEDIATE')\n" if write else "")
            + "print('open', flush=True)\n"
            "import time; time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "open"
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("write", [False, True], ids=["reader", "writer"])
def test_wal_report_open_elsewhere_is_read_through_the_wal_protocol(tmp_path, write):
    """The log's committed change is read (immutable=1 would read the file alone), and
    nothing beyond that process's own -wal and -shm appears."""
    path = _wal_copy(CPU_2022, tmp_path / "in")
    expected = {name for (name,) in sql(CPU_2022, (
        "SELECT coalesce(e.text, s.value || '_logged') FROM NVTX_EVENTS AS e "
        "LEFT JOIN StringIds AS s ON s.id = e.textId "
        "WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL"))}
    with _held_open(path, write):
        before = {name for name, _, _ in _listing(path.parent)}
        report = nsyswrap.load(path, cache_dir=tmp_path / "cache")
        assert {name for name, _, _ in _listing(path.parent)} == before
    assert set(report.ranges["name"].astype(str)) == expected
    assert not (tmp_path / "cache").exists()


def test_a_writer_is_waited_for_with_a_message(report_copy, monkeypatch):
    """A file in rollback mode (as nsys exports) that another process is writing: waited
    for, the wait said as a step; held past the wait, a one-line error naming the pid."""
    from nsyswrap.common.progress import Progress
    from nsyswrap.read import database

    # A wait of 10 × 0.25 s (not 0.5 s): a writer for half a second is waited for, one
    # for 30 s is not.
    monkeypatch.setattr(database, "LOCKED_WAIT_S", 0.25)

    class Recorder(Progress):
        def __init__(self):
            self.steps = []

        @contextmanager
        def step(self, description, total=None):
            self.steps.append(description)
            yield lambda n=1: None

    path = report_copy(CPU_2022)
    code = ("import sqlite3, sys, time\n"
            "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "con.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n"
            "con.execute('ROLLBACK')\n")
    for hold_s in ("0.5", "30"):
        holder = subprocess.Popen([sys.executable, "-c", code, str(path), hold_s],
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "locked"
        try:
            rec = Recorder()
            if hold_s == "0.5":
                assert len(nsyswrap.load(path, progress=rec).ranges) > 0
            else:
                with pytest.raises(BadInputError, match=f"locked by another process "
                                                        f"\\(pid {holder.pid}"):
                    nsyswrap.load(path, progress=rec)
            assert rec.steps[0] == f"waiting for {path.name}: process {holder.pid} is writing it"
        finally:
            holder.kill()
            holder.wait()
    assert os.listdir(path.parent) == [path.name]


def test_reports_on_a_read_only_mount(read_only_mount, tmp_path):
    """The same report in rollback mode, in WAL mode, and in WAL mode with changes in its
    log, on a read-only file system: each reads, through the CLI, exit 0, with the right
    numbers, and nothing is created there."""
    folder, remount_read_only = read_only_mount
    rollback = folder / "rollback" / GPU_MIX.name
    rollback.parent.mkdir()
    shutil.copyfile(GPU_MIX, rollback)
    wal = _wal_copy(GPU_MIX, folder / "wal")
    logged = _wal_copy(CPU_2022, folder / "logged")
    subprocess.run([sys.executable, "-c", _DIE_AFTER_COMMIT, str(logged)], check=True)
    (logged.parent / f"{logged.name}-shm").unlink()  # as a copy of the pair would come
    expected = _logged_names(logged, tmp_path / "reference")
    remount_read_only()
    before = {p: _listing(p.parent) for p in (rollback, wal, logged)}
    env = {**os.environ, "NSYSWRAP_CACHE": str(tmp_path / "cache")}
    for path in (rollback, wal, logged):
        proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(path),
                               "--format", "json"], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        doc = json.loads(proc.stdout)
        if path is logged:
            assert {r["name"] for r in doc["ranges"]} <= expected
            assert any(n.endswith("_logged") for n in (r["name"] for r in doc["ranges"]))
        else:
            assert doc["report"]["counts"]["kernels"] == sql(GPU_MIX, KERNELS)[0][0]
        assert _listing(path.parent) == before[path]
