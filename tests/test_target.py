"""nsyswrap/instrument/runner.py, the runner nsys starts: an interrupted program ends through
exit(),
also when it is stuck in a C call (a rank waiting in a collective for a rank that stopped),
and a program that handles the interrupt itself is given its time. No nsys needed: a C exit
handler stands for the one that writes nsys's CUDA trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TARGET = Path(__file__).parents[1] / "nsyswrap" / "instrument" / "runner.py"
# A C-level exit handler (glibc on_exit), as the CUDA trace's flush is: it runs on exit(),
# not when the process dies by a signal.
EXIT_HANDLER = """
import ctypes
libc = ctypes.CDLL(None)
CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p)
handler = CB(lambda status, arg: print(f"exit handler ran: {status}", flush=True))
libc.on_exit(handler, None)
"""
# The main thread never gets back to Python: signals blocked for it, as a thread inside a
# CUDA or NCCL wait that does not return.
# The main thread is inside the C call before "running" is printed (by another thread): a
# signal while it still runs bytecode would be handled normally, a race in this test only.
STUCK = EXIT_HANDLER + """
import signal, threading, time
def announce():
    time.sleep(0.5)
    print("running", flush=True)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
threading.Thread(target=announce, daemon=True).start()
time.sleep(60)
"""
SLOW_CHECKPOINT = """
import time
try:
    print("running", flush=True)
    while True:
        time.sleep(0.05)
finally:
    time.sleep(2)  # longer than the watcher's patience: must not be cut
    print("checkpoint saved", flush=True)
"""

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc on_exit")


def _interrupt(tmp_path, source: str, sig: int, **env) -> tuple[int, str, float]:
    script = tmp_path / "program.py"
    script.write_text(source)
    proc = subprocess.Popen(
        [sys.executable, str(TARGET), str(script)], stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env=dict(os.environ, **env),
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout.readline().strip() == "running"
    sent = time.monotonic()
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    return proc.returncode, out, time.monotonic() - sent


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130),
                                         (signal.SIGHUP, 129)])
def test_a_stuck_program_is_ended_through_exit(tmp_path, sig, code):
    rc, out, took = _interrupt(tmp_path, STUCK, sig, NSYSWRAP_STUCK_AFTER_S="1")
    assert rc == code, out
    assert f"exit handler ran: {code}" in out  # the trace would have been written
    assert "did not respond" in out and took < 10


def test_a_program_handling_the_interrupt_gets_its_time(tmp_path):
    rc, out, took = _interrupt(tmp_path, SLOW_CHECKPOINT, signal.SIGINT,
                               NSYSWRAP_STUCK_AFTER_S="1")
    assert rc == 130 and "checkpoint saved" in out and "did not respond" not in out, out
    assert took >= 2


def test_ranks_exit_zero_when_interrupted(tmp_path):
    """Under `run --ranks` (NSYSWRAP_INTERRUPT_EXIT=0): torchrun must not see a failure."""
    rc, out, _ = _interrupt(tmp_path, STUCK, signal.SIGTERM, NSYSWRAP_STUCK_AFTER_S="1",
                            NSYSWRAP_INTERRUPT_EXIT="0")
    assert rc == 0 and "exit handler ran: 0" in out, out


def test_sighup_ends_the_program_through_exit_as_sigterm_does(tmp_path):
    """A closed terminal: `finally` blocks run, exit code 129 through sys.exit."""
    rc, out, _ = _interrupt(tmp_path, SLOW_CHECKPOINT, signal.SIGHUP)
    assert rc == 129 and "checkpoint saved" in out and "SIGHUP" in out, out


def test_a_module_that_cannot_be_found_is_one_line_as_python_says_it(tmp_path):
    status = tmp_path / "status"
    proc = subprocess.run([sys.executable, str(TARGET), "-m", "no_such_module_xyz"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env=dict(os.environ, NSYSWRAP_STATUS=str(status)))
    python = subprocess.run([sys.executable, "-m", "no_such_module_xyz"], capture_output=True,
                            text=True, cwd=tmp_path)
    assert proc.returncode == python.returncode == 1
    assert proc.stderr == python.stderr  # "...python: No module named no_such_module_xyz"
    assert status.read_text().splitlines() == ["no-module",
                                               "No module named no_such_module_xyz"]


def test_an_error_in_the_program_shows_only_its_own_frames(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "bad.py").write_text("import no_such_module_xyz\n")
    proc = subprocess.run([sys.executable, str(TARGET), "-m", "pkg.bad"], capture_output=True,
                          text=True, cwd=tmp_path)
    python = subprocess.run([sys.executable, "-m", "pkg.bad"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert proc.returncode == python.returncode == 1
    assert proc.stderr.splitlines()[-3:] == python.stderr.splitlines()[-3:]
    assert "runner.py" not in proc.stderr and "runpy" not in proc.stderr
