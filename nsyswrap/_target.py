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
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback

EXIT_SIGINT = 130
EXIT_SIGTERM = 143
USAGE = "usage: python _target.py SCRIPT [ARGS] | -m MODULE [ARGS]"


class _Terminated(KeyboardInterrupt):
    """SIGTERM, delivered as the interrupt Python programs already know how to handle."""


def _on_sigterm(_signum, _frame):
    raise _Terminated("SIGTERM")


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
        return EXIT_SIGTERM if isinstance(e, _Terminated) else EXIT_SIGINT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
