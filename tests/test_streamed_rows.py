"""Sections written a chunk at a time (json --instances, csv): the same text as the rule
they replaced, which made every row a dict at once (to_dict, plain per value) and wrote it
with json.dumps or csv.DictWriter. Written out here as the reference."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import GPU_MIX

import nsyswrap
from nsyswrap import cli
from nsyswrap.comparison import document as doc_module
from nsyswrap.comparison.document import (
    INSTANCE_FIELDS,
    ITERATION_FIELDS,
    document,
    plain,
    records,
    section_frame,
)
from nsyswrap.render.csv import CsvRenderer, _frame_pieces
from nsyswrap.render.json import JsonRenderer, _json_array


def reference_records(df: pd.DataFrame, fields: list[str]) -> list[dict]:
    rows = []
    for rec in df[fields].to_dict("records"):
        row = {k: plain(v) for k, v in rec.items()}
        if "domain" in row and row["domain"] == "":
            row["domain"] = None
        rows.append(row)
    return rows


CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def reference_csv(rows: list[dict]) -> str:
    """csv.DictWriter of the rows, text cells one line (control characters, a newline too,
    as \\xNN: docs/json.md)."""
    out = io.StringIO()
    if not rows:
        return ""
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else
                         CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", v)
                         if isinstance(v, str) else ("" if v is None else v)
                         for k, v in row.items()})
    return out.getvalue()


def awkward() -> pd.DataFrame:
    """Every kind of value the sections hold, and the edges of plain()."""
    return pd.DataFrame({
        "range_id": np.array([0, 1, 2**40, -5, 7, 2**62, 3], dtype="int64"),
        "pid": np.array([1, 2, 3, 4, 5, 6, 7], dtype="int32"),
        "name": pd.Series(['say "hi"', "über\nline", "back\\slash", None, "", "x", "%s"],
                          dtype="str"),
        "domain": pd.Series(["", "NCCL", "", "d", None, "", "e"], dtype="str"),
        "style": pd.Categorical(["push/pop", None, "start/end", "push/pop", "push/pop",
                                 "start/end", None]),
        "value": [1.0, 1.5, np.nan, np.inf, -0.0, 2.0**53, 0.1],
        "big": [2.0**53 + 2, -1e300, 1e-7, 3.0, -np.inf, 12345678.125, np.nan],
        "flag": [True, False, True, True, False, False, True],
        "mixed": pd.Series([1, "a", None, 2.5, np.int64(4), np.nan, True], dtype=object),
    })


FLAT = ["range_id", "pid", "name", "domain", "style", "value", "big", "flag", "mixed"]


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(doc_module, "CHUNK_ROWS", 3)


def test_records_in_chunks_are_the_per_value_rule(small_chunks):
    df = awkward()
    assert records(df, FLAT) == reference_records(df, FLAT)
    assert records(df.iloc[:0], FLAT) == []


@pytest.mark.parametrize("nested", [False, True])
def test_json_rows_are_json_dumps(small_chunks, nested):
    df = awkward()
    if nested:  # a list and a dict in cells: laid out over lines, as json.dumps does
        df["mixed"] = pd.Series([[1, 2], {"a": None}, None, "s", [], 3, {}], dtype=object)
    expected = json.dumps({"x": reference_records(df, FLAT)}, indent=2, ensure_ascii=False)
    got = '{\n  "x": ' + "".join(_json_array(df, FLAT)) + "\n}"
    assert got == expected
    assert "".join(_json_array(df.iloc[:0], FLAT)) == "[]"


def test_csv_rows_are_dictwriter(small_chunks):
    df = awkward()
    df["mixed"] = pd.Series([[1, 2], {"a": None}, None, "s", [], 3, {}], dtype=object)
    assert "".join(_frame_pieces(df, FLAT)) == reference_csv(reference_records(df, FLAT))
    # No rows: the header alone (a section's columns, not a 0-byte file).
    assert "".join(_frame_pieces(df.iloc[:0], FLAT)) == ",".join(FLAT) + "\n"


def test_report_json_with_instances_streams_the_whole_document(small_chunks):
    c = nsyswrap.compare(GPU_MIX)
    a = c.analysis
    assert len(a.instances) > 3 * doc_module.CHUNK_ROWS  # several chunks
    whole = document(c)
    whole["instances"] = reference_records(a.instances.frame(), INSTANCE_FIELDS)
    whole["iterations"] = reference_records(a.iterations, ITERATION_FIELDS)
    whole["user_timing_instances"] = reference_records(*section_frame(c, "timing_instances"))
    pieces = list(JsonRenderer().pieces(c, instances=True))
    assert len(pieces) > len(a.instances) / doc_module.CHUNK_ROWS  # written as it goes
    assert "".join(pieces) == json.dumps(whole, indent=2, ensure_ascii=False) + "\n"
    csv_text = CsvRenderer().render(c, section="instances")
    assert csv_text == reference_csv(reference_records(a.instances.frame(), INSTANCE_FIELDS))


def test_a_file_cut_short_by_a_failure_is_removed(tmp_path):
    def failing():
        yield "more"
        raise RuntimeError("renderer bug")

    out = tmp_path / "report.json"
    with pytest.raises(RuntimeError):
        cli._write_pieces(out, "{", failing())
    assert not out.exists()
    cli._write_pieces(out, "{", iter(["}", "\n"]))
    assert out.read_text() == "{}\n"


def test_a_reader_that_stops_early_ends_it_quietly():
    """`nsyswrap compare --format json --instances | head`: the demo's ~0.7 MB of rows
    outgrow the pipe's buffer, so writing meets the closed pipe."""
    p = subprocess.Popen([sys.executable, "-m", "nsyswrap", "compare", "--format", "json",
                          "--instances"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout.read(10) == b'{\n  "schem'
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == cli.EXIT_BROKEN_PIPE
    assert "error" not in err and "Traceback" not in err
