"""How `nsyswrap run` runs nsys (nsyswrap/capture/launch.py), for real with nsys 2022.4 on the CPU:
the workload's output on channels of its own (never filtered, never taken for nsys's), a
reader that leaves, and signals: repeated ones while nsys writes, SIGHUP from a terminal
that closes."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import needs_nsys, sql
from test_run import NVTX_ONLY, nsyswrap

pytestmark = [pytest.mark.nsys, needs_nsys]
WORKLOADS = Path(__file__).parent / "workloads"
NOISY_LINES = ["The target application returned non-zero exit code 42",
               "Processing [=====                 ]", "[3/10] compiling kernels", "Generated:",
               "    /tmp/results.sqlite", "Collecting data...", "Generating 'summary'",
               "Process is terminated."]


def test_the_workloads_lines_are_shown_whole_and_set_no_exit_code(tmp_path):
    """Lines like nsys's own, printed by the workload: all shown, and the exit code is the
    workload's real one (from nsys), not the one its text names."""
    proc = nsyswrap("run", "-o", tmp_path / "py", *NVTX_ONLY, WORKLOADS / "noisy.py", "5")
    assert proc.returncode == 5, proc.stderr
    assert proc.stdout.splitlines()[: len(NOISY_LINES)] == NOISY_LINES
    assert "exited with code 5" in proc.stderr and "code 42" not in proc.stderr
    # Any other command: through the sh wrapper, the same.
    script = "; ".join(f"printf '%s\\n' {shlex.quote(line)}" for line in NOISY_LINES)
    proc = nsyswrap("run", "-o", tmp_path / "sh", *NVTX_ONLY, "--", "sh", "-c", script)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[: len(NOISY_LINES)] == NOISY_LINES
    # With --format json the workload's output moves to stderr, whole, and stdout is JSON.
    proc = nsyswrap("run", "-o", tmp_path / "json", *NVTX_ONLY, "--format", "json",
                    WORKLOADS / "noisy.py")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["schema"] == "nsyswrap.compare/1"
    shown = proc.stderr.splitlines()
    assert all(line in shown for line in NOISY_LINES)


def test_a_reader_that_leaves_stops_nothing(tmp_path):
    """`nsyswrap run chatty.py | head -1`: the workload is drained to the end, the capture
    analysed, no traceback, and nsyswrap ends as a program killed by SIGPIPE would."""
    out = tmp_path / "run"
    err = tmp_path / "stderr"
    with open(err, "w") as err_file:
        proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(out),
                                 *NVTX_ONLY, str(WORKLOADS / "chatty.py")], stdout=subprocess.PIPE,
                                stderr=err_file)
        assert proc.stdout.readline().startswith(b"chatty line 0 ")
        proc.stdout.close()  # the reader leaves, as head does
        assert proc.wait(timeout=180) == 141
    stderr = err.read_text()
    assert "Traceback" not in stderr and "chatty: done" in stderr
    assert "chatty line 19999 " in (out / "nsys.log").read_text()  # drained to the end
    lines = sql(out / "chatty.sqlite", "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s "
                                       "ON s.id = e.textId WHERE s.value = 'line'")[0][0]
    assert lines == 20000
    assert json.loads((out / "analysis.json").read_text())["ranges"]
    assert (out / "report.html").stat().st_size > 0


def _start(out: Path, *trace: str, ticking_s: float = 0.5) -> subprocess.Popen:
    """forever.py under `nsyswrap run`, `ticking_s` into its ticks of 10 ms (the tests ask
    for more than 10)."""
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(out), *trace,
                             str(WORKLOADS / "forever.py")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "running"
    time.sleep(ticking_s)
    return proc


