"""A CPU-only workload for nsys capture ranges: a few ranges before an NVTX range
`window@e2e` (the capture range of the tests), steps inside it, more after, then a line
saying it reached its end and the exit code from argv."""

import sys
import time

import nsyswrap

for _ in range(3):
    with nsyswrap.annotate("before", domain="e2e"):
        time.sleep(0.005)
with nsyswrap.annotate("window", domain="e2e"):
    for _ in range(3):
        with nsyswrap.annotate("step", domain="e2e"):
            time.sleep(0.005)
time.sleep(0.3)  # nsys shuts a program down as the range ends: it does so in here
for _ in range(3):
    with nsyswrap.annotate("after", domain="e2e"):
        time.sleep(0.005)
print("window: reached the end", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
