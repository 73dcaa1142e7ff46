"""The program's own CUDA-event timings (`nsyswrap run`'s records) in the text, JSON, CSV and
Markdown outputs, on the H100 fixtures of scripts/workloads/torch_*.py. Expected values come
from the runner's records decoded here from the report's NVTX marks (not with
analysis/user_events.py) and from SQL on the kernels."""

from __future__ import annotations

import bisect
import json
import os
import re
from statistics import median

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DATA, GPU_MIX, compared, sql
from reference import runner_rows

import nsyswrap
from nsyswrap.cli import main
from nsyswrap.common.units import fmt_ns
from nsyswrap.render import render

# One worker runs the module: its outputs are made once (module-scoped), not once per worker.
pytestmark = pytest.mark.xdist_group("user_timings_render")

SEED = DATA / "h100_user_seed.sqlite"
DO_BENCH = DATA / "h100_user_do_bench.sqlite"
LOOPS = DATA / "h100_user_loops.sqlite"
EDGES = DATA / "h100_user_edges.sqlite"
TIMER = DATA / "h100_user_timer.sqlite"
EVENT_REPORTS = [SEED, DO_BENCH, LOOPS, EDGES]
# The Timer fixture (12 MB as first made) comes with the final fixtures.
needs_timer = pytest.mark.skipif(not TIMER.exists(), reason="Timer fixture not committed yet")

GROUP_KEYS = ["key", "label", "kind", "pid", "instances", "calls", "value_median_ns",
              "value_iqr_ns",
              "kernels_median_ns", "kernels_iqr_ns", "difference_ns", "difference_share",
              "floor_ns", "floor_source", "host_median_ns", "lead_idle_median_ns",
              "tail_idle_median_ns", "prior_busy_median_ns", "uncovered_median_ns",
              "sync_median_ns", "copy_median_ns", "residual_median_ns", "first_values_ns",
              "tool_value_ns", "tool_statistic", "tool_kernels_ns", "codes", "verdict"]
INSTANCE_KEYS = ["key", "label", "kind", "pid", "instance", "calls", "stream_id", "start_ns",
                 "end_ns",
                 "value_ns", "gpu_busy_ns", "gpu_span_ns", "gpu_first_start_ns",
                 "gpu_last_end_ns", "predicted_ns", "residual_ns", "host_between_records_ns",
                 "lead_idle_ns", "tail_idle_ns", "prior_busy_ns", "uncovered_busy_ns",
                 "uncovered_ops", "joined_ops", "internal_idle_ns", "gaps", "max_gap_ns",
                 "gpu_ops", "kernels", "streams", "syncs", "sync_ns", "copies", "copy_bytes",
                 "copy_ns", "pageable_copies", "copies_before_bytes", "copies_before_gap_ns",
                 "work"]


# -- the runner's records, decoded independently ------------------------------------------

def runner_doc(path) -> dict:
    """The one process's document of the runner: a mark of JSON, or its parts joined."""
    docs, parts = [], {}
    for (text,) in sql(path, "SELECT text FROM NVTX_EVENTS WHERE text LIKE ?",
                       ('{"nsyswrap":"nsyswrap.user-events/%',)):
        d = json.loads(text)
        if d["nsyswrap"].endswith("/part"):
            parts.setdefault(d["key"], {})[d["part"]] = d["text"]
        else:
            docs.append(d)
    docs += [json.loads("".join(p[i] for i in sorted(p))) for p in parts.values()]
    assert len(docs) == 1
    return docs[0]


def unpack(doc: dict, name: str) -> list[dict]:
    """'records' or 'elapsed': zlib-compressed, base64 rows of doc's struct format."""
    return runner_rows(doc, name)


def _site(doc: dict, code: int) -> tuple[str, int, str]:
    file, line, function = doc["sites"][code]
    return os.path.basename(file), line, function


def event_groups(path) -> dict[str, list[dict]]:
    """label -> the elapsed_time() results of that call-site pair (each pair of records
    once; calls that raised left out), with their start and end records."""
    doc = runner_doc(path)
    records = {(r["event"], r["nth"]): r for r in unpack(doc, "records")}
    errors = {int(k) for k in doc["elapsed_errors"]}
    out: dict[str, list[dict]] = {}
    seen = set()
    for i, e in enumerate(unpack(doc, "elapsed")):
        pair = (e["start_event"], e["start_nth"], e["end_event"], e["end_nth"])
        if i in errors or pair in seen:
            continue
        seen.add(pair)
        start, end = records[pair[:2]], records[pair[2:]]
        (fa, la, fn), (fb, lb, _) = _site(doc, start["site"]), _site(doc, end["site"])
        label = f"{fa}:{la}→{lb}" if fa == fb else f"{fa}:{la}→{fb}:{lb}"
        label = f"{fn} at {label}" if fn != "<module>" else label
        out.setdefault(label, []).append({**e, "start": start, "end": end})
    return out


