"""The harness pieces that need no GPU: clock locking (with a fake nvidia-smi), results and
their statistics, the JSON marks and their parsing, annotate, and the errors."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap

import pandas as pd
import pytest
from conftest import DATA

import nsyswrap
from nsyswrap.analysis.reconcile import benchmark_runs
from nsyswrap.common.errors import NsysWrapError
from nsyswrap.instrument.clocks import locked_clocks, read_clocks
from nsyswrap.instrument.harness import BenchmarkConfig, BenchmarkResult, mark_payloads


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """An nvidia-smi that logs its arguments; `refuse` makes -lgc fail like a non-root user."""
    log = tmp_path / "smi.log"
    smi = tmp_path / "nvidia-smi"
    smi.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$@" >> {log}
        case "$*" in
          *--query-gpu*) echo "1410, 1980"; exit 0 ;;
          *-lgc*) if [ -e {tmp_path}/refuse ]; then
                    echo "Setting locked GPU clocks is not permitted: Insufficient Permissions"
                    exit 4
                  fi; echo "GPU clocks set"; exit 0 ;;
          *-rgc*) echo "All done."; exit 0 ;;
        esac
        """))
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return tmp_path, log


def test_lock_and_restore(fake_smi):
    _, log = fake_smi
    assert read_clocks(0) == {"sm_mhz": 1410.0, "max_sm_mhz": 1980.0}
    with locked_clocks("max", 0) as mhz:
        assert mhz == 1980
        assert "-lgc 1980,1980" in log.read_text()
        assert "-rgc" not in log.read_text()
    assert log.read_text().strip().splitlines()[-1] == "-i 0 -rgc"


def test_restore_after_an_exception(fake_smi):
    _, log = fake_smi
    with pytest.raises(ZeroDivisionError), locked_clocks(1500, 1):
        1 / 0
    lines = log.read_text().splitlines()
    assert "-i 1 -lgc 1500,1500" in lines and lines[-1] == "-i 1 -rgc"


