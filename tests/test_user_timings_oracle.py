"""The program's timed windows (`nsyswrap run`'s records) against the independent oracle of
tests/reference.py (SQL, the runner's document decoded by hand, loops), on every fixture with
the program's timings (tests/data/h100_user_*.sqlite, found by glob). Checked on nsyswrap's
JSON output (`compare --format json --instances`), not its internals: each window's GPU work,
back-pressure, missed work on other streams and blocking calls; each group's kernels median;
each group's window findings against the facts of its windows."""

from __future__ import annotations

import json
from statistics import median

import pytest
from click.testing import CliRunner
from conftest import DATA
from reference import do_bench_estimates, timed_windows, timer_measurements

from nsyswrap.cli import main

# One worker runs the module: its outputs are made once (module-scoped), not once per worker.
pytestmark = pytest.mark.xdist_group("user_timings_oracle")

REPORTS = sorted(DATA.glob("h*_user_*.sqlite"))
# The window findings: only groups the checks judge carry them (a Timer has no events and
# its syncs are its own).
WINDOW_CODES = {"LAUNCH_OVERHEAD", "HOST_WORK_IN_WINDOW", "TRANSFER_IN_WINDOW", "SYNC_IN_WINDOW",
                "UNCOVERED_STREAM"}
JUDGED = {"events", "do_bench"}


@pytest.fixture(scope="module")
def outputs():
    """Per report: nsyswrap's JSON document, and the oracle's windows and Timer measurements."""
    cache = {}

    def get(path):
        if path not in cache:
            result = CliRunner().invoke(main, ["compare", str(path), "--format", "json",
                                               "--instances"])
            assert result.exit_code == 0, result.output
            # do_bench's estimate windows are no row of nsyswrap's: left out here too.
            windows = timed_windows(path)
            estimates = {id(w) for w in do_bench_estimates(windows)}
            cache[path] = (json.loads(result.stdout),
                           [w for w in windows if id(w) not in estimates],
                           timer_measurements(path))
        return cache[path]
    return get


def _key(row: dict) -> tuple[int, int, int]:
    return row["pid"], row["start_ns"], row["end_ns"]


def _windows_by_label(doc: dict, windows: list[dict]) -> dict[str, list[dict]]:
    """The oracle's windows in nsyswrap's groups (the grouping is tested elsewhere)."""
    label = {_key(r): r["label"] for r in doc["user_timing_instances"] if r["kind"] != "timer"}
    out: dict[str, list[dict]] = {}
    for w in windows:
        out.setdefault(label[_key(w)], []).append(w)
    return out


def _joined(w: dict) -> list[dict]:
    return [o for o in w["other"] if o["joined"]]


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_every_window_is_the_trace_between_its_records(outputs, path):
    """The windows are the elapsed_time() results whose records the report holds, and each
    one's GPU work, back-pressure, missed work and blocking calls are the trace's."""
    doc, windows, _ = outputs(path)
    rows = {_key(r): r for r in doc["user_timing_instances"] if r["kind"] != "timer"}
    assert set(rows) == {_key(w) for w in windows}
    wrong = []
    for w in windows:
        r = rows[_key(w)]
        where = f"{r['label']} #{r['instance']}"
        blocked = sum(ns for _, ns in w["blocking"])
        checks = {
            # One stream runs one operation at a time: its busy time is a sum; joined work
            # on other streams may overlap it (union <= busy <= sum).
            "gpu_busy_ns": w["busy_union_ns"] - 1 <= r["gpu_busy_ns"] <= w["busy_sum_ns"] + 1
            if w["own"] or _joined(w) else r["gpu_busy_ns"] is None,
            "gpu_ops": r["gpu_ops"] == len(w["own"]) + len(_joined(w)),
            "kernels": r["kernels"] == sum(o["kind"] == "kernel" for o in w["own"]),
            "value_ns": r["value_ns"] == pytest.approx(w["value_ns"]),
            "stream_id": r["stream_id"] == w["stream"],
            "prior_busy_ns": ((r["prior_busy_ns"] or 0) >= 5_000) == w["queued_ahead"],
            "uncovered_busy_ns": abs((r["uncovered_busy_ns"] or 0) - w["uncovered_ns"]) <= 1,
            "uncovered_ops": r["uncovered_ops"] == w["uncovered_ops"],
            "joined_ops": r["joined_ops"] == len(_joined(w)),
            "syncs": r["syncs"] == len(w["blocking"]),
            "sync_ns": abs((r["sync_ns"] or 0) - blocked) <= 1,
        }
        wrong += [f"{where}: {name} {r[name]!r}, the trace's: {_oracle(w, name)}"
                  for name, ok in checks.items() if not ok]
    assert not wrong, "\n".join(wrong[:20]) + f"\n({len(wrong)} in all)"