def do_bench_groups(path) -> dict[str, tuple[list[float], dict]]:
    """'do_bench at file:line' -> (the timed calls' event values in ns, its scope): the
    call-site pair measured most often inside the do_bench call."""
    doc = runner_doc(path)
    records = {(r["event"], r["nth"]): r for r in unpack(doc, "records")}
    elapsed = unpack(doc, "elapsed")
    out = {}
    for scope in doc["scopes"]:
        if scope["kind"] != "do_bench":
            continue
        by_pair: dict[tuple, list[float]] = {}
        for e in elapsed[scope["first_elapsed"]:scope["end_elapsed"]]:
            pair = (records[(e["start_event"], e["start_nth"])]["site"],
                    records[(e["end_event"], e["end_nth"])]["site"])
            by_pair.setdefault(pair, []).append(e["value_ms"] * 1e6)
        file, line, _ = _site(doc, scope["site"])
        out[f"do_bench at {file}:{line}"] = (max(by_pair.values(), key=len), scope)
    return out


def kernel_union_ns(path, rowids: list[int]) -> int:
    """The time the kernels at `rowids` cover (their union), from SQL, by a plain sweep."""
    times = sorted(sql(path, 'SELECT start, "end" FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid '
                             f'IN ({",".join(map(str, rowids))})')) if rowids else []
    total, horizon = 0, None
    for s, e in times:
        if horizon is None or s >= horizon:
            total, horizon = total + e - s, e
        elif e > horizon:
            total, horizon = total + e - horizon, e
    return total


def seed_interval_kernels() -> dict[str, list[list[tuple[int, int]]]]:
    """Per group of the seed, each interval's kernels (rowid, duration) from SQL: those the
    recording thread launched between the cudaEventRecord calls of its two records (the
    runner's host clock put on the report's by its clock marks)."""
    doc = runner_doc(SEED)
    marks = {json.loads(t)["key"]: s for t, s in sql(
        SEED, "SELECT text, start FROM NVTX_EVENTS WHERE text LIKE ?",
        ('{"nsyswrap":"nsyswrap.clock/1%',))}
    offset = median(marks[k] - (b + a) / 2 for b, a, k in doc["clock_marks"] if k in marks)
    tid = doc["threads"][0]
    calls = [s for (s,) in sql(SEED, """
        SELECT r.start FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId
        WHERE n.value LIKE 'cudaEventRecord%' AND (r.globalTid & 16777215) = ?
        ORDER BY r.start""", (tid,))]
    kernels = sql(SEED, """
        SELECT r.start, k.rowid, k."end" - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
         AND (r.globalTid >> 24) = (k.globalPid >> 24)
        WHERE (r.globalTid & 16777215) = ? ORDER BY r.start""", (tid,))
    launches = [s for s, _, _ in kernels]

    def call(record):  # the first event-record call at or after the host clock's reading
        return calls[bisect.bisect_left(calls, record["before_ns"] + offset - 2_000)]

    out = {}
    for label, intervals in event_groups(SEED).items():
        out[label] = []
        for e in intervals:
            lo = bisect.bisect_right(launches, call(e["start"]))
            hi = bisect.bisect_left(launches, call(e["end"]))
            out[label].append([(rowid, d) for _, rowid, d in kernels[lo:hi]])
    return out


def _groups(c) -> dict[str, dict]:
    return {r["label"]: r for r in c.user_timings.to_dict("records")}


# -- the numbers ----------------------------------------------------------------------------

