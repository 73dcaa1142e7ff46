"""`nsyswrap run`, `import` and `doctor` for real, with Debian's nsys 2022.4 on the CPU.

Broken installs are made real where we can (no nsys on PATH, no importer) and, for a
missing libdw, by an importer that fails the way the dynamic loader does."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_nsys, needs_torch, once_more_if_nsys_failed, sql

pytestmark = [pytest.mark.nsys, needs_nsys]
WORKLOAD = Path(__file__).parent / "workloads" / "annotated.py"
C_WORKLOAD = Path(__file__).parents[1] / "scripts" / "workloads" / "cpu_nvtx.c"
# For runs whose test is about what `run` does with its folder, exit code or capture, not
# about what the default traces record: nsys 2022.4's OS runtime trace adds about 1.5 s to
# every run on the CPU, 4 s to two torch ranks (test_run_python_script_end_to_end and
# others keep the defaults).
NVTX_ONLY = ("--trace", "nvtx")
# nsys 2022.4 now and then fails a run with one of the lines of conftest.NSYS_SESSION_FAILED
# in its output (nsys.log), on a machine where other runs pass: nsys's own failure, not one
# of what these tests check (sem_open, from its ProcessWaiter, came in 3 of about 230 runs
# of the suite's nsys tests while other nsys sessions ran on the machine). Such a run is
# undone and made once more (nsyswrap below); any other failure, and one of these twice in
# a row, stands.


def nsyswrap(*args, env=None, cwd=None, timeout=180):
    """`python -m nsyswrap ARGS`. A `run -o FOLDER` that nsys failed as a line of
    NSYS_SESSION_FAILED says is made once more, after what it added to FOLDER is removed."""
    def once():
        return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)],
                              capture_output=True, text=True, env=env, cwd=cwd,
                              timeout=timeout)

    folder = _output_folder(args, cwd)
    return once() if folder is None else once_more_if_nsys_failed(once, folder)


def _output_folder(args, cwd) -> Path | None:
    """The -o folder of a `run` (among the options before the command), else None."""
    args = [str(a) for a in args]
    options = args[:args.index("--")] if "--" in args else args
    if not options or options[0] != "run" or "-o" not in options:
        return None
    folder = Path(options[options.index("-o") + 1])
    return folder if folder.is_absolute() else Path(cwd or os.getcwd()) / folder


def test_run_python_script_end_to_end(default_traces_run):
    out, proc = default_traces_run  # `run -o OUT --format json annotated.py`
    # With --format json standard output is the JSON alone; the workload's output moves to
    # standard error.
    assert "annotated: start" in proc.stderr and "annotated: done" in proc.stderr
    assert "Generating" not in proc.stdout + proc.stderr  # nsys's noise is filtered
    sqlite = out / "annotated.sqlite"
    assert sqlite.exists() and (out / "annotated.nsys-rep").exists()
    assert (out / "nsys.log").exists() and not (out / "annotated.qdstrm").exists()
    n = sql(sqlite, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId "
                    "WHERE s.value = 'step' AND e.eventType = 59")[0][0]
    assert n == 6  # every range of the Python nvtx package reached nsys 2022.4
    doc = json.loads((out / "analysis.json").read_text())
    steps = [r for r in doc["ranges"] if r["name"] == "step"][0]
    assert steps["count"] == 6 and steps["domain"] == "e2e"
    assert json.loads(proc.stdout)["schema"] == "nsyswrap.compare/1"
    assert any(f["code"] == "COLD_START" and "e2e:load" in f["ranges"] for f in doc["findings"])
    # The page beside the JSON, its path printed; the profiled command line on it.
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "e2e:load" in page
    assert f"nsyswrap: report: {out / 'report.html'} (open it in a browser)" in proc.stderr


def test_workload_exit_code_is_kept_and_capture_analysed(tmp_path):
    out = tmp_path / "run"
    proc = nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD, "4")
    assert proc.returncode == 4
    assert (out / "analysis.json").exists() and "exited with code 4" in proc.stderr


def test_module_and_command_forms(tmp_path):
    out = tmp_path / "mod"
    env = {**os.environ, "PYTHONPATH": str(WORKLOAD.parent)}
    proc = nsyswrap("run", "-o", out, *NVTX_ONLY, "-m", "annotated", env=env)
    assert proc.returncode == 0, proc.stderr
    assert (out / "annotated.sqlite").exists()
    exe = tmp_path / "cpu_nvtx"
    include = "/usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64/nvtx/include"
    subprocess.run(["gcc", "-O1", "-o", exe, C_WORKLOAD, f"-I{include}", "-ldl", "-lpthread"],
                   check=True)
    out = tmp_path / "c"
    proc = nsyswrap("run", "-o", out, *NVTX_ONLY, "--", exe)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((out / "analysis.json").read_text())
    assert {r["name"] for r in doc["ranges"]} >= {"iteration", "step", "startend", "worker_iter"}


def test_existing_report_needs_force(tmp_path):
    out = tmp_path / "run"
    assert nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD).returncode == 0
    before = (out / "annotated.sqlite").stat().st_mtime_ns
    proc = nsyswrap("run", "-o", out, WORKLOAD)
    assert proc.returncode == 2 and "--force" in proc.stderr
    assert (out / "annotated.sqlite").stat().st_mtime_ns == before
    assert nsyswrap("run", "-o", out, *NVTX_ONLY, "--force", WORKLOAD).returncode == 0


def test_missing_importer_keeps_the_raw_capture(tmp_path):
    env = {**os.environ, "NSYSWRAP_IMPORTER": str(tmp_path / "no-importer")}
    out = tmp_path / "run"
    proc = nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD, env=env)
    assert proc.returncode == 1
    assert "QdstrmImporter" in proc.stderr and "nsyswrap import" in proc.stderr
    qdstrm = out / "annotated.qdstrm"
    assert qdstrm.exists() and not (out / "annotated.nsys-rep").exists()
    # Once the importer is there again, `nsyswrap import` finishes the job.
    proc = nsyswrap("import", qdstrm)
    assert proc.returncode == 0, proc.stderr
    assert (out / "annotated.sqlite").exists() and "e2e:step" in proc.stdout


def fake_importer_without_libdw(tmp_path: Path) -> Path:
    """Fails exactly as the Nsight Compute bundle's importer does when libdw is absent."""
    fake = tmp_path / "QdstrmImporter"
    fake.write_text("#!/bin/sh\necho \"$0: error while loading shared libraries: libdw.so.1: "
                    "cannot open shared object file: No such file or directory\" >&2\nexit 127\n")
    fake.chmod(0o755)
    return fake


