"""Where one `compare` spends its time and memory, stage by stage, on one report.

    python scripts/time_stages.py REPORT.sqlite [--load-only]

Runs what `nsyswrap compare` runs (the same start-up, `load`, `analyze(consume=True)`,
`diagnose`) in this process and prints, per stage, its wall time and the resident and peak
memory after it (from /proc and getrusage). With --load-only, stops after `load`. Put
another version's code first on PYTHONPATH to time it: compare versions in one run, in
turns, since these machines drift by ±20% through the day. Note that the kernel table is
built on a thread beside the attribution, so those two stages overlap.
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
from nsyswrap.loader import load  # noqa: E402

STAGES = ["durations_summary", "attribute", "range_instances", "range_summary",
          "process_summary", "iterations", "benchmark_summary"]
# Steps as older versions named them (to time them side by side).
OLDER_NAMES = {"durations_summary": "kernel_summary"}
# The modules that call the steps: analyze's and finished's (older versions: the package).
try:
    from nsyswrap.analysis import finish, whole  # noqa: E402

    CALLERS = [whole, finish]
except ImportError:
    CALLERS = [analysis]


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
            step = name if hasattr(caller, name) else OLDER_NAMES.get(name)  # older name
            if step is not None and hasattr(caller, step):
                setattr(caller, step, stage(step, getattr(caller, step)))
    report = timed("load", load, a.report)
    if a.load_only:
        return
    result = timed("analyze", analysis.analyze, report, consume=True)
    timed("diagnose", diagnose, result, Thresholds())
    print(f"{'total':24s} {time.perf_counter() - T0:7.2f} s   {memory()}")


if __name__ == "__main__":
    sys.exit(main())
