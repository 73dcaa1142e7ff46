"""torch.utils.benchmark.Timer and triton.testing.do_bench on CPU tensors, unmodified, for
`nsyswrap run` on the CPU (tests/test_timing_tools_run.py): what each returned goes, as one
JSON line, to the file named by the first argument."""

import json
import sys

import torch
import torch.utils.benchmark as benchmark
from triton.testing import do_bench

a = torch.randn(64, 64)
b = torch.randn(64, 64)
said = open(sys.argv[1], "w")


def measured(kind, m):
    said.write(json.dumps({"kind": kind, "raw_times": list(m.raw_times),
                           "number_per_run": m.number_per_run, "median": m.median}) + "\n")


measured("timer.timeit", benchmark.Timer(stmt="a @ b", globals={"a": a, "b": b}).timeit(200))
measured("timer.blocked_autorange", benchmark.Timer(
    stmt="a + b", globals={"a": a, "b": b}).blocked_autorange(min_run_time=0.2))
measured("timer.adaptive_autorange", benchmark.Timer(
    stmt="torch.mm(a, b)", globals={"a": a, "b": b, "torch": torch}).adaptive_autorange(
        threshold=0.2, max_run_time=0.5))
mean_ms = do_bench(lambda: a @ b, warmup=5, rep=20)
said.write(json.dumps({"kind": "do_bench", "returned": mean_ms}) + "\n")
quantiles_ms = do_bench(lambda: a + b, warmup=5, rep=20, quantiles=[0.5, 0.2, 0.8])
said.write(json.dumps({"kind": "do_bench", "returned": quantiles_ms}) + "\n")
said.close()
