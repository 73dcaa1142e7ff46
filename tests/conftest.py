"""Shared test helpers. Fixtures are real nsys exports under tests/data, made by
scripts/make_fixtures_gpu.sh (H100, nsys 2025.3) and scripts/make_fixtures_cpu.sh (nsys 2022.4).
Expected values come from direct SQL against those files (the `sql` helper), never from
nsyswrap itself."""

from __future__ import annotations

import base64
import functools
import hashlib
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
GPU_MIX = DATA / "h100_torch_mix.sqlite"
# The seed article's three ways of timing F.linear, run unchanged under `nsyswrap run`.
USER_SEED = DATA / "h100_user_seed.sqlite"
GPU_NO_NVTX = DATA / "h100_torch_mix_nonvtx.sqlite"
GPU_NO_CUDA = DATA / "h100_torch_mix_nocuda.sqlite"
GPU_GRAPH_NODES = DATA / "h100_torch_graph.sqlite"
GPU_GRAPH_WHOLE = DATA / "h100_torch_graph_graphlevel.sqlite"
CPU_2022 = DATA / "cpu2022_nvtx.sqlite"
CPU_2022_REP = DATA / "cpu2022_nvtx.nsys-rep"
CPU_HOSTILE = DATA / "cpu2022_hostile.sqlite"
DEMO = Path(__file__).parents[1] / "nsyswrap" / "data" / "scenarios-h100.sqlite"
ALL_REPORTS = sorted(DATA.glob("*.sqlite"))


def sql(path: Path, query: str, params: tuple = ()) -> list[tuple]:
    """Run a query on a fixture, read-only, with plain sqlite3 (the independent reference).
    Text that is not UTF-8 (cpu2022_not_utf8.sqlite) comes with U+FFFD in place of the bytes
    that are not, by Python's own decoder."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    con.text_factory = lambda raw: raw.decode("utf-8", "replace")
    try:
        return con.execute(query, params).fetchall()
    finally:
        con.close()


@functools.cache
def analysed(path: Path, attribution: str = "process"):
    """analyze(load(path)) under `attribution`, the other options their defaults: made once
    per worker for the tests that only read it (none may change it). Each fixture is
    analysed whole by many tests (the reference checks, the stream's, the kernels'); made
    again by each, it was a tenth of the suite's time."""
    import nsyswrap
    from nsyswrap.analysis import analyze

    return analyze(nsyswrap.load(path), attribution=attribution)


@functools.cache
def compared(path: Path):
    """nsyswrap.compare(path) with its defaults, made once per worker for the tests that only
    read or render it (none may change it): a fixture compared by a dozen tests in as many
    modules."""
    import nsyswrap

    return nsyswrap.compare(path)


def has_table(path: Path, table: str) -> bool:
    return bool(sql(path, "SELECT 1 FROM sqlite_master WHERE name = ?", (table,)))


@functools.cache
def threads_that_matter(path) -> frozenset[int]:
    """The threads that launched GPU work or opened NVTX ranges (SQL): with one, nsys's
    thread rule and the process rule give every range the same work, and the summary per
    process is the summary. Asked once per fixture and worker (two test modules
    parametrise by it)."""
    threads = set()
    if has_table(path, "CUPTI_ACTIVITY_KIND_RUNTIME"):
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                      "CUPTI_ACTIVITY_KIND_MEMSET"):
            if has_table(path, table):
                threads |= {t for (t,) in sql(path, f"""
                    SELECT DISTINCT r.globalTid FROM CUPTI_ACTIVITY_KIND_RUNTIME AS r
                    JOIN {table} AS o ON o.correlationId = r.correlationId
                     AND r.globalTid >> 24 = o.globalPid >> 24""")}
    if has_table(path, "NVTX_EVENTS"):
        threads |= {t for (t,) in sql(path, "SELECT DISTINCT globalTid FROM NVTX_EVENTS "
                                            "WHERE eventType IN (59, 60, 70, 71)")}
    return frozenset(threads)


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def report_copy(tmp_path):
    """Copy a fixture into a private folder, so a test can watch what appears beside it."""

    def _copy(src: Path) -> Path:
        dst = tmp_path / "in" / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        return dst

    return _copy


