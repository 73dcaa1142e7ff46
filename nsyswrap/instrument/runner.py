"""How `nsyswrap run` starts a Python program under nsys:

    python .../nsyswrap/instrument/runner.py SCRIPT [ARGS]      (as python SCRIPT ARGS)
    python .../nsyswrap/instrument/runner.py -m MODULE [ARGS]   (as python -m MODULE ARGS)

Run by path, not as `-m nsyswrap.instrument.runner`, so that the profiled process imports nothing of
nsyswrap (nor pandas) unless the program does; this file uses the standard library only.

It runs the program as python would (runpy; sys.argv and sys.path[0] set the same way;
an error shown without this runner's frames; `-m` of a module that cannot be found says
so in one line, as python does), with one difference: an interrupted program ends through
exit(), not through a signal.

Under `nsyswrap run` it first puts the program's standard output and error on the two
FIFOs nsyswrap reads (NSYSWRAP_STDOUT, NSYSWRAP_STDERR: apart from nsys's own output, see
nsyswrap/capture/launch.py); when the module of `-m` cannot be found, it says so in the file
NSYSWRAP_STATUS. It gives the program the user's umask back (NSYSWRAP_UMASK).

Why: nsys's CUDA trace is buffered inside the profiled process and handed to nsys by exit
handlers of its injection library. Python ends a program interrupted by Ctrl-C by re-raising
SIGINT on itself after finalisation, and SIGTERM's default action ends it outright: either
way the process dies by a signal, exit handlers never run, and the report keeps the NVTX
ranges but none of the kernels (measured on the H100 with nsys 2025.3.1:
scripts/probe_interrupt.py, docs/nsys-quirks.md "Signals"). Here a KeyboardInterrupt that
reaches the top is printed as python prints it and the program exits with 130 through
sys.exit; SIGTERM and SIGHUP (a closed terminal), unless the program handles them, raise
KeyboardInterrupt the same way (and exit with 143 and 129), so `finally` blocks and
checkpoint-on-interrupt code run as for Ctrl-C.

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
EXIT_SIGHUP = 129
USAGE = "usage: python runner.py SCRIPT [ARGS] | -m MODULE [ARGS]"
# How long the program gets to start handling an interrupt before it counts as stuck.
STUCK_AFTER_S = float(os.environ.get("NSYSWRAP_STUCK_AFTER_S", "10"))
INTERRUPT_EXIT = os.environ.get("NSYSWRAP_INTERRUPT_EXIT")
# The names nsyswrap/capture/launch.py hands the program's channels under.
STDOUT_ENV, STDERR_ENV, STATUS_ENV = "NSYSWRAP_STDOUT", "NSYSWRAP_STDERR", "NSYSWRAP_STATUS"
# The user's umask (octal), as nsyswrap/common/files.py hands it: nsyswrap runs with 077, and nsys
# 2022.4 starts the program with 000 (docs/nsys-quirks.md); the program makes its files as
# it would without either.
UMASK_ENV = "NSYSWRAP_UMASK"
NO_MODULE = "no-module"  # the status when the module of -m cannot be found

_handled: list[int] = []  # signals whose Python handler has run (in the main thread)


class _Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, delivered as the interrupt Python programs already know how to
    handle."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _on_sigterm(signum, _frame):
    _handled.append(signum)
    raise _Terminated(signum)


def _on_sigint(signum, _frame):
    _handled.append(signum)
    raise KeyboardInterrupt


def _exit_code(signum: int) -> int:
    if INTERRUPT_EXIT is not None:
        return int(INTERRUPT_EXIT)
    return {signal.SIGTERM: EXIT_SIGTERM, signal.SIGHUP: EXIT_SIGHUP}.get(signum, EXIT_SIGINT)


def _watch_for_a_stuck_interrupt() -> None:
    """Start the watcher thread (see the module docstring)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    try:
        signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    except (ValueError, OSError):
        return
    ours = {signal.SIGINT: _on_sigint, signal.SIGTERM: _on_sigterm,
            signal.SIGHUP: _on_sigterm}

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
            user_events = sys.modules.get("_nsyswrap_user_events")
            if user_events is not None:  # exit() skips Python's atexit: write them first
                user_events.flush(measure_floor=False)
            import ctypes

            ctypes.CDLL(None).exit(_exit_code(signum))

    threading.Thread(target=watch, name="nsyswrap-interrupt-watch", daemon=True).start()


def _user_frames(tb):
    """Drop the frames of this module and runpy from a traceback: the user's come after."""
    while tb is not None and _is_runners(tb.tb_frame):
        tb = tb.tb_next
    return tb


def _is_runners(frame) -> bool:
    """A frame of this module, of runpy, or of the import machinery."""
    return (frame.f_code.co_filename == __file__
            or frame.f_globals.get("__name__") in ("runpy", "importlib._bootstrap",
                                                   "importlib._bootstrap_external",
                                                   "importlib.util")
            or frame.f_code.co_filename.startswith("<frozen importlib"))


def _take_channels() -> str | None:
    """The program's output onto nsyswrap's FIFOs (only under nsyswrap run); returns the
    status file's path."""
    for name, fd in ((STDOUT_ENV, 1), (STDERR_ENV, 2)):
        path = os.environ.pop(name, None)
        if path:
            channel = os.open(path, os.O_WRONLY)
            os.dup2(channel, fd)
            os.close(channel)
    return os.environ.pop(STATUS_ENV, None)


def _no_module(error: ImportError, status: str | None) -> int:
    """What python -m prints when the module cannot be found, and its exit code."""
    print(f"{sys.executable}: {error}", file=sys.stderr, flush=True)
    if status:
        try:
            with open(status, "w") as f:
                f.write(f"{NO_MODULE}\n{error}\n")
        except OSError:
            pass
    return 1


def _record_user_events() -> None:
    """Record the program's own CUDA-event timings (event_hooks.py, loaded by path like
    this file), in this process and in the Python processes it starts, unless `nsyswrap
    run --no-user-events` set NSYSWRAP_USER_EVENTS=0."""
    if os.environ.get("NSYSWRAP_USER_EVENTS", "1") == "0":
        return
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "event_hooks.py")
    spec = importlib.util.spec_from_file_location("_nsyswrap_user_events", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    module.install()
    # The program's own Python processes record theirs too (_children/sitecustomize.py).
    children = os.path.join(os.path.dirname(path), "_children")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (children, os.environ.get("PYTHONPATH", "")) if p)


def _restore_umask() -> None:
    value = os.environ.pop(UMASK_ENV, "")
    try:
        os.umask(int(value, 8))
    except ValueError:  # not under nsyswrap run: the umask nsys gave
        pass


def main(argv: list[str]) -> int:
    status = _take_channels()
    _restore_umask()
    if not argv or argv == ["-m"]:
        print(USAGE, file=sys.stderr)
        return 2
    _record_user_events()
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
    if signal.getsignal(signal.SIGHUP) == signal.SIG_DFL:
        signal.signal(signal.SIGHUP, _on_sigterm)
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
        return _exit_code(e.signum if isinstance(e, _Terminated) else signal.SIGINT)
    except Exception as e:  # as python shows it: the program's frames, exit code 1
        frames = _user_frames(e.__traceback__)
        if isinstance(e, ImportError) and argv[0] == "-m" and frames is None:
            return _no_module(e, status)  # raised looking for the module, not inside it
        sys.excepthook(type(e), e.with_traceback(frames), frames)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
