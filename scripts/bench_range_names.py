"""Every output format of `nsyswrap compare` on one million NVTX ranges, named with a few
names and with a name each: what a name per range costs.

    python scripts/bench_range_names.py [--ranges 1000000] [--names 7 1000000] [--runs 3]
        [--formats json html table markdown csv [trace]] [--syncs] [--old OLD_CODE_DIR]
        [--timeout 600] [--workdir /tmp/nsyswrap-bench]

The reports are scripts/make_range_report.py's (one range around each tiny kernel, on two
threads, `--nesting 1`), their ranges named `request <id>` with NAMES distinct ids
(`--names`), with `--syncs` a cudaDeviceSynchronize in each range (a SYNC_IN_RANGE finding
for each family), made once and kept in WORKDIR (names_<ranges>_<names>[_syncs].sqlite).
A program that
names each range after what it serves (a request's id) makes a range family of every
range; the cost of each format should follow the ranges, not names × instances.

For each format, RUNS times, the reports in turn (and with --old, OLD_CODE_DIR's nsyswrap
after each: the anchor): `python -m nsyswrap compare REPORT --format F -o OUT`, in a child
process of its own. Its wall time, CPU time (user + system: less disturbed than wall time
where other work shares the cores) and peak RSS come from wait4(); the output's size from
the file. Prints a Markdown table of medians [min–max] and each report's ratio to the
first's (the few-names report), taken run by run: compare ratios, not times across runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FORMATS = ("json", "html", "table", "markdown", "csv", "trace")


def report(ranges: int, names: int, workdir: Path, syncs: bool) -> Path:
    """`ranges` ranges named with `names` distinct names, made once and kept."""
    out = workdir / f"names_{ranges}_{names}{'_syncs' if syncs else ''}.sqlite"
    if not out.exists():
        tmp = out.with_suffix(".partial")
        subprocess.run([sys.executable, str(HERE / "make_range_report.py"), str(tmp),
                        "--kernels", str(ranges), "--nesting", "1", "--names", str(names),
                        "--force", *(["--syncs"] if syncs else [])], check=True)
        tmp.rename(out)
    return out


def measured(cmd: list[str], code: Path, timeout: float) -> dict | None:
    """Wall seconds, CPU seconds and peak RSS (MiB) of one child process running `code`'s
    nsyswrap; None when it failed or ran past `timeout`."""
    # Run from the code's own folder: `python -m` puts the working folder first on the path.
    env = dict(os.environ, PYTHONPATH=str(code), PYTHONDONTWRITEBYTECODE="1")
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=code, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            os.wait4(proc.pid, 0)
            return None
        time.sleep(0.02)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        print(f"failed: {' '.join(cmd)}\n{err}", file=sys.stderr)
        return None
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
            "rss": usage.ru_maxrss / 1024}


def _span(values: list[float], unit: str, digits: int = 1) -> str:
    return (f"{statistics.median(values):.{digits}f} {unit} "
            f"[{min(values):.{digits}f}–{max(values):.{digits}f}]")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranges", type=int, default=1_000_000)
    p.add_argument("--names", type=int, nargs="+", default=None,
                   help="distinct names of each report (default: 7 and one per range)")
    p.add_argument("--formats", nargs="+", default=list(FORMATS[:-1]), choices=FORMATS,
                   help="default: all but trace, which writes every GPU operation (~490 B each)")
    p.add_argument("--syncs", action="store_true", help="a sync in each range")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--old", type=Path, help="another nsyswrap's code folder, the anchor")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/nsyswrap-bench"))
    a = p.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    names = a.names or [7, a.ranges]
    files = [report(a.ranges, n, a.workdir, a.syncs).resolve() for n in names]
    os.sync()  # no write-back of fresh files competing with the timed runs
    codes = [("this checkout", ROOT)] + ([("old", a.old.resolve())] if a.old else [])
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{a.ranges:,} ranges{' with a sync each' if a.syncs else ''}; {a.runs} runs each, "
          f"median [min–max]; ratios to {names[0]:,} names, run by run\n")
    print("| format | code | names | wall | CPU | peak RSS | output | wall ratio | "
          "CPU ratio | RSS ratio |")
    print("|---|---|---:|---|---|---|---:|---:|---:|---:|")
    for fmt in a.formats:
        for label, code in codes:
            samples: list[list[dict | None]] = [[] for _ in files]
            sizes = [0] * len(files)
            for _ in range(a.runs):
                for i, path in enumerate(files):
                    out = a.workdir.resolve() / f"out.{fmt}"
                    samples[i].append(measured(
                        [sys.executable, "-m", "nsyswrap", "compare", str(path), "--format",
                         fmt, "-o", str(out)], code, a.timeout))
                    sizes[i] = out.stat().st_size if out.exists() else 0
                    out.unlink(missing_ok=True)
            for i, n in enumerate(names):
                got = [s for s in samples[i] if s]
                if len(got) < a.runs:
                    print(f"| {fmt} | {label} | {n:,} | failed or > {a.timeout:.0f} s | | | | "
                          "| | |", flush=True)
                    continue
                base = samples[0]
                ratios = {k: [s[k] / b[k] for s, b in zip(got, base, strict=True) if b]
                          for k in ("wall", "cpu", "rss")}
                print(f"| {fmt} | {label} | {n:,} | {_span([s['wall'] for s in got], 's')} | "
                      f"{_span([s['cpu'] for s in got], 's')} | "
                      f"{_span([s['rss'] for s in got], 'MiB', 0)} | "
                      f"{sizes[i] / 2**20:.2f} MiB | "
                      + " | ".join(f"{statistics.median(ratios[k]):.2f}×" if ratios[k]
                                   else "–" for k in ("wall", "cpu", "rss")) + " |",
                      flush=True)


if __name__ == "__main__":
    main()
