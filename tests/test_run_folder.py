"""Where `nsyswrap run` and `nsyswrap import` write (nsyswrap/capture/run_folder.py): folders never
shared, an earlier run replaced only by a complete one and only with --force, an import that
changes nothing it reads and writes over nothing without --force. For real, with nsys 2022.4
on the CPU; the folder rules alone also without nsys."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import CPU_2022, CPU_2022_REP, file_digest, names_session_failure, needs_nsys, sql
from test_run import NVTX_ONLY, WORKLOAD, nsyswrap

from nsyswrap.capture.run_folder import (
    INCOMPLETE_PREFIX,
    MANIFEST,
    REPLACED_PREFIX,
    Manifest,
    RunFolder,
)
from nsyswrap.common.errors import BadInputError, NsysWrapError

WORKLOADS = Path(__file__).parent / "workloads"
NOISY = WORKLOADS / "noisy.py"


def digests(folder: Path) -> dict[str, str]:
    return {p.name: file_digest(p) for p in folder.iterdir() if p.is_file()}


def steps_in(sqlite: Path) -> int:
    return sql(sqlite, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = "
                       "e.textId WHERE s.value = 'step' AND e.eventType = 59")[0][0]


def _plant_another_experiment(folder: Path) -> dict[str, str]:
    """Files a user keeps beside runs, several of them of the names runs write: another
    experiment's report and export, an unimported capture, pages and summaries of their own."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(CPU_2022_REP, folder / "baseline.nsys-rep")
    shutil.copy2(CPU_2022, folder / "baseline.sqlite")
    (folder / "keep.qdstrm").write_bytes(b"raw capture of another experiment")
    (folder / "report.final.html").write_text("<p>the report I sent</p>")
    (folder / "analysis.summary.json").write_text("{}")
    (folder / "notes.txt").write_text("notes")
    return digests(folder)


@pytest.mark.nsys
@needs_nsys
def test_force_replaces_the_earlier_run_only_with_a_complete_one(tmp_path):
    """In a folder that also holds a user's own reports, pages and captures (several of the
    names runs write): --force replaces the earlier run's files, once the new run is
    complete, and nothing of the user's."""
    out = tmp_path / "run"
    planted = _plant_another_experiment(out)
    assert nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD).returncode == 0
    before = digests(out)
    run = Manifest.read(out)
    assert set(run.files) == set(before) - set(planted) == {
        "annotated.nsys-rep", "annotated.sqlite", "nsys.log", "analysis.json", "report.html",
        MANIFEST}
    # Without --force: refused, naming exactly the files --force would replace.
    refused = nsyswrap("run", "-o", out, NOISY)
    assert refused.returncode == 2
    assert "(" + ", ".join(sorted(run.files)) + ")" in refused.stderr
    # A rerun that fails (nsys refuses an option) leaves the earlier run as it was, byte for
    # byte, and its own log apart, named.
    failed = nsyswrap("run", "-o", out, *NVTX_ONLY, "--force",
                      "--nsys-arg=--no-such-nsys-option", NOISY)
    assert failed.returncode == 1, failed.stderr
    assert digests(out) == before
    staged = [p for p in out.iterdir() if p.is_dir()]
    assert len(staged) == 1 and staged[0].name.startswith(INCOMPLETE_PREFIX)
    assert str(staged[0] / "nsys.log") in failed.stderr
    assert "no-such-nsys-option" in (staged[0] / "nsys.log").read_text()
    # A complete rerun of another script replaces the whole earlier run: nothing of it is
    # left beside the new files to read as one run with them; the user's files are as they
    # were, byte for byte.
    again = nsyswrap("run", "-o", out, *NVTX_ONLY, "--force", NOISY)
    assert again.returncode == 0, again.stderr
    after = digests(out)
    assert set(after) - set(planted) == {"noisy.nsys-rep", "noisy.sqlite", "nsys.log",
                                         "analysis.json", "report.html", MANIFEST}
    assert {n: after[n] for n in planted} == planted
    assert Manifest.read(out).run != run.run
    doc = json.loads((out / "analysis.json").read_text())
    assert doc["report"]["path"] == str(out / "noisy.sqlite")
    assert "noisy.py" in (out / "nsys.log").read_text().splitlines()[0]
    assert [p for p in out.iterdir() if p.is_dir()] == staged  # the failed try's, untouched


