"""The timing harness: CUDA-event timing done the way the seed articles recommend, with every
timed iteration an NVTX range that `nsyswrap compare` reconciles with the kernels.

The core loop, each part switchable and recorded in the result:

    sync; warm up (by count, or until steady)
    for each iteration:
        [flush L2 by zeroing a buffer twice its size]       (all, none, or every other one)
        [GPU sleep long enough to cover the host's launches] (back-pressure)
        NVTX range <name>: start.record(); fn(); end.record()
        [sync]
    sync; read the events
    event floor: the same windows around one tiny kernel, after a GPU sleep (see _Floor)

After the loop the per-iteration event times and the configuration go into the report as an
NVTX mark carrying JSON (schema nsyswrap.benchmark/1), so a .sqlite is self-contained.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..common.errors import NsysWrapError
from ..common.files import atomic_write
from .annotate import annotate, mark
from .mark_parts import mark_texts
from .schema import (
    CAPTURE_ENV,
    CAPTURE_RANGE,
    FLOOR_RANGE_SUFFIX,
    HARNESS_DOMAIN,
    MARK_PART_SCHEMA,
    MARK_SCHEMA,
)

FLUSH_MODES = ("all", "none", "interleave")


@dataclass
class BenchmarkConfig:
    """What the harness did, as asked and as derived."""

    name: str
    iters: int
    warmup: int | str  # as asked: a count or "auto"
    warmup_iters: int  # as run
    flush_l2: str
    flush_bytes: int
    backpressure: bool
    sleep_ns: float  # median GPU sleep before an iteration, derived from the enqueue time
    sleep_cycles_per_ns: float  # calibrated on torch.cuda._sleep
    enqueue_ns: float | None  # median host time to enqueue one iteration, during warmup
    cuda_graph: int  # calls captured per replay (0: off)
    sync_each: bool
    gc_disabled: bool
    cpu_affinity: list[int] | None
    seed: int | None
    locked_clock_mhz: int | None
    device: str
    device_index: int
    l2_bytes: int
    calls: int = 1  # calls of fn per timed window (eager, back to back)
    clock_source: str | None = None  # "nvml" when per-iteration clocks were sampled
    max_clock_mhz: float | None = None
    torch_version: str = ""
    range_domain: str = HARNESS_DOMAIN

    @property
    def calls_per_window(self) -> int:
        """Calls of fn inside one pair of events (a graph replay of N calls counts N)."""
        return max(self.cuda_graph, 1) * self.calls


@dataclass
class BenchmarkResult:
    """Per-iteration CUDA-event times (per call, in graph mode) with what produced them.

    `samples_ns[i]` belongs to iteration i, whose L2 state is `cache[i]` ("flushed"/"hot").
    Statistics are computed on demand; nothing is thrown away.
    """

    name: str
    samples_ns: list[float]
    cache: list[str]
    config: BenchmarkConfig
    clock_mhz: list[float | None] = field(default_factory=list)  # SM clock per iteration
    warmup_ns: list[float] = field(default_factory=list)  # event times of the warmup
    host_ns: list[float] = field(default_factory=list)  # host time to issue each iteration
    # Event times of windows around one tiny kernel: what these events read for (almost) no
    # work. `nsyswrap compare` subtracts that kernel's own time to get the events' cost.
    floor_ns: list[float] = field(default_factory=list)

    @property
    def median_ns(self) -> float:
        return statistics.median(self.samples_ns)

    @property
    def min_ns(self) -> float:
        return min(self.samples_ns)

    @property
    def host_median_ns(self) -> float | None:
        """Median host time to issue one call (start.record() to end.record())."""
        return statistics.median(self.host_ns) if self.host_ns else None

    @property
    def floor_median_ns(self) -> float | None:
        """Median event time of a window holding one tiny kernel (per window, not per call)."""
        return statistics.median(self.floor_ns) if self.floor_ns else None

    @property
    def mean_ns(self) -> float:
        return statistics.fmean(self.samples_ns)

    @property
    def iqr_ns(self) -> float:
        if len(self.samples_ns) < 2:
            return 0.0
        q = statistics.quantiles(self.samples_ns, n=4, method="inclusive")
        return q[2] - q[0]

    def by_cache(self) -> dict[str, list[float]]:
        out: dict[str, list[float]] = {}
        for mode, s in zip(self.cache, self.samples_ns, strict=True):
            out.setdefault(mode, []).append(s)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"schema": MARK_SCHEMA, "name": self.name, "samples_ns": self.samples_ns,
                "cache": self.cache, "clock_mhz": self.clock_mhz, "host_ns": self.host_ns,
                "floor_ns": self.floor_ns, "median_ns": self.median_ns,
                "iqr_ns": self.iqr_ns, "min_ns": self.min_ns, "config": asdict(self.config)}

    def save(self, path: str | os.PathLike) -> Path:
        """The result as JSON in `path`, written atomically (files.py)."""
        return atomic_write(path, json.dumps(_finite(self.to_dict()), indent=2,
                                             allow_nan=False) + "\n")

    def __repr__(self) -> str:
        parts = [f"median {self.median_ns / 1e3:.2f} µs", f"IQR {self.iqr_ns / 1e3:.2f} µs",
                 f"min {self.min_ns / 1e3:.2f} µs", f"{len(self.samples_ns)} iterations"]
        split = self.by_cache()
        if len(split) > 1:
            parts += [f"{m} {statistics.median(v) / 1e3:.2f} µs" for m, v in sorted(split.items())]
        return f"<BenchmarkResult {self.name}: {', '.join(parts)} (CUDA events)>"


def mark_payloads(result: BenchmarkResult, pid: int | None = None) -> list[str]:
    """The JSON texts written as NVTX marks for `result` (one, or several parts)."""
    body = {
        "nsyswrap": MARK_SCHEMA,
        "name": result.name,
        "domain": result.config.range_domain,
        "range": result.name,
        "pid": os.getpid() if pid is None else pid,
        "calls_per_iteration": result.config.calls_per_window,
        "event_ns": [round(s * result.config.calls_per_window) for s in result.samples_ns],
        "cache": result.cache,
        "clock_mhz": result.clock_mhz,
        "warmup_event_ns": [round(s * result.config.calls_per_window) for s in result.warmup_ns],
        "host_ns": [round(h * result.config.calls_per_window) for h in result.host_ns],
        "floor_range": floor_range_name(result.name) if result.floor_ns else None,
        "floor_event_ns": [round(f) for f in result.floor_ns],
        "config": asdict(result.config),
    }
    text = json.dumps(_finite(body), separators=(",", ":"), allow_nan=False)
    return mark_texts(text, MARK_PART_SCHEMA, f"{body['pid']}-{result.name}-{time.time_ns()}")


def _finite(value: Any) -> Any:
    """`value` for strict JSON: a float that is not finite (a timer that failed) is None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _import_torch():
    try:
        import torch
    except ImportError:
        raise NsysWrapError(
            "the timing harness needs PyTorch: pip install 'nsyswrap[torch]' "
            "(analysis alone does not)"
        ) from None
    if not torch.cuda.is_available():
        raise NsysWrapError("the timing harness times CUDA work and no CUDA GPU is visible "
                            "(torch.cuda.is_available() is False)")
    return torch


