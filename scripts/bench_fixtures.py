"""The fixed cost of analysing small reports: every fixture analysed whole and streamed in
chunks of 97 operations (as tests/test_streamed.py does), this checkout against another
version, alternated, CPU seconds of each round.

    python scripts/bench_fixtures.py [--old OLD_CODE_DIR] [--rounds 3]

OLD_CODE_DIR holds an `nsyswrap` package (`git archive REV nsyswrap | tar -x -C DIR`). Each
round runs in a fresh process per version (imports and first use not counted: three
fixtures are analysed once before the clock starts). Small reports are what the test
suite analyses hundreds of times, and what most users' reports are: their time is
pandas' per-call cost, not the rows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUND = """
import glob, time
from nsyswrap import compare
from nsyswrap.analysis import analyze_streamed
from nsyswrap.read.database import open_report
from nsyswrap.read.loader import read_without_operations
from nsyswrap.read.operations import OperationStream

def streamed(path):
    with open_report(path, stream_operations=True) as opened:
        report, rest = read_without_operations(opened)
        stream = OperationStream(opened.db, opened.queries, chunk_operations=97)
        return analyze_streamed(report, stream, rest)

paths = sorted(glob.glob(%r))
for p in paths[:3]:
    compare(p)
began = time.process_time()
for p in paths:
    compare(p)
    streamed(p)
print(f"{time.process_time() - began:.2f}")
"""


def one_round(code: Path) -> float:
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run([sys.executable, "-c", ROUND % str(ROOT / "tests" / "data" / "*.sqlite")],
                         env=env, capture_output=True, text=True, check=True, cwd=code)
    return float(out.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=Path, help="another version's code folder")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sides = [("new", ROOT)] + ([("old", args.old.resolve())] if args.old else [])
    times: dict[str, list[float]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, code in sides:
            times[name].append(one_round(code))
    for name, values in times.items():
        print(f"{name}: CPU {min(values):.2f}-{max(values):.2f} s a round "
              f"({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
