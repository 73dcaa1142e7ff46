"""`nsyswrap run` and `nsyswrap doctor` where no nsys session starts: an output folder that
cannot be made, no nsys to be found, the run's name cut for the file system, and how the
workload is found below a process tree shaped like nsys's. They run wherever the suite runs,
nsys installed or not, and outside the worker that runs the nsys sessions one at a time
(tests/conftest.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_run import WORKLOAD, nsyswrap


def test_unwritable_output_folder_is_a_usage_error(tmp_path):
    """Refused before the workload runs: exit 2, one line naming the path."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where a folder should go")
    for out in (blocked / "run", Path("/proc/nsyswrap-cannot-be-here")):
        proc = nsyswrap("run", "-o", out, WORKLOAD)
        assert proc.returncode == 2, proc.stderr
        assert str(out) in proc.stderr and proc.stderr.count("\n") == 1
        assert "annotated: start" not in proc.stdout + proc.stderr  # nothing ran


def test_no_nsys_is_a_precise_error(tmp_path):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    env.pop("NSYS", None)
    proc = nsyswrap("run", "-o", tmp_path / "run", WORKLOAD, env=env)
    if "nsys not found" not in proc.stderr:
        pytest.skip("an nsys outside PATH was found in a standard install place")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "install Nsight Systems" in proc.stderr and proc.stderr.count("\n") == 1


def test_doctor_without_nsys_says_how_to_install_it():
    env = {**os.environ, "PATH": os.path.dirname(sys.executable)}
    env.pop("NSYS", None)
    no_nsys = nsyswrap("doctor", env=env)
    if "✗ nsys" in no_nsys.stdout:
        assert no_nsys.returncode == 1 and "install Nsight Systems" in no_nsys.stdout


def test_workload_roots_finds_the_program_below_nsys(tmp_path):
    """A real process tree shaped like nsys's: nsys -> nsys-launcher -> program -> its own
    child. The program is found; nsys's processes and the program's children are not."""
    from nsyswrap.capture.launch import workload_roots

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "program"
    program.write_text("#!/bin/sh\nsleep 30 &\nwait\n")
    launcher = bin_dir / "nsys-launcher"
    launcher.write_text(f"#!/bin/sh\n{program} &\nwait\n")
    nsys = bin_dir / "nsys"
    nsys.write_text(f"#!/bin/sh\n{launcher}\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    proc = subprocess.Popen([str(nsys)], start_new_session=True)
    try:
        deadline = time.time() + 10
        roots = []
        while time.time() < deadline and not (roots and _has_child(roots[0])):
            time.sleep(0.1)
            roots = workload_roots(proc.pid)
        assert len(roots) == 1
        assert Path(f"/proc/{roots[0]}/comm").read_text().strip() == "program"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _has_child(pid: int) -> bool:
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and Path(f"/proc/{entry}/stat").read_text().rsplit(
                    ")", 1)[1].split()[1] == str(pid):
                return True
        except OSError:
            continue
    return False


def test_a_name_too_long_for_a_file_system_is_cut():
    """A script name of 250 bytes (a file system allows 255) would make `NAME.nsys-rep` too
    long: the run's name is cut to 200 bytes at a whole character."""
    from nsyswrap.capture.profile import target_stem

    stem = target_stem([sys.executable, "é" * 125 + ".py"])
    assert stem == "é" * 100 and len(f"report.{stem}.rank7.html".encode()) <= 255
    assert target_stem([sys.executable, "-m", "pkg."]) == "run"