def _oracle(w: dict, name: str):
    return {
        "gpu_busy_ns": (w["busy_union_ns"], w["busy_sum_ns"]),
        "gpu_ops": len(w["own"]) + len(_joined(w)),
        "kernels": sum(o["kind"] == "kernel" for o in w["own"]),
        "value_ns": w["value_ns"], "stream_id": w["stream"],
        "prior_busy_ns": "queued ahead" if w["queued_ahead"] else "nothing queued ahead",
        "uncovered_busy_ns": w["uncovered_ns"], "uncovered_ops": w["uncovered_ops"],
        "joined_ops": len(_joined(w)), "syncs": w["blocking"],
        "sync_ns": sum(ns for _, ns in w["blocking"]),
    }[name]


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_each_groups_kernels_are_the_median_of_its_windows(outputs, path):
    doc, windows, timers = outputs(path)
    groups = {g["label"]: g for g in doc["user_timings"]["groups"]}
    by_label = _windows_by_label(doc, windows)
    for label, mine in by_label.items():
        g = groups[label]
        assert g["instances"] == len(mine), label
        low = median(w["busy_union_ns"] for w in mine)
        high = median(w["busy_sum_ns"] for w in mine)
        assert low - 1 <= g["kernels_median_ns"] <= high + 1, (label, g["kernels_median_ns"],
                                                                low, high)
        assert g["value_median_ns"] == pytest.approx(median(w["value_ns"] for w in mine))
    # Timer: per call, each measurement's GPU work over its calls.
    by_timer: dict[str, list[dict]] = {}
    for m in timers:
        by_timer.setdefault(f"Timer({m['timer']['label']}) at {m['site']}", []).append(m)
    for label, mine in by_timer.items():
        g = groups[label]
        assert g["instances"] == len(mine) and g["calls"] == mine[0]["calls"], label
        assert g["kernels_median_ns"] == pytest.approx(
            median(m["busy_union_ns"] / m["calls"] for m in mine), abs=1), label
        assert g["value_median_ns"] == pytest.approx(
            median(m["seconds"] / m["calls"] * 1e9 for m in mine)), label
    assert set(groups) == set(by_label) | set(by_timer)