@pytest.mark.nsys
@needs_nsys
def test_another_runs_folder_is_refused_without_force(tmp_path):
    """A different script into the same -o: refused before anything runs, exit 2."""
    out = tmp_path / "run"
    assert nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD).returncode == 0
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
    procs = [subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", *NVTX_ONLY, str(WORKLOAD)],
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
    assert nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD, env=env).returncode == 1
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
    # A folder it creates is its own: written directly, and claimed by a manifest at once.
    new = RunFolder.for_run(tmp_path / "a" / "b", "x", force=False, names=["x.sqlite"])
    assert new.created and new.stage == tmp_path / "a" / "b"
    assert set(Manifest.read(new.final).files) == {MANIFEST, "x.sqlite"}
    # An existing one with other files: the run is staged inside it, and put beside them.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    (mine / "data.sqlite").write_text("not an export of a capture here")
    staged = RunFolder.for_run(mine, "x", force=False, names=["x.sqlite", "nsys.log"])
    assert not staged.created and staged.stage.parent == mine
    assert oct(staged.stage.stat().st_mode & 0o777) == "0o700"
    (staged.stage / "x.sqlite").write_text("new")
    (staged.stage / "nsys.log").write_text("log")
    staged.commit()
    assert sorted(p.name for p in mine.iterdir()) == sorted(
        ["data.sqlite", MANIFEST, "notes.txt", "nsys.log", "x.sqlite"])
    assert set(Manifest.read(mine).files) == {MANIFEST, "nsys.log", "x.sqlite"}
    # Now it holds a run's files: refused, the message listing exactly those, or with
    # force replaced all together; nothing else of the folder is touched.
    with pytest.raises(BadInputError) as refused:
        RunFolder.for_run(mine, "y", force=False, names=["y.nsys-rep", "nsys.log"])
    assert f"(nsys.log, {MANIFEST}, x.sqlite)" in str(refused.value)
    forced = RunFolder.for_run(mine, "y", force=True, names=["y.nsys-rep", "nsys.log"])
    (forced.stage / "y.nsys-rep").write_text("new report")
    forced.commit()
    assert sorted(p.name for p in mine.iterdir()) == sorted(
        ["data.sqlite", MANIFEST, "notes.txt", "y.nsys-rep"])
    assert (mine / "notes.txt").read_text() == "mine"


def test_force_replaces_nothing_that_no_run_claims(tmp_path):
    """Files of the names a run writes that no manifest claims (another experiment's, an
    earlier version's run, a manifest planted or edited to claim other files) are refused
    with and without --force, each named; the folder stays as it was."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "x.sqlite").write_text("another experiment's export")
    (out / "notes.txt").write_text("notes")
    for force in (False, True):
        with pytest.raises(BadInputError, match=r"no earlier nsyswrap run there made "
                                                r"\(x\.sqlite\)"):
            RunFolder.for_run(out, "x", force=force, names=["x.sqlite", "nsys.log"])
    # A manifest that names a file outside what runs write claims nothing (it is not one).
    (out / MANIFEST).write_text(json.dumps({"nsyswrap": "nsyswrap.run/1", "run": "1",
                                            "files": ["notes.txt", "x.sqlite"]}))
    assert Manifest.read(out) is None
    with pytest.raises(BadInputError, match=MANIFEST):
        RunFolder.for_run(out, "x", force=True, names=["x.sqlite"])
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, "notes.txt", "x.sqlite"])


def test_of_two_runs_into_one_folder_the_first_to_finish_wins(tmp_path):
    """Both started while the folder held one earlier run: the first to finish replaces
    it; the second finds another run's files there and keeps its own, named."""
    out = tmp_path / "out"
    first = RunFolder.for_run(out, "x", force=False, names=["x.sqlite"])
    (first.stage / "x.sqlite").write_text("run 1")
    first.commit()
    a = RunFolder.for_run(out, "x", force=True, names=["x.sqlite"])
    b = RunFolder.for_run(out, "x", force=True, names=["x.sqlite"])
    for folder, text in ((a, "run 2"), (b, "run 3")):
        (folder.stage / "x.sqlite").write_text(text)
    a.commit()
    with pytest.raises(NsysWrapError, match=f"another run finished into {out}.*kept in "
                                            f"{b.stage}"):
        b.commit()
    assert (out / "x.sqlite").read_text() == "run 2"
    assert (b.stage / "x.sqlite").read_text() == "run 3"
    assert sorted(p.name for p in out.iterdir()) == sorted([MANIFEST, "x.sqlite",
                                                            b.stage.name])


