"""PyTorch's operator ranges (torch.autograd.profiler.emit_nvtx) on a real H100 export
(h100_torch_emit_nvtx.sqlite, made by scripts/make_fixtures_gpu.sh from
scripts/workloads/torch_emit_nvtx.py): 20 annotated steps, the second ten with shapes in the
names. Backward's operator ranges ("AddmmBackward0, seq = 15, op_id = 53") sit on the
autograd thread and carry no namespace.

Expected values come from direct SQL on the export."""

from __future__ import annotations

import re

import pytest
import reference
from click.testing import CliRunner
from conftest import DATA, has_table, sql

import nsyswrap
from nsyswrap.analysis import analyze
from nsyswrap.cli import main
from nsyswrap.diagnose import Thresholds, diagnose

EMIT = DATA / "h100_torch_emit_nvtx.sqlite"
NAMES = """
SELECT coalesce(e.text, s.value), e.globalTid FROM NVTX_EVENTS e
LEFT JOIN StringIds s ON s.id = e.textId
WHERE e.eventType = 59 AND e.end IS NOT NULL AND coalesce(e.domainId, 0) = 0
"""


@pytest.fixture(scope="module")
def analysis():
    return analyze(nsyswrap.load(EMIT))


def test_operator_ranges_are_a_librarys(analysis):
    """Every range emit_nvtx opened is a library's, autograd's backward nodes included; the
    harness's own `step` is the user's."""
    names = {n for n, _ in sql(EMIT, NAMES)}
    backward_nodes = {n for n in names if re.match(r"^\w+Backward\d+, seq = \d+", n)}
    no_namespace = {n for n in names if "::" not in n and n != "step"}
    assert backward_nodes and no_namespace - backward_nodes  # "detach, op_id = N" too
    inst = analysis.instances.frame()
    operators = inst[inst["domain"] == ""]
    assert len(operators) == sum(1 for n, _ in sql(EMIT, NAMES) if n != "step")
    assert operators["library"].all()
    assert not inst.loc[inst["name"] == "step", "library"].any()


def test_operator_ranges_are_grouped_per_operator(analysis):
    """seq and op_id count calls: one family per operator (and per shapes), its count from
    SQL."""
    rows = [n for n, _ in sql(EMIT, NAMES)]
    plain = [n for n in rows if re.fullmatch(r"aten::linear, seq = \d+, op_id = \d+", n)]
    shaped = [n for n in rows if re.fullmatch(
        r"aten::linear, seq = \d+, op_id = \d+, sizes = \[\[64, 512\], \[512, 512\], \[512\]\]"
        r", input_op_ids = .*", n)]
    assert len(plain) == 80 and len(shaped) == 80  # 8 layers x 10 steps, each half
    ranges = analysis.ranges.set_index("name")
    assert ranges.loc["aten::linear, seq = {n}, op_id = {n}", "count"] == len(plain)
    shaped_family = ("aten::linear, seq = {n}, op_id = {n}, sizes = [[64, 512], [512, 512], "
                     "[512]], input_op_ids = {n}")
    assert ranges.loc[shaped_family, "count"] == len(shaped)
    # Far fewer rows than ranges: a table a person can read.
    assert len(analysis.ranges) < 100 < len(rows)


def test_operator_ranges_own_nothing_of_the_step(analysis):
    """Under the process rule the autograd thread's operator ranges are no ownership: each
    step owns every GPU op its process launched while it was open (SQL), backward's
    included."""
    tables = [t for t in ("KERNEL", "MEMCPY", "MEMSET")
              if has_table(EMIT, f"CUPTI_ACTIVITY_KIND_{t}")]
    union = " UNION ALL ".join(f"SELECT start, end, correlationId, globalPid "
                               f"FROM CUPTI_ACTIVITY_KIND_{t}" for t in tables)
    ops = sql(EMIT, f"""
        SELECT o.start, o.end, r.start FROM ({union}) o
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
          ON r.correlationId = o.correlationId AND (r.globalTid >> 24) = (o.globalPid >> 24)""")
    steps = sql(EMIT, """SELECT e.start, e.end FROM NVTX_EVENTS e
                         LEFT JOIN StringIds s ON s.id = e.textId
                         WHERE coalesce(e.text, s.value) = 'step' AND e.eventType = 59
                         ORDER BY e.start""")
    assert len(steps) == 20
    inst = analysis.instances.frame()
    got = inst[inst["name"] == "step"].sort_values("start_ns").to_dict("records")
    for (start, end), row in zip(steps, got, strict=True):
        mine = [(s, e) for s, e, launch in ops if start <= launch <= end]
        assert row["gpu_ops"] == len(mine)
        assert row["gpu_busy_ns"] == reference.union_length(mine)
    assert sum(r["gpu_busy_other_threads_ns"] for r in got) > 0  # backward's, from autograd


def test_no_findings_on_operator_ranges_unless_asked(analysis):
    findings = diagnose(analysis, Thresholds())
    judged = {r for f in findings for r in (f.ranges or [f.range]) if r}
    assert judged <= {"nsyswrap:step"}, judged
    res = CliRunner().invoke(main, ["compare", str(EMIT), "--format", "json",
                                    "--all-domains"])
    assert res.exit_code == 0, res.output
