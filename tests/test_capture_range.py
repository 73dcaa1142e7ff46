"""nsys capture ranges under `nsyswrap run`: a range ends with the program still running
unless the user chose how it ends, and where nsys ends the program its exit code is said to
be nsys's. Real captures with nsys 2022.4 on the CPU use an NVTX capture range; the
cudaProfilerApi range (which needs CUDA) is checked on the command nsyswrap builds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import needs_nsys, sql
from test_run import nsyswrap

from nsyswrap.capture.profile import ProfileOptions, profile_command, runnable_target, shuts_down

WINDOW = Path(__file__).parent / "workloads" / "window.py"
RANGE_ARGS = ["--nsys-arg=--capture-range=nvtx", "--nsys-arg=--nvtx-capture=window@e2e"]


def nsys_part(extra: list[str], **opts) -> list[str]:
    """The nsys arguments of the command, without the target."""
    cmd = profile_command("nsys", ["prog"], Path("out/prog"),
                          ProfileOptions(extra_args=extra, **opts))
    target = runnable_target(["prog"])
    assert cmd[-len(target):] == target
    return cmd[:-len(target)]


def value(cmd: list[str], option: str) -> list[str]:
    return [a.split("=", 1)[1] for a in cmd if a.startswith(option + "=")]


@pytest.mark.parametrize("extra", [["--capture-range=cudaProfilerApi"],
                                   ["-c", "cudaProfilerApi"],
                                   ["--capture-range", "cudaProfilerApi"],
                                   ["--capture-range=nvtx", "-p", "window@e2e"]])
def test_a_capture_range_ends_with_the_program_running(extra):
    cmd = nsys_part(extra)
    assert value(cmd, "--capture-range-end") == ["stop"]
    assert shuts_down(cmd) is None


@pytest.mark.parametrize("end", ["stop-shutdown", "repeat:2", "repeat-shutdown:2", "none"])
def test_the_users_range_end_is_kept(end):
    for extra in (["-c", "cudaProfilerApi", f"--capture-range-end={end}"],
                  ["--capture-range-end", end, "--capture-range=cudaProfilerApi"]):
        cmd = nsys_part(extra)
        assert cmd[-len(extra):] == extra  # nothing added after the user's arguments
        assert shuts_down(cmd) == (end if "shutdown" in end else None)
    # --kill=none: nsys stops collecting and sends the program nothing.
    cmd = nsys_part(["-c", "cudaProfilerApi", "--capture-range-end=stop-shutdown",
                     "--kill=none"])
    assert shuts_down(cmd) is None


def test_no_capture_range_no_range_end():
    for extra in ([], ["--capture-range=none"], ["--cudabacktrace=all"]):
        cmd = nsys_part(extra)
        assert not any(a.startswith("--capture-range-end") for a in cmd)
        assert shuts_down(cmd) is None
    # --harness-only's own range runs to the end of the program, as it says.
    cmd = nsys_part([], harness_only=True)
    assert value(cmd, "--capture-range-end") == ["none"] and shuts_down(cmd) is None


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """`nsyswrap run` of window.py (once more where nsys failed on its own: test_run.nsyswrap)."""
    return nsyswrap("run", "-o", tmp_path / "r", "--trace", "nvtx", "--format", "json", *args,
                    WINDOW, "3")


@pytest.mark.nsys
@needs_nsys
def test_the_program_runs_on_after_its_capture_range(tmp_path):
    proc = run(tmp_path, *RANGE_ARGS)
    assert "window: reached the end" in proc.stderr
    assert proc.returncode == 3  # the program's own code
    assert "nsys's doing" not in proc.stderr and "nsys ended" not in proc.stderr
    assert "--capture-range-end=stop " in (tmp_path / "r" / "nsys.log").read_text()
    # Only the window was collected: the ranges before it and after it are not there.
    names = {n for (n,) in sql(tmp_path / "r" / "window.sqlite",
                               "SELECT DISTINCT s.value FROM NVTX_EVENTS e JOIN StringIds s "
                               "ON s.id = e.textId WHERE e.eventType = 59")}
    assert names == {"window", "step"}
    assert {r["name"] for r in json.loads(proc.stdout)["ranges"]} == {"window", "step"}


@pytest.mark.nsys
@needs_nsys
def test_a_program_nsys_shut_down_is_said_to_be(tmp_path):
    proc = run(tmp_path, *RANGE_ARGS, "--nsys-arg=--capture-range-end=stop-shutdown")
    assert "window: reached the end" not in proc.stderr  # nsys ended it in its sleep
    assert ("nsys ended the workload when its capture range ended "
            "(--capture-range-end=stop-shutdown; =stop lets it run on)") in proc.stderr
    if proc.returncode:  # nsys 2022.4 returns 0 or the signal's code: either is nsys's
        assert f"exit code {proc.returncode} is nsys's doing" in proc.stderr
    assert (tmp_path / "r" / "analysis.json").exists()
