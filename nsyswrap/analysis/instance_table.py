"""The range instances' columns, each kept in the fewest bytes that give its values back
exactly (docs/architecture.md, "The instance table").

An instance's GPU numbers are float64 (NaN marks what the report lost) and its counts and
host waits int64: ~200 bytes per instance, 1.6 GB resident at 10 M ranges, held to the
analysis's end. Almost all of them are whole numbers of nanoseconds or small
counts, often the same value throughout (no gaps, one stream), and the GPU's first and
last times sit close to the range's own start. So each column is kept as the narrowest
integers that hold it (halves too: the median of an even count), a constant as one value,
times as offsets from the range's start where that is narrower; anything else as it is.
Reading a column gives the very values that were stored, bit for bit, as the dtype they
came in.

Readers ask for the columns they need (`table["cpu_ns"]`, `table[["family_id",
"start_ns"]]`): a column is decoded on each read, so a reader that loops reads it once.
`frame()` gives every column as one DataFrame, for the formats that draw every instance
on reports small enough to analyse whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..read.chunks import steps

__all__ = ["InstanceTable", "pack", "unpack"]

# Whole floats at or above this lose their last digits as integers' doubles; kept as floats.
_EXACT = 2.0**53
_WIDTHS = (np.int8, np.int16, np.int32, np.int64)


@dataclass
class _Plain:
    """A column as it came: texts, flags, fractions."""
    values: np.ndarray | pd.Categorical

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)


@dataclass
class _Packed:
    """Integers `codes` plus `constant` (None: every row is `constant`) that decode to
    `dtype`: plus the column `base` where given (times as offsets from the range's start),
    divided by `scale` (2 for halves), NaN where the code is `missing`."""
    codes: np.ndarray | None
    constant: int
    dtype: np.dtype
    scale: int
    base: str | None
    missing: int | None

    @property
    def nbytes(self) -> int:
        return 0 if self.codes is None else int(self.codes.nbytes)


def _width(span: int, spare: bool) -> type:
    """The narrowest integer type with `span` + 1 codes, and one more for NaN when
    `spare`."""
    for t in _WIDTHS:
        info = np.iinfo(t)
        if span + (1 if spare else 0) <= int(info.max) - int(info.min):
            return t
    return np.int64


def pack(values: np.ndarray, base: np.ndarray | None, base_name: str | None
          ) -> _Plain | _Packed:
    """`values` (a float or integer array) as its narrowest exact form: one pass to learn
    what the values are (whole, halves, their range, with and without `base`), one to write
    the codes, each a step of rows at a time (a column-sized temporary is 76 MB at 10 M
    ranges, and columns are packed while the analysis holds its most)."""
    dtype = values.dtype
    if not _packable(values):
        return _Plain(values)
    survey = _survey(values, base)
    if survey is None:
        return _Plain(values)
    if survey.lo is None:
        return _Packed(None, 0, dtype, 1, None, 0)  # every row unknown
    scale = 1 if survey.whole else 2
    lo, hi = int(survey.lo * scale), int(survey.hi * scale)
    # Offsets from the range's start, where narrower (the GPU's first and last times fall
    # within milliseconds of it; as absolute nanoseconds they need 64 bits).
    relative = base is not None and scale == 1 and survey.off_hi - survey.off_lo < hi - lo
    if relative:
        lo, hi = survey.off_lo, survey.off_hi
    else:
        base_name = None
    missing = survey.missing
    if lo == hi and not missing:
        return _Packed(None, lo, dtype, scale, base_name, None)
    # Codes are the values less `reference`, which puts the lowest at the type's least
    # code (or the one above it, the least kept for NaN): pids 1000-1010 take one byte.
    width = _width(hi - lo, missing)
    info = np.iinfo(width)
    sentinel = int(info.min) if missing else None
    # (64-bit codes are the values themselves: the shift could leave 64 bits.)
    reference = 0 if width is np.int64 else lo - int(info.min) - (1 if missing else 0)
    codes = _codes(values, base if relative else None, width, scale, reference, sentinel)
    return _Packed(codes, reference, dtype, scale, base_name, sentinel)


def _packable(values: np.ndarray) -> bool:
    """Whether `values` may pack at all: integers that fit int64, or float64; not empty."""
    dtype = values.dtype
    if len(values) == 0 or dtype.kind not in "iuf" or (dtype.kind == "f"
                                                        and dtype.itemsize != 8):
        return False
    return not (dtype.kind == "u" and int(values.max()) >= 2**63)


@dataclass
class _Survey:
    """What pack's first pass learnt of a column: whether some rows are NaN (`missing`),
    whether every known value is whole (else a half), their least and greatest, and those
    of their offsets from the base column (None until a row is known)."""
    missing: bool = False
    whole: bool = True
    lo: Any = None
    hi: Any = None
    off_lo: int | None = None
    off_hi: int | None = None

    def exact(self, v: np.ndarray) -> bool:
        """Whether known floats `v` keep exactly as integers or their halves (`whole` is
        updated); False beyond exact integers, for -0.0, and for other fractions (shares,
        rates)."""
        if not (np.abs(v).max() < _EXACT / 4) or np.signbit(v[v == 0]).any():
            return False
        if self.whole and not np.array_equal(v, np.trunc(v)):
            self.whole = False
        if not self.whole:
            doubled = v * 2
            if not np.array_equal(doubled, np.trunc(doubled)):
                return False
        return True

    def add(self, v: np.ndarray, b: np.ndarray | None) -> None:
        """Known values `v` (not empty), and `b`, the base column's values of their rows
        where there is one."""
        v_lo, v_hi = v.min(), v.max()
        self.lo = v_lo if self.lo is None else min(self.lo, v_lo)
        self.hi = v_hi if self.hi is None else max(self.hi, v_hi)
        if b is not None:
            offsets = v.astype("int64") - b
            o_lo, o_hi = int(offsets.min()), int(offsets.max())
            self.off_lo = o_lo if self.off_lo is None else min(self.off_lo, o_lo)
            self.off_hi = o_hi if self.off_hi is None else max(self.off_hi, o_hi)


def _survey(values: np.ndarray, base: np.ndarray | None) -> _Survey | None:
    """pack's first pass, a step of rows at a time; None where the column must stay as it
    is."""
    survey = _Survey()
    floats = values.dtype.kind == "f"
    for part in steps(len(values)):
        v = values[part]
        known = None  # the rows that are not NaN, where some are
        if floats:
            nan = np.isnan(v)
            if nan.any():
                survey.missing = True
                known = ~nan
                v = v[known]
            if len(v) and not survey.exact(v):
                return None
        if len(v) == 0:
            continue
        b = None
        if base is not None:
            b = base[part] if known is None else base[part][known]
        survey.add(v, b)
    return survey


def _codes(values: np.ndarray, base: np.ndarray | None, width: type, scale: int,
           reference: int, sentinel: int | None) -> np.ndarray:
    """pack's second pass: each value (times `scale`, less `base` where given) less
    `reference` as a `width` integer, `sentinel` where it is NaN (None: none are)."""
    n = len(values)
    floats = values.dtype.kind == "f"
    codes = np.empty(n, dtype=width)
    for part in steps(n):
        v = values[part]
        nan = None
        if floats:
            nan = np.isnan(v) if sentinel is not None else None
            ints = np.nan_to_num(v * scale if scale != 1 else v, nan=0.0).astype("int64")
        else:
            ints = v.astype("int64")
        if base is not None:
            ints -= base[part]
        ints -= reference
        codes[part] = ints
        if sentinel is not None:
            codes[part][nan] = sentinel
    return codes


def unpack(stored: _Plain | _Packed, n: int, codes: np.ndarray | None = None,
           base: np.ndarray | None = None) -> np.ndarray:
    """The `n` values `stored` holds (a fresh array): from `codes` (its codes, or those of
    the rows wanted) plus `base` (the base column's values at those rows) where it has one."""
    if isinstance(stored, _Plain):
        return stored.values.copy()
    if codes is None:
        codes = stored.codes
    out = np.empty(n, dtype=stored.dtype)
    for part in steps(n):
        if codes is None:
            ints = np.full(len(range(n)[part]), stored.constant, dtype="int64")
        else:
            ints = codes[part].astype("int64")
            ints += stored.constant
        if base is not None:
            ints += base[part]
        # Exact: integers below 2**53 as doubles, and their halves.
        out[part] = ints / stored.scale if stored.scale != 1 else ints
        if stored.missing is not None:
            if codes is None:
                out[part] = np.nan
            else:
                out[part][codes[part] == stored.missing] = np.nan
    return out


class InstanceTable:
    """One row per NVTX range instance (columns.INSTANCE_COLUMNS and the families'
    columns), in the report's range order, each column stored as pack keeps it. Reads
    give pandas objects indexed 0..n-1, as the instance frame was."""

    def __init__(self, rows: int):
        self._rows = rows
        self._columns: dict[str, _Plain | _Packed] = {}

    @classmethod
    def of(cls, frame: pd.DataFrame) -> InstanceTable:
        """A table of `frame`'s columns, rows in its order (its index is not kept)."""
        table = cls(len(frame))
        for c in frame.columns:
            table[c] = frame[c]
        return table

    # -- shape -----------------------------------------------------------------------
    def __len__(self) -> int:
        return self._rows

    @property
    def empty(self) -> bool:
        return self._rows == 0 or not self._columns

    @property
    def columns(self) -> pd.Index:
        return pd.Index(list(self._columns))

    @property
    def index(self) -> pd.RangeIndex:
        return pd.RangeIndex(self._rows)

    def __contains__(self, name: object) -> bool:
        return name in self._columns

    def nbytes(self) -> int:
        """The bytes the columns hold (texts' codes, not their categories)."""
        return sum(c.nbytes for c in self._columns.values())

    # -- writing ---------------------------------------------------------------------
    def set(self, name: str, values, *, relative_to: str | None = None) -> None:
        """Column `name` from `values` (an array, Series, Categorical or one scalar for
        every row), packed: as offsets from column `relative_to` (integers) where that
        is narrower. A column kept as it came (_Plain) is the caller's array itself: the
        caller must not write it afterwards."""
        if isinstance(values, pd.Series):
            values = values.array if isinstance(values.dtype, pd.api.extensions.ExtensionDtype) \
                else values.to_numpy()
        if isinstance(values, pd.api.extensions.ExtensionArray):
            self._columns[name] = _Plain(values)
            return
        if np.isscalar(values) or values is None:
            values = np.full(self._rows, values)
        values = np.asarray(values)
        if len(values) != self._rows:
            raise ValueError(f"{name}: {len(values)} values for {self._rows} instances")
        base = self._read_only(relative_to) if relative_to is not None else None
        self._columns.pop(name, None)  # its old codes freed before the new ones exist
        self._columns[name] = pack(values, base, relative_to)

    __setitem__ = set

    def set_rows(self, columns: Iterable[str], rows: np.ndarray, value: float) -> None:
        """Write `value` at positions `rows` of `columns` (the lost tail's NaN)."""
        if len(rows) == 0:
            return
        for name in columns:
            values = self.values(name)
            values[rows] = value
            self.set(name, values, relative_to=self._base(name))

    def update(self, other: InstanceTable) -> None:
        """Take `other`'s columns (the same rows) as they are stored."""
        if len(other) != self._rows:
            raise ValueError(f"{len(other)} instances for {self._rows}")
        self._columns.update(other._columns)

    def reordered(self, columns: list[str]) -> InstanceTable:
        """This table with exactly `columns`, in that order (the same stored columns)."""
        table = InstanceTable(self._rows)
        table._columns = {c: self._columns[c] for c in columns}
        return table

    def _read_only(self, name: str) -> np.ndarray:
        """Column `name` for reading only: its own codes where they are its values (the
        range's start, 64-bit: the base of the GPU times), else decoded."""
        stored = self._columns[name]
        if (isinstance(stored, _Packed) and stored.codes is not None
                and stored.codes.dtype == stored.dtype and stored.constant == 0
                and stored.base is None and stored.scale == 1 and stored.missing is None):
            return stored.codes
        return self.values(name)

    def _base(self, name: str) -> str | None:
        stored = self._columns[name]
        return stored.base if isinstance(stored, _Packed) else None

    # -- reading ---------------------------------------------------------------------
    def values(self, name: str, rows: np.ndarray | slice | None = None) -> np.ndarray:
        """Column `name` as a numpy array (a fresh one: the caller may write it), at
        positions `rows` (an integer array or a slice) when given. Texts come as their
        Categorical, flags and fractions as they were given."""
        stored = self._columns[name]
        if isinstance(stored, _Plain):
            v = stored.values
            if rows is None:
                return v.copy()
            return v[rows]
        n = self._rows if rows is None else len(range(self._rows)[rows]) \
            if isinstance(rows, slice) else len(rows)
        codes = stored.codes
        if codes is not None and rows is not None:
            codes = codes[rows]  # narrow integers: a gather of a few bytes per row
        base = None if stored.base is None else self.values(stored.base, rows)
        return unpack(stored, n, codes, base)

    def series(self, name: str, rows: np.ndarray | None = None) -> pd.Series:
        """values(name, rows) as a Series indexed 0..len-1 (the findings' statistics)."""
        return pd.Series(self.values(name, rows), copy=False)

    def __getitem__(self, key):
        if isinstance(key, str):
            return pd.Series(self.values(key), index=self.index, name=key, copy=False)
        if isinstance(key, (pd.Series, np.ndarray)) and np.asarray(key).dtype == bool:
            return self.rows(np.flatnonzero(np.asarray(key)))
        return self.frame(list(key))

    def frame(self, columns: list[str] | None = None) -> pd.DataFrame:
        """`columns` (every column when None) as one DataFrame indexed 0..n-1."""
        return self._frame(None, self.index, columns)

    def rows(self, positions: np.ndarray, columns: list[str] | None = None) -> pd.DataFrame:
        """The rows at `positions` (0-based) of `columns` (all when None), indexed by
        their positions."""
        positions = np.asarray(positions, dtype="int64")
        return self._frame(positions, pd.Index(positions), columns)

    def _frame(self, rows: np.ndarray | slice | None, index: pd.Index,
               columns: list[str] | None) -> pd.DataFrame:
        names = list(self._columns) if columns is None else list(columns)
        return pd.DataFrame({c: self.values(c, rows) for c in names}, index=index,
                            copy=False)

    def head(self, n: int = 5) -> pd.DataFrame:
        """The first `n` rows as a DataFrame."""
        return self.iloc[:n]

    def _title(self) -> str:
        return (f"InstanceTable: {self._rows:,} range instances, {len(self._columns)} "
                f"columns in {self.nbytes() / 2**20:,.1f} MiB")

    def __repr__(self) -> str:
        return f"{self._title()} (.frame() for a DataFrame)\n{self.head()!r}"

    def _repr_html_(self) -> str:
        return (f"<p>{self._title()} (<code>.frame()</code> for a DataFrame)</p>"
                f"{self.head()._repr_html_()}")

    @property
    def iloc(self) -> _Slices:
        """`table.iloc[lo:hi]`: those rows of every column as a DataFrame (the writers'
        chunks of rows)."""
        return _Slices(self)


class _Slices:
    def __init__(self, table: InstanceTable):
        self._table = table

    def __getitem__(self, rows: slice) -> pd.DataFrame:
        if not isinstance(rows, slice):
            raise TypeError("InstanceTable.iloc takes a slice of rows")
        return self._table._frame(rows, self._table.index[rows], None)
