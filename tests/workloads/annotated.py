"""A CPU-only Python workload for end-to-end tests of `nsyswrap run` (no GPU needed):
nested NVTX ranges through nsyswrap.annotate, the first step slow, exit code from argv."""

import sys
import time

import nsyswrap

STEPS = 6

print("annotated: start", flush=True)
for i in range(STEPS):
    with nsyswrap.annotate("step", domain="e2e"):
        with nsyswrap.annotate("load", domain="e2e"):
            time.sleep(0.02 if i == 0 else 0.002)
        with nsyswrap.annotate("compute", domain="e2e"):
            time.sleep(0.001)
nsyswrap.mark("done", domain="e2e")
print("annotated: done", file=sys.stderr, flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
