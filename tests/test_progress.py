"""Progress of the long steps: reported by the library through the Progress it is given,
drawn only on a terminal and never beside machine-readable output."""

from __future__ import annotations

import io
import os
import pty
import subprocess
import sys
from contextlib import contextmanager

from conftest import CPU_2022_REP, GPU_MIX, needs_nsys, sql

from nsyswrap.common.progress import NO_PROGRESS, Progress, TerminalProgress
from nsyswrap.comparison.single import compare


class Recorder(Progress):
    def __init__(self):
        self.steps = []

    @contextmanager
    def step(self, description, total=None):
        self.steps.append(description)
        yield lambda n=1: None


def test_compare_reports_its_steps():
    rec = Recorder()
    compare(GPU_MIX, progress=rec)
    assert rec.steps == [f"loading {GPU_MIX.name}", "analysing"]


@needs_nsys
def test_export_of_a_nsys_rep_is_a_step(tmp_path):
    rec = Recorder()
    compare(CPU_2022_REP, progress=rec, cache_dir=tmp_path)
    assert rec.steps[0] == f"exporting {CPU_2022_REP.name} to SQLite (once)"
    assert rec.steps[1:] == [f"loading {rec.steps[1].split()[-1]}", "analysing"]


def test_default_progress_is_silent():
    with NO_PROGRESS.step("x", total=3) as advance:
        advance()


def test_terminal_progress_draws_nested_steps_and_clears_them():
    buf = io.StringIO()
    from rich.console import Console

    steps = TerminalProgress(Console(file=buf, force_terminal=True, width=100))
    with steps.step("analysing reports", total=2) as advance:
        with steps.step("loading a.sqlite"):
            pass
        advance()
        advance()
    out = buf.getvalue()
    assert "nsyswrap: analysing reports" in out and "0/2" in out
    assert steps._bar is None  # the live display ended with the outer step


def _stderr_on_a_terminal(*args) -> str:
    """Run the CLI with standard error on a pseudo-terminal; what it drew there."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "nsyswrap", *map(str, args)],
                            stdout=subprocess.DEVNULL, stderr=follower, stdin=subprocess.DEVNULL)
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
    proc.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_cli_spins_on_a_terminal_only_for_human_formats(tmp_path):
    drawn = _stderr_on_a_terminal("compare", GPU_MIX, "--format", "html", "-o",
                                  tmp_path / "r.html")
    assert "nsyswrap: loading" in drawn and "nsyswrap: analysing" in drawn
    quiet = _stderr_on_a_terminal("compare", GPU_MIX, "--format", "json", "-o",
                                  tmp_path / "r.json")
    assert "loading" not in quiet and "analysing" not in quiet
    assert (tmp_path / "r.json").exists()


def test_cli_prints_no_progress_into_pipes(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(GPU_MIX),
                           "--format", "html", "-o", str(tmp_path / "r.html")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0
    assert proc.stderr.strip() == f"nsyswrap: wrote html to {tmp_path / 'r.html'}"


def test_command_line_comes_from_the_report():
    from conftest import DEMO

    rows = dict(sql(DEMO, "SELECT name, value FROM META_DATA_CAPTURE WHERE name IN "
                          "('PROCESS_0:COMMAND', 'PROCESS_0:ARGUMENT_0')"))
    assert compare(DEMO).info.command == [rows["PROCESS_0:COMMAND"],
                                          rows["PROCESS_0:ARGUMENT_0"]]
    assert compare(GPU_MIX.parent / "cpu2022_nvtx.sqlite").info.command is None  # 2022.4


class Counter(Progress):
    """Records each step with its total and how many advances it got."""

    def __init__(self):
        self.steps = []

    @contextmanager
    def step(self, description, total=None):
        entry = [description, total, 0]
        self.steps.append(entry)

        def advance(n=1):
            entry[2] += n

        yield advance


def test_many_reports_advance_once_per_finished_report():
    from conftest import DATA

    from nsyswrap.multi import compare_ranks, diff_reports

    ranks = [DATA / f"h200x2_ddp_control.rank{r}.sqlite" for r in (0, 1)]
    rec = Counter()
    compare_ranks(ranks, jobs=1, progress=rec)
    assert rec.steps == [["analysing 2 reports", 2, 2]]
    rec = Counter()
    diff_reports(DATA / "h100_diff_base.sqlite", DATA / "h100_diff_base_again.sqlite", jobs=2,
                 progress=rec)  # in worker processes: advanced as each one finishes
    assert rec.steps == [["analysing 2 reports", 2, 2]]


def test_cli_bar_for_many_reports_on_a_terminal_only():
    from conftest import DATA

    ranks = [DATA / f"h200x2_ddp_control.rank{r}.sqlite" for r in (0, 1)]
    drawn = _stderr_on_a_terminal("compare", *ranks, "-j", "1")
    assert "nsyswrap: analysing 2 reports" in drawn and "0/2" in drawn
    quiet = _stderr_on_a_terminal("diff", *ranks, "-j", "1", "--format", "json")
    assert "analysing" not in quiet
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "diff", *map(str, ranks), "-j",
                           "1"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == ""  # a pipe: nothing extra