def benchmark(fn: Callable[[], Any] | None = None, *, name: str | None = None,
              warmup: int | str = 10, iters: int = 100, flush_l2: str = "all",
              backpressure: bool = True, cuda_graph: int = 0, calls: int = 1,
              sync_each: bool = True,
              disable_gc: bool = True, cpu_affinity: list[int] | None = None,
              seed: int | None = 0, lock_clocks: int | str | None = None,
              device: int | None = None, record: bool = True,
              save: str | os.PathLike | None = None):
    """Time `fn()` (no arguments: use a lambda or functools.partial) with CUDA events.

    warmup: iterations before timing, or "auto" (until 5 in a row agree within 10%). Warmup
        iterations run exactly like timed ones and are kept in the result (warmup_ns).
    flush_l2: "all" (every iteration starts with a cold L2), "none" (hot), or "interleave"
        (even iterations flushed, odd ones hot: both measured in one run).
    backpressure: before each iteration, a GPU sleep derived from the host's launch time so
        that launch latency falls outside the timed window.
    cuda_graph: capture this many calls of fn in a CUDA graph and time replays (per call).
    calls: time this many back-to-back calls per pair of events (per call): the events' own
        cost (about 2.5 µs on an H100) is then shared; only with flush_l2="none", since only
        the first call of a window would see a flushed L2.
    sync_each: synchronize after every iteration (each starts from an idle GPU).
    lock_clocks: lock the SM clock at this many MHz, or "max", restored afterwards (root).
    record: write the timings into the nsys report (an NVTX mark) when a profiler is attached.

    As a decorator, `@benchmark(iters=50)` turns `f(*args)` into a call that benchmarks
    `f(*args)` and returns the BenchmarkResult.
    """
    options = dict(warmup=warmup, iters=iters, flush_l2=flush_l2, backpressure=backpressure,
                   cuda_graph=cuda_graph, calls=calls, sync_each=sync_each,
                   disable_gc=disable_gc,
                   cpu_affinity=cpu_affinity, seed=seed, lock_clocks=lock_clocks, device=device,
                   record=record, save=save)
    if fn is None:
        def decorate(f: Callable[..., Any]) -> Callable[..., BenchmarkResult]:
            def run(*args, **kwargs) -> BenchmarkResult:
                return benchmark(lambda: f(*args, **kwargs), name=name or f.__qualname__,
                                 **options)
            run.__wrapped__ = f  # type: ignore[attr-defined]
            run.__name__ = getattr(f, "__name__", "benchmark")
            run.__doc__ = f.__doc__
            return run
        return decorate
    return _run(fn, name=name or getattr(fn, "__qualname__", "benchmark"), **options)