def _evidence(doc: dict, code: str, label: str) -> dict | None:
    """The evidence of `code` about group `label` (a finding merged over groups keeps each
    one's under by_range)."""
    for f in doc["findings"]:
        if f["code"] != code:
            continue
        if f["range"] == label:
            return f["evidence"]
        if f["range"] is None and label in f["evidence"].get("by_range", {}):
            return f["evidence"]["by_range"][label]
    return None


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_each_groups_window_findings_follow_its_windows(outputs, path):
    """The window findings against the oracle's facts, by the rules of diagnose/window.py
    (docs/analyses.md, "Window findings"), in both directions where the rule decides on those
    facts alone."""
    doc, windows, _ = outputs(path)
    t = doc["thresholds"]
    groups = {g["label"]: g for g in doc["user_timings"]["groups"]}
    wrong = []
    for label, mine in _windows_by_label(doc, windows).items():
        g = groups[label]
        codes = set(g["codes"])
        if g["kind"] not in JUDGED:
            if codes & WINDOW_CODES:
                wrong.append(f"{label}: {g['kind']} is not judged, yet {codes & WINDOW_CODES}")
            continue
        n = len(mine)
        event = median(w["value_ns"] for w in mine)
        busy = median(w["busy_union_ns"] for w in mine)
        # UNCOVERED_STREAM: missed work in most windows and not small, or the events
        # shorter than the span the missed work reaches.
        missed = sum(w["uncovered_ops"] > 0 for w in mine) >= n / 2 and median(
            w["uncovered_ns"] for w in mine) >= max(t["overhead_min_ns"],
                                                    t["uncovered_tolerance"] * event)
        beyond = event < (1 - t["uncovered_tolerance"]) * median(
            max(w["span_ns"], w["uncovered_ns"]) for w in mine)
        if ("UNCOVERED_STREAM" in codes) != (missed or beyond):
            wrong.append(f"{label}: UNCOVERED_STREAM {'UNCOVERED_STREAM' in codes}, windows "
                         f"with missed work {sum(w['uncovered_ops'] > 0 for w in mine)}/{n}, "
                         f"median {median(w['uncovered_ns'] for w in mine)} ns, events "
                         f"{event:.0f} ns")
        # SYNC_IN_WINDOW: the recording thread blocked in half the windows or more.
        synced = sum(bool(w["blocking"]) for w in mine) >= n / 2
        if ("SYNC_IN_WINDOW" in codes) != synced:
            wrong.append(f"{label}: SYNC_IN_WINDOW {'SYNC_IN_WINDOW' in codes}, windows with "
                         f"a blocking call {sum(bool(w['blocking']) for w in mine)}/{n}")
        # HOST_WORK_IN_WINDOW needs one host stall of host_work_min_ns: before the first
        # launch or between the window's operations; and no sync to explain the idle window.
        leads = [w["host_lead_ns"] for w in mine if w["host_lead_ns"] is not None]
        lead = median(leads) if leads else 0
        gap = median(w["max_gap_ns"] for w in mine)
        stall = max(lead, gap) >= t["host_work_min_ns"]
        if "HOST_WORK_IN_WINDOW" in codes and (not stall or synced):
            wrong.append(f"{label}: HOST_WORK_IN_WINDOW with a host lead of {lead} ns and a "
                         f"longest gap of {gap} ns{', synced' if synced else ''}")
        # ...and where the host's time before the first launch holds most of a window well
        # beyond the events' own cost, it is host work.
        overhead = event - busy
        edge = event - median(max(w["span_ns"], w["uncovered_ns"]) for w in mine)
        if (not synced and lead >= t["host_work_min_ns"] and edge >= t["stall_share"] * overhead
                and overhead - median(w["span_ns"] - w["busy_union_ns"] for w in mine)
                - g["floor_ns"] >= max(t["overhead_min_ns"], t["overhead_share"] * event)
                and "HOST_WORK_IN_WINDOW" not in codes):
            wrong.append(f"{label}: no HOST_WORK_IN_WINDOW, with {lead} ns of host time "
                         f"before the first launch in a {event:.0f} ns window of {busy} ns "
                         "of GPU work")
        # The host's time from the start record to the first launch, as the window
        # findings read it.
        for code in ("LAUNCH_OVERHEAD", "HOST_WORK_IN_WINDOW"):
            said = (_evidence(doc, code, label) or {}).get("host_lead_median_ns")
            if said is not None and leads and abs(said - median(leads)) > 1:
                wrong.append(f"{label}: {code} reads a host lead of {said} ns, the trace "
                             f"{median(leads)} ns")
        # Back-pressure: where launch overhead is said, how many windows had work queued
        # ahead of the start record, and what the message reads of it.
        queued = sum(w["queued_ahead"] for w in mine)
        evidence = _evidence(doc, "LAUNCH_OVERHEAD", label)
        if evidence is not None and evidence.get("windows_with_work_queued_ahead") != queued:
            wrong.append(f"{label}: LAUNCH_OVERHEAD counts "
                         f"{evidence.get('windows_with_work_queued_ahead')} windows with work "
                         f"queued ahead, the trace {queued} of {n}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_the_queued_ahead_reading_follows_the_windows(outputs, path):
    """LAUNCH_OVERHEAD's message on one group says the GPU had nothing queued exactly where
    no window followed queued work, and says in how many where some did."""
    doc, windows, _ = outputs(path)
    by_label = _windows_by_label(doc, windows)
    for f in doc["findings"]:
        if f["code"] != "LAUNCH_OVERHEAD":
            continue
        # A finding merged over groups reads the first one's numbers ("LABEL: ... (as in
        # 2 more timed places)").
        label = f["range"] or (f["ranges"] or [None])[0]
        if label not in by_label:
            continue
        mine = by_label[label]
        queued = sum(w["queued_ahead"] for w in mine)
        assert ("nothing was queued at the start record" in f["message"]) == (queued == 0), \
            label
        some = f"in {queued} of {len(mine)} windows the GPU still had earlier work queued"
        assert (some in f["message"]) == (0 < queued < len(mine)), label
