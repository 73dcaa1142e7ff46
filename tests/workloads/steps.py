"""A CPU-only training-loop stand-in for `nsyswrap diff` of two runs: `steps.py N [--slow]`
runs N steps, each a `load` (2 ms) and a `compute` (4 ms; 40 ms with --slow) in a `step`:
a step 7x as long, far beyond what a loaded machine's scheduling adds to sleeps (at 16 ms
the step's verdict came out "no significant change" under a load of 7 on 2 cores)."""

import sys
import time

import nsyswrap

steps = int(sys.argv[1])
compute_s = 0.040 if "--slow" in sys.argv[2:] else 0.004
for _ in range(steps):
    with nsyswrap.annotate("step", domain="e2e"):
        with nsyswrap.annotate("load", domain="e2e"):
            time.sleep(0.002)
        with nsyswrap.annotate("compute", domain="e2e"):
            time.sleep(compute_s)
