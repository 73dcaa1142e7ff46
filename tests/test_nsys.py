"""Reading a .nsys-rep: exported into the cache with nsys, never beside the original."""

from __future__ import annotations

import os

import pytest
from conftest import CPU_2022, CPU_2022_REP, file_digest, needs_nsys, sql

import nsyswrap
from nsyswrap.common import nsys as nsys_mod
from nsyswrap.common.errors import BadInputError


@needs_nsys
def test_rep_exported_to_cache_and_original_untouched(report_copy, tmp_path):
    rep = report_copy(CPU_2022_REP)
    before = file_digest(rep)
    cache = tmp_path / "cache"
    r = nsyswrap.load(rep, cache_dir=cache)
    assert file_digest(rep) == before
    assert os.listdir(rep.parent) == [rep.name]  # nothing written beside the report
    exported = list((cache / "exports").glob("*.sqlite"))
    assert len(exported) == 1 and r.info.path == exported[0]
    expected = sql(CPU_2022, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)")[0][0]
    assert len(r.ranges) == expected
    # A second load reuses the cached export.
    again = nsyswrap.load(rep, cache_dir=cache)
    assert again.info.path == exported[0]
    assert any("cached" in n for n in again.info.notes)


def test_rep_without_nsys_is_a_clear_error(report_copy, tmp_path, monkeypatch):
    rep = report_copy(CPU_2022_REP)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nsys on PATH
    monkeypatch.delenv("NSYS", raising=False)
    monkeypatch.setattr(nsys_mod, "NSYS_SEARCH_GLOBS", ())
    with pytest.raises(BadInputError, match="needs nsys"):
        nsyswrap.load(rep, cache_dir=tmp_path / "cache")
    assert os.listdir(rep.parent) == [rep.name]


def test_newer_sibling_export_is_reused(tmp_path):
    rep = tmp_path / "r.nsys-rep"
    rep.write_bytes(CPU_2022_REP.read_bytes())
    sibling = tmp_path / "r.sqlite"
    sibling.write_bytes(CPU_2022.read_bytes())
    os.utime(rep, (1_000_000, 1_000_000))
    r = nsyswrap.load(rep, cache_dir=tmp_path / "cache")
    assert r.info.path == sibling
    assert not (tmp_path / "cache").exists()


def test_find_nsys_order(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "nsys"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'NVIDIA Nsight Systems version 2099.1.2.3-abc'\n")
    fake.chmod(0o755)
    other = tmp_path / "other-nsys"
    other.write_text(fake.read_text())
    other.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake.parent))
    monkeypatch.delenv("NSYS", raising=False)
    assert nsys_mod.find_nsys() == str(fake)
    monkeypatch.setenv("NSYS", str(other))
    assert nsys_mod.find_nsys() == str(other)  # $NSYS beats PATH
    assert nsys_mod.find_nsys(str(fake)) == str(fake)  # --nsys beats $NSYS
    assert nsys_mod.nsys_version(str(fake)) == "2099.1.2.3"
    monkeypatch.setenv("NSYS", str(tmp_path / "missing"))
    assert nsys_mod.find_nsys() is None  # a wrong $NSYS is not silently replaced


def _compare(*args, env=None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "nsyswrap", "compare", *map(str, args)],
                          capture_output=True, text=True, env=env)


def test_a_cache_folder_that_cannot_be_used_is_one_line(report_copy, tmp_path):
    """A cache where no folder can be made (--cache-dir in /proc, $NSYSWRAP_CACHE a file):
    exit 2, one line naming the folder, the report untouched."""
    rep = report_copy(CPU_2022_REP)
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for cache, args, env in (("/proc/nsyswrap-cache", ["--cache-dir", "/proc/nsyswrap-cache"],
                              None),
                             (a_file, [], {**os.environ, "NSYSWRAP_CACHE": str(a_file)})):
        proc = _compare(rep, *args, env=env)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert f"cannot use the cache folder {cache}/exports" in proc.stderr
    assert os.listdir(rep.parent) == [rep.name]


def test_a_read_only_cache_or_home_is_one_line(report_copy, read_only_mount):
    folder, remount_read_only = read_only_mount
    remount_read_only()
    rep = report_copy(CPU_2022_REP)
    home = {k: v for k, v in os.environ.items()
            if k not in ("NSYSWRAP_CACHE", "XDG_CACHE_HOME")} | {"HOME": str(folder)}
    for args, env, named in (([], home, f"{folder}/.cache/nsyswrap/exports"),
                             (["--cache-dir", folder], None, f"{folder}/exports")):
        proc = _compare(rep, *args, env=env)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
        assert f"cannot use the cache folder {named}: Read-only file system" in proc.stderr


@needs_nsys
def test_no_home_folder_is_created(report_copy, tmp_path):
    """HOME names a folder that is not there (a service account): the export goes to a
    private temporary cache, said in the notes; no home is made."""
    import json

    rep = report_copy(CPU_2022_REP)
    env = {k: v for k, v in os.environ.items() if k not in ("NSYSWRAP_CACHE", "XDG_CACHE_HOME")}
    env |= {"HOME": str(tmp_path / "no-home"), "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    proc = _compare(rep, "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "no-home").exists()
    cache = tmp_path / "tmp" / f"nsyswrap-cache-{os.getuid()}"
    assert oct(cache.stat().st_mode & 0o777) == oct(0o700)
    assert len(list((cache / "exports").glob("*.sqlite"))) == 1
    notes = json.loads(proc.stdout)["report"]["notes"]
    assert any(f"the cache is {cache}, a temporary folder" in n for n in notes)
    assert os.listdir(rep.parent) == [rep.name]
