"""`nsyswrap compare` against `nsys stats` on the same grown reports, in the same run.

    python scripts/bench_compare.py [--source tests/data/h100_torch_mix.sqlite]
        [--sizes 10000 100000 1000000] [--timeout 600] [--workdir /tmp/nsyswrap-bench]

For each size, grows SOURCE to that many kernels (scripts/make_big_report.py), then times
  nsyswrap: nsyswrap compare FILE --format json -o OUT
  nsys:     nsys stats -r <kernel summary>,<NVTX GPU projection> -f csv FILE
(2022.x names the reports gpukernsum / nvtxgpuproj; 2023+ cuda_gpu_kern_sum /
nvtx_gpu_proj_sum) and prints wall time, peak RSS and the ratio, as a Markdown table.
Each tool reads its own copy of the file, so neither benefits from what the other wrote.
Peak RSS comes from wait4() on each child process.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_measured(cmd: list[str], timeout: float) -> tuple[float, float, int | None]:
    """(wall seconds, peak RSS MiB, exit code or None on timeout) of one child process."""
    t0 = time.perf_counter()
    # Its own session, so that a timeout stops the whole tree (nsys stats runs helpers).
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--source", type=Path, default=HERE.parent / "tests/data/h100_torch_mix.sqlite")
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--workdir", type=Path, default=Path("/tmp/nsyswrap-bench"))
    p.add_argument("--nsys", default=shutil.which("nsys"))
    a = p.parse_args()
    a.workdir.mkdir(parents=True, exist_ok=True)
    kern, proj, version = nsys_reports(a.nsys) if a.nsys else ("", "", "no nsys")
    print(f"{platform.node()}: {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"{version}; source {a.source.name}\n")
    print("| kernels | file | nsyswrap compare | peak RSS | nsys stats (kern + proj) | "
          "peak RSS | ratio |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size in a.sizes:
        grown = a.workdir / f"grown_{size}.sqlite"
        subprocess.run([sys.executable, str(HERE / "make_big_report.py"), str(a.source),
                        str(grown), "--kernels", str(size), "--force"], check=True,
                       stdout=subprocess.DEVNULL)
        for_nsys = a.workdir / f"grown_{size}_nsys.sqlite"
        shutil.copyfile(grown, for_nsys)
        os.sync()  # no write-back of the fresh files competing with the timed runs
        ours = run_measured([sys.executable, "-m", "nsyswrap", "compare", str(grown), "--format",
                             "json", "-o", str(a.workdir / f"out_{size}.json")], a.timeout)
        theirs = (run_measured([a.nsys, "stats", "-q", "-f", "csv", "-r", f"{kern},{proj}",
                                "--force-overwrite", "true",
                                "-o", str(a.workdir / f"nsys_{size}"), str(for_nsys)], a.timeout)
                  if a.nsys else (float("nan"), float("nan"), None))
        n = subprocess.run([sys.executable, "-c", "import sqlite3,sys;print(sqlite3.connect("
                            "sys.argv[1]).execute('SELECT count(*) FROM "
                            "CUPTI_ACTIVITY_KIND_KERNEL').fetchone()[0])", str(grown)],
                           capture_output=True, text=True).stdout.strip()
        mib = grown.stat().st_size / 2**20
        t_ours = f"{ours[0]:.2f} s" + ("" if ours[2] == 0 else f" (exit {ours[2]})")
        t_theirs = (f"{theirs[0]:.2f} s" + ("" if theirs[2] == 0 else f" (exit {theirs[2]})")
                    if theirs[2] is not None else f"> {a.timeout:.0f} s (stopped)")
        ratio = (f"{ours[0] / theirs[0]:.3f}" if theirs[2] == 0
                 else f"< {ours[0] / a.timeout:.3f}" if theirs[2] is None else "–")
        print(f"| {int(n):,} | {mib:.0f} MiB | {t_ours} | {ours[1]:.0f} MiB | {t_theirs} | "
              f"{theirs[1]:.0f} MiB | {ratio} |", flush=True)
        for f in (grown, for_nsys):
            f.unlink()


if __name__ == "__main__":
    main()
