"""Many reports in worker processes (--jobs) and on a local Dask cluster (--dask): the same
results as one process."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from conftest import DATA

from nsyswrap.common.progress import Progress
from nsyswrap.multi import compare_ranks

REPORTS = [DATA / f"h200x2_ddp_straggler.rank{r}.sqlite" for r in (0, 1)]


def _essence(a):
    return (a.table.drop(columns=["source"]).to_dict("records"),
            [(f.code, f.severity, f.message) for f in a.findings])


@pytest.fixture(scope="module")
def serial():
    return _essence(compare_ranks(REPORTS, jobs=1))


def test_jobs_give_the_serial_result(serial):
    assert _essence(compare_ranks(REPORTS, jobs=2)) == serial


@pytest.mark.parametrize("cores, reports, jobs", [(1, 16, 1), (2, 2, 1), (2, 64, 1),
                                                 (16, 2, 1), (16, 4, 1), (16, 8, 16),
                                                 (16, 100, 16)])
def test_default_jobs_where_workers_pay(monkeypatch, cores, reports, jobs):
    """Workers only on more than 2 cores and for 8 reports or more (docs/performance.md,
    "Many reports": on 2 cores and for 4 reports they were slower than one process)."""
    from nsyswrap.multi import parallel

    monkeypatch.setattr(parallel, "cores", lambda: cores)
    assert parallel.default_jobs(reports) == jobs


def test_local_dask_cluster_of_processes(serial, tmp_path):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        advances = []

        class Count(Progress):
            @contextmanager
            def step(self, description, total=None):
                yield lambda n=1: advances.append(n)

        assert _essence(compare_ranks(REPORTS, dask=cluster.scheduler_address,
                                      progress=Count())) == serial
        assert len(advances) == len(REPORTS)  # one per report finished on the cluster
        # A report the workers cannot read is left out; the others are analysed.
        cut = tmp_path / "cut.sqlite"
        cut.write_bytes(REPORTS[0].read_bytes()[:100_000])
        a = compare_ranks([*REPORTS, cut], dask=cluster.scheduler_address)
        assert [f.path for f in a.failed] == [str(cut)] and len(a.ranks) == len(REPORTS)
        assert "truncated" in a.failed[0].message and a.failed[0].exit_code == 2


def test_unreachable_dask_scheduler_is_one_error(monkeypatch):
    pytest.importorskip("distributed")
    from nsyswrap.common.errors import NsysWrapError
    from nsyswrap.multi import parallel

    # Dask retries a refused connection until the timeout: 1 s, not 10, is enough to see
    # the refusal become one error.
    monkeypatch.setattr(parallel, "DASK_TIMEOUT_S", 1)
    with pytest.raises(NsysWrapError, match="cannot reach"):
        compare_ranks(REPORTS, dask="tcp://127.0.0.1:9")


@contextmanager
def _service(reply: bytes | None):
    """A real local TCP service on a free port: it answers every connection with `reply`
    (an HTTP server's answer), or accepts and says nothing (None)."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    held = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:  # closed: the test is over
                return
            held.append(conn)
            if reply is not None:
                conn.recv(65536)
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        server.close()
        for conn in held:
            conn.close()


HTTP_REPLY = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\n\r\nBad Request"


@pytest.mark.parametrize(("reply", "words"), [
    (HTTP_REPLY, "what answered is not a Dask scheduler"),
    (None, "cannot reach the scheduler (no answer within 1 s)"),
], ids=["http", "silent"])
def test_a_dask_address_that_is_no_scheduler_is_one_error(monkeypatch, reply, words):
    """An HTTP server (its reply read as a Dask frame asked for exabytes), or a service
    that never answers (Client waited for ever): one line, exit 1, within the timeout."""
    import time

    from click.testing import CliRunner

    from nsyswrap.cli import main
    from nsyswrap.common.errors import NsysWrapError
    from nsyswrap.multi import parallel

    pytest.importorskip("distributed")
    monkeypatch.setattr(parallel, "DASK_TIMEOUT_S", 1)
    with _service(reply) as address:
        started = time.monotonic()
        with pytest.raises(NsysWrapError, match=words.replace("(", r"\(").replace(")", r"\)")):
            compare_ranks(REPORTS, dask=address)
        assert time.monotonic() - started < 10
        res = CliRunner().invoke(main, ["compare", *map(str, REPORTS), "--dask", address],
                                 catch_exceptions=False)
    assert res.exit_code == 1
    assert res.stderr.startswith(f"nsyswrap: error: --dask {address}: ")
    assert res.stderr.count("\n") == 1 and words in res.stderr


def test_a_malformed_dask_address_is_bad_input():
    from click.testing import CliRunner

    from nsyswrap.cli import main

    pytest.importorskip("distributed")
    res = CliRunner().invoke(main, ["compare", *map(str, REPORTS), "--dask", "bogus-address"],
                             catch_exceptions=False)
    assert res.exit_code == 2
    assert res.stderr.startswith("nsyswrap: error: --dask bogus-address: not a scheduler "
                                 "address") and res.stderr.count("\n") == 1
