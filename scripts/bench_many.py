"""Many reports at once: `nsyswrap compare DIR` serial (-j 1) against worker processes.

    python scripts/bench_many.py [--reports 16] [--kernels 50000] [--jobs 1 2 16]
        [--dask-workers 2]

Grows the per-rank DDP exports (tests/data/h200x2_ddp_straggler.rank{0,1}.sqlite, 2x H200)
with scripts/make_big_report.py into --reports reports of about --kernels kernels each
(alternating the two ranks' exports), then times `nsyswrap compare --format json` over the
folder once per --jobs value, each in a fresh process, and prints one table: wall time,
speed-up against the first, and the peak RSS of the parent and of the largest worker.
With --dask-workers N it also starts a local Dask cluster of N worker processes (one thread
each; needs nsyswrap[dask]) and times `--dask ADDRESS` against it (the workers' memory is
not in the RSS column: they are the cluster's processes). The grown reports are kept in
--workdir for a re-run (--reuse).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_big_report import grow  # noqa: E402

SOURCES = [HERE.parent / f"tests/data/h200x2_ddp_straggler.rank{r}.sqlite" for r in (0, 1)]
PROBE = """
import json, resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
wall = time.perf_counter() - t
if p.returncode:
    sys.exit(p.stderr.decode()[-2000:])
doc = json.loads(p.stdout)
print(json.dumps({"wall_s": wall, "ranks": len(doc["ranks"]),
                  "findings": sorted({f["code"] for f in doc["findings"]}),
                  "children_max_rss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def make_reports(workdir: Path, n: int, kernels: int, reuse: bool) -> list[Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        path = workdir / f"bench.rank{i}.sqlite"
        if not (reuse and path.exists()):
            path.unlink(missing_ok=True)
            grow(SOURCES[i % 2], path, kernels)
        out.append(path)
    return out


def time_compare(folder: Path, jobs: int, dask: str | None = None) -> dict:
    cmd = [sys.executable, "-m", "nsyswrap", "compare", str(folder), "--format", "json",
           "-j", str(jobs)] + (["--dask", dask] if dask else [])
    # A probe process runs the command so that RUSAGE_CHILDREN covers only it and its
    # workers (ru_maxrss: the largest single process among them).
    p = subprocess.run([sys.executable, "-c", PROBE, *cmd], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           p for p in (str(HERE.parent), os.environ.get("PYTHONPATH")) if p)})
    if p.returncode:
        sys.exit(f"bench_many: {' '.join(cmd)} failed: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=16)
    ap.add_argument("--kernels", type=int, default=50_000, help="kernels per report (about)")
    ap.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=1, help="runs per --jobs value (best kept)")
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/nsyswrap-bench-many"))
    ap.add_argument("--reuse", action="store_true", help="keep reports already grown")
    ap.add_argument("--dask-workers", type=int, default=0,
                    help="also time --dask on a local cluster of this many worker processes")
    args = ap.parse_args()

    t = time.perf_counter()
    reports = make_reports(args.workdir, args.reports, args.kernels, args.reuse)
    size = sum(p.stat().st_size for p in reports) / 2**20
    print(f"{len(reports)} reports, {size:.0f} MiB in all, grown in "
          f"{time.perf_counter() - t:.1f} s; {os.cpu_count()} cores; "
          f"nsyswrap compare {args.workdir} --format json -j N", flush=True)
    rows = []
    for jobs in args.jobs:
        runs = [time_compare(args.workdir, jobs) for _ in range(args.repeat)]
        rows.append((str(jobs), min(runs, key=lambda r: r["wall_s"])))
    if args.dask_workers:
        from dask.distributed import LocalCluster

        with LocalCluster(n_workers=args.dask_workers, threads_per_worker=1,
                          processes=True, dashboard_address=None) as cluster:
            runs = [time_compare(args.workdir, 1, cluster.scheduler_address)
                    for _ in range(args.repeat)]
        rows.append((f"dask {args.dask_workers}", min(runs, key=lambda r: r["wall_s"])))
    base = rows[0][1]["wall_s"]
    print(f"{'jobs':>6} {'wall':>9} {'speed-up':>9} {'max RSS (one process)':>22}  findings")
    for jobs, r in rows:
        print(f"{jobs:>6} {r['wall_s']:>8.2f}s {base / r['wall_s']:>8.2f}x "
              f"{r['children_max_rss_kib'] / 1024:>18.0f} MiB  {', '.join(r['findings'])}")


if __name__ == "__main__":
    main()