def _ticks(out: Path) -> int:
    doc = json.loads((out / "analysis.json").read_text())
    return [r for r in doc["ranges"] if r["name"] == "tick"][0]["count"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signals_while_nsys_writes_keep_the_capture(tmp_path, sig):
    """A second and third signal soon after the first (the workload has ended, nsys is
    writing the report): acknowledged once, never passed on; the capture is kept. The
    default traces and 1.5 s of them: nsys writes long enough for both to come while it
    does. The later signals wait for the workload to have ended: under load it once
    outlived a fixed 0.3 s, and a second signal to a running workload rightly stops nsys.
    Ended is the workload's processes exited (zombies or gone), not its command line
    empty: that comes first, while the process still runs its exit, and nsyswrap then
    rightly sees a workload running."""
    out = tmp_path / "run"
    proc = _start(out, ticking_s=1.5)
    workload = _workload_below(proc.pid, "forever.py")
    assert workload
    proc.send_signal(sig)
    deadline = time.monotonic() + 60
    while any(map(_running, workload)) and time.monotonic() < deadline:
        time.sleep(0.01)
    for gap_s in (0.0, 0.05):  # nsys writes for a few tenths of a second
        time.sleep(gap_s)
        proc.send_signal(sig)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert stderr.count("nsys is writing the report; it will be kept — waiting") == 1
    assert "stopping nsys" not in stderr
    assert _ticks(out) > 10


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited. Not its command line: while a
    process exits, /proc gives an empty one before the process is a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _workload_below(pid: int, name: str) -> list[int]:
    """The processes below `pid` (its children, theirs, ...) that name `name`, nsys's
    own processes (whose command lines name the workload's) aside."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            # The parent is the second field after the command's closing parenthesis.
            parents[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    found = []
    for child, (parent, cmdline) in parents.items():
        if name not in cmdline or "nsys" in cmdline.split(" ", 1)[0]:
            continue
        while parent > 1 and parent != pid:
            parent = parents.get(parent, (0, ""))[0]
        if parent == pid:
            found.append(child)
    return found


def _nsys_processes_for(out: Path) -> list[str]:
    return list(_processes_naming(out).values())


def _processes_naming(path: Path) -> dict[int, str]:
    """pid -> command line of the processes whose command line names `path`."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(path) in cmdline:
                found[int(entry.name)] = cmdline
    return found


def test_sighup_is_handled_like_sigterm(tmp_path):
    out = tmp_path / "run"
    proc = _start(out, *NVTX_ONLY)
    proc.send_signal(signal.SIGHUP)
    _stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    assert "interrupted: the capture up to that point was kept" in stderr
    assert _ticks(out) > 10
    assert _nsys_processes_for(out) == []  # no nsys or workload left behind


def test_a_closed_terminal_leaves_no_orphans_and_keeps_the_capture(tmp_path):
    """nsyswrap in a real terminal that goes away (the ssh session closes): the kernel's
    SIGHUP, writes to the terminal failing from then on. The capture is still written and
    analysed, and nothing is left running."""
    out = tmp_path / "run"
    pid, fd = pty.fork()
    if pid == 0:  # the child: nsyswrap, with the pty as its controlling terminal
        os.execv(sys.executable, [sys.executable, "-m", "nsyswrap", "run", "-o", str(out),
                                  *NVTX_ONLY, str(WORKLOADS / "forever.py")])
    seen = b""
    deadline = time.monotonic() + 120
    while b"running" not in seen and time.monotonic() < deadline:
        seen += os.read(fd, 4096)
    time.sleep(0.5)  # ~50 ticks of 10 ms
    os.close(fd)  # the terminal goes away: SIGHUP to nsyswrap, its session's leader
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.2)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("nsyswrap did not end after its terminal closed")
    assert os.waitstatus_to_exitcode(status) == 130
    assert _ticks(out) > 10
    assert _nsys_processes_for(out) == []


STUBBORN = """\
import signal, time
import nsyswrap
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a program that ignores Ctrl-C
print("running", flush=True)
while True:
    with nsyswrap.annotate("tick", domain="stubborn"):
        time.sleep(0.01)
"""


@pytest.mark.parametrize("signals, grace_s", [(2, "120"), (1, "1")],
                         ids=["a second signal", "the grace period over"])
def test_a_workload_that_ignores_the_interrupt_is_stopped(tmp_path, signals, grace_s):
    """The workload ignores SIGINT: a second signal (the grace period long), or the end of
    the grace period (shortened by NSYSWRAP_INTERRUPT_GRACE_S) stops nsys at once and ends
    the workload. Exit 130, the capture kept, analysed and named, nothing left running."""
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    out = tmp_path / "run"
    env = {**os.environ, "NSYSWRAP_INTERRUPT_GRACE_S": grace_s}
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", "run", "-o", str(out), "--trace",
                             "nvtx", str(script)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "running"
    time.sleep(0.5)  # ~50 ticks of 10 ms
    for _ in range(signals):
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
    stopping = time.monotonic()
    try:
        _stdout, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        stderr = f"nsyswrap did not stop nsys: {proc.communicate()}"
    finally:
        took_s = time.monotonic() - stopping
        left = _processes_naming(script)
        for pid in left:  # this test's own, should it fail: not left running for the next
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert left == {}, stderr  # neither nsys nor the workload left behind
    # nsys 2022.4 told alone (SIGINT) keeps waiting for the workload, ~20 s, then leaves it
    # running: the workload is ended too, and nsys is done within seconds.
    assert took_s < 15, stderr
    assert proc.returncode == 130, stderr
    assert "stopping nsys" in stderr
    assert f"nsyswrap: files: {out / 'stubborn.nsys-rep'}, {out / 'stubborn.sqlite'}" in stderr
    doc = json.loads((out / "analysis.json").read_text())
    assert [r["count"] for r in doc["ranges"] if r["name"] == "tick"][0] > 10