def test_restore_on_sigterm(fake_smi, tmp_path):
    _, log = fake_smi
    code = ("import time; from nsyswrap.instrument.clocks import locked_clocks\n"
            "with locked_clocks(1600):\n    print('locked', flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=os.environ)
    assert proc.stdout.readline().strip() == "locked"
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert log.read_text().splitlines()[-1] == "-i 0 -rgc"


def test_refused_lock_is_a_clear_error(fake_smi):
    folder, log = fake_smi
    (folder / "refuse").touch()
    with pytest.raises(NsysWrapError, match="needs root") as e, locked_clocks(1500):
        pass
    assert "Insufficient Permissions" in str(e.value)
    assert "-rgc" not in log.read_text()  # nothing was locked, nothing to restore


def _result(samples, cache=None, graph=0):
    config = BenchmarkConfig(
        name="b", iters=len(samples), warmup=3, warmup_iters=3, flush_l2="all",
        flush_bytes=1, backpressure=True, sleep_ns=1.0, sleep_cycles_per_ns=1.0,
        enqueue_ns=1.0, cuda_graph=graph, sync_each=True,
        gc_disabled=True, cpu_affinity=None, seed=0, locked_clock_mhz=None, device="x",
        device_index=0, l2_bytes=1)
    return BenchmarkResult("b", list(samples), cache or ["flushed"] * len(samples), config,
                           [1980.0] * len(samples))


def test_result_statistics_and_repr(tmp_path):
    r = _result([10.0, 12.0, 11.0, 30.0, 9.0], ["flushed", "hot"] * 2 + ["flushed"])
    assert r.median_ns == 11.0 and r.min_ns == 9.0
    assert r.iqr_ns == pytest.approx(statistics.quantiles(r.samples_ns, n=4,
                                                          method="inclusive")[2] - 10.0)
    assert r.by_cache() == {"flushed": [10.0, 11.0, 9.0], "hot": [12.0, 30.0]}
    assert "median 0.01 µs" in repr(r) and "hot" in repr(r)
    saved = json.loads(r.save(tmp_path / "r.json").read_text())
    assert saved["samples_ns"] == r.samples_ns and saved["config"]["warmup_iters"] == 3


def _marks(texts):
    return pd.DataFrame({"time_ns": range(len(texts)), "pid": 7, "thread": 7,
                         "domain": "nsyswrap", "text": texts})


def test_mark_roundtrip_and_graph_scaling():
    r = _result([100.0, 101.0], graph=10)
    (text,) = mark_payloads(r, pid=7)
    (run,) = benchmark_runs(_marks([text]))
    assert run["event_ns"] == [1000, 1010]  # per iteration, i.e. 10 calls each
    assert run["calls_per_iteration"] == 10 and run["mark_pid"] == 7


def test_long_marks_are_split_and_joined():
    r = _result([float(i) for i in range(5000)])
    parts = mark_payloads(r, pid=7)
    assert len(parts) > 1 and all(len(p) < 40_000 for p in parts)
    (run,) = benchmark_runs(_marks(parts))
    assert run["event_ns"] == list(range(5000))
    assert benchmark_runs(_marks(parts[:-1])) == []  # an incomplete set is ignored


def test_parts_numbered_off_or_counted_past_any_list_are_incomplete():
    """The harness's parts are joined as the runner's are (json_input.MarkParts): parts 0
    to count - 1, each there; a count no list could hold is not counted out."""
    docs = [json.loads(p) for p in mark_payloads(_result([float(i) for i in range(5000)]),
                                                 pid=7)]
    renumbered = [dict(d, part=d["parts"]) if d["part"] == d["parts"] - 1 else d for d in docs]
    huge = [dict(d, parts=2**62) for d in docs]
    for texts in (renumbered, huge):
        notes: list[str] = []
        assert benchmark_runs(_marks([json.dumps(d) for d in texts]), notes) == []
        assert notes == []


def test_harness_without_torch_or_gpu_says_so():
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(NsysWrapError, match="PyTorch|CUDA"):
        nsyswrap.benchmark(lambda: None, iters=2)


def test_bad_options_are_refused_before_any_work():
    with pytest.raises(NsysWrapError, match="flush_l2"):
        nsyswrap.benchmark(lambda: None, flush_l2="sometimes")
    with pytest.raises(NsysWrapError, match="iters"):
        nsyswrap.benchmark(lambda: None, iters=0)
    with pytest.raises(NsysWrapError, match="hot L2"):
        nsyswrap.benchmark(lambda: None, calls=10)  # flush_l2="all" by default


def test_annotate_forms_work_without_a_profiler():
    calls = []

    @nsyswrap.annotate()
    def f(x):
        calls.append(x)
        return x * 2

    assert f(3) == 6 and f.__name__ == "f"
    with nsyswrap.annotate("block", domain="mine", color="red", payload=3) as a:
        calls.append(a.message)
    nsyswrap.mark("m")
    assert calls == [3, "block"]


HARNESS_REPORT = DATA / "h100_harness_clock.sqlite"
MARK_TEXT = ("SELECT s.id, s.value FROM NVTX_EVENTS AS e JOIN StringIds AS s ON s.id = e.textId "
             "WHERE e.eventType = 34 AND s.value LIKE '{\"nsyswrap\":%'")


@pytest.mark.parametrize(("change", "words"), [
    ({"calls_per_iteration": 0}, "calls_per_iteration must be a whole number of at least 1"),
    ({"calls_per_iteration": -3}, "calls_per_iteration must be a whole number of at least 1"),
    ({"event_ns": "x"}, "event_ns must be a list of durations"),
    ({"event_ns": [1000, "a"]}, "event_ns must be a list of durations"),
    ({"event_ns": [-5000]}, "event_ns must be a list of durations"),
    ({"name": None}, "it has no name"),
], ids=["calls 0", "calls -3", "event_ns text", "event_ns item", "event_ns negative",
        "no name"])
def test_a_harness_mark_that_cannot_be_used_is_left_out_and_said(report_copy, change, words):
    """A harness mark written by hand or by another tool: the report is still analysed,
    the other marks' benchmarks as ever, and the notes say which mark was left out."""
    import sqlite3

    from click.testing import CliRunner

    from nsyswrap.cli import main

    path = report_copy(HARNESS_REPORT)
    con = sqlite3.connect(path)
    marks = {json.loads(v)["name"]: (i, json.loads(v)) for i, v in con.execute(MARK_TEXT)}
    (string_id, doc), *_ = marks.values()
    broken = doc["name"]
    doc.update(change)
    if doc["name"] is None:
        del doc["name"]
    con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (json.dumps(doc), string_id))
    con.commit()
    con.close()
    res = CliRunner().invoke(main, ["compare", str(path), "--format", "json"],
                             catch_exceptions=False)
    assert res.exit_code == 0, res.stderr
    out = json.loads(res.stdout)
    assert [b["benchmark"] for b in out["benchmarks"]] == sorted(set(marks) - {broken})
    named = f"{broken!r}" if "name" in doc else "without a name"
    said = [n for n in out["report"]["notes"] if "harness mark" in n]
    assert len(said) == 1 and said[0].startswith(
        f"the harness mark {named} at {_mark_time(path, string_id)} ns left out: {words}")


def _mark_time(path, string_id):
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT start FROM NVTX_EVENTS WHERE eventType = 34 AND textId = ?",
                           (string_id,)).fetchone()[0]
    finally:
        con.close()
