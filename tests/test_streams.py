"""nsyswrap started with a standard stream closed (`>&-`, `2>&-`) or in an encoding that cannot
hold what it writes (nsyswrap/capture/streams.py, launch.Relay): the workload runs as it would
anywhere, what cannot be shown is kept in nsys.log and one line says so on the other stream,
and nsyswrap's own output never ends in a traceback.

The streams are closed for real, by a shell's `>&-` (a closed descriptor, not /dev/null:
Python then has no sys.stdout at all); the `run` tests profile real workloads with nsys."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CPU_2022, needs_nsys, sql

from nsyswrap.capture import streams

WORKLOADS = Path(__file__).parent / "workloads"
# The workload writes these bytes itself (UTF-8, whatever nsyswrap's encoding is).
UNICODE_LINE = "arrow → and a face 😀".encode()


def nsyswrap_closed(redirect: str, *args, env=None) -> subprocess.CompletedProcess:
    """`python -m nsyswrap ARGS` with a stream closed by the shell (`>&-` or `2>&-`); the
    other one captured, as bytes."""
    return subprocess.run(["/bin/sh", "-c", f'exec "$@" {redirect}', "sh", sys.executable,
                           "-m", "nsyswrap", *map(str, args)], capture_output=True, env=env,
                          timeout=180)


@pytest.mark.nsys
@needs_nsys
def test_a_closed_standard_output_changes_nothing_for_the_workload(tmp_path):
    """`nsyswrap run chatty.py >&-`: the workload prints 2.3 MB and runs to its end (its
    output drained into nsys.log), the capture is analysed, one line says where the output
    went and one where the analysis is; no traceback."""
    out = tmp_path / "run"
    proc = nsyswrap_closed(">&-", "run", "-o", out, "--trace", "nvtx", WORKLOADS / "chatty.py")
    stderr = proc.stderr.decode()
    assert proc.returncode == 0, stderr
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert "chatty: done" in stderr  # its last line, on the stream that is open
    assert stderr.count("nsyswrap: standard output is closed: what the workload writes there "
                        "is kept only in the run's nsys.log") == 1
    assert "nsyswrap: standard output is closed: the analysis is not shown" in stderr
    assert "chatty line 19999 " in (out / "nsys.log").read_text()
    lines = sql(out / "chatty.sqlite", "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s "
                                       "ON s.id = e.textId WHERE s.value = 'line'")[0][0]
    assert lines == 20000  # every line printed: the workload was not stopped half-way
    assert json.loads((out / "analysis.json").read_text())["ranges"]


CHATTY_STDERR = f"""\
import sys
sys.stdout.buffer.write({UNICODE_LINE!r} + b"\\n")
sys.stdout.flush()
for i in range(3000):  # 300 kB: more than a pipe holds
    print(f"err line {{i}} " + "x" * 90, file=sys.stderr)
print("out: done", flush=True)
print("err: done", file=sys.stderr, flush=True)
"""


@pytest.mark.nsys
@needs_nsys
def test_a_closed_standard_error_and_an_encoding_without_the_workloads_characters(tmp_path):
    """`PYTHONIOENCODING=latin-1 nsyswrap run script.py 2>&-`: the workload writes 300 kB to
    its standard error, kept in nsys.log, and runs to its end; its UTF-8 bytes reach standard
    output as they are (never decoded and encoded again, nothing after them dropped); one
    line on standard output says where its standard error went; the table is shown."""
    script = tmp_path / "chatty_stderr.py"
    script.write_text(CHATTY_STDERR)
    out = tmp_path / "run"
    env = {**_env(), "PYTHONIOENCODING": "latin-1"}
    proc = nsyswrap_closed("2>&-", "run", "-o", out, "--trace", "nvtx", script, env=env)
    stdout = proc.stdout.decode("latin-1")
    assert proc.returncode == 0, stdout
    assert UNICODE_LINE + b"\nout: done\n" in proc.stdout, stdout
    assert stdout.count("nsyswrap: standard error is closed: what the workload writes there "
                        "is kept only in the run's nsys.log") == 1
    assert "0 kernels, 0 GPU ops" in stdout  # the analysis' table (its header)
    assert "internal error" not in stdout
    log = (out / "nsys.log").read_text()
    assert "err line 2999 " in log and "err: done" in log


def test_compare_with_a_closed_stream(tmp_path):
    """Standard output closed: the output has nowhere to go, so it is refused before the
    report is read, one line naming -o (which then works); standard error closed: the table
    all the same."""
    proc = nsyswrap_closed(">&-", "compare", CPU_2022)
    assert proc.returncode == 2
    assert proc.stderr.decode() == ("nsyswrap: error: standard output is closed: give -o "
                                    "FILE.txt to write the table output\n")
    proc = nsyswrap_closed(">&-", "diff", CPU_2022, CPU_2022)
    assert proc.returncode == 2 and b"standard output is closed" in proc.stderr
    page = tmp_path / "report.txt"
    proc = nsyswrap_closed(">&-", "compare", CPU_2022, "-o", page)
    assert proc.returncode == 0, proc.stderr
    assert CPU_2022.name in page.read_text(encoding="utf-8")
    proc = nsyswrap_closed("2>&-", "compare", CPU_2022)
    assert proc.returncode == 0 and CPU_2022.name in proc.stdout.decode()


def test_output_in_an_encoding_that_lacks_its_characters(tmp_path):
    """PYTHONIOENCODING=latin-1 and range names beyond it (a copy of a real export, its
    names renamed): the table, and JSON that parses to the same document as in UTF-8, what
    latin-1 cannot hold written as JSON's escapes. (Where the encoding is ASCII, Click
    writes UTF-8 itself.)"""
    report = tmp_path / CPU_2022.name
    shutil.copy2(CPU_2022, report)
    with sqlite3.connect(report) as con:
        con.execute("UPDATE StringIds SET value = value || ' → 😀' WHERE value = 'iteration'")
    con.close()
    utf8 = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", report, "--format",
                           "json"], capture_output=True, env=_env(), check=True)
    assert "iteration → 😀" in utf8.stdout.decode()
    env = {**_env(), "PYTHONIOENCODING": "latin-1"}
    doc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", report, "--format",
                          "json"], capture_output=True, env=env)
    assert doc.returncode == 0, doc.stderr
    assert json.loads(doc.stdout.decode("latin-1")) == json.loads(utf8.stdout.decode())
    table = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", report],
                           capture_output=True, env=env)
    assert table.returncode == 0, table.stderr
    assert "iteration \\u2192 \\ud83d\\ude00" in table.stdout.decode("latin-1")


def test_the_escapes_are_jsons():
    text = "µ → 😀 \x9b"
    escaped = text.encode("ascii", streams.ESCAPE_ERRORS).decode("ascii")
    assert json.loads(f'"{escaped}"') == text


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONIOENCODING"}
