"""The runner's trace of the program's lines (nsyswrap/instrument/line_trace.py), on the CPU:
a program run by the real runner under Python 3.12 or newer (sys.monitoring), its marks
written to a file by the stand-in torch (tests/fake_torch), the trace decoded here and read
against the program's own source (each line marked `# L:<name>`)."""

from __future__ import annotations

import array
import base64
import functools
import glob
import json
import os
import shutil
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
RUNNER = ROOT / "nsyswrap" / "instrument" / "runner.py"


@functools.cache
def _python312() -> str | None:
    """A Python with sys.monitoring: this one, one on PATH, or one pyenv keeps. Looked for
    when a test asks (each candidate is started once), not while the tests are collected."""
    if sys.version_info >= (3, 12):
        return sys.executable
    found = [shutil.which(f"python3.{minor}") for minor in range(12, 16)]
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found += sorted(glob.glob(os.path.join(root, "versions", "3.1[2-9]*", "bin", "python3")))
    for python in filter(None, found):
        try:
            ok = subprocess.run([python, "-c", "import sys; sys.monitoring"],
                                capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok:
            return python
    return None


@pytest.fixture
def python312() -> str:
    python = _python312()
    if python is None:
        pytest.skip("no Python 3.12 or newer here")
    return python


needs_312 = pytest.mark.usefixtures("python312")

PROGRAM = '''\
import json
import threading
import torch  # the stand-in: its NVTX writes the runner's marks to FAKE_NVTX_LOG


def helper(n):  # L:helper_def
    total = 0  # L:helper_total
    for i in range(n):  # L:helper_loop
        total += i  # L:helper_add
    return total  # L:helper_return


def numbers():
    yield 1  # L:yield_1
    yield 2  # L:yield_2


def as_text(value):  # called back by the json library
    return str(value)  # L:as_text


def worker():
    helper(1)  # L:worker_call


def main():
    x = helper(2)  # L:call_helper
    y = json.dumps({"a": object()}, default=as_text)  # L:json
    for v in numbers():  # L:for
        z = v  # L:body
    try:
        helper("x")  # L:raises
    except TypeError:
        pass  # L:handled
    t = threading.Thread(target=worker)  # L:thread
    t.start()  # L:start
    t.join()  # L:join
    return x  # L:main_return


main()  # L:main
'''


def _line(marker: str) -> int:
    for i, text in enumerate(PROGRAM.splitlines(), start=1):
        if text.endswith(f"# L:{marker}"):
            return i
    raise KeyError(marker)


def _trace(tmp_path, **env) -> tuple[dict | None, list[str]]:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    log = tmp_path / "marks.log"
    proc = subprocess.run(
        [_python312(), str(RUNNER), str(script)], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT / "tests" / "fake_torch"),
                              FAKE_NVTX_LOG=str(log), **env))
    assert proc.returncode == 0, proc.stderr
    if not log.exists():  # nothing recorded: the runner writes no document
        return None, []
    for text in log.read_text().splitlines():
        if text.startswith('{"nsyswrap":"nsyswrap.user-events/2"'):
            doc = json.loads(text)
            return doc.get("lines"), doc["notes"]
    raise AssertionError("no runner document among the marks")


def _entries(lines: dict, thread: dict) -> list[tuple]:
    """The thread's entries as (function, line, caller's line or None)."""
    wheres, codes = lines["wheres"], lines["codes"]
    places = array.array("I", zlib.decompress(base64.b64decode(thread["wheres"])))
    deltas = array.array("q", zlib.decompress(base64.b64decode(thread["clock_deltas"])))
    assert len(places) == len(deltas) == thread["rows"]
    assert all(d >= 0 for d in deltas[1:])  # in time order

    def at(w):
        if w < 2:
            return None
        code, line, parent = wheres[w]
        return (codes[code][1], line, wheres[parent][1] if parent >= 2 else None)

    return [at(w) for w in places]