def test_missing_libdw_is_named(tmp_path):
    env = {**os.environ, "NSYSWRAP_IMPORTER": str(fake_importer_without_libdw(tmp_path))}
    out = tmp_path / "run"
    proc = nsyswrap("run", "-o", out, *NVTX_ONLY, WORKLOAD, env=env)
    assert proc.returncode == 1
    assert "libdw.so.1 is missing" in proc.stderr and "apt install libdw1" in proc.stderr
    assert (out / "annotated.qdstrm").exists()


def test_ctrl_c_keeps_and_analyses_the_capture(tmp_path):
    script = tmp_path / "forever.py"
    seen = tmp_path / "seen"
    # The workload itself must see the interrupt (and end through its own shutdown, where
    # CUDA's buffered trace is written), not be killed by nsys.
    script.write_text("import sys, time, nsyswrap\nprint('running', flush=True)\ntry:\n"
                      "    while True:\n"
                      "        with nsyswrap.annotate('tick', domain='forever'):\n"
                      "            time.sleep(0.01)\n"
                      "except KeyboardInterrupt:\n"
                      f"    open({str(seen)!r}, 'w').write('KeyboardInterrupt')\n"
                      "    sys.exit(130)\n")
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(out), *NVTX_ONLY,
                             str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()  # the workload is running under nsys
    assert "running" in line
    time.sleep(0.5)  # ~50 ticks of 10 ms; more than 10 are asked for
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert seen.read_text() == "KeyboardInterrupt"
    doc = json.loads((out / "analysis.json").read_text())
    ticks = [r for r in doc["ranges"] if r["name"] == "tick"][0]
    assert ticks["count"] > 10


