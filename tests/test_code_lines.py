"""Where in the program's code (analysis/code_lines.py, diagnose/where.py): each GPU
operation's line, checked against truths the code under test does not compute.

- h200_user_lines_train: scripts/workloads/torch_lines_train.py through `nsyswrap run` on an
  H200. Each launching line opens an NVTX range named after its own line number: SQL finds
  the innermost such range around each operation's launching call, and autograd's thread by
  its name.
- h200_user_lines_seed: the seed article's program, unchanged: the host time of line 38 in
  its first timed place, from the runner's trace decoded here (zlib, base64, the host clock
  deltas: no offset needed), against what the finding says.
"""

from __future__ import annotations

import array
import base64
import json
import zlib
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA, compared, needs_browser, sql

import nsyswrap

TRAIN = DATA / "h200_user_lines_train.sqlite"
EMIT = DATA / "h200_user_lines_emit.sqlite"
WORKLOAD = Path(__file__).parents[1] / "scripts" / "workloads" / "torch_lines_train.py"


def L(code: str) -> int:
    """The line of torch_lines_train.py (the fixtures' program) that holds `code`."""
    lines = WORKLOAD.read_text().splitlines()
    found = [i for i, text in enumerate(lines, start=1) if code in text]
    assert len(found) == 1, code
    return found[0]
SEED = DATA / "h200_user_lines_seed.sqlite"
OPS = {"kernel": "CUPTI_ACTIVITY_KIND_KERNEL", "copy": "CUPTI_ACTIVITY_KIND_MEMCPY",
       "memset": "CUPTI_ACTIVITY_KIND_MEMSET"}


@pytest.fixture(scope="module")
def train():
    return compared(TRAIN)


def _truth(kind: str, path=TRAIN) -> Counter:
    """Per line number: the operations of `kind` whose launching call lies inside a "line N"
    range of its thread (the innermost), from SQL alone; "backward" for autograd's."""
    rows = sql(path, f"""
        WITH ops AS (
          SELECT r.globalTid AS tid, r.start AS t FROM {OPS[kind]} o
          JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.correlationId),
        lines AS (
          SELECT n.globalTid AS tid, n.start, n.end, coalesce(n.text, s.value) AS text
          FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId
          WHERE coalesce(n.text, s.value) LIKE 'line %')
        SELECT (SELECT l.text FROM lines l WHERE l.tid = ops.tid AND l.start <= ops.t
                AND ops.t < l.end ORDER BY l.start DESC LIMIT 1),
               (SELECT s.value FROM ThreadNames tn JOIN StringIds s ON s.id = tn.nameId
                WHERE tn.globalTid = ops.tid)
        FROM ops""")
    out = Counter()
    for line, thread in rows:
        if thread and thread.startswith("pt_autograd"):
            out["backward"] += 1
        elif line:
            out[int(line.split()[1])] += 1
    return out


def _by_line(c, column: str) -> Counter:
    out = Counter()
    for row in c.analysis.lines.table.itertuples():
        if row.function == "backward (autograd thread)":
            key = "backward"
        elif str(row.file).endswith("torch_lines_train.py"):
            key = int(row.line)
        else:
            continue
        if getattr(row, column):
            out[key] += int(getattr(row, column))
    return out


@pytest.mark.parametrize("kind, column", [("kernel", "kernels"), ("copy", "copies"),
                                          ("memset", "memsets")])
def test_every_operation_is_on_the_line_that_launched_it(train, kind, column):
    truth = _truth(kind)
    assert truth, kind
    found = _by_line(train, column)
    # Every line the ranges mark, and backward: the same counts, operation for operation.
    for line, count in truth.items():
        assert found[line] == count, (kind, line)