@needs_312
def test_the_trace_follows_the_programs_lines(tmp_path):
    lines, notes = _trace(tmp_path)
    assert lines is not None, notes
    assert lines["nsyswrap"] == "nsyswrap.lines/1"
    # Only the program's own code: no frame of json, threading or the stand-in torch's.
    files = {Path(f).name for f, _, _ in lines["codes"] if "fake_torch" not in f}
    assert files == {"program.py"}
    threads = sorted(lines["threads"], key=lambda t: -t["rows"])
    main = _entries(lines, threads[0])
    L = _line
    # helper called from main: its lines, each under the calling line; then back to it.
    i = main.index(("helper", L("helper_total"), L("call_helper")))
    assert main[i - 1] == ("main", L("call_helper"), L("main"))
    assert main[i:i + 7] == [("helper", L(m), L("call_helper")) for m in (
        "helper_total", "helper_loop", "helper_add", "helper_loop", "helper_add",
        "helper_loop", "helper_return")]
    assert main[i + 7] == ("main", L("call_helper"), L("main"))  # returned to its caller
    # A function the json library calls back: under the line that called json.
    assert ("as_text", L("as_text"), L("json")) in main
    j = main.index(("as_text", L("as_text"), L("json")))
    assert main[j + 1] == ("main", L("json"), L("main"))
    # A generator: its lines between the loop's, back to the loop after each yield.
    k = main.index(("numbers", L("yield_1"), L("for")))
    assert main[k + 1] == ("main", L("for"), L("main"))
    # An exception leaves helper: back to the line that called it.
    r = main.index(("helper", L("helper_loop"), L("raises")))
    assert main[r + 1] == ("main", L("raises"), L("main"))
    # The thread's own trace: worker's line, its helper under it.
    assert len(threads) == 2
    worker = _entries(lines, threads[1])
    assert ("worker", L("worker_call"), None) in worker
    assert ("helper", L("helper_total"), L("worker_call")) in worker
    assert threads[1]["tid"] != threads[0]["tid"]
    # The source of the program's own lines (its working folder) is kept.
    assert lines["texts"][f"{tmp_path / 'program.py'}:{L('json')}"].strip().startswith(
        "y = json.dumps")
    assert lines["ended_ns"] is not None and lines["stopped_ns"] is None


@needs_312
def test_no_source_and_no_lines(tmp_path):
    lines, _ = _trace(tmp_path, NSYSWRAP_SOURCE="0")
    assert lines is not None and lines["texts"] == {}
    (tmp_path / "off").mkdir()
    lines, _ = _trace(tmp_path / "off", NSYSWRAP_LINES="0")
    assert lines is None


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="this Python has sys.monitoring")
def test_before_312_the_runner_says_why(tmp_path):
    """Without sys.monitoring the runner keeps no trace and says why in its document; the
    analysis shows that where the By line table would be."""
    from nsyswrap.analysis.code_lines import lines_missing
    from nsyswrap.analysis.user_events import UserEvents, decode

    script = tmp_path / "program.py"
    script.write_text("import torch\ntorch.cuda.Event(enable_timing=True).record()\n")
    log = tmp_path / "marks.log"
    proc = subprocess.run(
        [sys.executable, str(RUNNER), str(script)], cwd=tmp_path, capture_output=True,
        text=True, timeout=120, env=dict(os.environ, FAKE_NVTX_LOG=str(log),
                                         PYTHONPATH=str(ROOT / "tests" / "fake_torch")))
    assert proc.returncode == 0, proc.stderr
    doc = next(json.loads(t) for t in log.read_text().splitlines()
               if t.startswith('{"nsyswrap":"nsyswrap.user-events/2"'))
    assert doc["lines"] is None and "sys.monitoring" in doc["lines_note"]
    why = lines_missing(UserEvents(processes=[decode(doc)]))
    assert f"Python 3.{sys.version_info[1]}" in why and "3.12" in why


VENV312 = ROOT / ".venv-test312" / "bin" / "python"


@pytest.fixture
def venv312() -> Path:
    """.venv-test312's Python with the nvtx package, asked when a test needs it."""
    if not VENV312.exists() or subprocess.run([str(VENV312), "-c", "import nvtx"],
                                              capture_output=True).returncode != 0:
        pytest.skip("no .venv-test312 with the nvtx package (scripts/test.sh makes it)")
    return VENV312


needs_venv312 = pytest.mark.usefixtures("venv312")

END_TO_END = '''\
import time
import torch  # the stand-in: NVTX through the nvtx package, which nsys traces


def slow():
    time.sleep(0.05)  # L:sleep


def main():
    for _ in range(3):
        slow()  # L:call
    torch.cuda.Event(enable_timing=True).record()


main()
'''


@pytest.mark.nsys
@needs_venv312
def test_nsyswrap_run_traces_the_lines_end_to_end(tmp_path):
    """Under Debian's nsys 2022.4 on the CPU: the runner (Python 3.12) writes its trace into
    the report, the analysis places it on the report's clock and shows each line's host
    time, with the line that called it."""
    from conftest import nsys_available

    if not nsys_available():
        pytest.skip("nsys not on PATH")
    script = tmp_path / "program.py"
    script.write_text(END_TO_END)
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'tests' / 'fake_torch'}{os.pathsep}{ROOT}")
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", str(tmp_path / "run"),
                           "--trace", "nvtx", "--format", "json", "--", str(VENV312),
                           str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = json.loads(proc.stdout)["lines"]
    assert lines["why_empty"] is None, lines
    rows = {(r["function"], r["line"]): r for r in lines["rows"]}
    line = END_TO_END.splitlines().index("    time.sleep(0.05)  # L:sleep") + 1
    sleep = rows[("slow", line)]
    assert 150e6 <= sleep["host_ns"] < 400e6  # three sleeps of 50 ms
    assert sleep["text"].strip().startswith("time.sleep(0.05)")
    call = END_TO_END.splitlines().index("        slow()  # L:call") + 1
    assert sleep["stack"][0].endswith(f":{call} main")
