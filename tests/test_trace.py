"""`--format trace`: Chrome trace-event JSON (what Perfetto and chrome://tracing read),
checked against the format's rules and, operation by operation, against SQL."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pytest
from click.testing import CliRunner
from conftest import CPU_2022, GPU_GRAPH_WHOLE, GPU_MIX, has_table, sql

from nsyswrap.cli import main
from nsyswrap.comparison.single import compare
from nsyswrap.render import render
from nsyswrap.render.trace import GPU_PID_BASE

MULTI_GPU = GPU_MIX.parent / "h200x2_ddp_straggler_one.sqlite"
FIXTURES = [GPU_MIX, GPU_GRAPH_WHOLE, MULTI_GPU, CPU_2022]
OP_TABLES = {"kernel": "CUPTI_ACTIVITY_KIND_KERNEL", "memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
             "memset": "CUPTI_ACTIVITY_KIND_MEMSET",
             "graph": "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"}
PHASES = {"X", "B", "E", "i", "I", "b", "e", "n", "M", "s", "t", "f", "C"}
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def _trace(path) -> dict:
    return json.loads(render(compare(path), "trace"))


@pytest.fixture(scope="module", params=FIXTURES, ids=lambda p: p.stem)
def fixture_trace(request):
    return request.param, _trace(request.param)


def test_structure_follows_the_trace_event_format(fixture_trace):
    _, doc = fixture_trace
    assert set(doc) >= {"traceEvents", "displayTimeUnit"}
    assert doc["displayTimeUnit"] in ("ms", "ns")
    async_open = Counter()
    for e in doc["traceEvents"]:
        assert e["ph"] in PHASES
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "M":
            assert e["name"] in METADATA and isinstance(e["args"], dict)
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
        if e["ph"] == "i":
            assert e["s"] in ("g", "p", "t")
        if e["ph"] in ("b", "e"):
            assert e["cat"] and ("id" in e or "id2" in e)
            key = (e["cat"], json.dumps(e.get("id2", e.get("id"))), e["name"])
            async_open[key] += 1 if e["ph"] == "b" else -1
    assert all(v == 0 for v in async_open.values())  # every async slice is closed


def test_complete_slices_nest_on_each_track(fixture_trace):
    """Trace viewers stack X slices of one thread by nesting: a slice that starts inside
    another must end inside it."""
    _, doc = fixture_trace
    tracks = defaultdict(list)
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            tracks[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for slices in tracks.values():
        stack: list[float] = []
        for start, end in sorted(slices, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1] <= start + 1e-6:
                stack.pop()
            if stack:
                assert end <= stack[-1] + 1e-6
            stack.append(end)


def test_every_gpu_operation_appears_once(fixture_trace):
    path, doc = fixture_trace
    origin = doc["otherData"]["origin_ns"]
    got = Counter()
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE:
            start = round(e["ts"] * 1000) + origin
            got[(e["cat"], start, start + round(e["dur"] * 1000))] += 1
    want = Counter()
    for kind, table in OP_TABLES.items():
        if has_table(path, table):
            for start, end in sql(path, f'SELECT start, "end" FROM {table}'):
                want[(kind, start, end)] += 1
    assert got == want


def test_each_launch_flows_to_its_operation(fixture_trace):
    path, doc = fixture_trace
    out = Counter(e["bind_id"] for e in doc["traceEvents"] if e.get("flow_out"))
    into = Counter(e["bind_id"] for e in doc["traceEvents"] if e.get("flow_in"))
    assert out == into and all(n == 1 for n in out.values())
    launched = 0
    for table in OP_TABLES.values():
        if has_table(path, table) and has_table(path, "CUPTI_ACTIVITY_KIND_RUNTIME"):
            launched += sql(path, f"SELECT count(*) FROM {table} o WHERE EXISTS (SELECT 1 "
                                  "FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId "
                                  "= o.correlationId AND r.globalTid >> 24 = o.globalPid >> 24)"
                            )[0][0]
    assert sum(into.values()) == launched
    # The launch sits on the CPU (a traced process), the operation on a GPU.
    for e in doc["traceEvents"]:
        if e.get("flow_out"):
            assert e["pid"] < GPU_PID_BASE and e["cat"] == "cuda_launch"
        if e.get("flow_in"):
            assert e["pid"] >= GPU_PID_BASE


def test_nvtx_ranges_and_devices(fixture_trace):
    path, doc = fixture_trace
    events = doc["traceEvents"]
    ranges = sum(1 for e in events if e.get("cat") == "nvtx" and e["ph"] in ("X", "b"))
    assert ranges == sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)"
                               " AND \"end\" IS NOT NULL")[0][0]
    gpu_pids = {e["pid"] for e in events if e["ph"] == "X" and e["pid"] >= GPU_PID_BASE}
    devices = set()
    for table in OP_TABLES.values():
        if has_table(path, table):
            devices |= {d for (d,) in sql(path, f"SELECT DISTINCT deviceId FROM {table}")}
    assert gpu_pids == {GPU_PID_BASE + d for d in devices}
    named = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert gpu_pids <= named


def test_findings_are_instants_on_their_range():
    c = compare(GPU_MIX)
    doc = json.loads(render(c, "trace"))
    instants = [e for e in doc["traceEvents"] if e.get("cat") == "finding"]
    # A merged finding (several ranges) is an instant on each of its ranges.
    expected = Counter()
    for f in c.findings:
        expected[f.code] += len(f.ranges) or 1
    assert any(len(f.ranges) > 1 for f in c.findings)
    assert Counter(e["name"] for e in instants) == expected
    for e in instants:
        by_range = next(f for f in c.findings if f.code == e["name"]
                        and (e["args"]["range"] in f.ranges or not f.ranges)
                        ).evidence.get("by_range")
        if by_range:
            assert e["args"]["evidence"] == json.loads(json.dumps(by_range[e["args"]["range"]]))
    starts = {(e["pid"], e["tid"], e["ts"], e["name"]) for e in doc["traceEvents"]
              if e.get("cat") == "nvtx" and e["ph"] in ("X", "b")}
    for e in instants:
        if e["args"]["range"]:
            domain_name = e["args"]["range"]
            assert e["s"] == "t"
            assert (e["pid"], e["tid"], e["ts"], domain_name) in starts


def test_cli_writes_a_trace(tmp_path):
    out = tmp_path / "t.json"
    res = CliRunner().invoke(main, ["compare", str(GPU_MIX), "--format", "trace", "-o",
                                    str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["traceEvents"]
