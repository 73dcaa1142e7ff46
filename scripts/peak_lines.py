"""Where one `compare`'s memory peaks, line by line: a report's load, analysis and findings
(diagnose) while a thread samples the resident set every 2 ms with the main thread's
current nsyswrap lines.

    python scripts/peak_lines.py REPORT.sqlite [--top 15] [--load-only] [--exact]

Prints the highest RSS seen at each (function:line < caller < caller) of nsyswrap, highest
first, the load included. Work on other threads (the reads, the kernel table,
range_instances' side passes) shows under whatever line the main thread was at; freed heap
that glibc keeps resident counts, as it does for the user.

The sampler needs the GIL, so a spike inside one C call that holds it (pandas' grouped
median, a lexsort) can pass unseen. `--exact` instead traces the main thread's nsyswrap
lines and reads the kernel's own high-water mark of the resident set (VmHWM, reset at each
line through /proc/self/clear_refs): every byte counted, slower (each line reads /proc),
Linux only. The peak of each line is what the process reached while that line ran.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import nsyswrap.cli  # noqa: F401  (the CLI's start-up: allocator settings)
from nsyswrap import analysis
from nsyswrap.diagnose import Thresholds, diagnose
from nsyswrap.read.loader import load


def rss_mib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--load-only", action="store_true", help="stop after the load")
    p.add_argument("--exact", action="store_true",
                   help="trace lines and read the kernel's high-water mark (see above)")
    a = p.parse_args()
    if a.exact:
        return exact(a)
    main_thread = threading.get_ident()
    peaks: dict[str, int] = {}
    done = threading.Event()

    def where() -> str:
        frame, lines = sys._current_frames().get(main_thread), []
        while frame is not None and len(lines) < 3:
            if "nsyswrap" in frame.f_code.co_filename:
                lines.append(f"{os.path.basename(frame.f_code.co_filename)}:"
                             f"{frame.f_code.co_name}:{frame.f_lineno}")
            frame = frame.f_back
        return " < ".join(lines) or "-"

    def sample() -> None:
        while not done.is_set():
            rss, line = rss_mib(), where()
            if rss > peaks.get(line, 0):
                peaks[line] = rss
            time.sleep(0.002)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    report = load(a.report)
    if not a.load_only:
        diagnose(analysis.analyze(report, consume=True), Thresholds())
    done.set()
    sampler.join()
    for line, rss in sorted(peaks.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"{rss:6d} MiB  {line}")


def exact(a: argparse.Namespace) -> None:
    """peak_lines by the kernel's high-water mark of the resident set, line by line."""
    peaks: dict[str, int] = {}
    current: list[str | None] = [None]

    def high_water_mib() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
        return 0

    def reset() -> None:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the high-water mark back to the current resident set

    def traced(frame, event, arg):
        if "nsyswrap" not in frame.f_code.co_filename:
            return None

        def line(frame, event, arg):
            if event in ("line", "return"):
                if current[0] is not None:
                    peaks[current[0]] = max(peaks.get(current[0], 0), high_water_mib())
                current[0] = (f"{os.path.basename(frame.f_code.co_filename)}:"
                              f"{frame.f_code.co_name}:{frame.f_lineno}")
                reset()
            return line
        return line

    sys.settrace(traced)
    try:
        report = load(a.report)
        if not a.load_only:
            diagnose(analysis.analyze(report, consume=True), Thresholds())
    finally:
        sys.settrace(None)
    for line, rss in sorted(peaks.items(), key=lambda kv: -kv[1])[:a.top]:
        print(f"{rss:6d} MiB  {line}")


if __name__ == "__main__":
    main()
