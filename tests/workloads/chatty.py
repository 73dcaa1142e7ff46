"""Prints far more than a pipe holds (20 000 annotated lines, ~2.3 MB), for the test that
`nsyswrap run chatty.py | head -1` neither hangs nor loses the capture."""

import sys

import nsyswrap

LINES = 20000

for i in range(LINES):
    with nsyswrap.annotate("line", domain="chatty"):
        print(f"chatty line {i} " + "x" * 100)
print("chatty: done", file=sys.stderr, flush=True)
