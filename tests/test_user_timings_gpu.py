"""The program's own timings on a real GPU, under a real nsys (run on the GPU host:
pytest -m gpu): an unmodified script run through `nsyswrap run` has its CUDA-event records
matched and reconciled. CPU-only CI skips these."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys"),
]

WORKLOADS = Path(__file__).parents[1] / "scripts" / "workloads"


def _run(tmp_path, script: str, *args: str) -> dict:
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "nsyswrap", "run", "-o", str(out), "--format", "json",
         str(WORKLOADS / script), *args],
        capture_output=True, text=True, timeout=600,
        env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _env() -> dict:
    """This checkout first on the path, what the environment had after it."""
    path = [str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in path if p))


def test_the_seed_articles_timings_are_reconciled(tmp_path):
    doc = _run(tmp_path, "torch_seed_timings.py")
    u = doc["user_timings"]
    assert u["records"] >= 180 and u["measured"] == 90
    groups = {g["label"]: g for g in u["groups"]}
    assert len(groups) == 9
    copied_t1 = next(g for label, g in groups.items() if label.startswith("copied at ")
                     and ":37→" in label)
    # t1 after the copies reads several times its kernels, for host time before the
    # launch; on_gpu's first window starts behind torch.rand's kernels, still queued.
    assert copied_t1["value_median_ns"] > 3 * copied_t1["kernels_median_ns"]
    assert "host work" in copied_t1["verdict"] or "launch overhead" in copied_t1["verdict"]
    first_on_gpu = next(g for label, g in groups.items()
                        if label.startswith("on_gpu ") and ":59→" in label)
    assert first_on_gpu["prior_busy_median_ns"] > 0
    # Whether a window starts behind queued work, and whether that work outlasts the
    # window's own launches, is the GPU's and the host's of the day (three H200 runs of
    # this script: later on_gpu and flushed groups queued in two, not in the third, and
    # read +3 to +50 us over their kernels). What holds is the verdict following the
    # numbers: within twice the events' own cost of the kernels is never "inflated"; more
    # than twice the kernels with nothing queued at the start always is.
    for g in groups.values():
        excess = g["value_median_ns"] - g["kernels_median_ns"]
        if excess < 2 * g["floor_ns"]:
            assert "inflated" not in g["verdict"], g
        if g["prior_busy_median_ns"] == 0 and excess > g["kernels_median_ns"]:
            assert "inflated" in g["verdict"], g
    assert all(g["floor_source"] == "measured" for g in u["groups"])


def test_without_user_events_nothing_is_recorded(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "nsyswrap", "run", "-o", str(out), "--format", "json",
         "--no-user-events", str(WORKLOADS / "torch_event_edges.py")],
        capture_output=True, text=True, timeout=600, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["user_timings"]["records"] == 0
    assert doc["user_timings"]["event_records_in_report"] != 0
