"""The interval primitives on hand-made cases whose answers are worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from nsyswrap.analysis.grouped import (
    few_groups_median,
    grouped_median,
    median,
    small_key_order,
)
from nsyswrap.analysis.lanes import assign_lanes
from nsyswrap.analysis.range_search import RangeSearch, no_pairs, range_starts, with_innermost
from nsyswrap.analysis.union import merge_intervals, union_stats


def events_in_ranges(ranges: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """The (range, event) pairs as the attribution makes them: the ranges' search by thread
    (RangeSearch), sorted by event with the innermost marked (with_innermost)."""
    columns = RangeSearch(ranges).pairs(events)
    if columns is None:
        return no_pairs("innermost")
    return with_innermost(range_starts(ranges), pd.DataFrame(columns))


def _ranges(rows):
    df = pd.DataFrame(rows, columns=["range_id", "thread", "start_ns", "end_ns"])
    df["lane"] = assign_lanes(df)
    return df


def test_union_of_overlaps_and_gaps():
    iv = pd.DataFrame({"g": [1, 1, 1, 2], "start_ns": [0, 5, 20, 100],
                       "end_ns": [10, 12, 30, 101]})
    s = union_stats(iv, "g")
    # group 1: [0,12) U [20,30) = 22 busy, span 30, one gap of 8
    assert s.loc[1].to_dict() == {"busy_ns": 22, "span_ns": 30, "idle_ns": 8,
                                  "first_start_ns": 0, "last_end_ns": 30, "gaps": 1,
                                  "max_gap_ns": 8, "count": 3}
    assert s.loc[2, "busy_ns"] == 1


def test_contained_interval_adds_nothing():
    iv = pd.DataFrame({"g": [0, 0, 0], "start_ns": [0, 2, 50], "end_ns": [100, 3, 60]})
    s = union_stats(iv, "g")
    assert (s.loc[0, "busy_ns"], s.loc[0, "gaps"]) == (100, 0)


def test_nested_ranges_get_depth_lanes():
    r = _ranges([(0, 1, 0, 100), (1, 1, 10, 40), (2, 1, 20, 30), (3, 1, 50, 90)])
    assert list(r["lane"]) == [0, 1, 2, 1]


def test_overlapping_start_end_ranges_get_disjoint_lanes():
    # A [0,5), B [1,10), C [6,12): depth counting would put B and C together; they overlap.
    r = _ranges([(0, 1, 0, 5), (1, 1, 1, 10), (2, 1, 6, 12)])
    lanes = dict(zip(r["range_id"], r["lane"], strict=True))
    assert lanes[1] != lanes[2] and lanes[0] != lanes[1]


def test_events_land_in_all_enclosing_ranges_on_their_thread():
    r = _ranges([(0, 1, 0, 100), (1, 1, 10, 40), (2, 2, 0, 100)])
    ev = pd.DataFrame({"thread": [1, 1, 2, 3], "time_ns": [15, 60, 15, 15]})
    pairs = events_in_ranges(r, ev)
    got = {(int(p.event), int(p.range_id), bool(p.innermost)) for p in pairs.itertuples()}
    assert got == {(0, 0, False), (0, 1, True), (1, 0, True), (2, 2, True)}


def test_range_edges_are_inclusive():
    r = _ranges([(0, 1, 10, 20)])
    ev = pd.DataFrame({"thread": [1, 1, 1, 1], "time_ns": [9, 10, 20, 21]})
    assert sorted(events_in_ranges(r, ev)["event"]) == [1, 2]


@pytest.mark.parametrize("step_rows", [None, 7])
def test_merge_intervals_matches_a_plain_sweep(step_rows, monkeypatch):
    """Random intervals, nested, touching and zero-length ones among them, in no order,
    against a sweep in Python over them sorted by start; also with the merged intervals
    moved to the front a few rows at a time (fails when a step's rows land anywhere but
    after the last step's)."""
    from nsyswrap.read import chunks

    if step_rows is not None:
        monkeypatch.setattr(chunks, "STEP_ROWS", step_rows)
    rng = np.random.default_rng(5)
    for n in (1, 2, 50, 2000):
        start = rng.integers(0, 5 * n, n)
        end = start + rng.integers(0, 40, n) * (rng.random(n) < 0.9)  # some zero-length
        want: list[list[int]] = []
        for s, e in sorted(zip(start.tolist(), end.tolist(), strict=True)):
            if want and s <= want[-1][1]:
                want[-1][1] = max(want[-1][1], e)
            else:
                want.append([s, e])
        ms, me = merge_intervals(start, end)
        assert [list(p) for p in zip(ms.tolist(), me.tolist(), strict=True)] == want


def test_with_innermost_sorts_the_frames_rows_as_lexsort_does(monkeypatch):
    """The frames' rows in turn, sorted by (event, range start) with ties in that order
    (np.lexsort's permutation of the concatenation), innermost on each event's last row;
    the frames emptied. Ranges' starts with many ties, by range id in and out of order;
    rows within each event in and out of start order (the stable sort, and the sort again),
    checked in steps of 5 rows."""
    from nsyswrap.read import chunks

    monkeypatch.setattr(chunks, "STEP_ROWS", 5)
    rng = np.random.default_rng(7)
    for trial in range(20):
        n, m = int(rng.integers(0, 300)), int(rng.integers(1, 60))
        starts = rng.integers(0, 25, 40)  # each range's start, by range id
        if trial % 4 >= 2:  # ids in start order (the loader's): found by the ids first
            starts = np.sort(starts)
        frames = []
        for k, other in ((n, False), (m, True)):
            range_id = rng.integers(0, 40, k)
            if trial % 2:  # starts ascending within each event: the stable sort alone
                range_id = range_id[np.argsort(starts[range_id], kind="stable")]
            frames.append(pd.DataFrame({"range_id": range_id, "event": rng.integers(0, 80, k),
                                        "other_thread": np.full(k, other)}))
        whole = pd.concat(frames, ignore_index=True)
        order = np.lexsort((starts[whole["range_id"].to_numpy()], whole["event"].to_numpy()))
        expected = whole.iloc[order].reset_index(drop=True)
        ev = expected["event"].to_numpy()
        expected["innermost"] = np.r_[ev[1:] != ev[:-1], True] if len(ev) else []
        got = with_innermost(starts, *frames)
        pd.testing.assert_frame_equal(got, expected)
        assert all(f.columns.empty for f in frames)


def test_chunks_on_threads_give_what_one_chunk_gives(monkeypatch):
    """The range search splits its work into chunks on threads (chunks.py). With chunks of
    a few rows on four threads it must give exactly the single-chunk answer."""
    from nsyswrap.read import chunks

    rng = np.random.default_rng(7)
    ranges = _ranges([(i, 1 + i % 3, s, s + d) for i, (s, d) in enumerate(
        zip(rng.integers(0, 1000, 60).tolist(), rng.integers(0, 300, 60).tolist(), strict=True))])
    events = pd.DataFrame({"thread": rng.integers(1, 4, 500),
                           "time_ns": rng.integers(0, 1300, 500)})
    whole = events_in_ranges(ranges, events)
    assert len(whole) > 100
    monkeypatch.setattr(chunks, "cores", lambda: 4)
    monkeypatch.setattr(chunks, "MIN_ROWS", 4)
    monkeypatch.setattr(chunks.even_bounds, "__defaults__", (4,))
    pd.testing.assert_frame_equal(events_in_ranges(ranges, events), whole)


def test_events_in_ranges_matches_a_loop_over_lanes_with_touching_and_empty_ranges():
    """Within a lane, an event goes to the last range (in start order, ties by input order
    after the lane sort) starting at or before it, when it is not past that range's end:
    so a range ending where the next starts leaves that instant to the next. Checked by a
    plain loop on ranges that touch, are empty, and nest."""
    rows = [(0, 1, 0, 10), (1, 1, 10, 20), (2, 1, 20, 20), (3, 1, 20, 30),  # touching, empty
            (4, 1, 5, 15), (5, 1, 12, 12), (6, 2, 0, 100), (7, 2, 50, 60), (8, 1, 40, 50)]
    r = _ranges(rows)
    rng = np.random.default_rng(3)
    times = np.r_[np.arange(0, 61), rng.integers(0, 110, 40)]
    ev = pd.DataFrame({"thread": np.r_[np.full(61, 1), rng.integers(1, 3, 40)],
                       "time_ns": times})
    got = {(int(p.event), int(p.range_id)) for p in events_in_ranges(r, ev).itertuples()}
    order = np.lexsort((r["start_ns"], r["thread"], r["lane"]))  # the lane sort
    want = set()
    for e, (thread, t) in enumerate(zip(ev["thread"], ev["time_ns"], strict=True)):
        for lane in set(r["lane"]):
            held = None
            for i in order:
                x = r.iloc[i]
                if x.lane == lane and x.thread == thread and x.start_ns <= t:
                    held = x  # the last one starting at or before t
            if held is not None and t <= held.end_ns:
                want.add((e, int(held.range_id)))
    assert got == want


def test_small_key_order_is_lexsorts_permutation_or_declines():
    rng = np.random.default_rng(7)
    thread = rng.choice([5 << 24 | 9, 5 << 24 | 3, 7 << 24 | 1], 5000)
    lane = rng.integers(0, 6, 5000)
    # Ties everywhere: the sort must be stable, as lexsort's is.
    assert np.array_equal(small_key_order(thread, lane), np.lexsort((thread, lane)))
    assert np.array_equal(small_key_order(lane), np.argsort(lane, kind="stable"))
    assert small_key_order(np.arange(70_000)) is None  # too many values for 16 bits
    assert len(small_key_order(np.array([], "int64"))) == 0


def test_grouped_median_is_pandas_bit_for_bit():
    """Odd and even counts, ties, one-value groups, unnumbered groups, negative values, and
    values near 2**62 where the two middle values' float sum rounds: pandas converts each
    value to float before averaging, and so must the packed path. Groups past 16 bits (range
    ids) take the packed path too; groups and values that do not fit 63 bits together take
    pandas itself."""
    rng = np.random.default_rng(11)
    groups = np.r_[rng.integers(0, 40, 5001) * 3, [500], [999, 999]].astype("int64")
    small = rng.integers(-50, 50, len(groups))  # ties everywhere
    big = rng.integers(2**62 - 1000, 2**62, len(groups))  # float64 spacing there: 1024
    for values in (small, big, (small + 50).astype("uint64") + 7,
                   (small + 50).astype("uint64") + np.uint64(2**63)):  # past int64
        want = pd.Series(values).groupby(groups).median()
        got = grouped_median(groups, values)
        pd.testing.assert_series_equal(got, want, check_exact=True)
        # Packed in the values' own array (int64), or in a new one (other types).
        got = grouped_median(groups, values.copy(), consume=True)
        pd.testing.assert_series_equal(got, want, check_exact=True)
    many = rng.integers(0, 70_000, 3000)
    spread = rng.integers(-2**40, 2**40, 3000)  # 41 bits beside 17 of groups: packed
    wide = rng.integers(-2**61, 2**61, 3000)  # 62 bits beside 17: pandas
    for values in (small[:3000], spread, big[:3000], wide):
        want = pd.Series(values).groupby(many).median()
        for consume in (False, True):
            pd.testing.assert_series_equal(grouped_median(many, values.copy(), consume),
                                           want, check_exact=True)
    pairs = np.repeat(np.arange(5), 2)  # even counts at 2**62: the float sum rounds
    near = np.array([2**62 - 1, 2**62 - 1024] * 5, dtype="int64")
    pd.testing.assert_series_equal(grouped_median(pairs, near),
                                   pd.Series(near).groupby(pairs).median(), check_exact=True)
    assert grouped_median(np.array([], "int64"), np.array([], "int64")).empty


def test_few_groups_median_is_pandas_bit_for_bit():
    """Each group on its own, by selection: odd and even counts, ties, one-value groups,
    unnumbered groups, values near 2**62 whose float sum rounds, unsigned values past
    int64, floats with NaN left out and a group of NaN only (NaN, as pandas gives)."""
    rng = np.random.default_rng(3)
    groups = np.r_[rng.integers(0, 10, 5001) * 3, [40], [63, 63]].astype("int64")
    nan_only = groups == 40
    floats = rng.normal(size=len(groups))
    floats[::7] = np.nan
    floats[nan_only] = np.nan
    for values in (rng.integers(-50, 50, len(groups)),
                   rng.integers(2**62 - 1000, 2**62, len(groups)),
                   rng.integers(0, 50, len(groups)).astype("uint64") + np.uint64(2**63),
                   floats):
        before = values.copy()
        want = pd.Series(values).groupby(groups).median()
        pd.testing.assert_series_equal(few_groups_median(groups, values), want,
                                       check_exact=True)
        assert np.array_equal(values, before, equal_nan=values.dtype.kind == "f")
    pairs = np.repeat(np.arange(5), 2)
    near = np.array([2**62 - 1, 2**62 - 1024] * 5, dtype="int64")
    pd.testing.assert_series_equal(few_groups_median(pairs, near),
                                   pd.Series(near).groupby(pairs).median(), check_exact=True)
    assert few_groups_median(np.array([], "int64"), np.array([], "int64")).empty


def test_median_of_one_array_is_pandas_and_numpy_bit_for_bit():
    """What the harness's and the timings' summaries take: NaN left out, NaN for nothing
    left, odd and even counts, the array left as it was."""
    rng = np.random.default_rng(4)
    for n in (0, 1, 2, 3, 10, 11, 999, 1000):
        floats = rng.normal(size=n) * 1e6
        floats[::3] = np.nan
        for values in (floats, np.full(n, np.nan), rng.integers(-50, 50, n)):
            before = values.copy()
            got = median(values)
            want = pd.Series(values).median()
            assert got == want or (np.isnan(got) and np.isnan(want))
            if (~np.isnan(values.astype("float64"))).any():
                assert got == float(np.nanmedian(values))
            assert np.array_equal(values, before, equal_nan=values.dtype.kind == "f")


def test_distinct_per_group_is_pandas_nunique(monkeypatch):
    """Distinct values per group from one packed key: groups in ascending order, repeated
    values counted once, groups with one value, in any input order; and the summary's
    helper for codes and pids, including its pandas path when the packing does not fit."""
    from nsyswrap.analysis.grouped import distinct_per_group
    from nsyswrap.analysis.summary import _distinct_by_group

    rng = np.random.default_rng(3)
    groups = rng.integers(0, 50, 3000) * 7  # sparse ids, some absent
    values = rng.integers(0, 9, 3000)  # many repeats in each group
    want = pd.Series(values).groupby(groups).nunique()
    key = groups.astype("int64") * 9 + values
    pd.testing.assert_series_equal(distinct_per_group(key, 9), want, check_names=False,
                                   check_index_type=False)
    pids = rng.choice([4242, 17, 2**23], 3000)  # pid-like values: packed with width 2**23 + 1
    for vals in (values, pids, rng.integers(0, 2**60, 3000)):  # the last: pandas' path
        pd.testing.assert_series_equal(_distinct_by_group(groups, vals),
                                       pd.Series(vals).groupby(groups).nunique(),
                                       check_names=False, check_index_type=False)
    dense = rng.integers(0, 50, 3000)  # every (group, value) place fits the rows: the table
    key = dense.astype("int64") * 9 + values
    pd.testing.assert_series_equal(distinct_per_group(key, 9),
                                   pd.Series(values).groupby(dense).nunique(),
                                   check_names=False, check_index_type=False)
    assert distinct_per_group(np.array([], "int64"), 1).empty
    # The presence table marked from groups and values a few rows at a time (no packed
    # key): as pandas, for codes and for a categorical's own codes of the same names.
    from nsyswrap.analysis.summary import _name_codes
    from nsyswrap.read import chunks

    monkeypatch.setattr(chunks, "STEP_ROWS", 7)
    pd.testing.assert_series_equal(_distinct_by_group(dense, values),
                                   pd.Series(values).groupby(dense).nunique(),
                                   check_names=False, check_index_type=False)
    names = pd.Series(np.array(["fwd", "bwd", "opt", "zero"])[values % 4])
    for column in (names, names.astype("category"),
                   names.astype(pd.CategoricalDtype(["unused", "zero", "opt", "fwd", "bwd"]))):
        pd.testing.assert_series_equal(_distinct_by_group(dense, _name_codes(column)),
                                       names.groupby(dense).nunique(),
                                       check_names=False, check_index_type=False)


def test_lanes_and_pairs_do_not_depend_on_the_ranges_order():
    """Ranges in start order take the quick sorts; shuffled ones take the lexsorts. Nested
    ranges on three threads, with ties of start (outer first) and touching edges."""
    rng = np.random.default_rng(3)
    rows = []
    for thread in (1, 2, 1 << 24 | 4):
        t = 0
        for _ in range(300):
            outer = (t, t + int(rng.integers(20, 60)))
            rows.append((thread, *outer))
            inner_start = outer[0] + int(rng.integers(0, 2)) * 5  # sometimes tied
            rows.append((thread, inner_start, inner_start + int(rng.integers(1, 10))))
            t = outer[1] + int(rng.integers(0, 3))  # sometimes touching
    df = pd.DataFrame(rows, columns=["thread", "start_ns", "end_ns"])
    df = df.sort_values(["start_ns", "end_ns"], ascending=[True, False], kind="stable",
                        ignore_index=True)
    df.insert(0, "range_id", np.arange(len(df)))
    shuffled = df.sample(frac=1, random_state=1)
    lanes = pd.Series(assign_lanes(df), index=df.index)
    assert lanes.max() == 1
    assert lanes.equals(pd.Series(assign_lanes(shuffled), index=shuffled.index).sort_index())
    events = pd.DataFrame({"thread": rng.choice(df["thread"].unique(), 4000),
                           "time_ns": rng.integers(0, df["end_ns"].max(), 4000)})
    ordered = events_in_ranges(df.assign(lane=lanes), events)
    assert len(ordered) > 1000
    pd.testing.assert_frame_equal(
        ordered, events_in_ranges(shuffled.assign(lane=lanes[shuffled.index]), events))


def test_sorted_by_event_is_lexsorts_permutation(monkeypatch):
    """Pairs in range-start order within each event (the usual case, taken by a stable
    sort) and pairs out of it (sorted again), checked a few rows at a time: a disorder that
    sits across two steps must still be sorted again. Ties (equal event and start) keep
    their given order, as in np.lexsort."""
    from nsyswrap.analysis.range_search import _sorted_by_event
    from nsyswrap.read import chunks

    monkeypatch.setattr(chunks, "STEP_ROWS", 4)
    rng = np.random.default_rng(9)
    starts = rng.integers(0, 10**4, 60) // 100  # each range's start, with ties
    event = rng.integers(0, 30, 200)
    range_id = rng.integers(0, 60, 200)
    by_start = np.argsort(starts[range_id], kind="stable")
    in_order = (event[by_start], range_id[by_start])  # starts ascend within each event
    across = (np.array([1, 0, 1, 1, 1, 1]), np.array([0, 1, 2, 3, 4, 5]))
    across_starts = np.array([5, 0, 6, 9, 8, 10])  # 9 > 8 across steps
    for (ev, rid), st in ((in_order, starts), ((event, range_id), starts),
                          (across, across_starts)):
        row = np.arange(len(ev))
        got = _sorted_by_event({"range_id": rid.copy(), "event": ev.copy(), "row": row}, st)
        order = np.lexsort((st[rid], ev))
        assert np.array_equal(got["row"].to_numpy(), order)
        assert np.array_equal(got["event"].to_numpy(), ev[order])
        assert np.array_equal(got["innermost"].to_numpy(),
                              np.r_[ev[order][1:] != ev[order][:-1], True])


def test_sorts_on_every_core_give_one_sorts_answer(monkeypatch):
    """sort_in_place by either sort, timsort in parts on four threads (parts of a few
    rows, merged by one more sort), gives np.sort's array: random values with many
    repeats, values in order, in reverse, negative and unsigned; and what is built on it
    (merge_intervals, the packed medians, the distinct counts, the pairs by event) gives
    its one-part answer."""
    from nsyswrap.analysis.grouped import distinct_per_group
    from nsyswrap.analysis.range_search import _sorted_by_event
    from nsyswrap.read import chunks
    from nsyswrap.read.chunks import sort_in_place

    rng = np.random.default_rng(11)
    arrays = [rng.integers(-50, 50, 1001), np.arange(300), np.arange(300)[::-1].copy(),
              rng.integers(0, 2**40, 777), rng.integers(0, 9, 64).astype(np.uint16)]
    start = rng.integers(0, 3000, 900)
    end = start + rng.integers(0, 40, 900)
    groups, values = rng.integers(0, 30, 900), rng.integers(-5, 10**6, 900)
    key = rng.integers(0, 200, 900) * 7 + rng.integers(0, 7, 900)  # sparse: the sort
    starts = rng.integers(0, 100, 50)
    pairs = {"range_id": rng.integers(0, 50, 900), "event": rng.integers(0, 300, 900)}

    def answers():
        return (merge_intervals(start, end), grouped_median(groups, values.copy(), True),
                distinct_per_group(key.copy(), 7),
                _sorted_by_event({c: v.copy() for c, v in pairs.items()}, starts))

    whole = answers()
    monkeypatch.setattr(chunks, "cores", lambda: 4)
    monkeypatch.setattr(chunks, "PARALLEL_SORT_ROWS", 8)
    monkeypatch.setattr(chunks, "SORT_TRIAL_FROM", 16)
    monkeypatch.setattr(chunks, "SORT_TRIAL_ROWS", 8)
    timed = chunks._timsort_quicker
    for timsort in (True, False):  # either sort, whichever the trial picks
        monkeypatch.setattr(chunks, "_timsort_quicker", lambda v, t=timsort: t)
        for a in arrays:
            got = a.copy()
            sort_in_place(got)
            assert np.array_equal(got, np.sort(a))
        split = answers()
        (ms, me), (ws, we) = split[0], whole[0]
        assert np.array_equal(ms, ws) and np.array_equal(me, we)
        pd.testing.assert_series_equal(split[1], whole[1])
        pd.testing.assert_series_equal(split[2], whole[2])
        pd.testing.assert_frame_equal(split[3], whole[3])
    assert isinstance(timed(np.arange(40)), bool)  # the trial itself runs


def test_a_search_by_thread_keyed_by_process_is_the_search_by_process():
    """RangeSearch.by_process shares the thread search's ranges: its pairs are those of a
    search built by process from the same ranges, for events of every thread of two
    processes (nested ranges, several lanes, threads with none)."""
    from nsyswrap.analysis.range_search import RangeSearch

    rng = np.random.default_rng(3)
    rows, rid = [], 0
    for pid in (7, 9):
        for tid in (1, 2, 3):
            t = 0
            for _ in range(40):
                t += int(rng.integers(1, 50))
                length = int(rng.integers(5, 200))
                rows.append((rid, (pid << 24) | tid, t, t + length))
                rid += 1
                if rng.random() < 0.3:  # a range nested inside
                    rows.append((rid, (pid << 24) | tid, t + 1, t + length // 2))
                    rid += 1
    df = _ranges(sorted(rows, key=lambda r: r[2]))
    df["range_id"] = np.arange(len(df))
    df["process"] = df["thread"].to_numpy() >> 24
    events = pd.DataFrame({"thread": rng.choice([(p << 24) | t for p in (7, 9, 11)
                                                 for t in (1, 2, 3, 4)], 3000),
                           "time_ns": rng.integers(0, 4000, 3000)})
    events["process"] = events["thread"].to_numpy() >> 24
    built = RangeSearch(df, key="process").pairs(events)
    shared = RangeSearch(df).by_process().pairs(events)
    assert len(built["event"]) > 1000
    for c in built:
        np.testing.assert_array_equal(shared[c], built[c])