@pytest.mark.parametrize("path", EVENT_REPORTS, ids=lambda p: p.name)
def test_groups_are_the_runner_records(path):
    """Each call-site pair's N, median and first values are its elapsed_time() results."""
    c = compared(path)
    groups = _groups(c)
    expected = event_groups(path)
    if path == DO_BENCH:  # inside do_bench, its own timing loop: grouped per do_bench call
        for label, (values, scope) in do_bench_groups(path).items():
            g = groups[label]
            assert g["instances"] == len(values)
            assert g["value_median_ns"] == pytest.approx(median(values))
            assert g["first_values_ns"] == pytest.approx(values[:3])
            assert g["tool_value_ns"] == pytest.approx(scope["returned"] * 1e6)
        return
    # A pair of lines whose windows ran work of different shapes in turn (two sizes) is a
    # row per shape, labelled "... (the work)".
    by_pair: dict[str, list[dict]] = {}
    for label, g in groups.items():
        by_pair.setdefault(re.sub(r" \([^()]*\)$", "", label) if label not in expected
                           else label, []).append(g)
    assert set(by_pair) == set(expected)
    for label, intervals in expected.items():
        values = [e["value_ms"] * 1e6 for e in intervals]
        assert sum(g["instances"] for g in by_pair[label]) == len(values), label
        if len(by_pair[label]) > 1:
            continue
        g = groups[label]
        assert g["value_median_ns"] == pytest.approx(median(values)), label
        assert g["first_values_ns"] == pytest.approx(values[:3]), label


def test_seed_kernels_are_the_kernels_between_the_records():
    """Their busy time: the union of the kernels' times (consecutive kernels on one stream
    may overlap a little: a programmatic dependent launch starts before the last ends)."""
    groups = _groups(compared(SEED))
    for label, intervals in seed_interval_kernels().items():
        busy = [kernel_union_ns(SEED, [r for r, _ in kernels]) for kernels in intervals]
        assert groups[label]["kernels_median_ns"] == median(busy), label


# -- text ----------------------------------------------------------------------------------

def _identifiers(label: str) -> list[str]:
    """The words of a label that name code: 'torch_seed_timings.py:37→39', 'do_bench'."""
    return [w for w in label.split() if re.search(r"[._:]", w)]


@pytest.mark.parametrize("width", [80, 100, 120])
@pytest.mark.parametrize("path", EVENT_REPORTS, ids=lambda p: p.name)
def test_text_section_fits_and_never_splits_a_call_site(path, width):
    c = compared(path)
    text = render(c, "table", width=width)
    lines = text.splitlines()
    assert not [ln for ln in lines if len(ln) > width]
    at = text.index("Your CUDA-event timings")
    verdict = min(text.index(s) for s in ("Findings (", "No findings") if s in text)
    assert verdict < at < text.index("GPU kernels")  # right after the findings
    section = text[at:text.index("GPU kernels")].splitlines()
    pos = 0
    for g in c.user_timings.to_dict("records"):  # in order, each on its call site's line
        for word in _identifiers(g["label"]):
            assert any(word in ln for ln in section), (word, width)
        figures = (f" {g['instances']} ", fmt_ns(g["value_median_ns"]),
                   fmt_ns(g["kernels_median_ns"]))
        first_word = g["label"].split()[0]
        pos = next(i for i, ln in enumerate(section) if i >= pos
                   and first_word in ln and all(f in ln for f in figures))
        pos += 1


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_text_lines_under_the_table():
    """Cold first instances, records never measured, elapsed_time() calls that raised, and
    the hooks' cost: from the runner's records."""
    c = compared(EDGES)
    text = _flat(render(c, "table", width=80))
    doc = runner_doc(EDGES)
    for e in doc["elapsed_errors"].values():
        assert e.splitlines()[0] in text
    # Records never measured: a record made again before elapsed_time() (its first one),
    # and events recorded and never measured at all.
    measured = {(e[a], e[b]) for e in unpack(doc, "elapsed")
                for a, b in (("start_event", "start_nth"), ("end_event", "end_nth"))}
    never = [r for r in unpack(doc, "records") if (r["event"], r["nth"]) not in measured
             and "site-packages" not in doc["sites"][r["site"]][0]]
    by_site: dict[int, int] = {}
    for r in never:
        by_site[r["site"]] = by_site.get(r["site"], 0) + 1
    assert len(by_site) == 2  # rerecorded()'s first start, unmeasured()'s four records
    said = []
    for site, n in by_site.items():
        file, line, _ = _site(doc, site)
        said.append(f"{file}:{line} ({n} record{'s' if n > 1 else ''})")
    assert f"Recorded but never measured by elapsed_time(): {', '.join(said)}." in text
    assert f"hooks add {fmt_ns(doc['hook_cost_ns'])} of host time per record()" in text
    # The loops' first steps are cold: 287 ms against 1.61 ms in the fixture.
    c = compared(LOOPS)
    text = _flat(render(c, "table", width=120))
    for label, intervals in event_groups(LOOPS).items():
        values = [e["value_ms"] * 1e6 for e in intervals]
        cold = values[0] > 2 * median(values) and values[0] - median(values) >= 5_000
        line = f"Cold start: {label}: the first"
        assert (line in text) == cold, label
        if cold:
            assert f"read {fmt_ns(values[0])}" in text


