"""Text columns of ranges and instances that may be categorical: the loader makes a range
name column categorical where names repeat (a code per range instead of its text), and a
categorical takes only values among its categories. Each helper here gives what the same
operation gives on a text column, as a text column for text and as a categorical, with its
categories sorted as the texts sort, for a categorical."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd


def is_categorical(values: pd.Series) -> bool:
    return isinstance(values.dtype, pd.CategoricalDtype)


def text_copy(values: pd.Series) -> pd.Series:
    """A column of the same texts to rename rows of (with_texts) without touching `values`.
    Text columns are immutable arrays under pandas' copy-on-write, so astype shares the
    buffers until a row is renamed (128 MB at 10 M ranges); a categorical's codes are
    copied (a byte or two a row)."""
    return values.copy() if is_categorical(values) else values.astype(str)


def text_where(values: pd.Series, keep: np.ndarray, other: str) -> pd.Series:
    """`values.where(keep, other)`: `other` where not `keep`."""
    if is_categorical(values):
        values = _with_categories(values, [other])
    return values.where(keep, other)


def with_texts(values: pd.Series, renames: Iterable[tuple[np.ndarray, object]]) -> pd.Series:
    """`values` with each (rows, texts) of `renames` written at those positions (texts: one
    text, or one per row), in turn. A categorical gains the new texts as categories once,
    and loses those no row holds any more (renamed rows' old names)."""
    renames = list(renames)
    if not renames:
        return values
    if is_categorical(values):
        new = set()
        for _, texts in renames:
            new.update([texts] if isinstance(texts, str) else pd.unique(np.asarray(texts)))
        values = _with_categories(values, new)
    for rows, texts in renames:
        values.iloc[rows] = texts
    if is_categorical(values):
        values = values.cat.remove_unused_categories()
    return values


def _with_categories(values: pd.Series, texts: Iterable[str]) -> pd.Series:
    """The categorical with `texts` among its categories, all kept in sorted order (so that
    sorting and grouping by it stay as for text)."""
    categories = values.cat.categories
    missing = [t for t in dict.fromkeys(texts) if t not in categories]
    if not missing:
        return values
    return values.cat.set_categories(sorted([*categories.tolist(), *missing]))


def holding(texts, literals: Iterable[str] = (), prefixes: Iterable[str] = ()) -> np.ndarray:
    """True for each text (an array or Index of distinct texts) that holds one of `literals`
    or starts with one of `prefixes`, found by Arrow's compute functions in C: the
    prefilter of a regular expression that can match only such texts, so that Python runs
    it only on them (a million distinct range names, each searched in Python, took
    seconds). Missing values hold nothing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    array = pa.array(pd.Series(texts, copy=False).astype(str))
    found = np.zeros(len(array), dtype=bool)
    for literal in literals:
        found |= pc.match_substring(array, literal).to_numpy(zero_copy_only=False)
    for prefix in prefixes:
        found |= pc.starts_with(array, prefix).to_numpy(zero_copy_only=False)
    return found
