"""Check that two versions of nsyswrap give the same JSON document on the same report.

    python scripts/same_results.py REPORT.sqlite --old OLD_CODE_DIR [--new NEW_CODE_DIR]
        [--attribution process thread] [--no-instances]

OLD_CODE_DIR holds an `nsyswrap` package, e.g. main's code unpacked with
`git archive main nsyswrap | tar -x -C /tmp/main-code`. Each version runs
`python -m nsyswrap compare REPORT --format json --instances` in its own process (so the
peak memory of one cannot hide in the other's), and the documents are compared field by
field; only fields that name the files or the tool version may differ. Exit 1 on a
difference, listing the first few. Both documents are loaded whole: a 10 M-range report's
pair with `--instances` (6.3 GB of JSON each) took this script past 24 GB and the kernel's
OOM killer, so compare such reports with `--no-instances`.

    python scripts/same_results.py REPORT.sqlite --old OLD_CODE_DIR --formats table csv ...

With --formats, also each named format's output (`compare --format F`, a file where the
format makes one) byte for byte, but for the lines that name the tool's version or the
report's path.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
IGNORED = {("report", "path"), ("report", "source"), ("tool", "version")}


def run(code: Path, report: Path, attribution: str, out: Path, instances: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code), PYTHONDONTWRITEBYTECODE="1")
    subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(report), "--format",
                    "json", *(["--instances"] if instances else []), "--attribution",
                    attribution, "-o", str(out)],
                   env=env, check=True, cwd=code, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def output(code: Path, report: Path, fmt: str, out: Path) -> bytes:
    """`compare --format fmt`'s output (its file where it writes one), without the lines
    that name the files or the tool's version."""
    env = dict(os.environ, PYTHONPATH=str(code), PYTHONDONTWRITEBYTECODE="1", COLUMNS="100")
    out.unlink(missing_ok=True)
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(report), "--format",
                           fmt, "-o", str(out)], env=env, check=True, cwd=code,
                          capture_output=True)
    data = out.read_bytes() if out.exists() else proc.stdout
    for text in (str(report).encode(), str(out).encode(), report.name.encode()):
        data = data.replace(text, b"<path>")
    return data.replace(_version(code).encode(), b"<version>")


def _version(code: Path) -> str:
    text = (code / "nsyswrap" / "_version.py").read_text()
    return text.split("=")[1].strip().strip("\"'")


def differences(a, b, path=()) -> list[str]:
    if path[:2] in IGNORED:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{'.'.join(map(str, path + (k,)))}: only in one" for k in a.keys() ^ b.keys()]
        for k in a.keys() & b.keys():
            out += differences(a[k], b[k], path + (k,))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{'.'.join(map(str, path))}: {len(a)} rows against {len(b)}"]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += differences(x, y, path + (i,))
        return out
    return [] if a == b else [f"{'.'.join(map(str, path))}: {a!r} != {b!r}"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path)
    p.add_argument("--old", type=Path, required=True)
    p.add_argument("--new", type=Path, default=HERE.parent)
    p.add_argument("--attribution", nargs="+", default=["process", "thread"])
    p.add_argument("--no-instances", dest="instances", action="store_false",
                   help="leave out the instance rows (for reports too big to hold twice)")
    p.add_argument("--formats", nargs="*", default=[],
                   help="formats also compared byte for byte (table, csv, markdown, html, ...)")
    a = p.parse_args()
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for rule in a.attribution:
            old = run(a.old.resolve(), a.report.resolve(), rule, Path(tmp) / "old.json",
                      a.instances)
            new = run(a.new.resolve(), a.report.resolve(), rule, Path(tmp) / "new.json",
                      a.instances)
            diff = differences(old, new)
            rows = {k: len(old.get(k, [])) for k in ("kernels", "ranges", "instances",
                                                      "findings")}
            print(f"{a.report.name} --attribution {rule}: "
                  f"{'identical' if not diff else f'{len(diff)} difference(s)'} ({rows})")
            for d in diff[:20]:
                print("  " + d)
            failed |= bool(diff)
        for fmt in a.formats:
            old = output(a.old.resolve(), a.report.resolve(), fmt, Path(tmp) / f"old.{fmt}")
            new = output(a.new.resolve(), a.report.resolve(), fmt, Path(tmp) / f"new.{fmt}")
            same = old == new
            print(f"{a.report.name} --format {fmt}: "
                  f"{'identical' if same else 'DIFFERENT'} ({len(new)} bytes)")
            if not same:
                lines = [(x, y) for x, y in zip(old.splitlines(), new.splitlines(), strict=False)
                         if x != y][:3]
                for x, y in lines:
                    print(f"  - {x[:150]!r}\n  + {y[:150]!r}")
            failed |= not same
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
