"""What tracing the program's lines costs (instrument/line_trace.py).

1. Per entry: a loop of the program's own lines, each calling a C function, timed with and
   without the trace in one process (ns per trace entry; its lines are the worst case: the
   trace's cost against lines that do almost nothing).
2. Whole programs: each workload run through the runner (no nsys), with the trace on and off
   in turns (NSYSWRAP_LINES=1/0), wall time of the whole process and the ratio of medians.
   Python's and torch's start-up (seconds) make these noisy: see 3.
3. In one process (--in-process FILE:FUNCTION[:ARG]): the workload's function called with
   the trace on and off in turns, after one call to warm up, each timed (the ratio of the
   medians, and the trace's entries per call).

    python scripts/bench_lines.py [--rounds N] [--in-process FILE:FUNC[:ARG]]...
        [WORKLOAD.py [ARGS...]]...
    (workloads separated by --, e.g. scripts/workloads/torch_seed_timings.py --
     scripts/workloads/torch_lines_train.py 200)

Prints JSON. Python 3.12 or newer (sys.monitoring).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER = ROOT / "nsyswrap" / "instrument" / "runner.py"
LOOP = '''
import math
def step(x):
    y = math.sqrt(x)
    return y
def loop(n):
    t = 0.0
    for i in range(n):
        t += step(i)
    return t
'''


def per_entry(rounds: int, n: int = 200_000) -> dict:
    spec = importlib.util.spec_from_file_location(
        "_lt", ROOT / "nsyswrap" / "instrument" / "line_trace.py")
    lt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(lt)
    folder = tempfile.mkdtemp()
    ns: dict = {}
    exec(compile(LOOP, os.path.join(folder, "loop.py"), "exec"), ns)
    plain, traced, entries = [], [], 0
    for _ in range(rounds):
        t = time.perf_counter_ns()
        ns["loop"](n)
        plain.append(time.perf_counter_ns() - t)
        trace = lt.LineTrace(lambda f: not f.startswith(folder))
        trace.start()
        t = time.perf_counter_ns()
        ns["loop"](n)
        traced.append(time.perf_counter_ns() - t)
        trace.stop()
        entries = sum(len(s[3]) for s in trace.threads.values())
    added = statistics.median(traced) - statistics.median(plain)
    return {"entries": entries, "plain_ns_per_call": statistics.median(plain) / n,
            "added_ns_per_entry": added / entries}


def whole(program: list[str], rounds: int) -> dict:
    times = {"1": [], "0": []}
    for _ in range(rounds):
        for on in ("1", "0"):
            env = dict(os.environ, NSYSWRAP_LINES=on)
            t = time.perf_counter()
            subprocess.run([sys.executable, str(RUNNER), *program], env=env, check=True,
                           stdout=subprocess.DEVNULL)
            times[on].append(time.perf_counter() - t)
    on, off = statistics.median(times["1"]), statistics.median(times["0"])
    return {"program": " ".join(program), "lines_s": times["1"], "no_lines_s": times["0"],
            "ratio_of_medians": on / off}


def _load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def in_process(target: str, rounds: int) -> dict:
    """FILE:FUNC[:ARG] called with the trace on and off in turns (the runner's rule of what
    is the program's code: event_hooks._is_library)."""
    path, function, *arg = target.split(":")
    hooks = _load(str(ROOT / "nsyswrap" / "instrument" / "event_hooks.py"), "_eh")
    lt = _load(str(ROOT / "nsyswrap" / "instrument" / "line_trace.py"), "_lt")
    sys.argv = [path, *arg]
    module = _load(path, "_workload")
    fn = getattr(module, function)
    args = [int(a) for a in arg]
    torch = sys.modules.get("torch")

    def timed(trace_on: bool) -> tuple[float, int]:
        trace = lt.LineTrace(lambda f: f.startswith("<") or hooks._is_library(f))
        if trace_on:
            trace.start()
        if torch is not None:
            torch.cuda.synchronize()
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            fn(*args)
        if torch is not None:
            torch.cuda.synchronize()
        took = time.perf_counter() - t
        trace.stop()
        return took, sum(len(s[3]) for s in trace.threads.values())

    timed(False)  # warm-up: libraries, allocations, autotuning
    on, off, entries = [], [], 0
    for _ in range(rounds):
        took, entries = timed(True)
        on.append(took)
        off.append(timed(False)[0])
    ratio = statistics.median(on) / statistics.median(off)
    return {"target": target, "lines_s": on, "no_lines_s": off, "ratio_of_medians": ratio,
            "entries_per_call": entries,
            "added_ns_per_entry": (statistics.median(on) - statistics.median(off)) * 1e9
            / max(entries, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--in-process", action="append", default=[], metavar="FILE:FUNC")
    parser.add_argument("programs", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    programs, current = [], []
    for arg in args.programs:
        if arg == "--":
            if current:
                programs.append(current)
            current = []
        else:
            current.append(arg)
    if current:
        programs.append(current)
    out = {"python": sys.version.split()[0], "cores": os.cpu_count(),
           "per_entry": per_entry(args.rounds),
           "in_process": [in_process(t, args.rounds) for t in args.in_process],
           "programs": [whole(p, args.rounds) for p in programs]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
