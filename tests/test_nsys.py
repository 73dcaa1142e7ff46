"""Reading a .nsys-rep: exported into the cache with nsys, never beside the original."""

from __future__ import annotations

import os

import pytest
from conftest import CPU_2022, CPU_2022_REP, file_digest, needs_nsys, sql

import nsyswrap
from nsyswrap import nsys as nsys_mod
from nsyswrap.errors import BadInputError


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
