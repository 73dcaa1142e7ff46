"""Property-based tests of the readers of what nobody vouches for (Hypothesis): the runner's
documents in a report's marks, and the integer columns of the export's tables. Whatever a
crafted input holds, the report analyses (what cannot be read is left out, with a note) or
is refused as bad input in one line: `internal error` (exit 1) is for bugs in nsyswrap.

Each input is a mutation of a real fixture (the seed report: CUDA, NVTX, OS runtime calls
and the runner's records). The examples are derandomized and few, so CI runs the same ones
in a few seconds; NSYSWRAP_FUZZ_EXAMPLES=500 explores further (new examples each run
with NSYSWRAP_FUZZ_RANDOM=1)."""

from __future__ import annotations

import base64
import copy
import dataclasses
import json
import os
import shutil
import sqlite3
import struct
import zlib

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import PACKED, PACKED_1, USER_SEED, runner_document_2, sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nsyswrap.analysis import analyze
from nsyswrap.cli import main
from nsyswrap.diagnose import Thresholds, diagnose
from nsyswrap.read.loader import load

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def _settings(examples: int):
    return settings(max_examples=int(os.environ.get("NSYSWRAP_FUZZ_EXAMPLES", examples)),
                    derandomize=not os.environ.get("NSYSWRAP_FUZZ_RANDOM"), deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


# Integers at the edges that break readers (a type's bounds, past int64, past float64's
# exact integers, more digits than float() takes), and any others.
EDGE_INTS = st.sampled_from([0, 1, -1, 7, 1 << 16, (1 << 31) - 1, 1 << 31, 1 << 32,
                             (1 << 53) + 1, 1 << 62, INT64_MAX, INT64_MIN, 1 << 64, 1 << 70,
                             -(1 << 70), 10 ** 4299])
SCALARS = (st.none() | st.booleans() | EDGE_INTS | st.integers() | st.floats()
           | st.text(max_size=6))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                           max_leaves=6)

# -- the runner's documents ------------------------------------------------------------------

# Each field's values at its type's edges (the packed columns' formats: conftest.PACKED).
CODE_EDGES = {
    "q": [0, 1, -1, INT64_MIN, INT64_MAX, 1 << 62],
    "H": [0, 1, 2, 0xFFFF], "I": [0, 1, 2, 0xFFFFFFFF],
    "d": [0.0, -1.0, float("nan"), float("inf"), -float("inf"), 1e308],
}


@pytest.fixture(scope="module")
def seed():
    """The seed report loaded and analysed once; the runner's document and where it lies
    in the marks."""
    report = load(USER_SEED)
    analysis = analyze(report)
    marks = report.marks
    at = int(np.flatnonzero(marks["text"].astype(str).str.startswith(
        '{"nsyswrap":"nsyswrap.user-events/1"').to_numpy())[0])
    doc = json.loads(marks["text"].iloc[at])
    return _Seed({"report": report, "analysis": analysis, "marks": marks, "at": at,
                  "doc": doc, "doc_2": runner_document_2(doc)})


class _Seed(dict):
    def __repr__(self) -> str:  # Hypothesis shows the arguments of a failing example
        return "seed"


def _nested_set(data, value_of, container):
    """Set a value somewhere inside `container` (a list or dict, walked at random)."""
    while True:
        keys = list(range(len(container))) if isinstance(container, list) else list(container)
        if not keys:
            return
        key = data.draw(st.sampled_from(keys))
        inner = container[key]
        if isinstance(inner, (list, dict)) and inner and data.draw(st.booleans()):
            container = inner
            continue
        container[key] = data.draw(value_of)
        return