def test_do_bench_rows_say_what_it_returned():
    c = compared(DO_BENCH)
    text = _flat(render(c, "table", width=120))
    groups = _groups(c)
    statistics = {}
    for label, (_, scope) in do_bench_groups(DO_BENCH).items():
        # The runner writes do_bench's options that are not numbers as their repr.
        mode = str(scope["options"].get("return_mode", "mean")).strip("'\"")
        statistics[label] = mode
        g = groups[label]
        assert g["tool_statistic"] == mode
        assert f"do_bench said {fmt_ns(scope['returned'] * 1e6)} (its {mode})" in text
        assert f"the kernels' {mode} {fmt_ns(g['tool_kernels_ns'])}" in text
    assert set(statistics.values()) == {"mean", "median"}
    # do_bench's own estimate of its calls is no row of its own: one row per do_bench call
    assert sorted(groups) == sorted(statistics)


@needs_timer
def test_timer_rows_are_per_call():
    c = compared(TIMER)
    doc = runner_doc(TIMER)
    groups = _groups(c)
    for scope in doc["scopes"]:
        if not scope["kind"].startswith("timer."):
            continue
        file, line, _ = _site(doc, scope["site"])
        g = groups[f"Timer({scope['label']}) at {file}:{line}"]
        number = scope["returned"]["number_per_run"]
        per_call = [t / number * 1e9 for t in scope["returned"]["raw_times"]]
        assert g["calls"] == number and g["instances"] == len(per_call)
        assert g["value_median_ns"] == pytest.approx(scope["returned"]["median"] * 1e9)
        assert g["first_values_ns"] == pytest.approx(per_call[:3])
    for width in (80, 100, 120):
        text = render(c, "table", width=width)
        assert not [ln for ln in text.splitlines() if len(ln) > width]
        for g in groups.values():
            assert all(any(w in ln for ln in text.splitlines()) for w in _identifiers(
                g["label"]))
    text = _flat(text)
    assert "calls a measurement" in text and "Cold start" not in text
    launch = [f for f in c.findings if f.code == "LAUNCH_OVERHEAD"]
    assert launch and all("calls per timed window" in f.message for f in launch)
    assert not any(re.search(r"\d{3,} gaps between", f.message) for f in launch)