def _check(name: str, iters: int, warmup, flush_l2: str, cuda_graph: int, calls: int) -> None:
    if iters < 1:
        raise NsysWrapError(f"benchmark {name!r}: iters must be at least 1")
    if not (warmup == "auto" or (isinstance(warmup, int) and warmup >= 0)):
        raise NsysWrapError(f"benchmark {name!r}: warmup must be a count >= 0 or 'auto'")
    if flush_l2 not in FLUSH_MODES:
        raise NsysWrapError(f"benchmark {name!r}: flush_l2 must be one of {FLUSH_MODES}")
    if cuda_graph < 0:
        raise NsysWrapError(f"benchmark {name!r}: cuda_graph must be >= 0")
    if calls < 1:
        raise NsysWrapError(f"benchmark {name!r}: calls must be at least 1")
    if calls > 1 and flush_l2 != "none":
        raise NsysWrapError(f"benchmark {name!r}: calls={calls} times the calls after the first "
                            "with a hot L2; use flush_l2='none' (or calls=1 to flush each)")


@contextlib.contextmanager
def _affinity(cpus: list[int] | None) -> Iterator[None]:
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextlib.contextmanager
def _gc_disabled(enabled: bool) -> Iterator[None]:
    was = gc.isenabled()
    if enabled:
        gc.collect()
        gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _seed(seed: int | None, torch) -> None:
    if seed is None:
        return
    random.seed(seed)
    torch.manual_seed(seed)
    with contextlib.suppress(ImportError):
        import numpy as np

        np.random.seed(seed)


def _cache_mode(flush_l2: str, i: int) -> str:
    if flush_l2 == "all":
        return "flushed"
    if flush_l2 == "none":
        return "hot"
    return "flushed" if i % 2 == 0 else "hot"


class _Loop:
    """The loop body, identical for warmup and timed iterations, so that the warmup also
    warms the harness itself (events, the sleep kernel, the NVTX range, the L2 flush).

    Every iteration is one NVTX range with the benchmark's name; the timed ones are the last
    `iters` of them, which is how `compare` finds them.
    """

    def __init__(self, torch, call, name, flush_buffer, pressure, nvml, sync_each):
        self.torch, self.call = torch, call
        self.flush_buffer, self.pressure, self.nvml = flush_buffer, pressure, nvml
        self.sync_each = sync_each
        self.range = annotate(name, domain=HARNESS_DOMAIN)

    def events(self):
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()  # PyTorch creates CUDA events lazily: not inside the timed window
        end.record()
        return start, end

    def iteration(self, mode: str, sync: bool | None = None, sleep: bool = True):
        start, end = self.events()
        if mode == "flushed":
            self.flush_buffer.zero_()
        slept = self.pressure.sleep() if self.pressure is not None and sleep else None
        with self.range:
            t0 = time.perf_counter_ns()
            start.record()
            self.call()
            end.record()
            enqueue = time.perf_counter_ns() - t0
        if self.pressure is not None:
            self.pressure.observe(enqueue, slept)
        clock = self.nvml.read_mhz() if self.nvml is not None else None  # GPU still busy
        if self.sync_each if sync is None else sync:
            self.torch.cuda.synchronize()
        return start, end, clock, enqueue

    def warm_up(self, warmup, flush_l2: str, window: int = 5, tolerance: float = 0.1,
                max_iters: int = 200, max_seconds: float = 5.0) -> list[float]:
        """Warmup event times. "auto": until `window` iterations in a row agree within
        `tolerance`, at most `max_iters` iterations or `max_seconds`."""
        times: list[float] = []
        deadline = time.perf_counter() + max_seconds
        pending = []
        i = 0
        while (len(times) + len(pending) < warmup if warmup != "auto"
               else len(times) < max_iters and time.perf_counter() < deadline):
            # No back-pressure in the warmup: its enqueue times must be the host's own, not
            # waits on a sleeping GPU (a function that syncs would feed back into the sleep).
            start, end, _, _ = self.iteration(_cache_mode(flush_l2, i),
                                              sync=warmup == "auto" or None, sleep=False)
            i += 1
            if warmup != "auto":
                pending.append((start, end))
                continue
            times.append(start.elapsed_time(end) * 1e6)
            last = times[-window:]
            if len(last) == window and (max(last) - min(last)) <= tolerance * statistics.median(
                    last):
                break
        self.torch.cuda.synchronize()
        return times + [s.elapsed_time(e) * 1e6 for s, e in pending]


