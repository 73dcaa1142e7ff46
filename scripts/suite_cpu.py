"""Where the test suite's CPU goes: a pytest plugin that notes each test's CPU time (the
worker's own and its waited-for children's, `getrusage`), and the machine's busy and idle
core-seconds over the whole run (`/proc/stat`, which counts what no worker waits for too:
nsys's daemons), then a summary of the notes.

    PYTHONPATH=scripts bash scripts/test.sh -p suite_cpu      # notes in $SUITE_CPU_DIR
    python scripts/suite_cpu.py [DIR] [--top N]              # the summary

The machine's speed drifts by the hour (the same tests took 499 and 618 core-seconds 20
minutes apart): compare CPU, not wall time, and versions in turns. DIR defaults to
$SUITE_CPU_DIR or /tmp/suite-cpu; a run starts it afresh.
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import shutil
import time
from pathlib import Path

FOLDER = Path(os.environ.get("SUITE_CPU_DIR", "/tmp/suite-cpu"))
_notes = None
_controller = False  # xdist's controller: it sees every test's report, runs none


def _cpu() -> tuple[float, float]:
    """(the worker's own CPU, its waited-for children's: the programs tests start)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _machine() -> tuple[int, int]:
    """(busy, idle) jiffies of all cores since boot."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq = fields[:7]
    return user + nice + system + irq + softirq, idle + iowait


def _note(kind: str, nodeid: str) -> None:
    global _notes
    if _controller:
        return
    if _notes is None:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _notes = open(FOLDER / f"{worker}.txt", "a", encoding="utf-8")  # noqa: SIM115
    own, children = _cpu()
    _notes.write(f"{kind} {time.time():.3f} {own:.3f} {children:.3f} {nodeid}\n")
    _notes.flush()


def _machine_line(what: str) -> str:
    busy, idle = _machine()
    return f"{what} {busy} {idle} {time.time():.3f}\n"


def pytest_configure(config) -> None:
    global _controller
    if "PYTEST_XDIST_WORKER" not in os.environ:  # the session's own process, once
        _controller = bool(getattr(config.option, "numprocesses", None))
        shutil.rmtree(FOLDER, ignore_errors=True)
        FOLDER.mkdir(parents=True)
        (FOLDER / "machine.txt").write_text(_machine_line("start"))


def pytest_unconfigure(config) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ:
        with open(FOLDER / "machine.txt", "a", encoding="utf-8") as f:
            f.write(_machine_line("end"))


def pytest_runtest_logstart(nodeid, location) -> None:
    _note("S", nodeid)


def pytest_runtest_logfinish(nodeid, location) -> None:
    _note("E", nodeid)


def summary(folder: Path, top: int) -> None:
    tests = {}  # (worker, test) -> (start, end, cpu, children's cpu)
    for path in sorted(folder.glob("*.txt")):
        if path.name == "machine.txt":
            continue
        started = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            kind, when, own, children, test = line.split(" ", 4)
            if kind == "S":
                started[test] = (float(when), float(own), float(children))
            elif test in started:
                t0, o0, c0 = started.pop(test)
                spent = float(children) - c0
                tests[(path.stem, test)] = (t0, float(when), float(own) - o0 + spent, spent)
    if not tests:
        raise SystemExit(f"{folder}: no notes (run pytest with -p suite_cpu)")
    machine = folder / "machine.txt"
    if machine.exists():
        lines = dict((w[0], w[1:]) for w in (ln.split() for ln in machine.read_text().splitlines()))
        if "end" in lines:
            tick = os.sysconf("SC_CLK_TCK")
            busy = (int(lines["end"][0]) - int(lines["start"][0])) / tick
            idle = (int(lines["end"][1]) - int(lines["start"][1])) / tick
            wall = float(lines["end"][2]) - float(lines["start"][2])
            print(f"machine: {wall:.0f} s, {busy:.0f} core-seconds busy, {idle:.0f} idle")
    start = min(t0 for t0, *_ in tests.values())
    for worker in sorted({w for w, _ in tests}):
        mine = [v for (w, _), v in tests.items() if w == worker]
        print(f"{worker}: {len(mine)} tests, last ended at {max(v[1] for v in mine) - start:.0f}"
              f" s, {sum(v[2] for v in mine):.0f} s of CPU")
    by_module, by_test = collections.Counter(), collections.Counter()
    children = collections.Counter()  # per module and per test function
    for (_, test), (_, _, cpu, spent) in tests.items():
        for name, counts in ((test.split("::")[0], by_module),
                             (test.split("[")[0].split("@")[0], by_test)):
            counts[name] += cpu
            children[name] += spent
    started = sum(v[3] for v in tests.values())
    print(f"tests' CPU in all: {sum(by_module.values()):.0f} s, {started:.0f} s of it in the"
          " programs they start")
    for title, counts in (("modules", by_module), ("test functions", by_test)):
        print(f"\nheaviest {title} (CPU in all, in the programs they start):")
        for name, cpu in counts.most_common(top):
            print(f"{cpu:7.1f} s {children[name]:6.1f} s  {name}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", nargs="?", type=Path, default=FOLDER)
    p.add_argument("--top", type=int, default=20)
    args = p.parse_args()
    summary(args.folder, args.top)


if __name__ == "__main__":
    main()