def test_reports_without_the_runner_records_say_how_many_event_records():
    c = compared(GPU_MIX)
    n = (sql(GPU_MIX, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT")[0][0])
    assert n > 0
    noun = "record" if n == 1 else "records"
    line = (f"This report holds {n} CUDA event {noun} (cudaEventRecord); `nsyswrap run "
            "SCRIPT` reconciles the timings a program measures with them.")
    assert line in _flat(render(c, "table", width=200))
    assert line.replace("`", "\\`") in render(c, "markdown")  # Markdown escapes backticks
    assert "Your CUDA-event timings" not in render(c, "table") + render(c, "markdown")
    # Not counted (a big runtime table): said without a number.
    u = c.analysis.user_timings
    u.event_records_in_report = None
    try:
        assert "This report holds CUDA event records (cudaEventRecord)" in _flat(
            render(c, "table", width=200))
    finally:
        u.event_records_in_report = n
    # The harness's own events are reconciled by its benchmarks: no such line.
    harness = compared(DATA / "h100_harness_clock.sqlite")
    assert "This report holds" not in render(harness, "table")
    assert "This report holds" not in render(compared(DATA / "cpu2022_nvtx.sqlite"), "table")


# -- JSON, CSV, Markdown --------------------------------------------------------------------

def _strict(text: str):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_json_user_timings(tmp_path):
    result = CliRunner().invoke(main, ["compare", str(EDGES), "--format", "json",
                                       "--instances"])
    assert result.exit_code == 0, result.output
    doc = _strict(result.stdout)
    u = doc["user_timings"]
    assert list(u) == ["records", "measured", "hook_cost_ns", "groups", "unmeasured",
                       "unreconciled", "notes", "event_records_in_report"]
    runner = runner_doc(EDGES)
    assert u["records"] == len(unpack(runner, "records"))
    assert u["measured"] == len(unpack(runner, "elapsed"))
    assert u["hook_cost_ns"] == pytest.approx(runner["hook_cost_ns"])
    assert u["event_records_in_report"] == sql(EDGES, """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId
        WHERE n.value LIKE 'cudaEventRecord%'""")[0][0]
    assert all(list(g) == GROUP_KEYS for g in u["groups"])
    assert {g["label"] for g in u["groups"]} == set(event_groups(EDGES))
    reasons = {r["label"]: r["reason"] for r in u["unreconciled"]}
    for i, error in runner["elapsed_errors"].items():
        file, line, _ = _site(runner, unpack(runner, "elapsed")[int(i)]["site"])
        assert error in reasons[f"elapsed_time at {file}:{line}"]
    instances = doc["user_timing_instances"]
    assert instances and all(list(r) == INSTANCE_KEYS for r in instances)
    for label, intervals in event_groups(EDGES).items():
        mine = [r for r in instances if r["label"] == label]
        assert [r["value_ns"] for r in mine] == pytest.approx(
            [e["value_ms"] * 1e6 for e in intervals])
        assert [r["instance"] for r in mine] == list(range(len(intervals)))
    # A report without the runner's records: the object is there, empty.
    plain = _strict(render(compared(GPU_MIX), "json", instances=True))
    assert plain["user_timings"]["groups"] == [] and plain["user_timings"]["records"] == 0
    assert plain["user_timing_instances"] == []


def test_csv_sections():
    c = compared(SEED)
    expected = event_groups(SEED)
    for section, keys, rows in (("timings", GROUP_KEYS, len(expected)),
                                ("timing_instances", INSTANCE_KEYS,
                                 sum(map(len, expected.values())))):
        result = CliRunner().invoke(main, ["compare", str(SEED), "--format", "csv",
                                           "--section", section])
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert lines[0].split(",") == keys
        assert len(lines) == 1 + rows
    # Text cells that a spreadsheet would run are neutralised, as in every section.
    label = c.user_timings.loc[0, "label"]
    c.user_timings.loc[0, "label"] = "=HYPERLINK(\"x\")"
    try:
        out = render(c, "csv", section="timings")
    finally:
        c.user_timings.loc[0, "label"] = label
    assert ",\"'=HYPERLINK(" in out.splitlines()[1]


def test_markdown_section():
    c = compared(SEED)
    text = render(c, "markdown")
    at = text.index("### Your CUDA-event timings")
    assert text.index("### Findings") < at < text.index("### GPU kernels")
    section = text[at:text.index("### GPU kernels")]
    rows = [ln for ln in section.splitlines() if ln.startswith(("| copied", "| on", "| flushed"))]
    assert len(rows) == len(event_groups(SEED))
    assert "copied at torch\\_seed\\_timings.py:37→39" in section  # escaped for Markdown
    assert "- Cold start: flushed at torch\\_seed\\_timings.py:87→89" in section


def test_streamed_compare_leaves_these_reports_to_the_whole_analysis():
    streamed = nsyswrap.compare(SEED, operations=False)
    pd.testing.assert_frame_equal(streamed.user_timings, compared(SEED).user_timings)


INTERRUPTED = DATA / "h100_user_interrupt.sqlite"


def test_an_interrupted_programs_timings_are_kept_and_reconciled():
    """Ctrl-C in the middle of a timing loop: the runner's records reach the report (written
    as the program exits through the interrupt), every elapsed_time() up to then is
    reconciled, and the runner measured the events' floor after the loop."""
    doc = runner_doc(INTERRUPTED)
    elapsed = unpack(doc, "elapsed")
    records = unpack(doc, "records")
    calls = sql(INTERRUPTED, """
        SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId
        WHERE n.value LIKE 'cudaEventRecord%'""")[0][0]
    floor_windows = len(doc["floor_ms"]) + 3  # the runner's own records: its warmup too
    assert len(records) == calls - 4 * floor_windows  # each floor window records 4 events
    c = compared(INTERRUPTED)
    g = _groups(c)
    (group,) = g.values()
    assert group["instances"] == len(elapsed) >= 200
    assert group["floor_source"] == "measured"