def test_doctor_tells_the_cases_apart(tmp_path):
    ok = nsyswrap("doctor")
    # The whole output on failure: a test profile nsys failed on its own names nsys's line
    # there, which makes the test once more (conftest.NSYS_SESSION_FAILED); pytest cuts
    # the operands of a failed comparison.
    assert "✓ nsys" in ok.stdout and "✓ NVTX from Python" in ok.stdout, ok.stdout + ok.stderr
    if "2022." in ok.stdout:  # Debian's nsys: the nvtx package's gate had to be bypassed
        assert "gate bypassed" in ok.stdout
    env = {**os.environ, "NSYSWRAP_IMPORTER": str(fake_importer_without_libdw(tmp_path))}
    libdw = nsyswrap("doctor", env=env)
    assert libdw.returncode == 1 and "✗ importer" in libdw.stdout and "libdw" in libdw.stdout
    env = {**os.environ, "NSYSWRAP_IMPORTER": str(tmp_path / "none")}
    missing = nsyswrap("doctor", env=env)
    assert "✗ importer" in missing.stdout and "not found" in missing.stdout
    # No test profile without an importer to read it.
    for out in (libdw.stdout, missing.stdout):
        assert "not tried: no importer" in out.replace("\n", " ")


def _process_tree_below(marker: str) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose command line names `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline and entry.name != str(os.getpid()):
                found.append((int(entry.name), cmdline.strip()))
    return found


def run_once_more_if_nsys_hangs(out: Path, *args, timeout=90):
    """nsys 2022.4 now and then never returns after a workload with spawned children has
    ended (seen once in a clean-clone CI run; not reproduced in 30 runs since:
    docs/nsys-quirks.md, "Spawned children"). Such a hang is nsys's, not ours: stop the
    stuck capture (it runs in its own session, so killing nsyswrap leaves it), say what
    was still running, and try once more in a fresh folder. Two hangs in a row fail."""
    for attempt in (1, 2):
        target = out.with_name(f"{out.name}{'' if attempt == 1 else '-again'}")
        try:
            return target, nsyswrap("run", "-o", target, *args, timeout=timeout)
        except subprocess.TimeoutExpired:
            stuck = _process_tree_below(str(target))
            # nsys's agent runs in a session of its own, named after the nsys pid.
            stuck += [p for pid, _ in stuck for p in _process_tree_below(f"-{pid} ")]
            for pid, _ in stuck:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if attempt == 2:
                pytest.fail(f"nsys hung twice; still running: {stuck}")
            print(f"nsys hung after {timeout} s, retrying; still running: {stuck}",
                  file=sys.stderr)


def test_spawned_workers_are_traced_and_grouped_by_process(tmp_path):
    out, proc = run_once_more_if_nsys_hangs(
        tmp_path / "workers", *NVTX_ONLY, "--format", "json",
        Path(__file__).parent / "workloads" / "workers.py")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    sqlite = out / "workers.sqlite"
    pids = {p for (p,) in sql(sqlite, "SELECT DISTINCT (globalTid >> 24) & 16777215 FROM "
                                      "NVTX_EVENTS WHERE eventType = 59")}
    assert len(pids) == 3, proc.stderr  # the parent and two workers
    with_ranges = {p["pid"] for p in doc["processes"] if p["nvtx_ranges"]}
    assert with_ranges == pids
    work = [r for r in doc["ranges"] if r["name"] == "work"][0]
    assert work["count"] == 8 and work["processes"] == 2
    by_process = nsyswrap("compare", sqlite, "--by-process", "--format", "json")
    rows = [r for r in json.loads(by_process.stdout)["ranges"] if r["name"] == "work"]
    assert sorted(r["count"] for r in rows) == [4, 4] and len({r["pid"] for r in rows}) == 2


@needs_torch
def test_one_report_per_torchrun_rank(tmp_path):
    # nsys 2022.4 once lost one rank's agent at start-up ("Connection to the Agent lost" in
    # nsys.log, under the full suite's load): that rank never started and the other waited
    # for it at the rendezvous until the test's timeout. nsys's failure: made once more.
    out, proc = run_once_more_if_nsys_hangs(
        tmp_path / "ranks", "--ranks", "2", *NVTX_ONLY,
        Path(__file__).parent / "workloads" / "ranks.py", timeout=150)
    assert proc.returncode == 0, proc.stderr
    for rank in (0, 1):
        sqlite = out / f"ranks.rank{rank}.sqlite"
        steps = sql(sqlite, "SELECT count(*), count(DISTINCT globalTid >> 24) FROM NVTX_EVENTS "
                            "e JOIN StringIds s ON s.id = e.textId WHERE s.value = 'step'")[0]
        assert steps == (4, 1)  # each rank's report holds its own four steps
        doc = json.loads((out / f"analysis.ranks.rank{rank}.json").read_text())
        assert [r["count"] for r in doc["ranges"] if r["name"] == "step"] == [4]
        assert (out / f"report.ranks.rank{rank}.html").exists()
    # It ends with the ranks side by side, identified (nsys 2022.4 records no environment:
    # by the file name), and each rank's report shrunk to its findings.
    assert "2 ranks side by side" in proc.stdout
    assert "file name (ranks.rank0.sqlite)" in proc.stdout.replace("\n", " ") or \
        "RANK=0" in proc.stdout


@needs_torch
def test_interrupted_ranks_each_keep_their_report(tmp_path):
    """Ctrl-C on `run --ranks 2`: every rank's report is written and analysed, exit 130.
    Rank 0 sits in an all-reduce waiting for rank 1 when the interrupt comes; a rank that
    never gets back to Python is ended by runner.py's watcher, and ranks exit 0 so that
    torchrun does not kill the others' nsys as failed workers. Under load gloo may abort
    rank 0 (SIGABRT) when rank 1 leaves, before the watcher ends it: torchrun then fails,
    but the user interrupted, so nsyswrap still exits 130 and names the rank (the case is
    made certain in test_a_rank_that_dies_after_the_interrupt_is_named)."""
    out = tmp_path / "ranks"
    env = dict(os.environ, NSYSWRAP_STUCK_AFTER_S="3")
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "--ranks", "2", "-o",
                             str(out), *NVTX_ONLY, str(Path(__file__).parent / "workloads" /
                                                       "ranks_forever.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "running" not in (proc.stdout.readline() or "x"):
        pass
    time.sleep(1.5)  # both ranks past their rendezvous: rank 1 steps every ~50 ms
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 130, stderr[-2000:]
    assert "interrupted: the capture up to that point was kept" in stderr
    if "ended with" in stderr:  # the race above: the failed rank is named
        assert "ended with SIGABRT (exit code 134) after the interrupt" in stderr
    for rank in (0, 1):
        sqlite = out / f"ranks_forever.rank{rank}.sqlite"
        assert sqlite.exists(), stderr[-2000:]
        steps = sql(sqlite, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON "
                            "s.id = e.textId WHERE s.value = 'step' AND e.end IS NOT NULL")[0][0]
        assert steps > 5
    assert "2 ranks side by side" in stdout


@needs_torch
def test_a_rank_that_dies_after_the_interrupt_is_named(tmp_path):
    """Rank 0 dies by SIGABRT when interrupted (as gloo aborts a rank whose peer left):
    torchrun fails, but the user interrupted: exit 130, the rank and its end named."""
    out = tmp_path / "ranks"
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "--ranks", "2", "-o",
                             str(out), *NVTX_ONLY, str(Path(__file__).parent / "workloads" /
                                                       "ranks_abort.py")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and "running" not in (proc.stdout.readline() or "x"):
        pass
    time.sleep(1)  # rank 0's handler is set before it says it is running
    proc.send_signal(signal.SIGINT)
    _stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 130, stderr[-2000:]
    assert "rank 0 ended with SIGABRT (exit code 134) after the interrupt" in stderr
    assert (out / "ranks_abort.rank0.sqlite").exists()


def test_a_module_that_cannot_be_found(tmp_path):
    """As `python -m` says it (one line, no runner frames), then nsyswrap's one line; no
    folder left behind for a run that profiled nothing of the user's."""
    out = tmp_path / "run"
    proc = nsyswrap("run", "-o", out, *NVTX_ONLY, "-m", "no_such_module_xyz")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("nsyswrap: profiling")]
    assert lines == [f"{sys.executable}: No module named no_such_module_xyz",
                     "nsyswrap: error: No module named no_such_module_xyz (python -m "
                     "no_such_module_xyz); nothing was profiled"]
    assert not out.exists()


@contextlib.contextmanager
def small_disk(folder: Path, size: str):
    """A real tmpfs of `size` mounted at `folder` (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                              str(folder)], capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def test_a_full_disk_keeps_the_capture_nsys_could_not_move(tmp_path):
    """The output folder's disk is full: nsys leaves its complete capture in its temporary
    folder; nsyswrap cannot move it either, keeps it there and names it, with the command
    that finishes it, which then works."""
    with small_disk(tmp_path / "disk", "64k") as disk:
        proc = nsyswrap("run", "-o", disk / "run", *NVTX_ONLY, WORKLOAD)
        assert proc.returncode == 1, proc.stderr
        error = proc.stderr.splitlines()[-1]
        assert error.startswith("nsyswrap: error: nsys could not write the report") and \
            "No space left on device" in error, proc.stderr
        kept = Path(error.split("`nsyswrap import ")[1].split()[0])
        assert not list((disk / "run").glob("*.qdstrm"))
    try:
        assert kept.name.startswith("nsys-report-") and kept.name.endswith(".qdstrm")
        done = nsyswrap("import", kept, "-o", tmp_path / "finished")
        assert done.returncode == 0, done.stderr
    finally:
        kept.unlink()  # nsys's temporary folder (TMPDIR or /tmp), not the test's
    sqlite = next((tmp_path / "finished").glob("*.sqlite"))
    assert sql(sqlite, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = "
                       "e.textId WHERE s.value = 'step' AND e.eventType = 59")[0][0] == 6


