"""The confidence interval of a change between two sets of samples: a percentile bootstrap
of the ratio of medians (new / base - 1). Medians, because GPU timings have long right
tails (a preempted kernel, a clock dip) that move a mean; bootstrap, because nothing says
those samples are normal. Seeded, so the same two reports always give the same interval."""

from __future__ import annotations

import numpy as np

# Beyond this many samples a side keeps this many of its order statistics, evenly spaced
# (cap_samples): the interval gets a little wider, never narrower, and a million-kernel
# report stays fast.
MAX_SAMPLES = 2000
METHOD = "bootstrap (percentile, ratio of medians)"


def median_change_ci(base: np.ndarray, new: np.ndarray, *, confidence: float = 0.95,
                     resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """(change, low, high) of median(new) / median(base) - 1."""
    rng = np.random.default_rng(seed)
    base = cap_samples(np.asarray(base, dtype="float64"))
    new = cap_samples(np.asarray(new, dtype="float64"))
    change = float(np.median(new) / np.median(base) - 1)
    b = np.median(base[rng.integers(0, len(base), (resamples, len(base)))], axis=1)
    n = np.median(new[rng.integers(0, len(new), (resamples, len(new)))], axis=1)
    ratio = n / np.where(b > 0, b, np.nan) - 1
    alpha = (1 - confidence) / 2
    low, high = np.nanquantile(ratio, [alpha, 1 - alpha])
    return change, float(low), float(high)


def cap_samples(x: np.ndarray) -> np.ndarray:
    """`x`, or beyond MAX_SAMPLES that many of its order statistics, evenly spaced: the same
    distribution, and the same values whether a report's samples are capped here or an
    analysis.json written from it kept them (samples.sample_rows)."""
    if len(x) <= MAX_SAMPLES:
        return x
    return np.sort(x)[np.linspace(0, len(x) - 1, MAX_SAMPLES).round().astype("int64")]