def test_each_marked_line_launches_what_the_source_says(train):
    """The kernels' lines read as the program's source: fp32 GEMM at `y = w @ w`, the
    model's layers inside MLP.forward, backward on autograd's thread only."""
    table = train.analysis.lines.table
    table = table[table["file"].str.endswith("torch_lines_train.py")].set_index("line")
    assert table.loc[L("y = w @ w"), "kernels"] == 12
    assert table.loc[L("h = self.fc1(x)"), "function"] == "MLP.forward"
    assert table.loc[L('x = data.to("cuda")'), "pageable_copies"] == 12  # from pageable memory
    assert table.loc[L("loss.item()"), "syncs"] == 12  # .item() waits for the GPU
    # time.sleep(0.002) while the GPU waits
    assert table.loc[L("time.sleep(0.002)"), "idle_ns"] > 12 * 1_000_000
    backward = train.analysis.lines.table
    backward = backward[backward["function"] == "backward (autograd thread)"]
    assert backward["kernels"].iloc[0] == _truth("kernel")["backward"]


def test_findings_name_their_lines(train):
    by_code = {(f.code, f.range): f for f in train.findings}
    item = L("loss.item()")
    sync = by_code[("SYNC_IN_RANGE", f"lines:line {item}")]
    assert sync.evidence["lines"][0]["line"] == item and "loss.item()" in sync.message
    gemm = next(f for f in train.findings if f.code == "FP32_GEMM")
    assert gemm.evidence["lines"][0]["line"] == L("y = w @ w") and "w @ w" in gemm.message
    for f in train.findings:
        assert len(f.message) < 8 * 80


def test_the_json_and_csv_hold_the_lines(train, tmp_path):
    from nsyswrap.render import render

    doc = json.loads(render(train, "json"))
    lines = doc["lines"]
    assert lines["why_empty"] is None
    assert {r["line"] for r in lines["rows"]} >= {L(c) for c in (
        "self.fc1(x)", "torch.relu(h)", "self.fc2(h)", "data.to(", "model(x)", "backward()",
        "opt.step()", "opt.zero_grad(", "w @ w", "loss.item()")}
    forward = next(r for r in lines["rows"] if r["line"] == L("self.fc1(x)"))
    # called from `loss = model(x)...`, in loop()
    assert forward["stack"][0].endswith(f":{L('model(x)')} loop")
    assert any(k["line"] == L("w @ w") for k in lines["kernels"])
    text = render(train, "csv", section="lines")
    assert text.splitlines()[0].startswith("file,line,function,text,stack")
    assert "By line" in render(train, "table")


def _runner_trace(path):
    """The runner's document of the report (its parts joined), decoded here."""
    parts = {}
    for (text,) in sql(path, "SELECT coalesce(n.text, s.value) FROM NVTX_EVENTS n LEFT JOIN "
                             "StringIds s ON s.id = n.textId"):
        if text and text.startswith('{"nsyswrap":"nsyswrap.user-events/2'):
            doc = json.loads(text)
            if "part" in doc:
                parts[doc["part"]] = doc["text"]
            else:
                return doc["lines"]
    return json.loads("".join(parts[i] for i in sorted(parts)))["lines"]


def test_the_seed_windows_host_time_is_the_lines_that_ran_there():
    """copied(): between each timed iteration's start record (line 37) and end record (line
    39) the host ran line 38 alone; its time there is the finding's number."""
    lines = _runner_trace(SEED)
    codes, wheres = lines["codes"], lines["wheres"]
    main = max(lines["threads"], key=lambda t: t["rows"])
    deltas = array.array("q", zlib.decompress(base64.b64decode(main["clock_deltas"])))
    places = array.array("I", zlib.decompress(base64.b64decode(main["wheres"])))
    clocks, t = [], 0
    for d in deltas:
        t += d
        clocks.append(t)

    def line_of(w):
        return (codes[wheres[w][0]][1], wheres[w][1]) if w >= 2 else None

    seq = [line_of(w) for w in places]
    host_38 = []
    for i in range(len(seq) - 2):
        if seq[i] == ("copied", 37) and seq[i + 1] == ("copied", 38):
            assert seq[i + 2] == ("copied", 39)  # nothing else ran between the records
            host_38.append(clocks[i + 2] - clocks[i + 1])
    host_38 = host_38[-10:]  # the ten timed iterations (the warm-up records none)
    assert len(host_38) == 10
    c = nsyswrap.compare(SEED)
    host = next(f for f in c.findings if f.code == "HOST_WORK_IN_WINDOW")
    top = host.evidence["lines"][0]
    assert (top["line"], top["function"]) == (38, "copied")
    assert abs(top["host_ns"] - sum(host_38)) <= 10 * 2  # rounding of the offset, per window


