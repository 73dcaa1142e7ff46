"""When each step of one `compare` ends, from the process's start: does the read overlap
the imports?

    python scripts/time_startup.py REPORT.sqlite

Runs what `nsyswrap compare` runs on one report and prints a timestamp after each step:
the CLI imported; the reads started (`database.open_report`); pandas and the analysis
imported, with how many of the reads' slices were done by then; all reads done; the report
loaded; the analysis done. Code from before the reads moved ahead of the imports (no
`nsyswrap.read.database`) runs in its old order: everything imported, then loaded. Put another
version's code first on PYTHONPATH to time it, alternating runs (these machines drift).
"""

from __future__ import annotations

import os
import sys
import time

T0 = time.perf_counter()


def mark(what: str) -> None:
    print(f"{time.perf_counter() - T0:6.3f} s  {what}", flush=True)


def main() -> None:
    if len(sys.argv) != 2 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.split("\n\n")[1])
    path = sys.argv[1]
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")  # as the CLI does
    import nsyswrap.cli  # noqa: F401

    mark("CLI imported")
    # By file, not by import: an editable install would find database.py in this checkout
    # even when PYTHONPATH puts an older version's package first.
    if not os.path.exists(os.path.join(os.path.dirname(nsyswrap.cli.__file__), "database.py")):
        # The older code: imports first, then the reads.
        import nsyswrap.compare  # noqa: F401

        from nsyswrap.read.loader import load

        mark("pandas and the analysis imported")
        report = load(path)
    else:
        from nsyswrap.read.database import open_report

        opened = open_report(path)
        mark("reads started")
        import nsyswrap.comparison.single
        from nsyswrap.read.loader import load

        slices = [f for fs in opened.db._prefetched.values() for f in fs]
        mark(f"pandas and the analysis imported; {sum(f.done() for f in slices)} of "
             f"{len(slices)} read slices done")
        for f in slices:
            f.result()
        mark("all reads done")
        report = load(opened)
    mark("loaded")
    from nsyswrap import analysis

    analysis.analyze(report, consume=True)
    mark("analysed")


if __name__ == "__main__":
    main()
