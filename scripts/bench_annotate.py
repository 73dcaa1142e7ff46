"""What an nsyswrap.annotate costs with no profiler attached, next to anchors measured in the
same run (a bare `with contextlib.nullcontext()` block and the nvtx package's own annotate).

    python scripts/bench_annotate.py            # prints a Markdown table
Each row is the best of 5 repeats of 200,000 enter/exit pairs (timeit), in ns per pair.
"""

from __future__ import annotations

import contextlib
import os
import platform
import timeit

os.environ.pop("NVTX_INJECTION64_PATH", None)  # no profiler: the case being measured

import nvtx  # noqa: E402

import nsyswrap  # noqa: E402

N = 200_000


def best_ns(stmt) -> float:
    return min(timeit.repeat(stmt, number=N, repeat=5)) / N * 1e9


def main() -> None:
    null = contextlib.nullcontext()
    reused = nsyswrap.annotate("step")
    package = nvtx.annotate("step")

    def with_null():
        with null:
            pass

    def with_reused():
        with reused:
            pass

    def with_new():
        with nsyswrap.annotate("step"):
            pass

    def with_package():
        with package:
            pass

    @nsyswrap.annotate()
    def decorated():
        pass

    def plain():
        pass

    rows = [
        ("`with contextlib.nullcontext()` (anchor)", best_ns(with_null)),
        ("`with a` where `a = nsyswrap.annotate(\"step\")`", best_ns(with_reused)),
        ("`with nsyswrap.annotate(\"step\")` (new object each time)", best_ns(with_new)),
        ("`with nvtx.annotate(\"step\")` (the nvtx package, reused)", best_ns(with_package)),
        ("call of a plain function (anchor)", best_ns(plain)),
        ("call of an `@nsyswrap.annotate()` function", best_ns(decorated)),
    ]
    anchor = rows[0][1]
    from importlib.metadata import version

    print(f"Python {platform.python_version()} on {platform.machine()}, nvtx "
          f"{version('nvtx')}, no profiler attached\n")
    print("| what | ns per pair | × nullcontext |")
    print("|---|---:|---:|")
    for what, ns in rows:
        print(f"| {what} | {ns:.0f} | {ns / anchor:.2f} |")


if __name__ == "__main__":
    main()
