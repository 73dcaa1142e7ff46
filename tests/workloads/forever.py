"""Annotates a tick every 10 ms until interrupted (says "running" after the first), then
exits 130 through sys.exit (as a training loop that catches KeyboardInterrupt): for the
signal tests of `nsyswrap run`."""

import sys
import time

import nsyswrap

try:
    # "running" once the first tick is recorded: NVTX's first call loads nsys's injection
    # library, which under load took longer than the tests' half second of ticking (a
    # capture interrupted before it held no NVTX at all).
    with nsyswrap.annotate("tick", domain="forever"):
        time.sleep(0.01)
    print("running", flush=True)
    while True:
        with nsyswrap.annotate("tick", domain="forever"):
            time.sleep(0.01)
except KeyboardInterrupt:
    print("forever: interrupted", flush=True)
    sys.exit(130)
