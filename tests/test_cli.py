"""The CLI through Click's runner and as a real subprocess."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import CPU_2022, GPU_MIX, GPU_NO_CUDA, GPU_NO_NVTX, file_digest, sql

from nsyswrap.cli import EXIT_FINDINGS, main


def run(*args):
    return CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)


def test_json_contract():
    res = run("compare", GPU_MIX, "--format", "json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "nsyswrap.compare/1"
    assert {"report", "kernels", "ranges", "findings"} <= set(doc)
    for key in ("name", "count", "total_ns", "median_ns", "min_ns", "max_ns", "share"):
        assert key in doc["kernels"][0]
    for key in ("name", "domain", "count", "cpu_median_ns", "gpu_busy_median_ns",
                "gpu_span_median_ns"):
        assert key in doc["ranges"][0]
    for key in ("code", "severity", "range", "message", "evidence", "suggestion"):
        assert key in doc["findings"][0]
    (n_kernels,) = sql(GPU_MIX, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    assert sum(k["count"] for k in doc["kernels"]) == n_kernels
    assert doc["report"]["counts"]["kernels"] == n_kernels
    (n_ranges,) = sql(GPU_MIX, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60)")[0]
    assert sum(r["count"] for r in doc["ranges"]) == n_ranges
    default = [r for r in doc["ranges"] if r["name"] == "step"][0]
    assert default["domain"] is None  # the default NVTX domain


def test_table_is_default_and_lists_findings():
    res = run("compare", GPU_MIX)
    assert res.exit_code == 0
    assert "GPU kernels" in res.stdout and "Findings" in res.stdout
    assert "TRANSFER_IN_RANGE" in res.stdout


def test_markdown_and_csv():
    md = run("compare", GPU_MIX, "--format", "markdown").stdout
    assert md.startswith("## nsyswrap compare") and "| Kernel |" in md
    out = run("compare", GPU_MIX, "--format", "csv", "--section", "kernels").stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    (n,) = sql(GPU_MIX, "SELECT count(DISTINCT demangledName) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0]
    assert len(rows) == n
    ranges = list(csv.DictReader(io.StringIO(run("compare", GPU_MIX, "--format", "csv").stdout)))
    assert "gpu_busy_median_ns" in ranges[0]


def test_output_file(tmp_path):
    out = tmp_path / "v.json"
    res = run("compare", GPU_MIX, "--format", "json", "-o", out)
    assert res.exit_code == 0 and json.loads(out.read_text())["schema"] == "nsyswrap.compare/1"


def test_findings_do_not_fail_unless_asked():
    assert run("compare", GPU_MIX, "--format", "json").exit_code == 0
    assert run("compare", GPU_MIX, "--fail-on", "any").exit_code == EXIT_FINDINGS
    assert run("compare", GPU_MIX, "--fail-on", "TRANSFER_IN_RANGE").exit_code == EXIT_FINDINGS
    # gemm ranges carry no sync; a report without CUDA can't have SYNC_IN_RANGE
    assert run("compare", GPU_NO_CUDA, "--fail-on", "SYNC_IN_RANGE").exit_code == 0


def test_thresholds_from_the_command_line():
    doc = json.loads(run("compare", GPU_MIX, "--format", "json", "-t", "fp32_gemm_share=1",
                         "--threshold", "idle_share=0.99").stdout)
    assert doc["thresholds"]["idle_share"] == 0.99
    assert "FP32_GEMM" not in {f["code"] for f in doc["findings"]}


@pytest.mark.parametrize(("args", "words"), [
    (["--fail-on", "NOPE"], "unknown code"),
    (["-t", "bogus=1"], "unknown threshold"),
    (["-t", "idle_share"], "NAME=VALUE"),
    (["-t", "idle_share=lots"], "needs a number"),
    (["-t", "idle_share=nan"], "a finite number"),
    (["-t", "idle_share=-1"], "a share between 0 and 1"),
    (["-t", "fp32_gemm_share=1.5"], "a share between 0 and 1"),
    (["-t", "cold_factor=0.5"], "a factor of at least 1"),
    (["-t", "cold_min_instances=1"], "at least 2"),
    (["-t", "cold_min_instances=2.5"], "a whole number"),
    (["-t", "host_bound_min_ns=-5"], "a duration in ns"),
])
def test_bad_options_are_one_line(args, words):
    res = run("compare", GPU_MIX, *args)
    assert res.exit_code == 2
    assert words in res.stderr and res.stderr.count("\n") == 1


def test_reports_without_nvtx_or_cuda_still_analysed():
    doc = json.loads(run("compare", GPU_NO_NVTX, "--format", "json").stdout)
    assert doc["kernels"] and doc["ranges"] == []
    assert any("NVTX" in n for n in doc["report"]["notes"])
    doc = json.loads(run("compare", GPU_NO_CUDA, "--format", "json").stdout)
    assert doc["kernels"] == [] and doc["ranges"]
    assert doc["ranges"][0]["gpu_busy_median_ns"] is None


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)],
                          capture_output=True, text=True, env=env)


def test_subprocess_demo_default():
    proc = _cli("compare", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert "demo" in proc.stderr
    assert json.loads(proc.stdout)["findings"]


def test_subprocess_quick_exit_keeps_codes_output_handlers_and_threads(tmp_path):
    """`entry` ends the process without the interpreter's teardown: the exit status, the
    whole output (through a pipe), exit handlers and a still-running thread's work must
    come out as with the usual exit."""
    proc = _cli("compare", "--format", "json", "--fail-on", "any")
    assert proc.returncode == 3, proc.stderr
    assert json.loads(proc.stdout)["findings"]  # complete: flushed before the exit
    script = tmp_path / "entry.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        "from nsyswrap import cli\n"
        "atexit.register(lambda: print('handler ran', flush=True))\n"
        "if sys.argv[1] == 'thread':\n"
        "    threading.Thread(target=lambda: (time.sleep(0.5), print('thread done'))).start()\n"
        "sys.argv = ['nsyswrap', '--version']\n"
        "cli.entry()\n")
    for case in ("plain", "thread"):
        proc = subprocess.run([sys.executable, str(script), case], capture_output=True,
                              text=True)
        assert proc.returncode == 0, proc.stderr
        assert "nsyswrap" in proc.stdout and "handler ran" in proc.stdout
        assert ("thread done" in proc.stdout) == (case == "thread")


def test_compare_starts_the_reads_before_pandas_loads(tmp_path):
    """`compare` on one report opens it and starts its bulk reads before pandas and the
    analysis are imported, so that the reads run during that half second: neither what
    the CLI imports at start-up nor open_report may import pandas. Bad input found while
    the reads run is still one line."""
    script = tmp_path / "order.py"
    script.write_text(
        "import sys\n"
        "from nsyswrap import cli\n"
        "from nsyswrap.read import database\n"
        "seen = []\n"
        "real = database.open_report\n"
        "def spy(*args, **kwargs):\n"
        "    opened = real(*args, **kwargs)\n"
        "    seen.append(('pandas' in sys.modules, len(opened.db._prefetched)))\n"
        "    return opened\n"
        "database.open_report = spy\n"
        "try:\n"
        "    cli.main(sys.argv[1:], standalone_mode=False)\n"
        "finally:\n"
        "    print(seen)\n")
    out = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, str(script), "compare", str(GPU_MIX), "--format",
                           "json", "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    (pandas_loaded, reads), = eval(proc.stdout.strip().splitlines()[-1])
    assert not pandas_loaded and reads >= 3  # kernels, launches, NVTX ranges at least
    assert json.loads(out.read_text())["kernels"]
    proc = _cli("compare", GPU_MIX, "--fail-on", "NOPE")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "unknown code" in proc.stderr


@pytest.mark.parametrize("kind", ["missing", "not_sqlite", "not_nsys", "truncated", "folder"])
def test_subprocess_bad_input(tmp_path, kind):
    import sqlite3

    p = tmp_path / "r.sqlite"
    if kind == "not_sqlite":
        p.write_text("not a database")
    elif kind == "not_nsys":
        sqlite3.connect(p).execute("CREATE TABLE t (x)").connection.commit()
    elif kind == "truncated":
        p.write_bytes(GPU_MIX.read_bytes()[:300_000])
    elif kind == "folder":
        p = tmp_path
    before = file_digest(p) if p.is_file() else None
    proc = _cli("compare", p)
    assert proc.returncode == 2
    assert proc.stderr.startswith("nsyswrap: error:") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    if before:
        assert file_digest(p) == before


def test_subprocess_rep_without_nsys(tmp_path):
    from conftest import CPU_2022_REP

    rep = tmp_path / CPU_2022_REP.name
    rep.write_bytes(CPU_2022_REP.read_bytes())
    env = {**os.environ, "PATH": os.path.dirname(sys.executable), "NSYSWRAP_CACHE": str(tmp_path)}
    env.pop("NSYS", None)
    proc = _cli("compare", rep, env=env)
    if proc.returncode == 0:  # an nsys in a standard install place was found: fine, skip
        pytest.skip("nsys found outside PATH")
    assert proc.returncode == 2 and "needs nsys" in proc.stderr and "Traceback" not in proc.stderr


def test_cpu_2022_report_via_cli():
    doc = json.loads(run("compare", CPU_2022, "--format", "json").stdout)
    names = {r["name"] for r in doc["ranges"]}
    assert {"iteration", "step", "load", "compute", "startend", "worker_iter"} <= names


@pytest.mark.parametrize(("args", "words"), [
    (["compare", "--bogus"], "No such option '--bogus'"),
    (["bogus"], "No such command 'bogus'"),
    (["--bogus"], "No such option '--bogus'"),
    (["diff", "a"], "Missing argument 'NEW'"),
    (["compare", "-t"], "Option '-t' requires an argument"),
    (["compare", "--format", "nope", "x"], "Invalid value for '--format'"),
    (["compare", "--jobs", "0", "a", "b"], "Invalid value for '-j' / '--jobs'"),
])
def test_usage_errors_are_two_lines(args, words):
    proc = _cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 2, proc.stderr
    assert lines[0].startswith("nsyswrap: error: ") and words in lines[0]
    # Help for the command that was given, or for nsyswrap itself.
    command = "" if args[0] in ("bogus", "--bogus") else f" {args[0]}"
    assert lines[1].startswith("Try '") and lines[1].endswith(f"nsyswrap{command} -h' for help.")


@pytest.mark.parametrize("value", ["soon", "-1", "inf"])
def test_a_bad_interrupt_grace_period_is_refused_before_anything_is_made(tmp_path, monkeypatch,
                                                                          value):
    monkeypatch.setenv("NSYSWRAP_INTERRUPT_GRACE_S", value)
    res = run("run", "-o", tmp_path / "out", tmp_path / "missing.py")
    assert res.exit_code == 2
    assert res.stderr.startswith("nsyswrap: error: NSYSWRAP_INTERRUPT_GRACE_S=")
    assert res.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
