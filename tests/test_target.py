"""nsyswrap/_target.py, the runner nsys starts: an interrupted program ends through exit(),
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

TARGET = Path(__file__).parents[1] / "nsyswrap" / "_target.py"
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
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
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


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
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