@pytest.mark.parametrize("pairs", [1, 7])
def test_host_time_taken_in_batches_is_the_same(pairs, monkeypatch):
    """host_time takes its (interval, trace segment) pairs a batch at a time, and the line
    table its trace entries: batches of one (every interval, every entry its own batch) or
    seven give every finding's lines and numbers, and the table, as one batch does."""
    from nsyswrap.analysis import code_lines

    def lines_of(c):
        return [(f.code, f.message, f.evidence.get("lines")) for f in c.findings]

    c = compared(SEED)
    whole, table = lines_of(c), c.analysis.lines.table
    assert any(lines for *_, lines in whole) and table["host_ns"].sum() > 0
    monkeypatch.setattr(code_lines, "PAIRS_AT_ONCE", pairs)
    monkeypatch.setattr(code_lines, "ENTRIES_AT_ONCE", pairs)
    batched = nsyswrap.compare(SEED)
    assert lines_of(batched) == whole
    pd.testing.assert_frame_equal(batched.analysis.lines.table, table)


def test_a_report_without_a_trace_says_why():
    c = compared(DATA / "h100_torch_train.sqlite")
    assert c.analysis.lines.table.empty
    assert "nsyswrap run" in c.analysis.lines.why_empty
    from nsyswrap.render import render

    assert "no trace of the program's lines" in render(c, "table")


@pytest.mark.browser
@needs_browser
def test_the_page_shows_the_lines_and_their_source_escaped(tmp_path, chromium):
    """The By line table and the source view, as Chromium shows them; a line's source
    text that is markup stays text (a program's source is the report's data)."""
    from browser import load_page

    c = nsyswrap.compare(TRAIN)
    probe = "<img src=x onerror=alert(1)>"
    table = c.analysis.lines.table
    probed = table["text"].where(table["line"] != L("w @ w"), probe)
    c.analysis.lines.table = table.assign(text=probed)
    page = tmp_path / "lines.html"
    c.save_html(page)
    shot = tmp_path / "lines.png"
    load = load_page(page, shot, element="#lines", chromium=chromium)
    assert not load.errors and not load.dialogs and not load.requests
    text = load.facts["text"]
    assert "By line" in text and "backward (autograd thread)" in text
    assert probe in text  # shown as text, never run
    assert "with at(): h = self.fc1(x)" in text  # the source view
    assert shot.stat().st_size > 10_000


