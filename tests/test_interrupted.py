"""Interrupted captures, as they reach the analysis.

h100_interrupted_lost.sqlite is a real H100 export of scripts/workloads/torch_interrupt.py
run under plain `nsys profile` and stopped with SIGINT, which Python re-raises and so dies of
(docs/nsys-quirks.md, "Signals"): NVTX ranges arrived, the CUDA activity did not. The report
must say so loudly and call the GPU numbers unknown, never 0 (a 0 would read as an idle GPU).
"""

from __future__ import annotations

import json

from click.testing import CliRunner
from conftest import DATA, has_table, sql

import nsyswrap
from nsyswrap.analysis import analyze
from nsyswrap.cli import main
from nsyswrap.diagnose import diagnose

LOST = DATA / "h100_interrupted_lost.sqlite"


def test_fixture_is_what_it_claims():
    assert not has_table(LOST, "CUPTI_ACTIVITY_KIND_KERNEL")  # not even the table
    assert sql(LOST, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0] < 10
    assert sql(LOST, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59")[0][0] > 10


def test_lost_gpu_trace_is_an_alert_and_gpu_numbers_are_unknown():
    a = analyze(nsyswrap.load(LOST))
    assert a.info.gpu_trace_lost
    assert any("GPU trace was lost" in alert for alert in a.info.alerts)
    n = sql(LOST, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId "
                  "WHERE s.value = 'iteration' AND e.eventType = 59")[0][0]
    inst = a.instances.frame()
    inst = inst[inst["name"] == "iteration"]
    assert len(inst) == n
    assert inst["gpu_busy_ns"].isna().all() and inst["gpu_ops"].isna().all()
    # The blocking calls and copies are CUDA records too, lost with the kernels: unknown.
    for col in ("syncs", "sync_ns", "copies", "copy_bytes", "pageable_copies"):
        assert inst[col].isna().all(), col
    # Nothing judged on GPU numbers that are not there.
    gpu_codes = {"GPU_IDLE", "LAUNCH_OVERHEAD", "SYNC_STALL", "HOST_BOUND", "FP32_GEMM"}
    assert not gpu_codes & {f.code for f in diagnose(a)}


def test_alert_is_loud_in_every_format():
    runner = CliRunner()
    text = runner.invoke(main, ["compare", str(LOST)], terminal_width=120)
    assert text.exit_code == 0
    assert text.output.count("WARNING:") == 1 and "GPU trace was lost" in text.output
    doc = json.loads(runner.invoke(main, ["compare", str(LOST), "--format", "json"]).output)
    assert doc["report"]["gpu_trace_lost"] is True
    assert any("GPU trace was lost" in n for n in doc["report"]["notes"])
    row = next(r for r in doc["ranges"] if r["name"] == "iteration")
    assert row["gpu_busy_median_ns"] is None and row["kernels"] is None
    assert row["syncs"] is None and row["copies"] is None
    md = runner.invoke(main, ["compare", str(LOST), "--format", "markdown"]).output
    assert "GPU trace was lost" in md


def test_complete_reports_raise_no_alert():
    for path in (DATA / "h100_torch_train.sqlite", DATA / "h100_torch_mix.sqlite"):
        info = nsyswrap.load(path).info
        assert not info.gpu_trace_lost and not info.alerts
