"""Prints lines that look like nsys's own (its exit-code message, progress, "Generated:"),
then exits with the code in argv: nsyswrap must show them all, and take the exit code from
nsys, not from these lines."""

import sys

LINES = [
    "The target application returned non-zero exit code 42",
    "Processing [=====                 ]",
    "[3/10] compiling kernels",
    "Generated:",
    "    /tmp/results.sqlite",
    "Collecting data...",
    "Generating 'summary'",
    "Process is terminated.",
]

for line in LINES:
    print(line, flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
