"""Where `nsyswrap run` and `nsyswrap import` write (nsyswrap/run_folder.py): folders never
shared, an earlier run replaced only by a complete one and only with --force, an import that
changes nothing it reads and writes over nothing without --force. For real, with nsys 2022.4
on the CPU; the folder rules alone also without nsys."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import file_digest, needs_nsys, sql
from test_run import WORKLOAD, nsyswrap

from nsyswrap.errors import BadInputError, NsysWrapError
from nsyswrap.run_folder import INCOMPLETE_PREFIX, RunFolder, run_files

WORKLOADS = Path(__file__).parent / "workloads"
NOISY = WORKLOADS / "noisy.py"


def digests(folder: Path) -> dict[str, str]:
    return {p.name: file_digest(p) for p in folder.iterdir() if p.is_file()}


def steps_in(sqlite: Path) -> int:
    return sql(sqlite, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = "
                       "e.textId WHERE s.value = 'step' AND e.eventType = 59")[0][0]


@pytest.mark.nsys
@needs_nsys
def test_force_replaces_the_earlier_run_only_with_a_complete_one(tmp_path):
    out = tmp_path / "run"
    assert nsyswrap("run", "-o", out, WORKLOAD).returncode == 0
    before = digests(out)
    assert set(before) == {"annotated.nsys-rep", "annotated.sqlite", "nsys.log",
                           "analysis.json", "report.html"}
    # A rerun that fails (nsys refuses an option) leaves the earlier run as it was, byte for
    # byte, and its own log apart, named.
    failed = nsyswrap("run", "-o", out, "--force", "--nsys-arg=--no-such-nsys-option", NOISY)
    assert failed.returncode == 1, failed.stderr
    assert digests(out) == before
    staged = [p for p in out.iterdir() if p.is_dir()]
    assert len(staged) == 1 and staged[0].name.startswith(INCOMPLETE_PREFIX)
    assert str(staged[0] / "nsys.log") in failed.stderr
    assert "no-such-nsys-option" in (staged[0] / "nsys.log").read_text()
    # A complete rerun of another script replaces the whole earlier run: nothing of it is
    # left beside the new files to read as one run with them.
    again = nsyswrap("run", "-o", out, "--force", NOISY)
    assert again.returncode == 0, again.stderr
    assert set(digests(out)) == {"noisy.nsys-rep", "noisy.sqlite", "nsys.log",
                                 "analysis.json", "report.html"}
    doc = json.loads((out / "analysis.json").read_text())
    assert doc["report"]["path"] == str(out / "noisy.sqlite")
    assert "noisy.py" in (out / "nsys.log").read_text().splitlines()[0]
    assert [p for p in out.iterdir() if p.is_dir()] == staged  # the failed try's, untouched


@pytest.mark.nsys
@needs_nsys
def test_another_runs_folder_is_refused_without_force(tmp_path):
    """A different script into the same -o: refused before anything runs, exit 2."""
    out = tmp_path / "run"
    assert nsyswrap("run", "-o", out, WORKLOAD).returncode == 0
    before = digests(out)
    proc = nsyswrap("run", "-o", out, NOISY)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "Generated" not in proc.stdout + proc.stderr
    assert digests(out) == before and [p.name for p in out.iterdir()] == list(before)


@pytest.mark.nsys
@needs_nsys
def test_runs_started_in_the_same_second_get_folders_of_their_own(tmp_path):
    """Every name the default folder could take in the next seconds is taken, by a folder
    and by links to a victim's folder: both runs make new folders of their own and write
    nothing through the links."""
    victim = tmp_path / "victim"
    victim.mkdir()
    runs = tmp_path / "nsyswrap-runs"
    runs.mkdir()
    now = time.time()
    for second in range(-1, 30):
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now + second))
        taken = runs / f"annotated-{stamp}"
        if second % 2:
            taken.symlink_to(victim, target_is_directory=True)
        else:
            taken.mkdir()
    before = set(runs.iterdir())
    procs = [subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", str(WORKLOAD)],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    for p in procs:
        _out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
    assert list(victim.iterdir()) == []
    made = sorted(set(runs.iterdir()) - before)
    assert len(made) == 2 and not any(p.is_symlink() for p in made)
    for folder in made:
        log = (folder / "nsys.log").read_text()
        assert log.count("$ ") == 1 and str(folder / "annotated") in log  # one run's log
        assert steps_in(folder / "annotated.sqlite") == 6
    for p in before:  # what was there is as it was
        assert p.is_symlink() or list(p.iterdir()) == []


@pytest.mark.nsys
@needs_nsys
def test_import_changes_nothing_it_reads_and_overwrites_nothing(tmp_path):
    env = {**os.environ, "NSYSWRAP_IMPORTER": str(tmp_path / "no-importer")}
    out = tmp_path / "run"
    assert nsyswrap("run", "-o", out, WORKLOAD, env=env).returncode == 1
    qdstrm = out / "annotated.qdstrm"
    raw = file_digest(qdstrm)
    # Into its own folder: the raw capture stays, byte for byte (the importer rewrites the
    # end of what it reads: it reads a copy).
    proc = nsyswrap("import", qdstrm)
    assert proc.returncode == 0, proc.stderr
    assert file_digest(qdstrm) == raw
    made = digests(out)
    assert {"annotated.nsys-rep", "annotated.sqlite", "analysis.json", "report.html"} <= set(made)
    assert steps_in(out / "annotated.sqlite") == 6
    # Again: every file it would write is there already; refused, nothing changed.
    again = nsyswrap("import", qdstrm)
    assert again.returncode == 2 and "--force" in again.stderr
    assert digests(out) == made
    # Elsewhere with -o, and over files there only with --force.
    other = tmp_path / "other"
    other.mkdir()
    (other / "analysis.json").write_text("{}\n")
    refused = nsyswrap("import", qdstrm, "-o", other)
    assert refused.returncode == 2 and (other / "analysis.json").read_text() == "{}\n"
    assert nsyswrap("import", qdstrm, "-o", other, "--force").returncode == 0
    assert json.loads((other / "analysis.json").read_text())["report"]["path"] == str(
        other / "annotated.sqlite")
    assert sorted(p.name for p in other.iterdir()) == [
        "analysis.json", "annotated.nsys-rep", "annotated.sqlite", "report.html"]
    assert file_digest(qdstrm) == raw and digests(out) == made


def test_run_folder_rules_without_nsys(tmp_path):
    # A folder it creates is its own: written directly.
    new = RunFolder.for_run(tmp_path / "a" / "b", "x", force=False)
    assert new.created and new.stage == tmp_path / "a" / "b"
    # An existing one with other files: the run is staged inside it, and put beside them.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (mine / "data.sqlite").write_text("not an export of a capture here")
    staged = RunFolder.for_run(mine, "x", force=False)
    assert not staged.created and staged.stage.parent == mine
    (staged.stage / "x.sqlite").write_text("new")
    (staged.stage / "nsys.log").write_text("log")
    staged.commit()
    assert sorted(p.name for p in mine.iterdir()) == ["data.sqlite", "notes.txt", "nsys.log",
                                                      "x.sqlite"]
    # Now it holds a run's files: refused, or with force replaced all together.
    with pytest.raises(BadInputError, match="another run's files"):
        RunFolder.for_run(mine, "y", force=False)
    (mine / "x.nsys-rep").write_text("old report")
    forced = RunFolder.for_run(mine, "y", force=True)
    (forced.stage / "y.nsys-rep").write_text("new report")
    forced.commit()
    assert sorted(p.name for p in mine.iterdir()) == ["data.sqlite", "notes.txt", "y.nsys-rep"]
    assert run_files(mine) == [mine / "y.nsys-rep"]


def test_a_file_that_appears_meanwhile_is_not_overwritten(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    folder = RunFolder.for_import(out, ["r.sqlite", "analysis.json"], force=False)
    (folder.stage / "r.sqlite").write_text("new export")
    (folder.stage / "analysis.json").write_text("new analysis")
    (out / "analysis.json").symlink_to(tmp_path / "victim.json")  # planted meanwhile
    with pytest.raises(NsysWrapError, match="kept in"):
        folder.commit()
    assert sorted(p.name for p in out.iterdir()) == sorted(["analysis.json", folder.stage.name])
    assert (folder.stage / "analysis.json").read_text() == "new analysis"
    assert not (tmp_path / "victim.json").exists()
