"""Many reports in worker processes (--jobs) and on a local Dask cluster (--dask): the same
results as one process."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from conftest import DATA

from nsyswrap.multi import compare_ranks
from nsyswrap.progress import Progress

REPORTS = [DATA / f"h200x2_ddp_straggler.rank{r}.sqlite" for r in (0, 1)]


def _essence(a):
    return (a.table.drop(columns=["source"]).to_dict("records"),
            [(f.code, f.severity, f.message) for f in a.findings])


@pytest.fixture(scope="module")
def serial():
    return _essence(compare_ranks(REPORTS, jobs=1))


def test_jobs_give_the_serial_result(serial):
    assert _essence(compare_ranks(REPORTS, jobs=2)) == serial


def test_local_dask_cluster_of_processes(serial):
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


def test_unreachable_dask_scheduler_is_one_error():
    pytest.importorskip("distributed")
    from nsyswrap.errors import NsysWrapError

    with pytest.raises(NsysWrapError, match="cannot reach"):
        compare_ranks(REPORTS, dask="tcp://127.0.0.1:9")
