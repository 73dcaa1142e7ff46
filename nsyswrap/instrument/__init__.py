"""What runs inside the user's program: NVTX ranges and marks (annotate.py, with
nvtx_compat.py), the timing harness and its clocks (harness.py, clocks.py), the runner that
`nsyswrap run` starts a Python program with (runner.py) and its hooks on the program's own
CUDA-event timings (event_hooks.py, _children/) and trace of its lines (line_trace.py),
long JSON marks split into parts (mark_parts.py), and the names they share with the readers
(schema.py). runner.py, event_hooks.py, _children/ and what the hooks load (line_trace.py,
nvtx_compat.py, mark_parts.py) are
loaded by path, standard library only: the profiled process imports nothing of nsyswrap.
Imports only common/."""
