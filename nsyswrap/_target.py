"""How `nsyswrap run` starts a Python program under nsys:

    python .../nsyswrap/_target.py SCRIPT [ARGS]      (as python SCRIPT ARGS)
    python .../nsyswrap/_target.py -m MODULE [ARGS]   (as python -m MODULE ARGS)

Run by path, not as `-m nsyswrap._target`, so that the profiled process imports nothing of
nsyswrap (nor pandas) unless the program does; this file uses the standard library only.

It runs the program as python would (runpy; sys.argv and sys.path[0] set the same way), with
one difference: an interrupted program ends through exit(), not through a signal.

Why: nsys's CUDA trace is buffered inside the profiled process and handed to nsys by exit
handlers of its injection library. Python ends a program interrupted by Ctrl-C by re-raising
SIGINT on itself after finalisation, and SIGTERM's default action ends it outright: either
way the process dies by a signal, exit handlers never run, and the report keeps the NVTX
ranges but none of the kernels (measured on the H100 with nsys 2025.3.1:
scripts/probe_interrupt.py, docs/nsys-quirks.md "Signals"). Here a KeyboardInterrupt that
reaches the top is printed as python prints it and the program exits with 130 through
sys.exit; SIGTERM, unless the program handles it, raises KeyboardInterrupt the same way
(and exits with 143), so `finally` blocks and checkpoint-on-interrupt code run as for Ctrl-C.

A program blocked in a CUDA or NCCL call never gets there: Python runs signal handlers in
the main thread between bytecodes. In a DDP job interrupted on every rank, the rank that
stops first leaves the others waiting for it inside a collective, forever (seen on 2x H200:
one rank's report lost). So a watcher thread hears the signal through the wakeup fd (written
by the C-level handler, whatever the main thread is doing); if the program has not started
handling it after STUCK_AFTER_S, and the handler is still ours, it calls the C library's
exit(): the exit handlers that write the trace run, the stuck thread goes with the process.

Under `nsyswrap run --ranks`, NSYSWRAP_INTERRUPT_EXIT=0: an interrupted rank exits with 0,
so that torchrun does not take it for a failed worker and kill the other ranks' nsys before
they have written their reports (nsyswrap itself knows it was interrupted, and exits 130).
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import threading
import time
import traceback

EXIT_SIGINT = 130
EXIT_SIGTERM = 143
USAGE = "usage: python _target.py SCRIPT [ARGS] | -m MODULE [ARGS]"
# How long the program gets to start handling an interrupt before it counts as stuck.
STUCK_AFTER_S = float(os.environ.get("NSYSWRAP_STUCK_AFTER_S", "10"))
INTERRUPT_EXIT = os.environ.get("NSYSWRAP_INTERRUPT_EXIT")

_handled: list[int] = []  # signals whose Python handler has run (in the main thread)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as the interrupt Python programs already know how to handle."""


def _on_sigterm(signum, _frame):
    _handled.append(signum)
    raise _Terminated("SIGTERM")


def _on_sigint(signum, _frame):
    _handled.append(signum)
    raise KeyboardInterrupt


def _exit_code(signum: int) -> int:
    if INTERRUPT_EXIT is not None:
        return int(INTERRUPT_EXIT)
    return EXIT_SIGTERM if signum == signal.SIGTERM else EXIT_SIGINT


def _watch_for_a_stuck_interrupt() -> None:
    """Start the watcher thread (see the module docstring)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except (ValueError, OSError):
        return
    ours = {signal.SIGINT: _on_sigint, signal.SIGTERM: _on_sigterm}

    def watch() -> None:
        while True:
            try:
                data = os.read(read_end, 64)
            except OSError:
                return
            received = [s for s in data if s in ours]
            if not received:
                continue
            signum = received[0]
            deadline = time.monotonic() + STUCK_AFTER_S
            while time.monotonic() < deadline:
                if _handled:
                    return  # the program is handling it (and may take its time to)
                time.sleep(0.05)
            if signal.getsignal(signum) is not ours[signum]:
                return  # the program's own handler: its business
            print(f"nsyswrap: the program did not respond to {signal.Signals(signum).name} "
                  f"within {STUCK_AFTER_S:g} s (blocked in a CUDA or NCCL call: waiting for a "
                  "rank that has stopped?); ending it here so that its trace is written",
                  file=sys.stderr, flush=True)
            import ctypes

            ctypes.CDLL(None).exit(_exit_code(signum))

    threading.Thread(target=watch, name="nsyswrap-interrupt-watch", daemon=True).start()


def _user_frames(tb):
    """Drop the frames of this module and runpy from a traceback: the user's come after."""
    while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                              or tb.tb_frame.f_globals.get("__name__") == "runpy"):
        tb = tb.tb_next
    return tb


def main(argv: list[str]) -> int:
    if not argv or argv == ["-m"]:
        print(USAGE, file=sys.stderr)
        return 2
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    _watch_for_a_stuck_interrupt()
    try:
        if argv[0] == "-m":
            sys.argv = argv[1:]
            sys.path[0] = os.getcwd()  # as python -m
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv[:]
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except KeyboardInterrupt as e:
        traceback.print_exception(type(e), e, _user_frames(e.__traceback__))
        return _exit_code(signal.SIGTERM if isinstance(e, _Terminated) else signal.SIGINT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