@pytest.fixture
def read_only_mount(tmp_path):
    """A small tmpfs, filled by the test, then remounted read-only (root only)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a file system needs root")
    folder = tmp_path / "mnt"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")

    def remount_read_only():
        subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        with pytest.raises(OSError):
            (folder / "probe").write_text("x")

    try:
        yield folder, remount_read_only
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def nsys_available() -> bool:
    return shutil.which("nsys") is not None


if os.environ.get("NSYSWRAP_REQUIRE_NSYS") and not nsys_available():
    raise RuntimeError("NSYSWRAP_REQUIRE_NSYS is set but nsys is not on PATH: the end-to-end "
                       "tests of `nsyswrap run` cannot run")

needs_nsys = pytest.mark.skipif(not nsys_available(), reason="nsys not on PATH")


@pytest.fixture(scope="session")
def default_traces_run(tmp_path_factory):
    """(output folder, finished process) of one `nsyswrap run --format json` of
    tests/workloads/annotated.py with nsyswrap's default traces (CUDA, NVTX, the OS runtime),
    for the tests that only read what it printed and wrote. Only for tests that use nsys
    (it runs nsys, in their worker)."""
    from test_run import WORKLOAD, nsyswrap

    out = tmp_path_factory.mktemp("default-traces") / "run"
    proc = nsyswrap("run", "-o", out, "--format", "json", WORKLOAD)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def torch_available() -> bool:
    """PyTorch installed (scripts/test.sh installs its CPU build where it can); found, not
    imported: importing it takes seconds in every worker."""
    import importlib.util

    return importlib.util.find_spec("torch") is not None


if os.environ.get("NSYSWRAP_REQUIRE_TORCH") and not torch_available():
    raise RuntimeError("NSYSWRAP_REQUIRE_TORCH is set but torch is not installed (pip install "
                       "'torch==2.13.0'): the tests of the runner's Timer hook, torchrun's "
                       "ranks and the harness without a GPU cannot run")

needs_torch = pytest.mark.skipif(not torch_available(), reason="torch not installed")


def finding(findings, code: str, label: str):
    """(the finding with `code` that concerns `label`, its evidence for that label): merged
    findings keep each range's evidence in evidence["by_range"]."""
    f = next(f for f in findings if f.code == code and label in f.ranges)
    return f, f.evidence["by_range"][label] if "by_range" in f.evidence else f.evidence


def browser_available() -> bool:
    """Debian's Chromium and Playwright for Python (which drives it; it never downloads a
    browser of its own here)."""
    from browser import chromium_path

    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return chromium_path() is not None


if os.environ.get("NSYSWRAP_REQUIRE_BROWSER") and not browser_available():
    raise RuntimeError("NSYSWRAP_REQUIRE_BROWSER is set but Chromium (apt install chromium) or "
                       "Playwright (pip install -e '.[test]') is missing: the browser tests "
                       "of the HTML report cannot run")

needs_browser = pytest.mark.skipif(not browser_available(),
                                   reason="Chromium or Playwright not installed")


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium for a module's browser tests, each page in a fresh context of
    its own (browser.Chromium). Closed when the module's tests end: while it runs,
    Playwright's sync API holds the worker thread's event loop, and asyncio.run (the Dask
    scheduler check) would refuse to start there. The browser tests run one after another
    in one worker (pytest_collection_modifyitems), so a module starts it once."""
    from browser import Chromium

    browser = Chromium()
    yield browser
    browser.close()


# nsys 2022.4 now and then fails a session at its start, more often under load: these are
# its lines then (docs/nsys-quirks.md). The same run made again passes.
NSYS_SESSION_FAILED = ("Local Endpoint is not available",
                       "[boost::errinfo_api_function_*] = sem_open",
                       "Connection reset by peer", "End of file",
                       "Connection to the Agent lost.")


def names_session_failure(text: str) -> bool:
    """Whether `text` holds a line of NSYS_SESSION_FAILED."""
    return any(line in text for line in NSYS_SESSION_FAILED)


def once_more_if_nsys_failed(once, folder: Path) -> subprocess.CompletedProcess:
    """`once()`, a run whose output folder is `folder` (`nsyswrap run -o folder ...`), made
    once more where nsys failed the session on its own (a line of NSYS_SESSION_FAILED in
    what it printed or in an nsys.log it added), after what it added to `folder` is
    removed. Module-scoped fixtures that run nsys need it: pytest keeps a fixture's error
    for the module, so pytest_runtest_protocol's retry of the test cannot make it again."""
    before = _names_in(folder)
    proc = once()
    if proc.returncode != 0 and _run_session_failed(proc, folder, before):
        _remove_added(folder, before)
        print(f"nsys failed on its own ({' or '.join(NSYS_SESSION_FAILED)}); running once "
              f"more: {proc.args}", file=sys.stderr)
        proc = once()
    return proc


