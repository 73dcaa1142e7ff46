"""What nsyswrap writes and how (nsyswrap/common/files.py): never over an input, never through a
link, atomically (a full disk or a failing renderer leaves an existing file as it was);
strict JSON; CSV a spreadsheet cannot run; names whose control characters show as escapes.

The full disk is a real tmpfs of 256 KiB, mounted here when the tests run as root (as on
this machine and in CI) and skipped otherwise. Hostile names come from
tests/data/cpu2022_hostile.sqlite (scripts/workloads/cpu_hostile.c, a real nsys 2022.4
capture); expected names are read from it with SQL."""

from __future__ import annotations

import csv
import dataclasses
import errno
import io
import json
import math
import os
import re
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CPU_2022, CPU_2022_REP, CPU_HOSTILE, DATA, DEMO, GPU_MIX, file_digest, sql

import nsyswrap
from nsyswrap import cli
from nsyswrap.capture import pipeline
from nsyswrap.capture.profile import Capture
from nsyswrap.cli import main
from nsyswrap.common import files
from nsyswrap.common.errors import BadInputError, NsysWrapError
from nsyswrap.diagnose import Thresholds
from nsyswrap.instrument.harness import BenchmarkConfig, BenchmarkResult, mark_payloads
from nsyswrap.render import render

STRAGGLER = [DATA / "h200x2_ddp_straggler.rank0.sqlite", DATA / "h200x2_ddp_straggler.rank1.sqlite"]
DIFF_BASE = DATA / "h100_diff_base.sqlite"
DIFF_SLOW = DATA / "h100_diff_slow.sqlite"
# What a spreadsheet takes for the start of a formula (OWASP, CSV injection).
FORMULA = re.compile(r"^[=+\-@\t\r]")
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # newline and tab too
ESC_NAME_SHOWN = "\\x1b[31mred\\x1b[0m \\x1b]0;title\\x07 del\\x7f csi\\x9b1m"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_one_line_error(res, exit_code: int, words: str) -> None:
    assert res.exit_code == exit_code, res.output
    assert res.stderr.startswith("nsyswrap: error: ") and res.stderr.count("\n") == 1, res.stderr
    assert words in res.stderr, res.stderr
    assert "Traceback" not in res.output


def folder_state(folder: Path) -> dict[str, str]:
    """Every name in `folder` (hidden ones too) with its content's digest or link target."""
    out = {}
    for p in folder.iterdir():
        if p.is_symlink():
            out[p.name] = "-> " + os.readlink(p)
        elif p.is_file():
            out[p.name] = file_digest(p)
        else:
            out[p.name] = "folder"
    return out


