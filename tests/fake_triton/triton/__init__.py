"""A stand-in for triton on machines without a GPU: only `triton.testing.do_bench`, which
nsyswrap's runner hooks (tests/test_benchmark_tools_run.py)."""