def _names_in(folder: Path) -> set[str] | None:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else None


def _run_session_failed(proc, folder: Path, before: set[str] | None) -> bool:
    """A line of NSYS_SESSION_FAILED in what the run printed or in an nsys.log it added."""
    if names_session_failure(proc.stdout + proc.stderr):
        return True
    if not folder.is_dir():
        return False
    added = [p for p in folder.iterdir() if before is None or p.name not in before]
    logs = [p for p in added if p.name == "nsys.log"]
    logs += [log for p in added if p.is_dir() for log in p.glob("nsys.log")]
    return any(names_session_failure(log.read_text(errors="replace")) for log in logs)


def _remove_added(folder: Path, before: set[str] | None) -> None:
    """Back to as the failed run found it: gone if it made the folder, else what it added."""
    if before is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for p in folder.iterdir():
        if p.name not in before:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink()


@pytest.fixture(autouse=True)
def _nsys_test_folder(request):
    """An nsys test's tmp_path, kept on its item, where a failed run's nsys.log is looked
    for (pytest_runtest_protocol)."""
    if request.node.get_closest_marker("nsys") is not None:
        request.node.stash[_FOLDER] = request.getfixturevalue("tmp_path")


_FOLDER = pytest.StashKey[Path]()


def _session_failed(item, reports) -> bool:
    """A test failed where nsys failed the session on its own: a line of
    NSYS_SESSION_FAILED in what the failure or the test printed, or in an nsys.log of its
    tmp_path."""
    text = "".join(r.longreprtext + "".join(c for _, c in r.sections) for r in reports)
    if names_session_failure(text):
        return True
    folder = item.stash.get(_FOLDER, None)
    return folder is not None and any(
        names_session_failure(log.read_text(errors="replace"))
        for log in folder.rglob("nsys.log"))


NICE_OTHER_WORKERS = 10


