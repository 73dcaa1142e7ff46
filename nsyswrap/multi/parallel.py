"""Analyse many reports at once: in worker processes on this machine (`--jobs N`), or on an
existing Dask cluster (`--dask ADDRESS`, the optional extra `nsyswrap[dask]`).

Each worker loads one report, analyses it and returns its summary (nsyswrap/multi/summary.py:
a few tables of per-step and per-collective numbers); the parent combines summaries only. So
peak memory is that of `jobs` reports at a time, not of all of them. Workers start through a
fork server that has imported nsyswrap once: no fork of a parent holding Arrow's and the
loader's thread pools, and no second import of pandas per report.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any

from ..common.errors import BadInputError, NsysWrapError
from ..common.progress import NO_PROGRESS, Advance, Progress
from ..read.chunks import cores

# Workers pay only past these: starting them costs about what analysing four reports does,
# and on 2 cores a report's own reads keep both busy (docs/performance.md, "Many reports").
WORKERS_MIN_CORES = 3
WORKERS_MIN_REPORTS = 8


def default_jobs(reports: int) -> int:
    """Worker processes when none are asked for: one per core, where there are more than
    two cores and WORKERS_MIN_REPORTS reports or more; else none (1: in this process)."""
    n = cores()
    return n if n >= WORKERS_MIN_CORES and reports >= WORKERS_MIN_REPORTS else 1


@dataclass(frozen=True)
class ReportFailure:
    """A report that could not be analysed (map_reports with keep_going): its path and
    the one-line error it gave (an NsysWrapError: unreadable, truncated, not an export)."""

    path: str
    message: str
    exit_code: int

    @classmethod
    def of(cls, path: Any, error: NsysWrapError) -> ReportFailure:
        return cls(str(path), str(error), error.exit_code)

    def describe(self) -> str:
        """The error, naming the report where it does not already."""
        return self.message if self.path in self.message else f"{self.path}: {self.message}"

    def error(self) -> NsysWrapError:
        kind = BadInputError if self.exit_code == BadInputError.exit_code else NsysWrapError
        return kind(self.describe())


def map_reports(func: Callable[..., Any], paths: Sequence[Any], *, jobs: int | None = None,
                dask: str | None = None, progress: Progress = NO_PROGRESS,
                keep_going: bool = False, **kwargs) -> list[Any]:
    """[func(path, **kwargs) for path in paths], in order, in parallel where asked.
    `progress` gets one advance per finished report, in the order they finish.
    `keep_going`: a report whose call raises an NsysWrapError (one that cannot be read)
    gives a ReportFailure in its place and the others go on; otherwise the first such
    error stops the run. Any other exception (a bug) always stops it."""
    call = partial(func, **kwargs)

    def result(path: Any, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except NsysWrapError as e:
            if not keep_going:
                raise
            return ReportFailure.of(path, e)

    what = f"analysing {len(paths)} report{'s' if len(paths) != 1 else ''}"
    with progress.step(what, total=len(paths)) as advance:
        if dask:
            return _on_dask(call, paths, dask, advance, result)
        jobs = min(jobs or default_jobs(len(paths)), len(paths))
        if jobs <= 1:
            out = []
            for p in paths:
                out.append(result(p, partial(call, p)))
                advance()
            return out
        ctx = multiprocessing.get_context(
            "forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
            else "spawn")
        if ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(["nsyswrap.multi.summary"])
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures: dict[Future, Any] = {pool.submit(call, p): p for p in paths}
            for future in as_completed(futures):
                # A failed report stops the run here (as pool.map would), unless kept going.
                result(futures[future], future.result)
                advance()
            return [result(p, f.result) for f, p in futures.items()]


def _on_dask(call: Callable[[Any], Any], paths: Sequence[Any], address: str,
             advance: Advance, result: Callable[[Any, Callable[[], Any]], Any]) -> list[Any]:
    try:
        from distributed import Client
    except ImportError:
        raise BadInputError("--dask needs Dask: pip install 'nsyswrap[dask]'") from None
    check_scheduler(address)
    try:
        client = Client(address, timeout=f"{DASK_TIMEOUT_S}s", set_as_default=False)
    except OSError as e:
        raise NsysWrapError(f"--dask {address}: cannot reach the scheduler ({e})") from None
    with client:
        # The workers read the reports themselves: paths must be valid on them (a shared
        # file system), and only the summaries travel back.
        from distributed import as_completed as finished

        futures = client.map(call, [str(p) for p in paths], pure=False)
        path_of = {f.key: p for f, p in zip(futures, paths, strict=True)}
        # this client is not the process's default one: as_completed needs its loop
        for future in finished(futures, loop=client.loop):
            result(path_of[future.key], future.result)
            advance()
        return [result(p, f.result) for f, p in zip(futures, paths, strict=True)]


# How long a Dask scheduler has to accept a connection and answer: Client's own timeout
# does not cover a service that accepts and then says nothing (it waited for ever).
DASK_TIMEOUT_S = 10


def check_scheduler(address: str, timeout_s: float | None = None) -> None:
    """Ask `address` who it is before a Client connects to it: a one-line error where the
    address is malformed (BadInputError), or nothing answers, or what answers is not a Dask
    scheduler (an HTTP server's reply read as a Dask frame asked for exabytes), within
    `timeout_s` (default DASK_TIMEOUT_S; NsysWrapError). An in-process scheduler
    (inproc://) is not asked."""
    import asyncio

    from distributed.comm import connect
    from distributed.comm.addressing import parse_address

    try:
        scheme, _ = parse_address(address)
    except ValueError as e:
        raise BadInputError(f"--dask {address}: not a scheduler address ({e}); give "
                            "tcp://HOST:PORT") from None
    if scheme == "inproc":
        return
    timeout_s = timeout_s or DASK_TIMEOUT_S

    async def identity() -> Any:
        comm = await asyncio.wait_for(connect(address, timeout=timeout_s), timeout_s)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await asyncio.wait_for(comm.read(), timeout_s)
        finally:
            comm.abort()

    try:
        answer = asyncio.run(identity())
    except (OSError, asyncio.TimeoutError) as e:  # refused, unreachable, silent
        detail = str(e) or f"no answer within {timeout_s:g} s"
        raise NsysWrapError(f"--dask {address}: cannot reach the scheduler ({detail})"
                            ) from None
    except ValueError as e:
        raise BadInputError(f"--dask {address}: not a scheduler address ({e}); give "
                            "tcp://HOST:PORT") from None
    except Exception as e:  # a reply that is no Dask message
        raise NsysWrapError(f"--dask {address}: what answered is not a Dask scheduler "
                            f"({type(e).__name__})") from None
    if not isinstance(answer, dict) or answer.get("type") != "Scheduler":
        raise NsysWrapError(f"--dask {address}: what answered is not a Dask scheduler")