def _mutate_packed(data, doc):
    packed_formats = PACKED_1 if doc.get("nsyswrap") == "nsyswrap.user-events/1" else PACKED
    name = data.draw(st.sampled_from(sorted(packed_formats)))
    layout = struct.Struct(packed_formats[name])
    try:
        raw = bytearray(zlib.decompress(base64.b64decode(doc[name], validate=True)))
    except (TypeError, ValueError, zlib.error):  # mutated already: left as it is
        return
    how = data.draw(st.sampled_from(["field", "cut", "extend", "not zlib", "not base64"]))
    if how == "field" and len(raw) >= layout.size:
        row = data.draw(st.integers(0, len(raw) // layout.size - 1))
        codes = packed_formats[name][1:]
        field = data.draw(st.integers(0, len(codes) - 1))
        values = list(layout.unpack_from(raw, row * layout.size))
        values[field] = data.draw(st.sampled_from(CODE_EDGES[codes[field]]))
        layout.pack_into(raw, row * layout.size, *values)
    elif how == "cut":
        del raw[len(raw) - data.draw(st.integers(0, min(len(raw), 2 * layout.size))):]
    elif how == "extend":
        raw += raw[:data.draw(st.integers(1, 2 * layout.size))]
    packed = zlib.compress(bytes(raw))
    if how == "not zlib":
        packed = packed[: len(packed) // 2]
    text = base64.b64encode(packed).decode("ascii")
    doc[name] = text + "!" if how == "not base64" else text


def _mutated_texts(data, original: dict) -> list[str]:
    """The runner's document, mutated a few times, as the marks that carry it: once, twice,
    or in parts."""
    doc = copy.deepcopy(original)
    for _ in range(data.draw(st.integers(1, 3))):
        fields = sorted(k for k in doc if k != "nsyswrap")
        how = data.draw(st.sampled_from(["set", "delete", "rename", "nested", "packed",
                                         "rows"]))
        if how == "packed" and all(k in doc for k in PACKED):
            _mutate_packed(data, doc)
        elif how == "rows":
            doc[data.draw(st.sampled_from(["records_rows", "elapsed_rows"]))] = data.draw(
                EDGE_INTS | st.integers(0, 400))
        elif how == "nested":
            inside = [k for k in fields if isinstance(doc[k], (list, dict)) and doc[k]]
            if inside:
                _nested_set(data, JSON_VALUES, doc[data.draw(st.sampled_from(inside))])
        elif fields:
            field = data.draw(st.sampled_from(fields))
            if how == "set":
                doc[field] = data.draw(JSON_VALUES)
            elif how == "delete":
                del doc[field]
            else:
                doc[field + "_"] = doc.pop(field)
    text = json.dumps(doc, separators=(",", ":"))
    form = data.draw(st.sampled_from(["once", "twice", "parts"]))
    if form != "parts":
        return [text] * (2 if form == "twice" else 1)
    size = data.draw(st.integers(1000, 20_000))
    chunks = [text[i:i + size] for i in range(0, len(text), size)]
    parts = [{"nsyswrap": doc["nsyswrap"] + "/part", "key": "k", "part": i,
              "parts": len(chunks), "text": c} for i, c in enumerate(chunks)]
    if data.draw(st.booleans()):
        _nested_set(data, JSON_VALUES, data.draw(st.sampled_from(parts)))
    return [json.dumps(p, separators=(",", ":")) for p in parts]


def test_the_seed_as_this_runners_document_reads_as_the_earlier_one(seed):
    """What the fuzzer mutates in this runner's form is a document the analysis reads."""
    from nsyswrap.analysis.user_events import decode

    earlier, now = decode(seed["doc"]), decode(seed["doc_2"])
    columns = [c for c in earlier.records.columns if c != "context"]
    pd.testing.assert_frame_equal(earlier.records[columns], now.records[columns],
                                  check_dtype=False)
    assert set(now.records["context"]) == {0, 1} and len(now.contexts) == 2
    assert all(s["context"] == 0 for s in now.scopes)


@_settings(examples=40)
@given(data=st.data())
def test_any_runner_document_analyses_or_is_left_out_with_a_note(seed, data):
    """The program's timings of the seed report, its runner's document mutated: matched,
    reconciled, grouped and judged, or left out with a note, never an exception."""
    texts = _mutated_texts(data, seed[data.draw(st.sampled_from(["doc", "doc_2"]))])
    marks = seed["marks"]
    mark = marks.iloc[[seed["at"]] * len(texts)].assign(text=texts)
    marks = pd.concat([marks.drop(index=marks.index[seed["at"]]), mark], ignore_index=True)
    report = dataclasses.replace(seed["report"], marks=marks)
    # The engine measures the windows the marks give (engine/windows.py): analysed again.
    diagnose(analyze(report, keep_pairs=False), Thresholds())


# -- the export's integer columns ----------------------------------------------------------------

# The tables nsyswrap reads (the enums and the call chains it does not).
READ_TABLES = ("ANALYSIS_DETAILS", "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_KERNEL",
               "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
               "CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
               "NVTX_EVENTS", "OSRT_API", "PROCESSES", "StringIds", "TARGET_INFO_GPU",
               "TARGET_INFO_SESSION_START_TIME", "ThreadNames")


def _integer_columns(path) -> list[tuple[str, str]]:
    """(table, column) of every INTEGER column of the tables nsyswrap reads that have rows."""
    out = []
    for table in READ_TABLES:
        if not sql(path, "SELECT 1 FROM sqlite_master WHERE name = ?", (table,)) or not sql(
                path, f'SELECT 1 FROM "{table}" LIMIT 1'):
            continue
        out += [(table, column) for _, column, kind, *_ in
                sql(path, f'PRAGMA table_info("{table}")') if kind.upper() == "INTEGER"]
    return out


SEED_COLUMNS = _integer_columns(USER_SEED)
TABLE_VALUES = st.sampled_from([None, INT64_MIN, INT64_MAX, INT64_MAX - 1000, -1, 0, 1,
                                1 << 32, (1 << 53) + 1]) | st.integers(INT64_MIN, INT64_MAX)
ROWS = st.sampled_from(["", "WHERE rowid % 3 = 0", "WHERE rowid = 1",
                        "WHERE rowid IN (SELECT max(rowid) FROM {table})"])


@_settings(examples=10)
@given(changes=st.lists(st.tuples(st.sampled_from(SEED_COLUMNS), TABLE_VALUES, ROWS),
                        min_size=1, max_size=4))
def test_any_integer_in_the_export_analyses_or_is_refused_in_one_line(tmp_path_factory,
                                                                      changes):
    """NULLs, int64's bounds and any other integer in any INTEGER column of the seed's
    tables (a constraint the export declares is kept: SQLite refuses that change)."""
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / USER_SEED.name
    shutil.copy(USER_SEED, path)
    con = sqlite3.connect(path)
    try:
        for (table, column), value, rows in changes:
            try:
                con.execute(f'UPDATE "{table}" SET "{column}" = ? {rows.format(table=table)}',
                            (value,))
            except sqlite3.IntegrityError:  # NOT NULL, UNIQUE, PRIMARY KEY
                pass
        con.commit()
    finally:
        con.close()
    result = CliRunner().invoke(main, ["compare", str(path), "--format", "json", "-o",
                                       str(folder / "out.json")])
    assert result.exit_code in (0, 2), result.stderr
    if result.exit_code == 2:
        assert len(result.stderr.splitlines()) == 1, result.stderr