def _backward_truth() -> Counter:
    """Per line: the kernels autograd's thread launched inside a backward node's range
    ("AddmmBackward0, seq = 4, ...") whose forward op (the same sequence number, the latest
    before it, on the program's thread) opened inside a "line N" range: from SQL alone."""
    rows = sql(EMIT, """
        WITH names AS (
          SELECT n.globalTid AS tid, n.start, n.end, coalesce(n.text, s.value) AS text
          FROM NVTX_EVENTS n LEFT JOIN StringIds s ON s.id = n.textId),
        autograd AS (
          SELECT tn.globalTid AS tid FROM ThreadNames tn JOIN StringIds s ON s.id = tn.nameId
          WHERE s.value LIKE 'pt_autograd%'),
        seqd AS (
          SELECT tid, start, end, text, CAST(substr(text, instr(text, ', seq = ') + 8) AS INT)
                 AS seq
          FROM names WHERE text LIKE '%, seq = %'),
        nodes AS (SELECT * FROM seqd WHERE tid IN (SELECT tid FROM autograd)
                  AND text GLOB '[A-Za-z]*Backward*, seq = *'),
        forward AS (SELECT * FROM seqd WHERE tid NOT IN (SELECT tid FROM autograd)),
        kernels AS (
          SELECT r.globalTid AS tid, r.start AS t FROM CUPTI_ACTIVITY_KIND_KERNEL k
          JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
          WHERE r.globalTid IN (SELECT tid FROM autograd)),
        node_of AS (
          SELECT k.t, (SELECT n.seq FROM nodes n WHERE n.tid = k.tid AND n.start <= k.t
                       AND k.t <= n.end ORDER BY n.start DESC LIMIT 1) AS seq,
                      (SELECT n.start FROM nodes n WHERE n.tid = k.tid AND n.start <= k.t
                       AND k.t <= n.end ORDER BY n.start DESC LIMIT 1) AS node_start
          FROM kernels k),
        forward_of AS (
          SELECT (SELECT f.tid || ' ' || f.start FROM forward f WHERE f.seq = node_of.seq
                  AND f.start <= node_of.node_start ORDER BY f.start DESC LIMIT 1) AS op
          FROM node_of WHERE seq IS NOT NULL)
        SELECT (SELECT l.text FROM names l WHERE l.text LIKE 'line %'
                AND l.tid = CAST(substr(op, 1, instr(op, ' ') - 1) AS INT)
                AND l.start <= CAST(substr(op, instr(op, ' ') + 1) AS INT)
                AND CAST(substr(op, instr(op, ' ') + 1) AS INT) < l.end
                ORDER BY l.start DESC LIMIT 1)
        FROM forward_of""")
    return Counter(int(line.split()[1]) for (line,) in rows if line)


def test_backward_kernels_go_to_the_forward_line_that_made_them():
    """Under emit_nvtx: each backward kernel on the forward op's line (SQL above), plus
    that line's own forward kernels; what no node holds stays on autograd's thread."""
    c = compared(EMIT)
    backward = _backward_truth()
    assert backward[L("self.fc1(x)")] > 0 and backward[L("model(x)")] > 0
    forward = _truth("kernel", EMIT)
    found = _by_line(c, "kernels")
    for line in set(backward) | {k for k in forward if k != "backward"}:
        assert found[line] == forward[line] + backward[line], line
    assert found["backward"] == forward["backward"] - sum(backward.values())
    table = c.analysis.lines.table.set_index("line")
    assert table.loc[L("self.fc1(x)"), "backward_kernels"] == backward[L("self.fc1(x)")]


@pytest.mark.parametrize("path", [TRAIN, SEED, EMIT], ids=lambda p: p.stem)
def test_every_finding_names_a_line_of_the_program(path):
    c = compared(path)
    assert c.findings
    for f in c.findings:
        assert f.evidence.get("lines"), f.code
        top = f.evidence["lines"][0]
        assert top["line"] > 0 and f"{top['line']}" in f.message


def test_the_perfetto_trace_names_each_operations_line():
    """--format trace: each kernel's args name its line, as many per line as the table."""
    from nsyswrap.render import render

    c = compared(EMIT)
    events = json.loads(render(c, "trace"))["traceEvents"]
    per_line = Counter(e["args"]["line"] for e in events if e.get("cat") == "kernel")
    table = c.analysis.lines.table
    for row in table[table["kernels"] > 0].itertuples():
        label = f"{row.file.rsplit('/', 1)[-1]}:{row.line}" if row.line else row.function
        assert per_line[label] == row.kernels, label
    plain = json.loads(render(compared(DATA / "h100_torch_train.sqlite"), "trace"))
    assert not any("line" in e.get("args", {}) for e in plain["traceEvents"])
