"""nsyswrap's exit codes, one real case each, through `python -m nsyswrap` as a shell runs
it: 0 fine, 1 a failure, 2 bad input or usage, 3 findings matched --fail-on, 141 the
reader of standard output left. Whatever the code, standard error holds at most two lines
and never a traceback. (130, an interrupted `nsyswrap run`, is tested with run:
tests/test_run.py.)"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import CPU_2022_REP, DATA, GPU_MIX

from nsyswrap.cli import EXIT_BROKEN_PIPE, EXIT_FINDINGS


def _nsyswrap(*args, **popen):
    return subprocess.Popen([sys.executable, "-m", "nsyswrap", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def _check_stderr(stderr: str) -> None:
    assert len(stderr.splitlines()) <= 2, stderr
    assert "Traceback" not in stderr


def _failing_nsys(tmp_path):
    """An nsys whose export fails, as a broken install's does."""
    fake = tmp_path / "nsys"
    fake.write_text("#!/bin/sh\necho 'export failed: broken install' >&2\nexit 1\n")
    fake.chmod(0o755)
    return fake


def _report_alone(tmp_path):
    """The .nsys-rep fixture without its .sqlite beside it (which would be read instead)."""
    rep = tmp_path / "in" / CPU_2022_REP.name
    rep.parent.mkdir()
    rep.write_bytes(CPU_2022_REP.read_bytes())
    return rep


CASES = {
    0: lambda tmp_path: ["compare", GPU_MIX, "--format", "json"],
    1: lambda tmp_path: ["compare", _report_alone(tmp_path), "--nsys", _failing_nsys(tmp_path),
                         "--cache-dir", tmp_path / "cache"],
    2: lambda tmp_path: ["compare", tmp_path / "no-such-report.sqlite"],
    EXIT_FINDINGS: lambda tmp_path: ["compare", GPU_MIX, "--fail-on", "any"],
}


@pytest.mark.parametrize("code", list(CASES))
def test_exit_code(tmp_path, code):
    proc = _nsyswrap(*CASES[code](tmp_path))
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == code, stderr
    _check_stderr(stderr)
    if code in (1, 2):
        assert stderr.startswith("nsyswrap: error: ") and stdout == ""


def test_usage_error_is_exit_2_in_two_lines():
    proc = _nsyswrap("compare", "--bogus")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 2 and len(stderr.splitlines()) == 2
    _check_stderr(stderr)


def test_reader_that_leaves_is_exit_141():
    """`nsyswrap compare ... | head -c1`: the reader takes one byte and closes the pipe;
    the rest of the output (4 MB of instance rows, written in pieces) cannot go anywhere."""
    proc = _nsyswrap("compare", DATA / "h100_torch_emit_nvtx.sqlite", "--format", "json",
                     "--instances")
    assert proc.stdout.read(1) == "{"
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert proc.wait(timeout=300) == EXIT_BROKEN_PIPE, stderr
    _check_stderr(stderr)
