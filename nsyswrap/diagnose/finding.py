"""The Finding record and the thresholds every check reads."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from ..common.errors import BadInputError

WARNING = "warning"
INFO = "info"


@dataclass(frozen=True)
class Finding:
    """One thing that distorts a timing, with the numbers that show it.

    code: stable identifier (CI scripts match on it); range: "domain:name" of the range it
    concerns, or None for the whole report; evidence: the numbers, keys with units.
    """

    code: str
    severity: str
    range: str | None
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    suggestion: str = ""
    # Every range or benchmark the finding concerns: [range] for one; a finding merged from
    # several (diagnose.merge_alike) has range None, these, and evidence["by_range"].
    ranges: list[str] = field(default_factory=list)

    def __post_init__(self):
        if self.range and not self.ranges:
            object.__setattr__(self, "ranges", [self.range])

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# What values each kind of threshold admits: (least, greatest, words for the error). Whole
# numbers where `least` is an int. Every value must also be finite.
SHARE = (0.0, 1.0, "a share between 0 and 1")
FACTOR = (1.0, float("inf"), "a factor of at least 1")
NANOSECONDS = (0.0, float("inf"), "a duration in ns, 0 or more")
COUNT = (2, float("inf"), "a whole number of instances, at least 2")
RATIO = (0.0, float("inf"), "a ratio, 0 or more")
STEPS = (0, float("inf"), "a whole number of steps, 0 or more")
SAMPLES = (2, float("inf"), "a whole number of samples, at least 2")
# The bootstrap holds resamples x samples values at once: a bound keeps a typo's memory in
# reach. Below 100 resamples the interval's ends are a handful of values.
RESAMPLES = (100, 100_000, "a whole number of resamples between 100 and 100000")
# A normal quantile of 1 is infinite (multi/diff.py's Welch interval).
CONFIDENCE = (0.5, 0.999, "a confidence level between 0.5 and 0.999")


def threshold(default, help_: str, kind: tuple):
    """A threshold field: its default, its help line and its kind (what values it admits)."""
    return field(default=default, metadata={"help": help_, "kind": kind})


class ThresholdSet:
    """What every set of thresholds (a frozen dataclass of `threshold` fields) shares: its
    values changed from NAME=VALUE text, as a dict, and its fields' help."""

    def with_overrides(self, overrides: dict[str, str]) -> ThresholdSet:
        fields = {f.name: f for f in dataclasses.fields(self)}
        values = {}
        for name, raw in overrides.items():
            if name not in fields:
                raise BadInputError(
                    f"unknown threshold {name!r}: choose from {', '.join(sorted(fields))}"
                )
            least, greatest, words = fields[name].metadata["kind"]
            try:
                value = float(raw)
            except ValueError:
                raise BadInputError(f"threshold {name} needs a number, not {raw!r}") from None
            # nan and inf: refused here, whatever the kind's bounds (no JSON holds them).
            if not math.isfinite(value):
                raise BadInputError(f"threshold {name} needs a finite number, not {raw!r}")
            if not least <= value <= greatest or (isinstance(least, int) and value % 1):
                raise BadInputError(f"threshold {name} needs {words}, not {raw!r}")
            values[name] = int(value) if isinstance(least, int) else value
        return dataclasses.replace(self, **values)

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)

    @classmethod
    def describe(cls) -> list[tuple[str, Any, str]]:
        return [(f.name, f.default, f.metadata["help"]) for f in dataclasses.fields(cls)]


@dataclass(frozen=True)
class Thresholds(ThresholdSet):
    """When a check speaks up. Change any with `--threshold NAME=VALUE`."""

    idle_share: float = threshold(0.5, "GPU_IDLE_IN_RANGE: median share of the GPU span left idle",
                                  SHARE)
    idle_min_span_ns: float = threshold(10_000, "GPU_IDLE_IN_RANGE: ignore ranges whose GPU span "
                                                "is shorter (ns)", NANOSECONDS)
    stall_share: float = threshold(0.5, "GPU_IDLE_IN_RANGE: one gap holding this share of the idle "
                                        "time is a host stall, else launch gaps", SHARE)
    cold_factor: float = threshold(2.0, "COLD_START: a leading instance this many times the median "
                                        "is cold", FACTOR)
    cold_min_excess_ns: float = threshold(5_000, "COLD_START: and at least this much slower (ns)",
                                          NANOSECONDS)
    cold_min_instances: int = threshold(3, "COLD_START: only ranges repeated at least this often",
                                        COUNT)
    sync_share: float = threshold(0.1, "SYNC_IN_RANGE: a warning (not info) when blocked for this "
                                       "share of the range", SHARE)
    transfer_share: float = threshold(0.1, "TRANSFER_IN_RANGE: a warning (not info) when copies "
                                           "take this share of the range, or use pageable memory",
                                      SHARE)
    fp32_gemm_share: float = threshold(0.1, "FP32_GEMM: share of GPU time in fp32 SIMT GEMMs",
                                       SHARE)
    overhead_share: float = threshold(0.15, "LAUNCH_OVERHEAD / HOST_WORK_IN_WINDOW: event time "
                                            "above the GPU busy time, as a share of the event time",
                                      SHARE)
    overhead_min_ns: float = threshold(2_000, "LAUNCH_OVERHEAD / HOST_WORK_IN_WINDOW: and at least "
                                              "this much (ns)", NANOSECONDS)
    host_work_min_ns: float = threshold(100_000, "HOST_WORK_IN_WINDOW: a single host stall this "
                                                 "long (ns) is host work; shorter ones read as the "
                                                 "framework's launch overhead", NANOSECONDS)
    dispatch_gap_ns: float = threshold(1_000, "LAUNCH_OVERHEAD: gaps between kernels shorter than "
                                              "this on average are the GPU's own dispatch (as in a "
                                              "CUDA graph), not host launch overhead (ns)",
                                       NANOSECONDS)
    cache_min_share: float = threshold(0.05, "CACHE_EFFECT: flushed vs hot kernel time difference",
                                       SHARE)
    host_bound_factor: float = threshold(2.0, "HOST_BOUND: host time to issue an iteration (or a "
                                              "range's host time) this many times its GPU time",
                                         FACTOR)
    host_bound_min_ns: float = threshold(250_000, "HOST_BOUND: and at least this much more (ns); "
                                                  "dispatching a few PyTorch ops under nsys takes "
                                                  "~100 µs of host time on its own", NANOSECONDS)
    uncovered_tolerance: float = threshold(0.05, "UNCOVERED_STREAM: events shorter than the GPU "
                                                 "span by this share", SHARE)
    clock_min_share: float = threshold(0.9, "CLOCK_VARIATION: median clock below this share of max",
                                       SHARE)
    clock_spread: float = threshold(0.1, "CLOCK_VARIATION: (p90 - p10) / median of the clock",
                                    RATIO)


def range_label(domain: str, name: str) -> str:
    """How a range is named in findings and tables: 'domain:name', or 'name' for the
    default domain (nsys writes ':name')."""
    return f"{domain}:{name}" if domain else name
