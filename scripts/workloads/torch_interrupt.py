"""A long annotated loop meant to be stopped: `nsyswrap run` gets SIGINT or SIGTERM while
it runs, and the report must still hold the kernels of the iterations that finished.

    python torch_interrupt.py [ITERATIONS] [SECONDS_PER_ITERATION]

Each iteration is one NVTX range `iteration` holding a matmul and a `.item()` (so each
iteration's kernels have run when it ends), then a host pause. It prints one line per
finished iteration, so a test knows how many completed before the signal.
"""

import os
import signal
import sys
import time

import torch

import nsyswrap

# For scripts/probe_interrupt.py: how the program itself ends on an interrupt.
#   exit      catch KeyboardInterrupt, sys.exit(130)
#   profstop  catch KeyboardInterrupt, cudaProfilerStop(), re-raise
#   term_exit SIGTERM -> sys.exit(143)
MODE = os.environ.get("PROBE_ON_INTERRUPT", "")
if MODE == "term_exit":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
a = torch.randn(2048, 2048, device="cuda")
try:
    for i in range(iterations):
        with nsyswrap.annotate("iteration"):
            (a @ a).sum().item()
        print(f"done {i + 1}", flush=True)
        time.sleep(pause)
except KeyboardInterrupt:
    if MODE == "exit":
        sys.exit(130)
    if MODE == "profstop":
        torch.cuda.cudart().cudaProfilerStop()
    raise
print("torch_interrupt finished all iterations")