def _fill_when(path: Path, disk: Path, stop) -> None:
    """Fill `disk` as soon as `path` appears (another program taking the space)."""
    while not path.exists() and not stop.is_set():
        time.sleep(0.002)
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()


def test_a_disk_that_fills_after_the_export_keeps_everything(tmp_path):
    """The disk fills between the export and analysis.json: one line naming the kept
    capture and the command that finishes it; no empty or partial analysis.json."""
    import threading

    with small_disk(tmp_path / "disk", "16m") as disk:
        out = disk / "run"
        stop = threading.Event()
        filler = threading.Thread(target=_fill_when, args=(out / "annotated.sqlite", disk,
                                                           stop))
        filler.start()
        try:
            proc = nsyswrap("run", "-o", out, "--trace", "nvtx", WORKLOAD)
        finally:
            stop.set()
            filler.join()
        assert proc.returncode == 1, proc.stderr
        assert "internal error" not in proc.stderr and proc.stderr.count("nsyswrap: error") == 1
        error = proc.stderr.splitlines()[-1]
        assert "No space left on device" in error
        assert f"`nsyswrap import {out / 'annotated.nsys-rep'} --force` finishes it" in error
        assert sorted(p.name for p in out.iterdir()) == [
            "annotated.nsys-rep", "annotated.sqlite", "nsys.log", "nsyswrap-run.json"]
        (disk / "filler").unlink()
        done = nsyswrap("import", out / "annotated.nsys-rep", "--force")
        assert done.returncode == 0, done.stderr
        doc = json.loads((out / "analysis.json").read_text())
        assert [r["count"] for r in doc["ranges"] if r["name"] == "step"] == [6]


