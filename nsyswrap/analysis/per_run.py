"""Numbers per run of timed windows (a harness run's iterations, a timed place's windows),
for every run at once: the runs numbered as `groupby(["benchmark", "run"], sort=False,
observed=True)` meets them, and per run a column's median, count, sum, extreme or
quartiles by grouped passes over all rows, each as pandas or numpy gives it for one run's
rows alone. A report may hold a harness run in every training step (22 k at 1 M kernels,
222 k at 10 M): a step per run (a frame from a groupby, a pandas median per column) took
~4.5 ms each, minutes in all."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .grouped import group_order, grouped_median, middle_of

# Runs up to which a median or quartiles are taken run by run, by selection in each run's
# own values (np.partition): a grouped pandas median hashes the run codes anew each time,
# 2-4x the time for the few timed places of a program (half a million windows in one).
FEW_RUNS = 64


class PerRun:
    """The runs of `windows` (a frame with `benchmark` and `run` columns, one row per
    window) and grouped statistics over them. Run k's rows are rows(k), in the frame's
    order; statistics are arrays with one value per run, in run order."""

    def __init__(self, windows: pd.DataFrame):
        self.windows = windows
        if windows.empty:
            self.code = np.zeros(0, "int64")
            self.count = 0
        else:
            number = windows.groupby(["benchmark", "run"], sort=False,
                                     observed=True).ngroup().to_numpy()
            # A window of no run (a key that is missing) is numbered -1: in no group.
            self.code = np.where(pd.isna(number), -1, number).astype("int64")
            self.count = int(self.code.max()) + 1 if len(self.code) else 0
        within = self.code >= 0
        self._in_run = None if within.all() else within
        self.sizes = np.bincount(self.code[within], minlength=self.count)
        order, bounds = group_order(self.code[within])
        if self._in_run is not None:
            order = np.flatnonzero(within)[order]
        self._order, self._bounds = order, bounds
        # Every run has rows, so run k's are the k-th run of the sorted codes.
        self.first = order[bounds[:-1]] if self.count else np.zeros(0, "int64")

    def rows(self, run: int) -> np.ndarray:
        """Run `run`'s positions in the windows, in their order."""
        return self._order[self._bounds[run]:self._bounds[run + 1]]

    def frame(self, run: int, columns: list[str] | None = None) -> pd.DataFrame:
        """Run `run`'s windows, as the groupby would give them (for the few runs a check
        reads more of); only `columns` where given: a run may be most of half a million
        windows of 61 columns (200 MB taken for the two a check reads)."""
        rows = self.rows(run)
        if columns is None:
            return self.windows.iloc[rows]
        return self.windows[columns].iloc[rows]  # a column it lacks raises KeyError

    def first_of(self, column: str) -> np.ndarray:
        """The column's value at each run's first window: taken at those rows, then made an
        array (a text column of half a million windows as an array is as many new Python
        strings: 40 MB)."""
        return self.windows[column].take(self.first).to_numpy()

    def column(self, column: str) -> np.ndarray:
        return self.windows[column].to_numpy()

    def _kept(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(codes, values) of the rows in a run."""
        if self._in_run is None:
            return self.code, values
        return self.code[self._in_run], values[self._in_run]

    def _each_run(self, values: np.ndarray, where: np.ndarray | None = None
                  ) -> list[np.ndarray]:
        """Each run's values (at rows where `where`), NaN left out: copies of their own, in
        one gather of the rows in run order."""
        grouped = values[self._order]
        kept = None if where is None else where[self._order]
        if grouped.dtype.kind == "f":
            present = ~np.isnan(grouped)
            kept = present if kept is None else kept & present
        spans = zip(self._bounds[:-1].tolist(), self._bounds[1:].tolist(), strict=True)
        if kept is None:
            return [grouped[a:b] for a, b in spans]
        return [grouped[a:b][kept[a:b]] for a, b in spans]

    def median(self, values: np.ndarray, where: np.ndarray | None = None) -> np.ndarray:
        """Per run, `Series.median()` of its values (at rows where `where`, if given): NaN
        left out, NaN where none is left. Bit for bit pandas' (grouped_median)."""
        if self.count <= FEW_RUNS:
            return np.array([middle_of(x) for x in self._each_run(values, where)])
        code, values = self._kept(values)
        if where is not None:
            keep = self._kept(where)[1]
            code, values = code[keep], values[keep]
        if values.dtype.kind == "f":
            present = ~np.isnan(values)
            code, values = code[present], values[present]
        out = np.full(self.count, np.nan)
        if len(values):
            medians = grouped_median(code, values)
            out[medians.index.to_numpy()] = medians.to_numpy()
        return out

    def any_count(self, mask: np.ndarray) -> np.ndarray:
        """Per run, how many of its rows `mask` holds."""
        code, mask = self._kept(mask)
        return np.bincount(code[mask], minlength=self.count)

    def total(self, values: np.ndarray) -> np.ndarray:
        """Per run, `Series.sum()` of whole numbers (counts): NaN left out."""
        return self._reduced(values, "sum")

    def maximum(self, values: np.ndarray) -> np.ndarray:
        """Per run, `Series.max()`: NaN left out, NaN where all are."""
        return self._reduced(values, "max")

    def minimum(self, values: np.ndarray) -> np.ndarray:
        """Per run, `Series.min()`: NaN left out, NaN where all are."""
        return self._reduced(values, "min")

    def _reduced(self, values: np.ndarray, how: str) -> np.ndarray:
        """Per run, pandas' grouped `how` of its values, in run order."""
        if 0 < self.count <= FEW_RUNS and values.dtype.kind in ("iu" if how == "sum" else "iuf"):
            # Every run has rows, so only a run of NaN alone has no extreme (NaN). A sum of
            # floats is left to pandas (its compensated sum can differ in the last bit).
            reduce = getattr(np, how)
            return np.array([reduce(x) if len(x) else np.nan
                             for x in self._each_run(values)])
        code, values = self._kept(values)
        return pd.Series(values).groupby(code).agg(how).reindex(
            np.arange(self.count)).to_numpy()

    def iqr(self, values: np.ndarray) -> np.ndarray:
        """Per run, np.quantile(x, 0.75) - np.quantile(x, 0.25) of its values x without
        NaN, 0 where fewer than two: runs of one length at a time, each a 2-D quantile
        over their sorted values (the same arithmetic row by row as one run's)."""
        if self.count <= FEW_RUNS:
            return np.array([np.quantile(x, 0.75) - np.quantile(x, 0.25) if len(x) > 1 else 0.0
                             for x in self._each_run(values)], dtype="float64")
        code, values = self._kept(values)
        present = ~np.isnan(values)
        code, values = code[present], values[present]
        order = np.lexsort((values, code))
        code, values = code[order], values[order]
        counts = np.bincount(code, minlength=self.count)
        starts = np.cumsum(counts) - counts
        out = np.zeros(self.count)
        for n in np.unique(counts[counts > 1]):
            runs = np.flatnonzero(counts == n)
            block = values[starts[runs][:, None] + np.arange(n)]
            out[runs] = (np.quantile(block, 0.75, axis=1) - np.quantile(block, 0.25, axis=1))
        return out
