"""Where one `compare` spends its time and memory, stage by stage, on one report.

    python scripts/time_stages.py REPORT.sqlite [--load-only]

Runs what `nsyswrap compare` runs (the same start-up, `load`, `analyze(consume=True)`,
`diagnose`) in this process and prints, per stage, its wall time and the resident and peak
memory after it (from /proc and getrusage). With --load-only, stops after `load`. Compare
versions in one run, in turns (scripts/bench_compare.py --old), since these machines drift
by ±20% through the day. `_add_chunks` is the engine's pass over the operations: each
chunk's attribution and per-range numbers; the stages after `engine_numbers` are
analysis/steps.STEPS.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time

T0 = time.perf_counter()
import nsyswrap.cli  # noqa: E402,F401  (the CLI's start-up: allocator settings, imports)
from nsyswrap import analysis  # noqa: E402
from nsyswrap.diagnose import Thresholds, diagnose  # noqa: E402
from nsyswrap.read.loader import load  # noqa: E402

# What runs before the engine and the engine's own stages (analysis/steps.py,
# analysis/engine/analyze.py), timed where they are called; then each of steps.STEPS.
STAGES = ["LoadedOperations", "families", "user_windows", "_add_chunks", "_attribution",
          "_kernel_summary", "_instances", "process_summary", "engine_numbers"]
from nsyswrap.analysis import steps  # noqa: E402
from nsyswrap.analysis.engine import analyze as engine  # noqa: E402

CALLERS = [steps, engine]


def memory() -> str:
    with open("/proc/self/statm") as f:
        rss = int(f.read().split()[1]) * resource.getpagesize() // 2**20
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    return f"rss {rss:6d} MiB, peak {peak:6d} MiB"


def timed(name: str, f, *args, **kwargs):
    t, cpu = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    wall = time.perf_counter() - t
    print(f"{name:24s} {wall:7.2f} s  cpu {time.process_time() - cpu:6.2f} s   {memory()}",
          flush=True)
    return out


def stage(name: str, f):
    return lambda *args, **kwargs: timed("  " + name, f, *args, **kwargs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("--load-only", action="store_true")
    a = p.parse_args()
    print(f"{'import':24s} {time.perf_counter() - T0:7.2f} s   {memory()}")
    for name in STAGES:  # each analysis step, timed where analyze calls it
        for caller in CALLERS:
            if hasattr(caller, name):
                setattr(caller, name, stage(name, getattr(caller, name)))
    steps.STEPS[:] = [stage(s.__name__, s) for s in steps.STEPS]
    report = timed("load", load, a.report)
    if a.load_only:
        return
    result = timed("analyze", analysis.analyze, report, consume=True)
    timed("diagnose", diagnose, result, Thresholds())
    print(f"{'total':24s} {time.perf_counter() - T0:7.2f} s   {memory()}")


if __name__ == "__main__":
    sys.exit(main())
