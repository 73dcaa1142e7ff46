"""The suite's own scheduling: under `pytest -n 4 --dist loadgroup` (scripts/test.sh) the
tests that start nsys are in one group (tests/conftest.py), which runs in one worker,
whatever pytest and xdist do with test ids (pytest 9.2 with xdist 3.8 silently spread the
nsys group over both workers): one nsys 2022.4 session at a time."""

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

# Each test writes its group (the end of its id: `id@group`, or none) and which worker ran
# it: in a test_run.py and another module, six that "use nsys" (the mark, or the skipif of
# conftest.needs_nsys) among six that do not, all short, so that load scheduling without
# groups hands some of each to every worker.
TESTS_SOURCE = '''
import os, time
import pytest
from suite_conftest import needs_nsys

def note(kind):
    test = os.environ["PYTEST_CURRENT_TEST"].split(" ")[0]
    group = test.split("@")[1] if "@" in test else "none"
    with open(os.environ["WHERE"], "a") as f:
        f.write(f"{kind} {group} {os.environ['PYTEST_XDIST_WORKER']}\\n")
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


def test_the_nsys_tests_run_in_one_group_in_one_worker(tmp_path):
    pytest.importorskip("xdist")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for module in ("test_run.py", "test_other.py"):
        (tmp_path / module).write_text(TESTS_SOURCE)
    where = tmp_path / "where.txt"
    env = {**os.environ, "WHERE": str(where), "PYTHONPATH": str(TESTS)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "3", "--dist",
                           "loadgroup", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "-o", "addopts=", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [line.split() for line in where.read_text().splitlines()]
    nsys = [(group, worker) for kind, group, worker in runs if kind == "nsys"]
    if nsys:  # without nsys on PATH the skipif ones skip
        assert len(nsys) == 12 and {group for group, _ in nsys} == {"nsys"}, runs
        assert len({worker for _, worker in nsys}) == 1, runs
    assert [group for kind, group, _ in runs if kind == "plain"] == ["none"] * 12
