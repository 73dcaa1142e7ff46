"""What nsyswrap's runner adds per `torch.cuda.Event.record()` on the host
(nsyswrap/instrument/event_hooks.py), measured against the unhooked record in the same process:

    python scripts/bench_user_events.py [--records N] [--rounds R]    (a CUDA GPU)
    python scripts/bench_user_events.py --stand-in [--runner PATH]    (any host, no torch)

Rounds alternate the plain and the hooked method; within a round, so do chunks of 10 000
records (`chunk_added_ns`: the median over a round's chunk pairs of hooked minus plain, the
figure least moved by the host's drift, which reached ±1 µs between whole rounds against
a ~6 µs plain record on the GPU hosts). The common path: each round times N
records on two events from one frame with no kernels between them (the record's own cost),
synchronising every 10 000 records outside the timed loop, as a program's elapsed_time()
pass would, and packing the hooked records there (their cost reported apart: it falls
outside the program's windows). A new invocation: each round times calls of a chain of 8
functions, 5 arguments each, whose innermost records once (the hook takes the record's
context, the most it adds to one record). Prints JSON: ns per record plain and hooked, the
difference, per round and as the median and worst round, ns per record to pack, bytes kept
per record, and the runner's own estimates (HOOK_COST_NS, HOOK_COST_WORST_NS).

--stand-in times the hooks on stand-ins for torch's Event and Stream (an empty record()),
as the runner's own estimate does; --runner PATH loads another copy of the runner (an
earlier commit's, for a comparison in one session). Also run under `nsys profile`
(scripts/gpu_batch.sh) for the cost with CUDA tracing on.
"""

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

CHAIN_DEPTH = 8
CHAIN_SOURCE = "".join(
    f"def level{i}(event, stream, size, name, shape):\n"
    + ("    event.record(stream)\n" if i == 0 else
       f"    level{i - 1}(event, stream, size, name, shape)\n")
    for i in range(CHAIN_DEPTH))


def load_runner_hooks(path: Path):
    spec = importlib.util.spec_from_file_location("_nsyswrap_user_events", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def timed_records(events, n, stream, sync, recorder=None):
    """ns per record() over n records, syncing (and packing) every 10 000 outside the
    clock; and the ns spent packing."""
    total = pack_ns = 0
    done = 0
    while done < n:
        chunk = min(10_000, n - done)
        t0 = time.perf_counter_ns()
        for i in range(chunk):
            events[i & 1].record(stream)
        total += time.perf_counter_ns() - t0
        sync()
        if recorder is not None:
            p0 = time.perf_counter_ns()
            recorder.pack()
            pack_ns += time.perf_counter_ns() - p0
        done += chunk
    return total / n, pack_ns / n


def paired_chunks(cls, plain, hooked, events, n, stream, sync, recorder):
    """ns added per record, median over pairs of 10 000-record chunks timed one plain, one
    hooked, in turn (packing outside the clock, as timed_records)."""
    added = []
    for _ in range(max(1, n // 10_000)):
        ns = {}
        for name, method in (("plain", plain), ("hooked", hooked)):
            cls.record = method
            t0 = time.perf_counter_ns()
            for i in range(10_000):
                events[i & 1].record(stream)
            ns[name] = (time.perf_counter_ns() - t0) / 10_000
            sync()
            recorder.pack()
        added.append(ns["hooked"] - ns["plain"])
    cls.record = hooked
    return statistics.median(added)


def timed_invocations(event, n, stream, sync, recorder=None):
    """ns per call of the chain (a new invocation each, recording once), packing as above."""
    program = {}
    exec(compile(CHAIN_SOURCE, "<benchmark program>", "exec"), program)
    outermost = program[f"level{CHAIN_DEPTH - 1}"]
    total = 0
    shape = (4096, 4096)
    done = 0
    while done < n:
        chunk = min(10_000, n - done)
        t0 = time.perf_counter_ns()
        for i in range(chunk):
            outermost(event, stream, i, "matmul", shape)
        total += time.perf_counter_ns() - t0
        sync()
        if recorder is not None:
            recorder.pack()
        done += chunk
    return total / n


def torch_setup():
    import torch

    cls = torch.cuda.Event
    events = [cls(enable_timing=True), cls(enable_timing=True)]
    for e in events:  # created on the first record: outside the timing
        e.record()
    torch.cuda.synchronize()
    about = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    return cls, torch.cuda.streams, events, None, torch.cuda.synchronize, about


def stand_in_setup():
    class Base:
        def record(self, stream=None):
            return None

        def elapsed_time(self, end_event):
            return 0.0

    class Event(Base):
        pass

    class Stream:
        cuda_stream = 0

    module = type("streams", (), {"Event": Event})
    about = {"device": "stand-in Event (an empty record())"}
    return Event, module, [Event(), Event()], Stream(), lambda: None, about


def summary(rows, key):
    values = [r[key] for r in rows]
    return {"median": statistics.median(values), "worst": max(values)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--invocations", type=int, default=20_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--stand-in", action="store_true")
    p.add_argument("--runner", type=Path,
                   default=Path(__file__).parents[1] / "nsyswrap" / "instrument" / "event_hooks.py")
    args = p.parse_args()
    hooks = load_runner_hooks(args.runner)
    hooks.RECORDER = hooks.Recorder()
    estimate = hooks._hook_cost()
    common_estimate, worst_estimate = estimate if isinstance(estimate, tuple) else \
        (estimate, None)
    cls, module, events, stream, sync, about = (stand_in_setup() if args.stand_in
                                                else torch_setup())
    plain = {"record": cls.record, "elapsed_time": cls.elapsed_time}
    rows = []
    for _ in range(args.rounds):
        for name, method in plain.items():
            setattr(cls, name, method)
        cls._nsyswrap_hooked = False
        plain_ns, _ = timed_records(events, args.records, stream, sync)
        plain_call_ns = timed_invocations(events[0], args.invocations, stream, sync)
        hooks._patch_event(module)
        recorder = hooks.RECORDER
        kept0 = len(recorder.records)
        hooked_ns, pack_ns = timed_records(events, args.records, stream, sync, recorder)
        kept = len(recorder.records) - kept0
        hooked_call_ns = timed_invocations(events[0], args.invocations, stream, sync,
                                           recorder)
        chunk_added_ns = paired_chunks(cls, plain["record"], cls.record, events, args.records,
                                       stream, sync, recorder)
        rows.append({"plain_ns": plain_ns, "hooked_ns": hooked_ns,
                     "added_ns": hooked_ns - plain_ns, "chunk_added_ns": chunk_added_ns,
                     "pack_ns": pack_ns,
                     "bytes_per_record": kept / args.records,
                     "new_invocation_added_ns": hooked_call_ns - plain_call_ns})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(json.dumps({**about, "runner": str(args.runner),
                      "python": sys.version.split()[0], "records": args.records,
                      "invocations": args.invocations, "rounds": rows, "median": med,
                      "added_ns": summary(rows, "added_ns"),
                      "chunk_added_ns": summary(rows, "chunk_added_ns"),
                      "new_invocation_added_ns": summary(rows, "new_invocation_added_ns"),
                      "runner_estimate_ns": common_estimate,
                      "runner_estimate_worst_ns": worst_estimate}, indent=1))


if __name__ == "__main__":
    main()