def strict_json(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


# -- an output that is one of the inputs (issue 34, case 1) -----------------------------

@pytest.fixture
def reports(tmp_path, monkeypatch):
    """A folder holding a report and its .nsys-rep (the export read for it), the working
    folder; a linked folder beside it."""
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy2(CPU_2022, folder / CPU_2022.name)
    shutil.copy2(CPU_2022_REP, folder / CPU_2022_REP.name)
    (tmp_path / "alias").symlink_to(folder)
    monkeypatch.chdir(folder)
    return folder


X = CPU_2022.name
SPELLINGS = ["the same name", "./X", "absolute", "through the parent", "through a linked folder",
             "a link to the input", "the input named by a link", "a hard link", "the .nsys-rep",
             "the .nsys-rep's export"]


def spell(spelling: str, folder: Path) -> tuple[str, str]:
    """(the report as given, the output) for one way of naming the input as the output."""
    if spelling in ("a link to the input", "the input named by a link"):
        os.symlink(X, "link.sqlite")
        return (X, "link.sqlite") if spelling == "a link to the input" else ("link.sqlite", X)
    if spelling == "a hard link":
        os.link(X, "hard.sqlite")
        return X, "hard.sqlite"
    return {"the same name": (X, X), "./X": (X, f"./{X}"), "absolute": (X, str(folder / X)),
            "through the parent": (X, f"../in/{X}"),
            "through a linked folder": (X, f"../alias/{X}"),
            "the .nsys-rep": (CPU_2022_REP.name, CPU_2022_REP.name),
            "the .nsys-rep's export": (CPU_2022_REP.name, X)}[spelling]


@pytest.mark.parametrize("fmt", ["table", "json"])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_output_that_is_the_input_is_refused_however_spelled(reports, spelling, fmt):
    given, output = spell(spelling, reports)
    before = folder_state(reports)
    res = run("compare", given, "--format", fmt, "-o", output)
    assert_one_line_error(res, 2, "nsyswrap never writes over its input")
    assert folder_state(reports) == before


def test_one_input_of_many_is_refused(reports):
    shutil.copy2(CPU_2022, reports / "b.sqlite")
    before = folder_state(reports)
    for args in ([X, "b.sqlite", "-o", "b.sqlite"],
                 ["-j", "1", X, "b.sqlite", "--format", "json", "-o", str(reports / X)],
                 [str(reports), "-o", "b.sqlite"],  # a folder's reports
                 ["*.sqlite", "-o", "./b.sqlite"]):  # a glob's
        res = run("compare", *args)
        assert_one_line_error(res, 2, "is one of the inputs")
        assert folder_state(reports) == before


def test_diff_output_that_is_base_or_new_is_refused(reports):
    shutil.copy2(CPU_2022, reports / "new.sqlite")
    (reports / "base.json").write_text(run("compare", X, "--format", "json").stdout)
    before = folder_state(reports)
    for base, new, output in ((X, "new.sqlite", "new.sqlite"), (X, "new.sqlite", f"./{X}"),
                              ("base.json", "new.sqlite", str(reports / "base.json"))):
        res = run("diff", base, new, "-o", output)
        assert_one_line_error(res, 2, "is one of the inputs")
        assert folder_state(reports) == before


@pytest.mark.parametrize("command", ["diff", "compare"])
def test_the_export_of_a_nsys_rep_input_is_refused_before_anything_is_written(reports, tmp_path,
                                                                              command):
    """`diff A.nsys-rep B.nsys-rep -o A.sqlite` and the ranks side by side (`compare` of
    both): the export of a .nsys-rep input is an input too, refused as the output before
    anything is read or written: no export made into the cache (none is there yet)."""
    os.remove(X)  # the .nsys-rep's export: not made yet
    shutil.copy2(CPU_2022_REP, reports / "b.nsys-rep")
    cache = tmp_path / "cache"
    before = folder_state(reports)
    for output in (X, "b.sqlite", str(reports / "b.sqlite")):
        res = run(command, CPU_2022_REP.name, "b.nsys-rep", "-o", output, "--cache-dir", cache)
        assert_one_line_error(res, 2, "is the export read for the input")
        assert folder_state(reports) == before
        assert not cache.exists()


def test_two_spellings_of_a_path_not_there_yet_are_one(tmp_path):
    (tmp_path / "sub").mkdir()
    with pytest.raises(BadInputError, match="one of the inputs"):
        files.refuse_input_as_output(tmp_path / "sub" / ".." / "new.json",
                                     [tmp_path / "new.json"])
    files.refuse_input_as_output(tmp_path / "other.json", [tmp_path / "new.json"])


# -- a full disk (case 4, the output side) ----------------------------------------------

@pytest.fixture
def small_disk(tmp_path):
    """A real 256 KiB tmpfs, unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(disk)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def fill(disk: Path) -> None:
    """Fill `disk` to the last byte."""
    with open(disk / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            assert e.errno == errno.ENOSPC
        try:
            while True:
                f.write(b"\0")
        except OSError as e:
            assert e.errno == errno.ENOSPC


def test_a_full_disk_leaves_the_existing_outputs_as_they_were(small_disk):
    old_json = run("compare", CPU_2022, "--format", "json").stdout
    assert len(old_json) > 4000
    (small_disk / "verdict.json").write_text(old_json)
    (small_disk / "report.html").write_text("<!DOCTYPE html><p>the last good page</p>\n")
    (small_disk / "trace.json").write_text('{"traceEvents": []}\n')
    fill(small_disk)
    before = folder_state(small_disk)
    for fmt, name in (("json", "verdict.json"), ("html", "report.html"),
                      ("trace", "trace.json"), ("json", "new.json")):
        res = run("compare", GPU_MIX, "--format", fmt, "-o", small_disk / name)
        assert_one_line_error(res, 1, "No space left on device")
        assert ("nothing was written" if name == "new.json" else "is unchanged") in res.stderr
        assert folder_state(small_disk) == before  # no temporary file, nothing cut short
    assert strict_json((small_disk / "verdict.json").read_text()) == strict_json(old_json)


def test_a_full_disk_under_a_streamed_json_leaves_no_part(small_disk):
    """--instances streams the rows (the demo's ~0.7 MB): the disk fills mid-stream, after
    pieces were written."""
    (small_disk / "v.json").write_text("{}\n")
    before = folder_state(small_disk)
    res = run("compare", DEMO, "--format", "json", "--instances", "-o", small_disk / "v.json")
    assert_one_line_error(res, 1, "No space left on device")
    assert folder_state(small_disk) == before


# -- links planted where nsyswrap writes (case 7, the output side) ----------------------

@pytest.mark.parametrize("fmt,name", [("json", "out.json"), ("html", "out.html"),
                                      ("trace", "out.json"), ("csv", "out.csv"),
                                      ("table", "out.txt")])
def test_a_link_at_the_output_is_not_followed(tmp_path, fmt, name):
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (tmp_path / name).symlink_to(victim)
    before = folder_state(tmp_path)
    res = run("compare", CPU_2022, "--format", fmt, "-o", tmp_path / name)
    assert_one_line_error(res, 2, "is a symbolic link")
    assert folder_state(tmp_path) == before


def test_a_dangling_link_at_the_output_creates_nothing(tmp_path):
    (tmp_path / "out.json").symlink_to(tmp_path / "elsewhere" / "made.json")
    (tmp_path / "elsewhere").mkdir()
    res = run("compare", CPU_2022, "--format", "json", "-o", tmp_path / "out.json")
    assert_one_line_error(res, 2, "is a symbolic link")
    assert not (tmp_path / "elsewhere" / "made.json").exists()


@pytest.mark.parametrize("planted", [pipeline.ANALYSIS_JSON, pipeline.REPORT_HTML])
def test_a_runs_files_are_not_written_through_links(tmp_path, planted):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy2(CPU_2022, folder / "work.sqlite")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (folder / planted).symlink_to(victim)
    cap = Capture(output_dir=folder, name="work", command=["work"], nsys="nsys",
                  nsys_version=None, sqlite=folder / "work.sqlite")
    with pytest.raises(BadInputError, match="is a symbolic link") as e:
        pipeline._analyse(cap, None, None)
    assert "\n" not in str(e.value)
    assert victim.read_text() == "precious\n"
    assert os.readlink(folder / planted) == str(victim)
    assert not list(folder.glob(".*"))  # no temporary file left


# -- a renderer that fails half-way -----------------------------------------------------

def test_a_renderer_failing_mid_stream_leaves_the_file_as_it_was(tmp_path):
    out = tmp_path / "report.json"
    out.write_text('{"the": "last good one"}\n')
    before = folder_state(tmp_path)

    def failing():
        yield '"more": 1'
        raise RuntimeError("renderer bug")

    with pytest.raises(RuntimeError):
        cli._write_pieces(out, "{", failing())
    assert folder_state(tmp_path) == before

    def interrupted():
        yield '"more": 1'
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cli._write_pieces(out, "{", interrupted())
    assert folder_state(tmp_path) == before
    cli._write_pieces(out, "{", iter(["}", "\n"]))
    assert out.read_text() == "{}\n"


@pytest.mark.parametrize("error,exit_code", [(RuntimeError("renderer bug"), 1),
                                             (KeyboardInterrupt(), 130)])
def test_compare_whose_rows_fail_mid_stream_keeps_the_old_file(tmp_path, monkeypatch, error,
                                                               exit_code):
    from nsyswrap.render import json as json_renderer

    def rows_then_failure(frame, fields):
        yield "[\n    {}"
        raise error

    monkeypatch.setattr(json_renderer, "_json_array", rows_then_failure)
    out = tmp_path / "v.json"
    out.write_text("{}\n")
    before = folder_state(tmp_path)
    res = run("compare", CPU_2022, "--format", "json", "--instances", "-o", out)
    assert res.exit_code == exit_code and res.stderr.count("\n") == 1, res.output
    assert folder_state(tmp_path) == before


# -- what is written in place, and how files are made -----------------------------------

def test_dev_null_and_a_fifo_are_written_in_place(tmp_path):
    res = run("compare", CPU_2022, "--format", "json", "-o", "/dev/null")
    assert res.exit_code == 0, res.output
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    res = run("compare", CPU_2022, "--format", "json", "-o", fifo)
    reader.join(timeout=60)
    assert res.exit_code == 0, res.output
    assert strict_json(got[0])["schema"] == "nsyswrap.compare/1"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert folder_state(tmp_path).keys() == {"pipe"}


def test_dev_stdout_is_followed_and_appended_to(tmp_path):
    """The system's link /dev/stdout to a file opened with `>>`: written where it points,
    after what the file held."""
    out = tmp_path / "log.txt"
    out.write_text("before\n")
    with open(out, "a") as stdout:
        done = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(CPU_2022),
                               "--format", "json", "-o", "/dev/stdout"], stdout=stdout,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.startswith("before\n")
    assert strict_json(text[len("before\n"):])["schema"] == "nsyswrap.compare/1"
    assert folder_state(tmp_path).keys() == {"log.txt"}


def test_a_folder_is_not_a_file_to_write(tmp_path):
    with pytest.raises(BadInputError, match="it is a folder"):
        files.atomic_write(tmp_path, "text")


def test_a_replaced_file_keeps_its_mode_and_a_new_one_follows_the_umask(tmp_path):
    old = tmp_path / "old.json"
    old.write_text("{}")
    old.chmod(0o604)
    files.atomic_write(old, "[]\n")
    assert old.read_text() == "[]\n" and stat.S_IMODE(old.stat().st_mode) == 0o604
    mask = os.umask(0o027)
    try:
        files.atomic_write(tmp_path / "new.json", "[]\n")
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640
    assert folder_state(tmp_path).keys() == {"old.json", "new.json"}


def test_open_new_makes_only_a_new_file(tmp_path):
    with files.open_new(tmp_path / "nsys.log") as log:
        log.write("first\n")
    with pytest.raises(BadInputError, match="already there"):
        files.open_new(tmp_path / "nsys.log")
    (tmp_path / "link.log").symlink_to(tmp_path / "target.log")
    with pytest.raises(BadInputError):
        files.open_new(tmp_path / "link.log")
    assert not (tmp_path / "target.log").exists()
    assert (tmp_path / "nsys.log").read_text() == "first\n"


def test_replacing_for_another_program_keeps_the_old_file_on_failure(tmp_path):
    target = tmp_path / "export.sqlite"
    target.write_bytes(b"old")
    with pytest.raises(NsysWrapError, match="export failed"):
        with files.replacing(target, suffix=".sqlite") as tmp:
            assert tmp.name.startswith(".export.sqlite.") and tmp.name.endswith(".tmp.sqlite")
            tmp.write_bytes(b"half")
            raise NsysWrapError("export failed")
    assert folder_state(tmp_path) == {"export.sqlite": file_digest(target)}
    assert target.read_bytes() == b"old"
    with files.replacing(target, suffix=".sqlite") as tmp:
        tmp.write_bytes(b"new")
    assert target.read_bytes() == b"new" and folder_state(tmp_path).keys() == {"export.sqlite"}


# -- strict JSON -------------------------------------------------------------------------

@pytest.mark.parametrize("report", [CPU_2022, CPU_HOSTILE, GPU_MIX])
def test_every_json_of_one_report_is_strict(report, tmp_path):
    for args in (["--format", "json"], ["--format", "json", "--instances"],
                 ["--format", "trace", "-o", tmp_path / "t.json"]):
        res = run("compare", report, *args)
        assert res.exit_code == 0, res.output
        text = res.stdout if "-o" not in args else (tmp_path / "t.json").read_text()
        strict_json(text)


def test_ranks_and_diff_json_are_strict(tmp_path):
    for args in (["compare", "-j", "1", *STRAGGLER, "--format", "json"],
                 ["diff", "-j", "1", DIFF_BASE, DIFF_SLOW, "--format", "json"]):
        res = run(*args)
        assert res.exit_code == 0, res.output
        strict_json(res.stdout)


def test_an_infinite_threshold_is_null_in_every_json(tmp_path):
    """The CLI refuses such a threshold; the writers must not depend on that."""
    limits = dataclasses.replace(Thresholds(), overhead_min_ns=math.inf,
                                 cold_min_excess_ns=-math.inf)
    c = nsyswrap.compare(CPU_2022, limits)
    doc = strict_json(render(c, "json"))
    assert doc["thresholds"]["overhead_min_ns"] is None
    assert doc["thresholds"]["cold_min_excess_ns"] is None
    assert strict_json("".join(nsyswrap.render.render_pieces(c, "json", instances=True)))
    for page in (render(c, "html"),):
        for data in re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page,
                               re.S):
            strict_json(data)


def test_analysis_json_and_the_pages_data_are_strict(tmp_path):
    shutil.copy2(CPU_HOSTILE, tmp_path / "work.sqlite")
    cap = Capture(output_dir=tmp_path, name="work", command=["work"], nsys="nsys",
                  nsys_version=None, sqlite=tmp_path / "work.sqlite")
    result = pipeline._analyse(cap, None, None)
    assert strict_json(result.analysis_json.read_text())["schema"] == "nsyswrap.compare/1"
    page = result.report_html.read_text(encoding="utf-8")
    scripts = re.findall(r'<script type="application/json"[^>]*>(.*?)</script>', page, re.S)
    assert scripts
    for data in scripts:
        strict_json(data)


def test_the_harness_writes_strict_json(tmp_path):
    config = BenchmarkConfig(
        name="b", iters=3, warmup=1, warmup_iters=1, flush_l2="all", flush_bytes=1,
        backpressure=True, sleep_ns=math.nan, sleep_cycles_per_ns=math.inf,
        enqueue_ns=None, cuda_graph=0, sync_each=True, gc_disabled=True, cpu_affinity=None,
        seed=0, locked_clock_mhz=None, device="x", device_index=0, l2_bytes=1)
    result = BenchmarkResult("b", [10.0, 11.0, 12.0], ["flushed"] * 3, config,
                             [math.nan, 1980.0, math.inf])
    saved = strict_json(result.save(tmp_path / "b.json").read_text())
    assert saved["clock_mhz"] == [None, 1980.0, None]
    assert saved["config"]["sleep_ns"] is None and saved["config"]["sleep_cycles_per_ns"] is None
    marks = [strict_json(p) for p in mark_payloads(result, pid=1)]
    assert marks[0]["clock_mhz"] == [None, 1980.0, None]
    assert folder_state(tmp_path).keys() == {"b.json"}


# -- hostile names: CSV cells a spreadsheet cannot run, controls as escapes (case 8) ----

def _shown(name: str) -> str:
    """How a name from the report should read in CSV: controls as \\xNN, and a leading
    quote where it would start a formula."""
    text = CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", name)
    return "'" + text if FORMULA.match(text) else text


def _hostile_names() -> set[str]:
    return {n for (n,) in sql(CPU_HOSTILE, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                                           "LEFT JOIN StringIds s ON s.id = e.textId "
                                           "WHERE e.eventType IN (59, 75)")}


def _no_formula(text: str) -> list[list[str]]:
    """The CSV's rows, after checking that no cell would start a formula: a cell starting
    with - or + is a number."""
    rows = list(csv.reader(io.StringIO(text)))
    for row in rows:
        for cell in row:
            if FORMULA.match(cell):
                float(cell)  # a number; text would have been quoted
    return rows


@pytest.fixture(scope="module")
def hostile_csvs(tmp_path_factory):
    """Every CSV section nsyswrap writes, from reports with hostile names."""
    folder = tmp_path_factory.mktemp("hostile")
    shutil.copy2(CPU_HOSTILE, folder / "=a.rank0.sqlite")
    shutil.copy2(CPU_HOSTILE, folder / "b.rank1.sqlite")
    # A GPU report whose first kernel is renamed like a formula: a real export, one string
    # changed (a CPU-only capture has no kernels).
    gpu = folder / "kernels.sqlite"
    shutil.copy2(GPU_MIX, gpu)
    con = __import__("sqlite3").connect(gpu)
    with con:
        con.execute("UPDATE StringIds SET value = '@SUM(1+1)*cmd|'' /C calc''!A0' WHERE id = "
                    "(SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)")
    con.close()
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        out = {}
        for section in ("ranges", "instances"):
            out[section] = run("compare", "b.rank1.sqlite", "--format", "csv", "--section",
                               section).stdout
        out["findings"] = run("compare", "b.rank1.sqlite", "-t", "cold_factor=15", "--format",
                              "csv", "--section", "findings").stdout
        out["kernels"] = run("compare", "kernels.sqlite", "--format", "csv", "--section",
                             "kernels").stdout
        for section in ("ranks", "families", "findings"):
            out[f"ranks {section}"] = run("compare", "-j", "1", "=a.rank0.sqlite",
                                          "b.rank1.sqlite", "--format", "csv", "--section",
                                          section).stdout
        out["diff rows"] = run("diff", "-j", "1", "=a.rank0.sqlite", "b.rank1.sqlite",
                               "--format", "csv").stdout
        Path("base.json").write_text(run("compare", "b.rank1.sqlite", "-t", "cold_factor=15",
                                         "--format", "json").stdout)
        out["diff findings"] = run("diff", "-j", "1", "base.json", "b.rank1.sqlite",
                                   "--format", "csv", "--section", "findings").stdout
    finally:
        os.chdir(cwd)
    return out


def test_no_csv_cell_starts_a_formula(hostile_csvs):
    for section, text in hostile_csvs.items():
        rows = _no_formula(text)
        assert len(rows) > 1 or section == "ranks findings", section  # a header and rows


def test_csv_neutralises_formula_names_in_every_section(hostile_csvs):
    names = {_shown(n) for n in _hostile_names()}
    formulas = {n for n in names if n.startswith("'")}
    assert {"'=HYPERLINK(\"http://example.invalid\",\"click\")", "'+1+cmd|' /C calc'!A0",
            "'-2+3", "'@SUM(1+1)", "'@dom", "'+in a domain"} <= formulas
    # CR and tab escaped: no longer a formula's start
    assert {"\\x0dCR first", "\\x09TAB first"} <= names

    def column(section, field):
        rows = list(csv.DictReader(io.StringIO(hostile_csvs[section])))
        return {r[field] for r in rows}

    family = "'=step {n}"  # the counter-named ranges' family
    steps = {n for n in formulas if n.startswith("'=step ")}
    range_names = (formulas - steps - {"'@dom"}) | {family}
    assert range_names <= column("ranges", "name")
    assert "'@dom" in column("ranges", "domain") and "'@dom" in column("instances", "domain")
    assert steps <= column("instances", "name") and family in column("instances", "family")
    assert column("findings", "range") == {family}
    assert all(m.startswith(family + ":") for m in column("findings", "message"))
    assert "'@SUM(1+1)*cmd|' /C calc'!A0" in column("kernels", "name")
    assert "'=a.rank0.sqlite" in column("ranks ranks", "source")
    assert range_names <= column("ranks families", "family")
    labels = (range_names - {"'+in a domain"}) | {"'@dom:+in a domain"}  # domain:name
    assert labels <= column("diff rows", "name")
    assert family in column("diff findings", "range")
    # A collective is an NCCL kernel, named nccl*: its section has no name from elsewhere.


def test_control_characters_show_as_escapes(tmp_path):
    shutil.copy2(CPU_HOSTILE, tmp_path / "a.rank0.sqlite")
    shutil.copy2(CPU_HOSTILE, tmp_path / "b.rank1.sqlite")
    ranks = [tmp_path / "a.rank0.sqlite", tmp_path / "b.rank1.sqlite"]
    outputs = {}
    for fmt in ("table", "markdown", "csv"):
        outputs[f"one {fmt}"] = run("compare", CPU_HOSTILE, "--format", fmt).stdout
        outputs[f"ranks {fmt}"] = run("compare", "-j", "1", *ranks, "--format", fmt,
                                      *(["--section", "families"] if fmt == "csv" else [])
                                      ).stdout
        outputs[f"diff {fmt}"] = run("diff", "-j", "1", *ranks, "--format", fmt).stdout
    outputs["one table in colour"] = run("compare", CPU_HOSTILE, "--color").stdout
    outputs["one instances csv"] = run("compare", CPU_HOSTILE, "--format", "csv", "--section",
                                       "instances").stdout
    for what, text in outputs.items():
        assert text, what
        if "colour" in what:  # rich's own styles are escape sequences; the name's are not
            assert "\x1b[31mred" not in text and "\x1b]0;" not in text, what
        else:
            assert not re.search("[\x1b\x07\x7f\x9b]", text), what
        # The name's start, as it shows (tables shorten and fold long names).
        shown = ESC_NAME_SHOWN[:18]
        if "markdown" in what:  # and Markdown's backslash before \\ [ and ]
            shown = re.sub(r"([\\\[\]])", r"\\\1", shown)
        assert shown in text, what


def test_the_page_shows_control_characters_as_escapes(tmp_path):
    page = render(nsyswrap.compare(CPU_HOSTILE), "html")
    ours = re.sub(r"<script>!function.*?</script>", "", page, flags=re.S)  # vendored bundles
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]", ours)
    assert ESC_NAME_SHOWN in ours  # in the tables, as text
    data = re.search(r'id="nsyswrap-specs">(.*?)</script>', page, re.S).group(1)
    assert any("\x1b[31mred" in t for t in _texts(strict_json(data)))  # the data, intact


def _texts(value) -> list[str]:
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return [value] if isinstance(value, str) else []
