"""Where one `compare`'s memory peaks, line by line: a report's load, analysis and findings
(diagnose) while a thread samples the resident set every 2 ms with the main thread's
current nsyswrap lines.

    python scripts/peak_lines.py REPORT.sqlite [--top 15] [--load-only]

Prints the highest RSS seen at each (function:line < caller < caller) of nsyswrap, highest
first, the load included. Work on other threads (the reads, the kernel table,
range_instances' side passes) shows under whatever line the main thread was at; freed heap
that glibc keeps resident counts, as it does for the user.
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
from nsyswrap.loader import load


def rss_mib() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 2**20


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--load-only", action="store_true", help="stop after the load")
    a = p.parse_args()
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


if __name__ == "__main__":
    main()