def test_a_replace_that_fails_half_way_puts_both_runs_back(tmp_path, monkeypatch):
    """A rename that fails while the new run's files go in (after the earlier run's were
    moved aside): the earlier run is back in place, byte for byte and nothing of it left
    hidden aside, and the new run's files are in its private folder, as the message says."""
    out = tmp_path / "out"
    old = RunFolder.for_run(out, "x", force=False, names=["x.sqlite", "nsys.log"])
    for name in ("x.sqlite", "nsys.log"):
        (old.stage / name).write_text(f"old {name}")
    old.commit()
    before = digests(out)
    new = RunFolder.for_run(out, "y", force=True, names=["y.sqlite", "nsys.log"])
    for name in ("y.sqlite", "nsys.log"):
        (new.stage / name).write_text(f"new {name}")
    made = digests(new.stage)
    real_rename = os.rename
    calls = []

    def rename_failing_on_the_second_file_in(src, dst):
        if Path(src).parent == new.stage:
            calls.append(src)
            if len(calls) == 2:
                raise OSError(5, "Input/output error")
        return real_rename(src, dst)

    monkeypatch.setattr("nsyswrap.capture.run_folder.os.rename",
                        rename_failing_on_the_second_file_in)
    with pytest.raises(NsysWrapError, match=f"kept in {new.stage}, the earlier ones as they "
                                            "were"):
        new.commit()
    assert len(calls) == 2
    assert digests(out) == before
    assert [p.name for p in out.iterdir() if p.is_dir()] == [new.stage.name]
    assert not any(p.name.startswith(REPLACED_PREFIX) for p in out.iterdir())
    assert {n: d for n, d in digests(new.stage).items() if n != MANIFEST} == made


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


