"""Stopping `nsyswrap run` on a real GPU keeps the kernels of the iterations that finished
(run on the GPU host: pytest -m gpu). Plain `nsys profile` loses them all when the program
dies by the signal (h100_interrupted_lost.sqlite, docs/nsys-quirks.md "Signals"); nsyswrap
hands the signal to the program, which ends through exit() and so flushes CUDA's trace."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sql

torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys"),
]
WORKLOAD = Path(__file__).parents[1] / "scripts" / "workloads" / "torch_interrupt.py"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_run_keeps_finished_iterations_kernels(tmp_path, sig):
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "nsyswrap", "run", "-o", str(out), "--trace", "cuda,nvtx",
         str(WORKLOAD), "1000", "0.05"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finished = 0
    for line in proc.stdout:  # the program prints one line per finished iteration
        if line.startswith("done "):
            finished = int(line.split()[1])
            if finished >= 10:
                break
    assert finished >= 10, proc.stderr.read() if proc.poll() is not None else "no output"
    proc.send_signal(sig)
    rest, stderr = proc.communicate(timeout=240)
    finished = max([finished] + [int(w.split()[1]) for w in rest.splitlines()
                                 if w.startswith("done ")])
    # Either signal reaches the program as a Ctrl-C (SIGINT, which code most often handles);
    # its exit code, 130, is nsyswrap's.
    assert proc.returncode == 130, stderr
    report = out / "torch_interrupt.sqlite"
    assert report.exists(), stderr
    ranges = sql(report, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s "
                         "ON s.id = e.textId WHERE s.value = 'iteration' AND e.end IS NOT NULL")
    assert ranges[0][0] >= finished
    # Each finished iteration ran a matmul and a sum: at least two kernels each, all kept.
    kernels = sql(report, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    assert kernels >= 2 * finished
    assert (out / "analysis.json").exists()
