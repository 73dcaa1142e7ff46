"""The runner's hooks of torch.utils.benchmark.Timer and triton.testing.do_bench, end to end on
the CPU: an unmodified program (tests/workloads/benchmark_tools.py) timing CPU tensors with
Timer's timeit, blocked_autorange and adaptive_autorange, and with do_bench through a
stand-in triton.testing (tests/fake_triton: do_bench's signature and recipe on the host
clock), run by `nsyswrap run` under Debian's nsys 2022.4 with PyTorch's CPU build. What the
program said it measured is checked against the runner's document in the report (decoded
here, tests/reference.py) and against nsyswrap's JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_nsys, needs_torch, once_more_if_nsys_failed
from reference import runner_documents

pytestmark = [pytest.mark.nsys, needs_nsys, needs_torch]

ROOT = Path(__file__).parents[1]
WORKLOAD = ROOT / "tests" / "workloads" / "benchmark_tools.py"
FAKE_TRITON = ROOT / "tests" / "fake_triton"
# Under nsys 2022.4 the nvtx package drops every mark unless its gate is lifted
# (docs/nsys-python-nvtx-2022.md); the runner marks through it where torch's NVTX is a stub
# (a CPU build) and does not lift it: this program's sitecustomize does.
LIFT_GATE = "import nsyswrap.instrument.nvtx_compat  # noqa: F401\n"


def _line_of(text: str) -> int:
    """The workload's line that holds `text` (once)."""
    lines = [i for i, line in enumerate(WORKLOAD.read_text().splitlines(), 1) if text in line]
    assert len(lines) == 1, text
    return lines[0]


def _run(tmp_path: Path, lift_gate: bool) -> tuple[dict, Path, list[dict]]:
    """nsyswrap's JSON, the report, and what the program said it measured."""
    paths = [FAKE_TRITON, ROOT]
    if lift_gate:
        site = tmp_path / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(LIFT_GATE)
        paths.insert(0, site)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(map(str, paths)))
    out, said = tmp_path / "run", tmp_path / "said.jsonl"
    def once():
        said.unlink(missing_ok=True)  # what the program says it measured, this run only
        return subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", str(out),
                               "--trace", "nvtx", "--format", "json", str(WORKLOAD), str(said)],
                              capture_output=True, text=True, env=env, timeout=300)

    proc = once_more_if_nsys_failed(once, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return (json.loads(proc.stdout), out / "benchmark_tools.sqlite",
            [json.loads(line) for line in said.read_text().splitlines()])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("tools"), lift_gate=True)


def test_the_runner_records_each_timer_and_do_bench_call(run):
    """The report holds a scope per call, at the program's line, with what it returned; and
    a measurement per Timer run of `number` calls, among them every one Timer kept."""
    _, report, said = run
    (doc,) = runner_documents(report)
    scopes = doc["scopes"]
    sites = doc["sites"]

    def site(scope):
        file, line, _ = sites[scope["site"]]
        return Path(file).name, line

    timers = [s for s in said if s["kind"].startswith("timer.")]
    assert [s["kind"] for s in scopes if s["kind"].startswith("timer.")] == \
        [s["kind"] for s in timers]
    lines = {"timer.timeit": _line_of(".timeit(200)"),
             "timer.blocked_autorange": _line_of("stmt=\"a + b\""),
             "timer.adaptive_autorange": _line_of("stmt=\"torch.mm(a, b)\"")}
    measurements = [s for s in scopes if s["kind"] == "timer_measurement"]
    for printed, scope in zip(timers, [s for s in scopes if s["kind"].startswith("timer.")],
                              strict=True):
        returned = scope["returned"]
        assert returned["raw_times"] == printed["raw_times"]
        assert returned["number_per_run"] == printed["number_per_run"]
        assert returned["median"] == printed["median"]
        assert site(scope) == (WORKLOAD.name, lines[scope["kind"]])
        inside = [m for m in measurements
                  if scope["before_ns"] <= m["before_ns"] <= m["after_ns"] <= scope["after_ns"]]
        kept = [m["returned"] for m in inside if m["number"] == printed["number_per_run"]]
        assert all(t in kept for t in printed["raw_times"]), scope["kind"]
    assert {s["label"] for s in scopes if s["kind"].startswith("timer.")} == \
        {"a @ b", "a + b", "torch.mm(a, b)"}

    benches = [s for s in scopes if s["kind"] == "do_bench"]
    assert [s["returned"] for s in benches] == [s["returned"] for s in said
                                                if s["kind"] == "do_bench"]
    assert [site(s) for s in benches] == [(WORKLOAD.name, _line_of("mean_ms = do_bench")),
                                          (WORKLOAD.name, _line_of("quantiles_ms = do_bench"))]
    assert benches[0]["options"] == {"warmup": 5.0, "rep": 20.0}
    assert benches[1]["options"]["quantiles"] == [0.5, 0.2, 0.8]


def test_the_timer_rows_say_what_timer_measured(run):
    """One row per Timer call, per call: N its measurements, the median it printed."""
    result, _, said = run
    groups = {g["label"]: g for g in result["user_timings"]["groups"]}
    stmts = {"timer.timeit": ("a @ b", _line_of(".timeit(200)")),
             "timer.blocked_autorange": ("a + b", _line_of("stmt=\"a + b\"")),
             "timer.adaptive_autorange": ("torch.mm(a, b)", _line_of("stmt=\"torch.mm(a, b)\""))}
    for printed in (s for s in said if s["kind"].startswith("timer.")):
        stmt, line = stmts[printed["kind"]]
        g = groups.pop(f"Timer({stmt}) at {WORKLOAD.name}:{line}")
        number = printed["number_per_run"]
        per_call_ns = [t / number * 1e9 for t in printed["raw_times"]]
        assert g["kind"] == "timer" and g["calls"] == number
        assert g["instances"] == len(printed["raw_times"])
        assert g["value_median_ns"] == pytest.approx(printed["median"] * 1e9)
        assert g["first_values_ns"] == pytest.approx(per_call_ns[:3])
        assert g["kernels_median_ns"] is None  # no GPU: nothing to set against it
    # do_bench timed with the host clock records no events: no window to reconcile.
    assert groups == {}
    assert result["user_timings"]["measured"] == 0


def test_the_runners_records_reach_the_report_without_help(tmp_path):
    result, report, _ = _run(tmp_path, lift_gate=False)
    assert runner_documents(report)
    assert result["user_timings"]["groups"]