@functools.cache
def _yield_to_the_nsys_worker() -> None:
    """Under pytest-xdist, the worker that runs the nsys tests lowers the other workers'
    CPU priority (nice 10; their children inherit it), once. The nsys tests run one after
    another in this worker, the suite's longest chain, and are slowed most by the others
    sharing the cores; the others still get every cycle the nsys sessions leave (half of
    their time is waiting on nsys). A process may lower the priority of its own user's
    processes without privileges; the siblings are the other children of this worker's
    parent, xdist's controller, which starts nothing else."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    me, parent = os.getpid(), os.getppid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == parent:
                os.setpriority(os.PRIO_PROCESS, int(entry.name), NICE_OTHER_WORKERS)
        except (OSError, ValueError, IndexError):
            continue


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """A test that starts nsys and failed because nsys failed a session at its start is
    made once more, whole, in a fresh tmp_path; only the second attempt is reported, with a
    line that says so. Helpers that can redo the one run (test_run.nsyswrap) do so
    themselves; this catches the rest (a Popen that reads the workload's first line, two
    runs at once)."""
    if item.get_closest_marker("nsys") is None:
        return None
    _yield_to_the_nsys_worker()
    from _pytest.runner import runtestprotocol

    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    if any(r.failed for r in reports) and _session_failed(item, reports):
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
        for r in reports:
            r.sections.append(("nsys", "nsys failed the first attempt's session on its "
                                       "own (NSYS_SESSION_FAILED): made once more"))
    for r in reports:
        item.ihook.pytest_runtest_logreport(report=r)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (scripts/test.sh runs the suite on four workers), the tests that
    start Debian's nsys are one group ("nsys"), run in one worker, one test after the
    other, and the other workers run tests that use the CPU while the sessions wait
    (docs/nsys-quirks.md on concurrent sessions); a run nsys fails at its start on its own
    (NSYS_SESSION_FAILED) is made once more (test_run.nsyswrap, pytest_runtest_protocol).
    tryfirst: xdist's worker reads the xdist_group marks in its own
    pytest_collection_modifyitems (it names each test `id@group` there), which otherwise
    runs before this one and sees no mark. Since pytest
    9.2 a test's id is no longer the attribute xdist 3.8 renames (`_nodeid`), so its renaming
    silently does nothing and every group is spread over the workers: where that is so, the
    test is named `id@group` here (tests/test_suite_groups.py checks the grouping). The
    browser tests are a group of their own, so that each module's share one Chromium
    (the `chromium` fixture) instead of one per worker that runs some of them."""
    grouping = bool(getattr(config.option, "loadgroup", False))  # an xdist worker's option
    for item in items:
        uses_nsys = item.get_closest_marker("nsys") is not None or any(
            m.kwargs.get("reason") == "nsys not on PATH" or "nsys not on PATH" in m.args
            for m in item.iter_markers("skipif"))
        if uses_nsys:
            # One group for them all, so that one nsys session runs at a time. Two groups
            # (two sessions at once) ran 40 concurrent pairs cleanly, but a full suite under
            # load then lost a capture's ranges once (test_sighup_is_handled_like_sigterm;
            # it happened again with one session at a time: the signal came before the
            # workload's first NVTX call had loaded nsys's injection, tests/workloads/forever.py).
            item.add_marker(pytest.mark.xdist_group("nsys"))
            if item.get_closest_marker("nsys") is None:
                # The mark the rerun of nsys's own failures (pytest_runtest_protocol) and
                # `-m nsys` go by, for the tests that only skip without nsys (needs_nsys).
                item.add_marker(pytest.mark.nsys)
        elif item.get_closest_marker("browser") is not None:
            item.add_marker(pytest.mark.xdist_group("browser"))
        group = item.get_closest_marker("xdist_group")
        if grouping and group is not None and hasattr(item, "_id") and "@" not in item.nodeid:
            from _pytest.nodeid import coerce_node_id  # pytest >= 9.2

            name = group.args[0] if group.args else group.kwargs.get("name", "default")
            item._id = coerce_node_id(f"{item.nodeid}@{name}")


# The runner's packed columns: struct format of each, in its documents (/2) and the earlier
# runner's (/1, the fixtures').
PACKED = {"records": "<qqIIIIIq", "elapsed": "<qqIIIIIId"}
PACKED_1 = {"records": "<qqHIIHq", "elapsed": "<qqHIIIIHd"}


def runner_document_2(doc: dict) -> dict:
    """A document of the earlier runner (/1: the fixtures') as this runner (/2) writes it:
    32-bit codes, each record's context (two contexts, alternating), the scopes' contexts.
    Made with struct and zlib, not nsyswrap."""
    def repacked(name, change):
        raw = zlib.decompress(base64.b64decode(doc[name]))
        rows = b"".join(struct.pack(PACKED[name], *change(row))
                        for row in struct.iter_unpack(PACKED_1[name], raw))
        return base64.b64encode(zlib.compress(rows)).decode("ascii")

    rows = iter(range(1 << 40))
    new = dict(doc, nsyswrap="nsyswrap.user-events/2", record_format=PACKED["records"],
               elapsed_format=PACKED["elapsed"],
               record_fields=["before_ns", "took_ns", "thread", "event", "nth", "site",
                              "context", "stream"],
               contexts=[[["w.py", 3, "timed", [["name", "'mm'"], ["fn", "matmul"]]],
                          ["w.py", 9, "<module>", []]], [["w.py", 12, "bench", []]]],
               own_records=0, own_elapsed=0, hook_cost_worst_ns=12_000.0,
               scopes=[dict(scope, context=0) for scope in doc["scopes"]])
    new["records"] = repacked("records", lambda row: row[:6] + (next(rows) % 2,) + row[6:])
    new["elapsed"] = repacked("elapsed", lambda row: row)
    return new