def _run(fn, *, name, warmup, iters, flush_l2, backpressure, cuda_graph, calls, sync_each,
         disable_gc, cpu_affinity, seed, lock_clocks, device, record, save) -> BenchmarkResult:
    _check(name, iters, warmup, flush_l2, cuda_graph, calls)
    torch = _import_torch()
    from .clocks import NvmlClock, locked_clocks

    index = torch.cuda.current_device() if device is None else int(device)
    props = torch.cuda.get_device_properties(index)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.cuda.device(index))
        if os.environ.get(CAPTURE_ENV):  # `nsyswrap run --harness-only`: nsys starts here
            stack.enter_context(annotate(CAPTURE_RANGE, domain=HARNESS_DOMAIN))
        locked = (stack.enter_context(locked_clocks(lock_clocks, index))
                  if lock_clocks is not None else None)
        stack.enter_context(_affinity(cpu_affinity))
        _seed(seed, torch)
        nvml = NvmlClock.open(_pci_bus_id(props), index)
        # Twice the L2: zeroing it evicts every line the benchmark could have left behind.
        flush_bytes = 2 * l2_bytes if flush_l2 != "none" else 0
        flush_buffer = (torch.empty(flush_bytes, dtype=torch.int8, device="cuda")
                        if flush_bytes else None)
        call, calls_per_iteration = _graph_or_eager(fn, cuda_graph, torch)
        if calls > 1:
            one = call

            def call():
                for _ in range(calls):
                    one()

            calls_per_iteration *= calls
        pressure = _Backpressure(torch) if backpressure else None
        loop = _Loop(torch, call, name, flush_buffer, pressure, nvml, sync_each)
        torch.cuda.synchronize()
        with _gc_disabled(disable_gc):
            warm = loop.warm_up(warmup, flush_l2)
            enqueue_warm = list(pressure.enqueue_ns) if pressure else []
            if pressure is not None:
                pressure.fix()
            modes = [_cache_mode(flush_l2, len(warm) + i) for i in range(iters)]
            timed = [loop.iteration(mode) for mode in modes]
            torch.cuda.synchronize()
            floor = _Floor(torch, name, pressure).measure()
        samples = [s.elapsed_time(e) * 1e6 / calls_per_iteration for s, e, _, _ in timed]
        config = BenchmarkConfig(
            name=name, iters=iters, warmup=warmup, warmup_iters=len(warm),
            flush_l2=flush_l2, flush_bytes=flush_bytes, backpressure=backpressure,
            sleep_ns=statistics.median(pressure.slept_ns) if pressure else 0.0,
            sleep_cycles_per_ns=pressure.cycles_per_ns if pressure else 0.0,
            enqueue_ns=statistics.median(enqueue_warm) if enqueue_warm else None,
            cuda_graph=cuda_graph, calls=calls, sync_each=sync_each,
            gc_disabled=disable_gc, cpu_affinity=cpu_affinity, seed=seed,
            locked_clock_mhz=locked, device=props.name, device_index=index, l2_bytes=l2_bytes,
            clock_source="nvml" if nvml is not None else None,
            max_clock_mhz=nvml.max_mhz if nvml is not None else None,
            torch_version=str(torch.__version__),
        )
        result = BenchmarkResult(name, samples, modes, config, [c for _, _, c, _ in timed],
                                 warmup_ns=[w / calls_per_iteration for w in warm],
                                 host_ns=[h / calls_per_iteration for _, _, _, h in timed],
                                 floor_ns=floor)
        if record:
            for text in mark_payloads(result):
                mark(text, domain=HARNESS_DOMAIN)
    if save is not None:
        result.save(save)
    return result


