"""What nsyswrap's runner adds per `torch.cuda.Event.record()` on the host
(nsyswrap/_user_events.py), measured against the unhooked record in the same process:

    python scripts/bench_user_events.py [--records N] [--rounds R]    (a CUDA GPU)

Rounds alternate the plain and the hooked method; each times N records on two events with
no kernels between them (the record's own cost), synchronising every 10 000 records outside
the timed loop, as a program's elapsed_time() pass would, and packing the hooked records
there (their cost reported apart: it falls outside the program's windows). Prints JSON: ns
per record plain and hooked, the difference (median over rounds), ns per record to pack,
bytes kept per record, and the runner's own estimate (HOOK_COST_NS). Also run under
`nsys profile` (scripts/gpu_batch.sh) for the cost with CUDA tracing on.
"""

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch


def load_runner_hooks():
    path = Path(__file__).parents[1] / "nsyswrap" / "_user_events.py"
    spec = importlib.util.spec_from_file_location("_nsyswrap_user_events", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed_records(events, n, recorder=None):
    """ns per record() over n records, syncing (and packing) every 10 000 outside the
    clock; and the ns spent packing."""
    total = pack_ns = 0
    done = 0
    while done < n:
        chunk = min(10_000, n - done)
        t0 = time.perf_counter_ns()
        for i in range(chunk):
            events[i & 1].record()
        total += time.perf_counter_ns() - t0
        torch.cuda.synchronize()
        if recorder is not None:
            p0 = time.perf_counter_ns()
            recorder.pack()
            pack_ns += time.perf_counter_ns() - p0
        done += chunk
    return total / n, pack_ns / n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    hooks = load_runner_hooks()
    hooks.RECORDER = hooks.Recorder()
    hooks.HOOK_COST_NS = hooks._hook_cost()
    cls = torch.cuda.Event
    plain = {"record": cls.record, "elapsed_time": cls.elapsed_time}
    events = [cls(enable_timing=True), cls(enable_timing=True)]
    for e in events:  # created on the first record: outside the timing
        e.record()
    torch.cuda.synchronize()
    rows = []
    for _ in range(args.rounds):
        for name, method in plain.items():
            setattr(cls, name, method)
        cls._nsyswrap_hooked = False
        plain_ns, _ = timed_records(events, args.records)
        hooks._patch_event(torch.cuda.streams)
        recorder = hooks.RECORDER
        kept0 = len(recorder.records)
        hooked_ns, pack_ns = timed_records(events, args.records, recorder)
        rows.append({"plain_ns": plain_ns, "hooked_ns": hooked_ns,
                     "added_ns": hooked_ns - plain_ns, "pack_ns": pack_ns,
                     "bytes_per_record": (len(recorder.records) - kept0) / args.records})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                      "python": sys.version.split()[0], "records": args.records,
                      "rounds": rows, "median": med,
                      "runner_estimate_ns": hooks.HOOK_COST_NS}, indent=1))


if __name__ == "__main__":
    main()
