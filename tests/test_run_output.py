"""What `nsyswrap run` and `nsyswrap doctor` print, for real under nsys 2022.4 (CPU): what a
program without CUDA calls is told, the run's files in one block after the output, and the
progress drawn on a terminal: messages on lines of their own, never on a spinner's."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from conftest import needs_nsys

WORKLOADS = Path(__file__).parent / "workloads"


def nsyswrap(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)], text=True,
                          timeout=300, **kwargs)


@needs_nsys
def test_a_program_without_cuda_calls_or_ranges(tmp_path):
    """`run -- sleep 1` traces CUDA: the program made no CUDA call (not 'profile with -t
    cuda'), and with nothing to analyse the output says so (not 'No findings'). The run's
    files come in one block after the output."""
    out = tmp_path / "run"
    res = nsyswrap("run", "-o", out, "--", "sleep", "1", stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "80"})
    assert res.returncode == 0, res.stdout
    text = res.stdout
    assert "the program made no CUDA calls" in text
    assert "profile with -t cuda" not in text
    assert "Nothing to analyse" in text and "nothing distorts" not in text
    notes = json.loads((out / "analysis.json").read_text())["report"]["notes"]
    assert any("made no CUDA calls" in n for n in notes)
    assert not any("profile with -t cuda" in n for n in notes)
    lines = text.splitlines()
    paths = [i for i, ln in enumerate(lines) if re.match(r"nsyswrap: (files|analysis|report):",
                                                          ln)]
    assert len(paths) == 3 and paths == list(range(paths[0], paths[0] + 3))
    assert paths[0] > max(i for i, ln in enumerate(lines) if "Nothing to analyse" in ln)
    assert paths[-1] == len(lines) - 1  # nothing after them


def screen(raw: str) -> list[str]:
    """What a terminal shows after `raw`: the cursor moves, line erasures and carriage
    returns that rich's spinners and a tty's newlines use (colours ignored)."""
    lines: list[list[str]] = [[]]
    row = col = 0
    i = 0
    while i < len(raw):
        ch = raw[i]
        if ch == "\x1b":
            m = re.match(r"\x1b\[([0-9;?]*)([A-Za-z])", raw[i:])
            if m is None:
                i += 1
                continue
            params, final = m.groups()
            n = int(params) if params.isdigit() else 1
            if final == "A":
                row = max(0, row - n)
            elif final == "B":
                row += n
            elif final == "G":
                col = n - 1
            elif final == "K":
                while len(lines) <= row:
                    lines.append([])
                lines[row] = [] if params == "2" else lines[row][:col]
            i += m.end()
            continue
        if ch == "\r":
            col = 0
        elif ch == "\n":
            row, col = row + 1, 0
        else:
            while len(lines) <= row:
                lines.append([])
            line = lines[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = ch
            col += 1
        i += 1
    return ["".join(x).rstrip() for x in lines]


def stderr_on_a_terminal(*args, cwd: Path) -> tuple[str, str, int]:
    """Run the CLI with standard error on a pseudo-terminal: what it drew there, its
    standard output, its exit code."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL,
                            text=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 65536)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    stdout = proc.stdout.read()
    proc.wait(timeout=300)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace"), stdout, proc.returncode


@needs_nsys
def test_run_messages_never_share_a_spinner_line(tmp_path):
    raw, stdout, code = stderr_on_a_terminal(
        "run", "-o", tmp_path / "run", "--trace", "nvtx", WORKLOADS / "annotated.py",
        cwd=tmp_path)
    assert code == 0, raw
    assert "importing and exporting the capture" in raw  # a spinner was drawn
    shown = screen(raw)
    said = [ln for ln in shown if "nsyswrap:" in ln]
    for expected in ("profiling with nsys", "exporting to SQLite", "analysing", "files:",
                     "analysis:", "report:"):
        assert any(ln.startswith(f"nsyswrap: {expected}") for ln in said), (expected, shown)
    # Each message alone on its line: no spinner text left beside it.
    assert all(ln.startswith("nsyswrap: ") and ln.count("nsyswrap:") == 1 for ln in said), said
    assert not any("━" in ln or "importing and exporting" in ln for ln in shown), shown


@needs_nsys
def test_doctor_shows_each_check_as_it_runs(tmp_path):
    raw, stdout, _ = stderr_on_a_terminal("doctor", cwd=tmp_path)
    assert "nsyswrap: profiling a test range" in raw  # its longest step, named
    assert not [ln for ln in screen(raw) if ln.strip()]  # the spinners leave nothing
    lines = stdout.splitlines()
    assert lines[0].startswith("✓ nsys:")
    assert any(ln.startswith("✓ NVTX from Python") for ln in lines)
