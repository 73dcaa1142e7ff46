"""What survives when a profiled run is stopped by a signal: one row per way of stopping.

    python scripts/probe_interrupt.py OUTDIR [--seconds 8] [--only NAME,...]

Each variant profiles scripts/workloads/torch_interrupt.py (one NVTX range and one matmul +
.item() per iteration, one printed line per finished iteration), sends a signal --seconds
after the first iteration finished, waits for everything to end, exports the report and counts
what it holds:
finished iterations (printed), NVTX ranges, kernels. Needs a CUDA GPU and nsys on PATH.
The table it prints is the evidence behind docs/nsys-quirks.md ("Signals").
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "scripts" / "workloads" / "torch_interrupt.py"
NSYS_BASE = ["-t", "cuda,nvtx", "--sample=none", "--cpuctxsw=none", "-f", "true"]


def children(pid: int) -> list[int]:
    """Every descendant of pid (from /proc), depth first."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        kids.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def python_workloads(root: int) -> list[int]:
    return [p for p in children(root) if comm(p).startswith("python")][:1]


def tree(root: int) -> str:
    return " ".join(f"{p}:{comm(p)}" for p in [root, *children(root)])


def variant(name: str, out: Path, seconds: float) -> dict:
    """Run one variant; returns its row. Names: how it is started (nsyswrap run, nsys
    directly, nsys with an option, or nsys with the program under nsyswrap's runner), the
    signal, and who gets it."""
    base = out / name
    base.mkdir(parents=True, exist_ok=True)
    log = open(base / "log.txt", "w")
    nsys_cmd = ["nsys", "profile", *NSYS_BASE, "-o", str(base / "r")]
    py = [sys.executable, str(WORKLOAD), "100000", "0.05"]
    runner = [sys.executable, str(ROOT / "nsyswrap" / "instrument" / "runner.py"), *py[1:]]
    mode = {"exit_int_to_workload": "exit", "profstop_int_to_workload": "profstop",
            "termexit_term_to_nsys": "term_exit"}.get(name, "")
    how = {
        "exit_int_to_workload": (nsys_cmd + py, "workload", signal.SIGINT),
        "profstop_int_to_workload": (nsys_cmd + py, "workload", signal.SIGINT),
        "termexit_term_to_nsys": (nsys_cmd + py, "self", signal.SIGTERM),
        "runner_int_to_nsys": (nsys_cmd + runner, "self", signal.SIGINT),
        "runner_term_to_nsys": (nsys_cmd + runner, "self", signal.SIGTERM),
        "runner_term_to_workload": (nsys_cmd + runner, "workload", signal.SIGTERM),
        "flush100_kill_workload": (nsys_cmd[:2] + ["--cuda-flush-interval=100"] + nsys_cmd[2:]
                                   + py, "workload", signal.SIGKILL),
        # nsyswrap run, the user's signal on nsyswrap itself
        "nsyswrap_term": (["-m", "nsyswrap", "run", "--trace", "cuda,nvtx", "-o", str(base),
                           "--force", str(WORKLOAD), "100000", "0.05"], "self", signal.SIGTERM),
        "nsyswrap_int": (["-m", "nsyswrap", "run", "--trace", "cuda,nvtx", "-o", str(base),
                          "--force", str(WORKLOAD), "100000", "0.05"], "self", signal.SIGINT),
        # nsys directly: the signal on nsys, or on the workload under it
        "nsys_int_to_nsys": (nsys_cmd + py, "self", signal.SIGINT),
        "nsys_term_to_nsys": (nsys_cmd + py, "self", signal.SIGTERM),
        "nsys_int_to_workload": (nsys_cmd + py, "workload", signal.SIGINT),
        "nsys_term_to_workload": (nsys_cmd + py, "workload", signal.SIGTERM),
        "flush1s_int_to_nsys": (nsys_cmd[:2] + ["--cuda-flush-interval=1000"] + nsys_cmd[2:] + py,
                                "self", signal.SIGINT),
        "flush1s_term_to_workload": (nsys_cmd[:2] + ["--cuda-flush-interval=1000"]
                                     + nsys_cmd[2:] + py, "workload", signal.SIGTERM),
        "kill_none_int_to_nsys": (nsys_cmd[:2] + ["--kill=none"] + nsys_cmd[2:] + py,
                                  "self", signal.SIGINT),
        "kill_sigint_int_to_nsys": (nsys_cmd[:2] + ["--kill=2"] + nsys_cmd[2:] + py,
                                    "self", signal.SIGINT),
    }[name]
    args, target, sig = how
    cmd = [sys.executable, *args] if args[0] == "-m" else args
    env = dict(os.environ, PYTHONUNBUFFERED="1", PROBE_ON_INTERRUPT=mode,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    t0 = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, env=env, text=True,
                            start_new_session=True)
    printed = []
    # The clock starts at the first finished iteration: importing torch under nsys on a
    # cold machine can take longer than `seconds`.
    deadline = time.time() + 300
    os.set_blocking(proc.stdout.fileno(), False)
    while time.time() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
        if line:
            printed.append(line)
            if line.startswith("done 1\n") or line.strip() == "done 1":
                deadline = time.time() + seconds
        else:
            time.sleep(0.01)
    log.write(f"tree before signal: {tree(proc.pid)}\n")
    victims = [proc.pid] if target == "self" else python_workloads(proc.pid)
    for v in victims:
        os.kill(v, sig)
    log.write(f"sent {sig.name} to {victims}\n")
    os.set_blocking(proc.stdout.fileno(), True)
    try:
        rest, _ = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # --kill=none: the workload runs on; end it
        log.write(f"still running after 30 s: {tree(proc.pid)}; SIGINT to the workload\n")
        for v in python_workloads(proc.pid):
            os.kill(v, signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rest, _ = proc.communicate()
    printed.append(rest or "")
    done = sum(1 for chunk in printed for ln in chunk.splitlines() if ln.startswith("done "))
    reps = list(base.glob("*.nsys-rep"))
    row = {"variant": name, "rc": proc.returncode, "seconds": round(time.time() - t0, 1),
           "finished": done, "report": bool(reps), "ranges": None, "kernels": None}
    if reps:
        sqlite = reps[0].with_suffix(".sqlite")
        if not sqlite.exists():
            subprocess.run(["nsys", "export", "--type", "sqlite", "-f", "true", "-o",
                            str(sqlite), str(reps[0])], capture_output=True)
        if sqlite.exists():
            con = sqlite3.connect(f"file:{sqlite}?mode=ro", uri=True)
            tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master")}
            if "NVTX_EVENTS" in tables:
                row["ranges"] = con.execute(
                    "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59").fetchone()[0]
            row["kernels"] = (con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
                              .fetchone()[0] if "CUPTI_ACTIVITY_KIND_KERNEL" in tables else 0)
            con.close()
    log.close()
    return row


# The first runs (H100, nsys 2025.3.1): every one of these kept 0 kernels.
BROKEN = ["nsys_int_to_nsys", "nsys_term_to_nsys", "nsys_int_to_workload",
          "nsys_term_to_workload", "flush1s_int_to_nsys", "flush1s_term_to_workload",
          "kill_none_int_to_nsys", "kill_sigint_int_to_nsys"]
VARIANTS = ["nsyswrap_term", "nsyswrap_int", "exit_int_to_workload", "profstop_int_to_workload",
            "termexit_term_to_nsys", "runner_int_to_nsys", "runner_term_to_nsys",
            "runner_term_to_workload", "flush100_kill_workload", "nsys_int_to_workload"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    names = [n for n in args.only.split(",") if n] or VARIANTS
    rows = []
    for name in names:
        row = variant(name, args.out, args.seconds)
        rows.append(row)
        print(row, flush=True)
    print("\n| variant | rc | s | finished iterations | NVTX ranges | kernels |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['rc']} | {r['seconds']} | {r['finished']} | "
              f"{r['ranges']} | {r['kernels']} |")


if __name__ == "__main__":
    main()
