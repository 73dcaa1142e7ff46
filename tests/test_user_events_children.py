"""The program's own Python processes record their timings too: under `nsyswrap run` every
Python process the program starts (multiprocessing's spawn workers, a `subprocess` of
python) loads the runner through nsyswrap/instrument/_children/sitecustomize.py, and the
environment's own sitecustomize still runs after it. End to end on the CPU under nsys
2022.4 with a stand-in torch."""

from __future__ import annotations

import base64
import json
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from conftest import has_table, needs_nsys, sql

from nsyswrap.instrument.schema import USER_EVENTS_SCHEMA

ROOT = Path(__file__).parents[1]

PROGRAM = """
import multiprocessing
import os
import struct
import subprocess
import sys

import torch

def time_it(n):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        start.record()
        sum(range(10_000))
        end.record()
        start.elapsed_time(end)
    print("timed", os.getpid(), os.environ.get("SITE_CUSTOMIZED", "-"), flush=True)

if __name__ == "__main__":
    time_it(2)
    worker = multiprocessing.get_context("spawn").Process(target=time_it, args=(3,))
    worker.start()
    worker.join()
    assert worker.exitcode == 0
    subprocess.run([sys.executable, "-c", "import sys, torch; "
                    "exec(open(sys.argv[1]).read().split('if __name__')[0]); time_it(4)",
                    __file__], check=True)
"""

# The environment's own sitecustomize: it must still run in the children.
SITE = "import os\nos.environ['SITE_CUSTOMIZED'] = 'yes'\n"


def _documents(path: Path) -> dict[int, dict]:
    out = {}
    if not has_table(path, "NVTX_EVENTS"):  # no process marked anything
        return out
    for (text,) in sql(path, "SELECT coalesce(e.text, s.value) AS t FROM NVTX_EVENTS e "
                       "LEFT JOIN StringIds s ON s.id = e.textId WHERE t LIKE ?",
                       ('{"nsyswrap":"' + USER_EVENTS_SCHEMA + '"%',)):
        doc = json.loads(text)
        out[doc["pid"]] = doc
    return out


def _records(doc: dict) -> int:
    raw = zlib.decompress(base64.b64decode(doc["records"]))
    return len(raw) // struct.calcsize(doc["record_format"])


@needs_nsys
def test_the_programs_python_processes_record_their_timings_too(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    path = os.pathsep.join([str(ROOT / "tests" / "fake_torch"), str(ROOT), str(site)])
    env = dict(os.environ, PYTHONPATH=path)
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", str(out),
                           "--trace", "nvtx", "--format", "json", str(script)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    timed = [line.split() for line in proc.stderr.splitlines() + proc.stdout.splitlines()
             if line.startswith("timed ")]
    report = next(out.glob("*.sqlite"))
    docs = _documents(report)
    # Three processes, each its own document with its own records (2, 3 and 4 windows).
    assert sorted(_records(d) for d in docs.values()) == [4, 6, 8]
    assert {int(t[1]) for t in timed} == set(docs)
    # The environment's own sitecustomize ran in every process, as it does without nsyswrap.
    assert [t[2] for t in timed] == ["yes"] * 3
    # --no-user-events: no process records.
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", str(tmp_path / "off"),
                           "--trace", "nvtx", "--no-user-events", "--format", "json",
                           str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _documents(next((tmp_path / "off").glob("*.sqlite"))) == {}
