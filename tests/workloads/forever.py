"""Annotates a tick every 10 ms until interrupted, then exits 130 through sys.exit (as a
training loop that catches KeyboardInterrupt): for the signal tests of `nsyswrap run`."""

import sys
import time

import nsyswrap

print("running", flush=True)
try:
    while True:
        with nsyswrap.annotate("tick", domain="forever"):
            time.sleep(0.01)
except KeyboardInterrupt:
    print("forever: interrupted", flush=True)
    sys.exit(130)