def _two_forced_runs(out: Path) -> tuple[dict[str, str], list[tuple[int, str, str]]]:
    """Two `run --force` at once into `out`, which holds another experiment's files and an
    earlier run: (the planted files' digests, each run's (exit code, stdout, stderr))."""
    planted = _plant_another_experiment(out)
    earlier = RunFolder.for_run(out, "noisy", force=False, names=["noisy.sqlite", "nsys.log"])
    for name in ("noisy.sqlite", "nsys.log"):
        (earlier.stage / name).write_text("the earlier run's")
    earlier.commit()
    procs = [subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(out),
                               *NVTX_ONLY, "--force", str(WORKLOAD)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [p.communicate(timeout=180) for p in procs]
    return planted, [(p.returncode, o, e) for p, (o, e) in zip(procs, outputs, strict=True)]


@pytest.mark.nsys
@needs_nsys
def test_two_forced_runs_into_one_folder_one_wins_the_other_keeps_its_capture(tmp_path):
    out = tmp_path / "runs"
    planted, ended = _two_forced_runs(out)
    if any(names_session_failure(e) for _code, _o, e in ended):
        # Two nsys 2022.4 sessions at once: now and then one fails at its start on its own
        # (conftest.NSYS_SESSION_FAILED). Made once more, in a fresh folder.
        out = tmp_path / "runs-again"
        planted, ended = _two_forced_runs(out)
    assert sorted(code for code, _out, _err in ended) == [0, 1], ended
    (_, _, won), (_, _, lost) = sorted(ended)
    error = lost.splitlines()[-1]
    assert "internal error" not in lost
    assert f"another run finished into {out} while this one ran" in error
    stage = next(p for p in out.iterdir() if p.name.startswith(INCOMPLETE_PREFIX))
    assert f"this run's are kept in {stage}" in error
    assert f"`nsyswrap import {stage / 'annotated.nsys-rep'} --force` finishes it" in error
    # The loser's run is complete where it says: its capture, export and analysis.
    assert steps_in(stage / "annotated.sqlite") == 6
    assert json.loads((stage / "analysis.json").read_text())["ranges"]
    # The winner's files in the folder, as its manifest and its message say; the user's
    # files as they were.
    assert f"nsyswrap: analysis: {out / 'analysis.json'}" in won
    assert steps_in(out / "annotated.sqlite") == 6
    assert set(Manifest.read(out).files) == {"annotated.nsys-rep", "annotated.sqlite",
                                             "nsys.log", "analysis.json", "report.html",
                                             MANIFEST}
    after = digests(out)
    assert {n: after.get(n) for n in planted} == planted


CRASH_IN_ANALYSIS = """
import sys
import nsyswrap.capture.pipeline
def compare(*args, **kwargs):
    raise RuntimeError("a bug in the analysis")
nsyswrap.capture.pipeline.compare = compare
from nsyswrap.cli import entry
sys.argv = ["nsyswrap", *sys.argv[1:]]
entry()
"""


@pytest.mark.nsys
@needs_nsys
def test_a_capture_is_named_whatever_ends_the_run(tmp_path):
    """A bug in nsyswrap after the capture (an internal error), and a kill (an OOM killer's
    SIGKILL): the capture in the run's private folder is named on stderr, by the next run
    into the folder, and `nsyswrap import` finishes it."""
    out = tmp_path / "runs"
    out.mkdir()
    crashed = subprocess.run([sys.executable, "-c", CRASH_IN_ANALYSIS, "run", "-o", str(out),
                              *NVTX_ONLY, str(WORKLOAD)], capture_output=True, text=True,
                             timeout=180)
    assert crashed.returncode == 1
    assert "nsyswrap: internal error: RuntimeError: a bug in the analysis" in crashed.stderr
    stage = next(p for p in out.iterdir() if p.name.startswith(INCOMPLETE_PREFIX))
    rep = stage / "annotated.nsys-rep"
    assert f"the capture is kept at {rep}: `nsyswrap import {rep} --force` finishes it" in (
        crashed.stderr)
    # Killed while it analyses: what it said at the start names where its files are.
    killed_out = tmp_path / "killed"
    killed_out.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(killed_out),
                             *NVTX_ONLY, str(WORKLOAD)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    said = []
    for line in proc.stderr:
        said.append(line)
        if line.startswith("nsyswrap: analysing"):
            proc.kill()
            break
    proc.wait(timeout=60)
    assert proc.returncode == -9, said
    killed_stage = next(p for p in killed_out.iterdir() if p.name.startswith(INCOMPLETE_PREFIX))
    assert (f"nsyswrap: the run's files are written into {killed_stage} and moved into "
            f"{killed_out} once the run is complete\n") in said
    # The next run into the folder names the capture (before nsys starts: this one is
    # refused by nsys at once); import finishes it where it lies.
    nxt = nsyswrap("run", "-o", killed_out, "--nsys-arg=--no-such-nsys-option", NOISY)
    assert nxt.returncode == 1, nxt.stderr
    killed_rep = killed_stage / "annotated.nsys-rep"
    assert (f"{killed_rep} is the capture of an earlier run into {killed_out} that did not "
            f"finish: `nsyswrap import {killed_rep} --force` finishes it") in nxt.stderr
    assert steps_in(rep.with_suffix(".sqlite")) == 6  # exported before the bug
    done = nsyswrap("import", killed_rep, "--force")
    assert done.returncode == 0, done.stderr
    assert steps_in(killed_rep.with_suffix(".sqlite")) == 6
    doc = json.loads((killed_stage / "analysis.json").read_text())
    assert [r["count"] for r in doc["ranges"] if r["name"] == "step"] == [6]
