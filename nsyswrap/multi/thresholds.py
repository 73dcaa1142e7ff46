"""When the cross-rank checks speak up, and what `nsyswrap diff` calls a change. Both
change with `--threshold NAME=VALUE` like the single-report thresholds."""

from __future__ import annotations

from dataclasses import dataclass

from ..diagnose.finding import (
    CONFIDENCE,
    NANOSECONDS,
    RATIO,
    RESAMPLES,
    SAMPLES,
    SHARE,
    STEPS,
    ThresholdSet,
    threshold,
)


@dataclass(frozen=True)
class RankThresholds(ThresholdSet):
    straggler_share: float = threshold(0.1, "STRAGGLER: the slow rank's extra time in a phase, as "
                                            "a share of the step's median time", SHARE)
    straggler_min_ns: float = threshold(100_000, "STRAGGLER: and at least this much per step (ns)",
                                         NANOSECONDS)
    straggler_spread: float = threshold(1.0, "STRAGGLER: and this many times the spread (IQR) of "
                                             "its per-step differences: slower beyond the run's "
                                             "own step-to-step jitter", RATIO)
    straggler_consistency: float = threshold(0.75, "STRAGGLER: slower in at least this share of "
                                                   "the steps", SHARE)
    comm_wait_share: float = threshold(0.1, "COMM_WAIT: time inside collectives waiting for the "
                                            "last rank, as a share of the step's GPU span", SHARE)
    exposed_comm_share: float = threshold(0.2, "EXPOSED_COMM: communication overlapped by no "
                                               "compute (waits left out), as a share of the "
                                               "step's GPU span",
                                         SHARE)
    skip_first_steps: int = threshold(1, "Steps left out at the start (start-up: communicators, "
                                         "handles, DDP's bucket rebuild), when 4 or more remain",
                                      STEPS)


@dataclass(frozen=True)
class DiffThresholds(ThresholdSet):
    noise_floor: float = threshold(0.02, "A change smaller than this share is no significant "
                                         "change, whatever the samples say", RATIO)
    confidence: float = threshold(0.95, "Confidence level of the bootstrap interval of the change",
                                  CONFIDENCE)
    resamples: int = threshold(2000, "Bootstrap resamples per row", RESAMPLES)
    min_samples: int = threshold(3, "Rows with fewer samples on a side get no verdict",
                                   SAMPLES)
    count_tolerance: float = threshold(0.1, "A kernel whose count changes by more than this share "
                                            "beyond the range families' counts ran different work "
                                            "under one name: inconclusive (a range family's GPU "
                                            "operations per instance, likewise: noted)", RATIO)
    clock_tolerance: float = threshold(0.05, "GPU clocks (median) differing by more than this "
                                             "share make the runs not comparable", RATIO)
    matched_share: float = threshold(0.5, "Runs where less than this share of either run's kernel "
                                          "launches have a name the other run has are different "
                                          "workloads", SHARE)