ONE_STEP = "import nsyswrap\nwith nsyswrap.annotate('step', domain='names'):\n    print('ran')\n"


@pytest.mark.parametrize("script, stem, folder", [
    ("bench%p.py", "bench%p", "runs%h"), ("my bench é.py", "my bench é", "runs"),
    ("..py", "run", "runs")], ids=["nsys's patterns", "a space, unicode", "dots only"])
def test_any_script_name_gives_a_report(tmp_path, script, stem, folder):
    """nsys expands %p, %h and %q{VAR} in its output name, the folders' too, and `..py`'s
    name, ".", joined to the folder is the folder itself: the report is still written where
    it should be, straight into the output folder, under the script's name (or "run"), and
    nothing lands beside it."""
    (tmp_path / script).write_text(ONE_STEP)
    out = tmp_path / folder / "out"
    proc = nsyswrap("run", "-o", out, "--trace", "nvtx", script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [f"{stem}.nsys-rep", f"{stem}.sqlite", "nsys.log", "analysis.json", "report.html",
         "nsyswrap-run.json"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([script, folder])
    assert sql(out / f"{stem}.sqlite", "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s "
                                       "ON s.id = e.textId WHERE s.value = 'step'")[0][0] == 1
    assert "Failed to create" not in (out / "nsys.log").read_text()  # nsys wrote it there
    assert ".qdstrm" not in proc.stderr  # nsys's "Generated:" paths hidden, spaces and all


WAITS_FOR_GO = """\
import os, sys, time
import nsyswrap
with nsyswrap.annotate("start", domain="waits"):
    print("waiting", flush=True)
while not os.path.exists(sys.argv[1]):
    time.sleep(0.05)
"""


def _run_while(tmp_path: Path, out: Path, meanwhile) -> tuple[subprocess.CompletedProcess, Path]:
    """`nsyswrap run -o OUT` of a workload that waits for a file; `meanwhile(out)` is done
    while it runs, then the workload ends. Returns the run and the capture its error names
    as kept, which it asserts exists (the test removes it)."""
    script = tmp_path / "waits.py"
    script.write_text(WAITS_FOR_GO)
    go = tmp_path / "go"
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(out), "--trace",
                             "nvtx", str(script), str(go)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "waiting"
        meanwhile(out)
    finally:
        go.touch()
    stdout, stderr = proc.communicate(timeout=120)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    error = stderr.splitlines()[-1]
    kept = Path(error.split("the capture is kept at ")[1].split(":")[0])
    assert kept.is_file() and kept.name.endswith(".qdstrm"), stderr
    return done, kept


def test_an_output_folder_removed_during_the_run_is_said(tmp_path):
    """The output folder is deleted while the workload runs: the error says so (not that
    the disk is full), names the capture nsys kept, and the command it gives finishes it."""
    out = tmp_path / "run"
    proc, kept = _run_while(tmp_path, out, shutil.rmtree)
    try:
        assert proc.returncode == 1, proc.stderr
        error = proc.stderr.splitlines()[-1]
        assert error.startswith(f"nsyswrap: error: the output folder {out} was removed during "
                                "the run (Failed to create"), error
        assert "make room" not in error
        finish = error.split("`")[1]
        assert finish == f"nsyswrap import {kept} -o {out}"
        done = nsyswrap(*finish.split()[1:])
        assert done.returncode == 0, done.stderr
    finally:
        kept.unlink()  # nsys's temporary folder (TMPDIR or /tmp), not the test's
    starts = sql(out / f"{kept.stem}.sqlite", "SELECT count(*) FROM NVTX_EVENTS e JOIN "
                 "StringIds s ON s.id = e.textId WHERE s.value = 'start'")[0][0]
    assert starts == 1


def test_an_output_folder_made_read_only_during_the_run_is_said(tmp_path):
    """The output folder (one that existed: the run writes into a private folder inside it)
    becomes read-only while the workload runs (a read-only bind mount over it: root only):
    the error says it is not writable, not that the disk is full, and names it."""
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    mounted = []

    def make_read_only(out: Path) -> None:
        subprocess.run(["mount", "--bind", str(out), str(out)], check=True)
        mounted.append(out)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(out)], check=True)

    out = tmp_path / "run"
    out.mkdir()
    try:
        proc, kept = _run_while(tmp_path, out, make_read_only)
    finally:
        for folder in mounted:
            subprocess.run(["umount", str(folder)], check=True)
    kept.unlink()
    assert proc.returncode == 1, proc.stderr
    error = proc.stderr.splitlines()[-1]
    assert error.startswith(f"nsyswrap: error: the output folder {out} is not writable "
                            "(Failed to create"), error
    assert "Read-only file system" in error and "make room" not in error
    assert f"the capture is kept at {kept}: make the folder writable, then `nsyswrap import " \
           f"{kept} -o {out}`" in error
