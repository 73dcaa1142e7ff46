"""A loaded report's GPU operations as one frame (`gpu_ops`: kernels first, in the
report's order, then the transfers): what the loaded source hands the engine as chunks
(engine/sources.LoadedOperations) and what the formats that draw every operation read
(Attribution.gpu_ops)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.chunks import steps
from ..read.report import Report
from .grouped import coded_by_steps

OP_KINDS = ["kernel", "memcpy", "memset", "graph"]



_TIME_COLUMNS = ("start_ns", "end_ns", "thread", "launch_start_ns")



# Small ids, and the launching calls' durations (the trace draws them): in the narrowest
# integer type that holds them (_narrowest_int).
_ID_COLUMNS = ("device_id", "stream_id", "launch_ns")



_INT_COLUMNS = _TIME_COLUMNS + _ID_COLUMNS



# What gpu_ops reads of the report's kernels.
GPU_OPS_KERNEL_INPUT = [*_INT_COLUMNS, "short_name"]



def gpu_ops(report: Report, consume: bool = False) -> pd.DataFrame:
    """Kernels and transfers in one frame (RangeIndex: kernels first, in the report's order):
    kind, start_ns, end_ns, thread, launch_start_ns, device_id, stream_id, launch_ns, name,
    copy_kind, bytes, src_kind, dst_kind. Text columns and the launching thread are
    categorical: a million kernels share a few hundred names and a few dozen threads.
    `consume`: drop each kernel column from the report once it (and transfer column) is
    stacked, so that ten million kernels are not held twice."""
    k, t = report.kernels, report.transfers
    n = len(k)
    data = {}
    for c in _INT_COLUMNS:
        parts = [k[c].to_numpy(), t[c].to_numpy()]
        if c == "thread":
            # The launching thread: a few dozen distinct 64-bit ids, so a categorical (a
            # byte or two per operation, not eight: 77 MB fewer at 10 M kernels, held from
            # here to the end). `.to_numpy()` gives the ids back as numbers.
            data[c] = _int_categorical(parts)
            del parts
            if consume:
                del k[c], t[c]
            continue
        dtype = "int64" if c in _TIME_COLUMNS else _narrowest_int(parts)
        data[c] = np.concatenate(parts, dtype=dtype)
        del parts
        if consume:
            del k[c], t[c]
    # Kernels move no bytes: their part of the column is left unwritten, so its pages are
    # never made resident (np.zeros; 80 MB at 10 M kernels).
    data["bytes"] = np.zeros(n + len(t), "int64")
    data["bytes"][n:] = t["bytes"].to_numpy(dtype="int64")
    # Categoricals built from codes: factorizing a million repeated strings would cost more
    # than everything else here.
    data["kind"] = _stack_categoricals([("kernel", n)], t["op"], OP_KINDS)
    short = text_categorical(k["short_name"])
    ops = text_categorical(t["op"])
    names = list(short.categories) + [c for c in ops.categories if c not in set(short.categories)]
    data["name"] = pd.Categorical.from_codes(
        np.concatenate([short.codes, pd.Index(names).get_indexer(ops.categories)[ops.codes]
                        if len(ops) else np.array([], "int64")]).astype("int32"),
        categories=names)
    for c in ("copy_kind", "src_kind", "dst_kind"):
        data[c] = _stack_categoricals([("", n)], t[c])
    # copy=False: the columns are fresh arrays; pandas would otherwise copy them into one
    # block, holding every operation twice for a moment.
    return pd.DataFrame(data, copy=False)



def _narrowest_int(parts: list[np.ndarray]) -> np.dtype:
    """The narrowest signed integer type that holds every value of `parts` (devices and
    streams: a handful of small numbers, a byte or two per operation rather than four:
    ~60 MB fewer at 10 M kernels, held to the end). Whoever computes with them widens
    them first."""
    lo = min((int(p.min()) for p in parts if len(p)), default=0)
    hi = max((int(p.max()) for p in parts if len(p)), default=0)
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)



def _int_categorical(parts: list[np.ndarray]) -> pd.Categorical:
    """The parts' integers, joined, as a categorical with sorted categories (codes in the
    values' order), made a step at a time: no joined 64-bit copy of the values."""
    parts = [p.astype("int64", copy=False) for p in parts]
    codes, categories = coded_by_steps(
        lambda: (p[s] for p in parts for s in steps(len(p))), sum(len(p) for p in parts))
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype="int64"))



def _stack_categoricals(constant: list[tuple[str, int]], values: pd.Series,
                        categories: list[str] | None = None) -> pd.Categorical:
    """`n` copies of a constant followed by `values`, as one categorical, from codes."""
    (fill, n), = constant
    vals = text_categorical(values)
    cats = list(categories or [])
    for c in [fill, *vals.categories]:
        if c not in cats:
            cats.append(c)
    index = pd.Index(cats)
    codes = np.empty(n + len(vals), dtype="int32")
    codes[:n] = index.get_loc(fill)
    if len(vals):
        codes[n:] = index.get_indexer(vals.categories)[vals.codes]
    return pd.Categorical.from_codes(codes, categories=cats)



def text_categorical(values: pd.Series) -> pd.Categorical:
    """A categorical of text whose categories are plain object strings, so that any two
    of them (also from empty frames) can be unioned."""
    cat = pd.Categorical(values.astype(str) if not isinstance(values.dtype, pd.CategoricalDtype)
                         else values)
    return cat.set_categories(pd.Index(cat.categories.astype(str), dtype=object), rename=True)
