"""`nsyswrap compare` against `nsys stats` (and, optionally, another version of nsyswrap) on
the same grown reports, in the same run.

    python scripts/bench_compare.py [--source tests/data/h100_torch_train.sqlite]
        [--sizes 1000000 10000000] [--ranges 2000000] [--demo] [--runs 3]
        [--old OLD_CODE_DIR] [--timeout 600] [--workdir /tmp/nsyswrap-bench] [--no-nsys]

(--runs 0 makes the reports and stops.) --ranges with no number after it skips the
range-heavy report, which the default includes: nsys stats' NVTX projection of its 10 M
ranges runs for many minutes (a device call of 600 s ran out in it), so time that report
with --no-nsys.

Reports are made once and kept in WORKDIR (grown_<source>_<size>.sqlite by
scripts/make_big_report.py; ranges_<n>.sqlite by scripts/make_range_report.py, five nested
NVTX ranges around each of n tiny kernels on two threads); later runs reuse them. Then, for
each report, RUNS times in turn:
  nsyswrap: nsyswrap compare FILE --format json -o OUT        (this checkout)
  old:      the same with OLD_CODE_DIR on PYTHONPATH           (with --old: the anchor)
  nsys:     nsys stats -r <kernel summary>,<NVTX GPU projection> -f csv FILE
(2022.x names the reports gpukernsum / nvtxgpuproj; 2023+ cuda_gpu_kern_sum /
nvtx_gpu_proj_sum) and prints the median wall time and peak RSS of each, and the ratios,
as a Markdown table. nsys reads its own copy of the file, so it cannot reuse an export
nsyswrap's run left beside it. Peak RSS comes from wait4() on each child process. Machines
drift by ±20% through the day: compare within one run, not across runs.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _path(code: Path) -> str:
    """PYTHONPATH with `code` first: the package under test, and whatever else the caller's
    PYTHONPATH provides (the GPU host's carried wheels)."""
    rest = os.environ.get("PYTHONPATH", "")
    return str(code) + (os.pathsep + rest if rest else "")


def run_measured(cmd: list[str], timeout: float, env: dict | None = None,
                 cwd: Path | None = None) -> tuple[float, float, int | None]:
    """(wall seconds, peak RSS MiB, exit code or None on timeout) of one child process."""
    t0 = time.perf_counter()
    # Its own session, so that a timeout stops the whole tree (nsys stats runs helpers).
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, env=env, cwd=cwd)
    deadline = t0 + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            return time.perf_counter() - t0, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(
                status)
        if time.perf_counter() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            _, _, usage = os.wait4(proc.pid, 0)
            return time.perf_counter() - t0, usage.ru_maxrss / 1024, None
        time.sleep(0.02)


def nsys_reports(nsys: str) -> tuple[str, str, str]:
    out = subprocess.run([nsys, "--version"], capture_output=True, text=True).stdout
    version = re.search(r"(\d{4})\.(\d+)", out)
    year = int(version.group(1)) if version else 2025
    if year < 2023:
        return "gpukernsum", "nvtxgpuproj", out.strip()
    return "cuda_gpu_kern_sum", "nvtx_gpu_proj_sum", out.strip()


def grown(source: Path, size: int, workdir: Path) -> Path:
    """SOURCE grown to `size` kernels, made once and kept."""
    out = workdir / f"grown_{source.stem}_{size}.sqlite"
    if not out.exists():
        tmp = out.with_suffix(".partial")
        subprocess.run([sys.executable, str(HERE / "make_big_report.py"), str(source),
                        str(tmp), "--kernels", str(size), "--force"], check=True)
        tmp.rename(out)
    return out


def range_heavy(kernels: int, workdir: Path) -> Path:
    out = workdir / f"ranges_{kernels}.sqlite"
    if not out.exists():
        tmp = out.with_suffix(".partial")
        subprocess.run([sys.executable, str(HERE / "make_range_report.py"), str(tmp),
                        "--kernels", str(kernels), "--force"], check=True)
        tmp.rename(out)
    return out


def counts(path: Path) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    k = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    r = con.execute("SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)").fetchone()[0]
    con.close()
    return f"{k:,} kernels, {r:,} ranges"


