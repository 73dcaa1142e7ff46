"""The suite's own scheduling: under `pytest -n 2 --dist loadgroup` (scripts/test.sh) every
test that starts nsys runs in one worker (tests/conftest.py), whatever pytest and xdist do
with test ids (pytest 9.2 with xdist 3.8 silently spread the nsys group over both workers,
and two nsys 2022.4 sessions at once break each other)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent

CONFTEST = f'''
import importlib.util, sys
sys.path.insert(0, {str(TESTS)!r})
spec = importlib.util.spec_from_file_location("suite_conftest", {str(TESTS / "conftest.py")!r})
suite = sys.modules["suite_conftest"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
pytest_collection_modifyitems = suite.pytest_collection_modifyitems
'''

# Each test writes which worker ran it: six that "use nsys" (the mark, or the skipif of
# conftest.needs_nsys) among six that do not, all short, so that load scheduling without
# groups hands some of each to both workers.
TESTS_SOURCE = '''
import os, time
import pytest
from suite_conftest import needs_nsys

def note(kind):
    with open(os.environ["WHERE"], "a") as f:
        f.write(kind + " " + os.environ["PYTEST_XDIST_WORKER"] + "\\n")
    time.sleep(0.05)

@pytest.mark.nsys
@pytest.mark.parametrize("n", range(3))
def test_marked(n):
    note("nsys")

@needs_nsys
@pytest.mark.parametrize("n", range(3))
def test_skipif(n):
    note("nsys")

@pytest.mark.parametrize("n", range(6))
def test_plain(n):
    note("plain")
'''


def test_every_nsys_test_runs_in_one_worker(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_groups.py").write_text(TESTS_SOURCE)
    where = tmp_path / "where.txt"
    env = {**os.environ, "WHERE": str(where), "PYTHONPATH": str(TESTS)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist",
                           "loadgroup", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-o", "addopts=", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [line.split() for line in where.read_text().splitlines()]
    if any(line[0] == "nsys" for line in runs):  # without nsys on PATH the skipif ones skip
        assert len({worker for kind, worker in runs if kind == "nsys"}) == 1, runs
    assert sum(kind == "plain" for kind, _ in runs) == 6