def _pci_bus_id(props) -> str | None:
    try:
        return f"{props.pci_domain_id:08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        return None


def _graph_or_eager(fn, cuda_graph: int, torch):
    if not cuda_graph:
        return fn, 1
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream before capture, as PyTorch asks
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(cuda_graph):
            fn()
    torch.cuda.synchronize()
    return graph.replay, cuda_graph


class _Backpressure:
    """A GPU sleep before each timed iteration that outlasts the host's time to enqueue it.

    sleep = 2 x (median host enqueue time) + 20 µs for the submission latency of the first
    launch, within [20 µs, 100 ms]. Enqueue times come from the warmup (run without sleep);
    with no warmup, from timed iterations whose host finished before the sleep did (when
    it did not, it may have waited on the GPU, and that wait is not launch time); the very
    first iteration then sleeps 1 ms. Cycles per ns are calibrated on torch.cuda._sleep.
    """

    FIRST_GUESS_NS = 1_000_000
    FLOOR_NS = 20_000
    CEILING_NS = 100_000_000

    def __init__(self, torch):
        self.torch = torch
        self.enqueue_ns: list[int] = []
        self.slept_ns: list[float] = []
        self.fixed_ns: float | None = None
        probe = 2_000_000
        for _ in range(2):  # the second, with the clock up after the first
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            torch.cuda._sleep(probe)
            end.record()
            end.synchronize()
            self.cycles_per_ns = probe / (start.elapsed_time(end) * 1e6)

    def observe(self, enqueue_ns: int, slept_ns: float | None) -> None:
        if self.fixed_ns is None and (slept_ns is None or enqueue_ns < slept_ns):
            self.enqueue_ns.append(enqueue_ns)

    def fix(self) -> None:
        """Freeze the sleep once the warmup measured the host: timed iterations then all
        sleep alike."""
        if self.enqueue_ns:
            self.fixed_ns = self._derive()

    def _derive(self) -> float:
        if not self.enqueue_ns:
            return self.FIRST_GUESS_NS
        ns = 2 * statistics.median(self.enqueue_ns) + self.FLOOR_NS
        return min(max(ns, self.FLOOR_NS), self.CEILING_NS)

    def sleep(self) -> float:
        ns = self.fixed_ns if self.fixed_ns is not None else self._derive()
        self.slept_ns.append(ns)
        self.torch.cuda._sleep(int(ns * self.cycles_per_ns))
        return ns


def floor_range_name(name: str) -> str:
    """The NVTX range of a benchmark's event-floor windows (see _Floor)."""
    return f"{name}{FLOOR_RANGE_SUFFIX}"


class _Floor:
    """What a pair of CUDA events reads around (almost) no work: windows holding one
    one-element kernel, each after a GPU sleep that outlasts the host's enqueue, so no launch
    latency can fall inside. Under nsys, `compare` subtracts that kernel's own duration and
    gets the events' own cost (about 2.4 µs on an H100: the GPU dispatching the start event,
    then the kernel), which no benchmark can go below; overhead is judged beyond it.

    Always with a sleep, whatever the benchmark's back-pressure setting: without one the
    floor would hold launch latency and hide the very overhead it is there to separate.
    """

    WARMUP = 3
    WINDOWS = 20
    SLEEP_NS = 200_000
    # Cycles per ns when back-pressure did not calibrate: 2 GHz overestimates every current
    # GPU's clock, so the sleep lasts at least SLEEP_NS.
    DEFAULT_CYCLES_PER_NS = 2.0

    def __init__(self, torch, name: str, pressure: _Backpressure | None):
        self.torch = torch
        self.range = annotate(floor_range_name(name), domain=HARNESS_DOMAIN)
        self.cycles = int(self.SLEEP_NS * (pressure.cycles_per_ns if pressure is not None
                                            else self.DEFAULT_CYCLES_PER_NS))
        self.tiny = torch.zeros(1, device="cuda")

    def measure(self) -> list[float]:
        torch = self.torch
        times = []
        for i in range(self.WARMUP + self.WINDOWS):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            end.record()
            torch.cuda._sleep(self.cycles)
            with self.range:
                start.record()
                self.tiny.zero_()
                end.record()
            end.synchronize()
            if i >= self.WARMUP:
                times.append(start.elapsed_time(end) * 1e6)
        return times