def fmt(samples: list[tuple[float, float, int | None]], timeout: float) -> tuple[str, str]:
    if not samples:
        return "–", "–"
    if any(s[2] is None for s in samples):
        return f"> {timeout:.0f} s (stopped)", f"{max(s[1] for s in samples):.0f} MiB"
    t = statistics.median(s[0] for s in samples)
    m = statistics.median(s[1] for s in samples)
    bad = {s[2] for s in samples} - {0}
    return (f"{t:.2f} s" + (f" (exit {bad})" if bad else "")
            + f" [{min(s[0] for s in samples):.2f}–{max(s[0] for s in samples):.2f}]",
            f"{m:.0f} MiB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=ROOT / "tests/data/h100_torch_train.sqlite")
    p.add_argument("--sizes", type=int, nargs="*", default=[1_000_000, 10_000_000])
    p.add_argument("--ranges", type=int, nargs="*", default=[2_000_000],
                   help="range-heavy reports: kernels, each in five nested ranges")
    p.add_argument("--demo", action="store_true", help="also the bundled demo report")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--old", type=Path, help="another nsyswrap's code folder, the anchor")
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/nsyswrap-bench"))
    p.add_argument("--nsys", default=shutil.which("nsys"))
    p.add_argument("--no-nsys", action="store_true")
    a = p.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    nsys = None if a.no_nsys else a.nsys
    kern, proj, version = nsys_reports(nsys) if nsys else ("", "", "no nsys")
    files = [grown(a.source.resolve(), n, a.workdir) for n in a.sizes]
    files += [range_heavy(n, a.workdir) for n in a.ranges]
    if a.demo:
        files.append(ROOT / "nsyswrap/data/scenarios-h100.sqlite")
    os.sync()  # no write-back of fresh files competing with the timed runs
    if a.runs == 0:  # only make the reports (on a host whose time is short, ahead of runs)
        print("\n".join(f"{path}: {counts(path)}" for path in files))
        return
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{version}; {a.runs} runs each, median [min–max]\n")
    cols = ["report", "nsyswrap", "peak RSS"]
    cols += ["old nsyswrap", "peak RSS", "new / old"] if a.old else []
    cols += ["nsys stats (kern + proj)", "peak RSS", "nsyswrap / nsys"] if nsys else []
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for path in files:
        out = a.workdir / "out.json"
        ours, old, theirs = [], [], []
        for_nsys = a.workdir / "for_nsys.sqlite"
        for _ in range(a.runs):
            env = dict(os.environ, PYTHONPATH=_path(ROOT), PYTHONDONTWRITEBYTECODE="1")
            ours.append(run_measured([sys.executable, "-m", "nsyswrap", "compare", str(path),
                                      "--format", "json", "-o", str(out)], a.timeout, env))
            if a.old:
                env = dict(os.environ, PYTHONPATH=_path(a.old.resolve()),
                           PYTHONDONTWRITEBYTECODE="1")
                old.append(run_measured([sys.executable, "-m", "nsyswrap", "compare", str(path),
                                         "--format", "json", "-o", str(out)], a.timeout, env,
                                        cwd=a.old.resolve()))
            if nsys:
                shutil.copyfile(path, for_nsys)
                theirs.append(run_measured(
                    [nsys, "stats", "-q", "-f", "csv", "-r", f"{kern},{proj}",
                     "--force-overwrite", "true", "-o", str(a.workdir / "nsys"),
                     str(for_nsys)], a.timeout))
                for f in a.workdir.glob("for_nsys*"):
                    f.unlink()
        row = [f"{path.name}: {counts(path)}, {path.stat().st_size / 2**20:.0f} MiB",
               *fmt(ours, a.timeout)]
        med = statistics.median(s[0] for s in ours)
        if a.old:
            rss = statistics.median(s[1] for s in ours) / statistics.median(s[1] for s in old)
            row += [*fmt(old, a.timeout),
                    f"{med / statistics.median(s[0] for s in old):.2f}× time, {rss:.2f}× RSS"]
        if nsys:
            ok = all(s[2] == 0 for s in theirs)
            ratios = [o[0] / t[0] for o, t in zip(ours, theirs, strict=True)]
            row += [*fmt(theirs, a.timeout),
                    f"{statistics.median(ratios):.3f} (max {max(ratios):.3f})" if ok
                    else f"< {med / a.timeout:.3f}"]
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
