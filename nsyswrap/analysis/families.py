"""Range families: ranges named with a counter (`step 12`, `iter_5`, `batch-003`, `linear:3`)
are instances of one thing, and statistics and findings treat them as one family, named
with `{n}` in place of the number (`step {n}`). Each instance keeps its own name.

A set of names is a counter family when, in one domain, the names differ only in a trailing
number, at least MIN_DISTINCT numbers occur, and the numbers never go down in the order the
ranges started (per process): a counter counts. Names that cycle (`layer1` ... `layer4` in
every step) are distinct ranges that happen to be numbered, and stay apart. One pass over
numbered layers looks like a counter; that ambiguity is accepted (docs/analyses.md).

PyTorch's emit_nvtx ranges carry two counters of their own (`aten::addmm, seq = 12, op_id =
57`: one name per call), so every operator range would be a family of one; their family is
the name with `{n}` for both (`aten::addmm, seq = {n}, op_id = {n}`), shapes kept apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import numpy as np
import pandas as pd

from ..read.chunks import compact_ids, steps
from .domains import EMIT_NVTX_COUNTER
from .grouped import group_order
from .instance_table import InstanceTable
from .texts import text_copy, with_texts

COUNTER = re.compile(r"^(?P<stem>.*\D)(?P<number>\d+)$")
MIN_DISTINCT = 3
PLACEHOLDER = "{n}"
OPERATOR_INPUTS = re.compile(r"(, input_op_ids = ).*$")


def family_names(instances: pd.DataFrame, eligible: np.ndarray,
                 library: np.ndarray | None = None) -> pd.Series:
    """Per instance (columns domain, name, pid, start_ns), the family it belongs to: the
    name with `{n}` for its counter, or its own name. Only `eligible` rows are grouped by
    the counter rule (the user's own ranges, not the harness's or a library's); `library`
    rows in the default domain by emit_nvtx's counters."""
    family = text_copy(instances["name"])
    renames: list[tuple[np.ndarray, object]] = []
    if library is not None:
        operators = library & (instances["domain"] == "").to_numpy()
        if operators.any():
            renames.append((np.flatnonzero(operators),
                            _operator_families(instances["name"][operators])))
    if not eligible.any():
        return with_texts(family, renames)
    # The regular expression runs once per distinct name: millions of ranges share a few.
    codes, uniques = pd.factorize(instances["name"][eligible])
    stems, numbers = counter_parts(np.asarray(uniques, dtype=object))
    numbered = pd.notna(stems)[codes]
    if not numbered.any():
        return with_texts(family, renames)
    rows = np.flatnonzero(eligible)[numbered]
    codes = codes[numbered]
    candidates = pd.DataFrame({
        "row": rows,
        "domain": instances["domain"].take(rows).to_numpy(),  # not a text per range
        "stem": stems[codes],
        "number": numbers[codes].astype("int64"),
        "pid": instances["pid"].to_numpy()[rows],
        "start_ns": instances["start_ns"].to_numpy()[rows],
    })
    for (_domain, stem), g in candidates.groupby(["domain", "stem"], sort=False, observed=True):
        if g["number"].nunique() < MIN_DISTINCT or not _counts_up(g):
            continue
        renames.append((g["row"].to_numpy(), f"{stem}{PLACEHOLDER}"))
    return with_texts(family, renames)


def counter_parts(names: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stem, number) of each of `names` (distinct texts) as COUNTER matches it, None for
    both where it does not. Names of ASCII characters without a line break, where Python's
    rules for `.`, `\\d` and `$` and RE2's agree, are matched by Arrow's RE2 in C; the others
    by Python (a million distinct names took 5 s through pandas' str.extract)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pd.Series(names, dtype=object, copy=False).astype(str)
    array = pa.array(text)
    simple = pc.and_(pc.string_is_ascii(array),
                     pc.invert(pc.match_substring(array, "\n"))).to_numpy(zero_copy_only=False)
    stems = np.full(len(names), None, dtype=object)
    numbers = np.full(len(names), None, dtype=object)
    parts = pc.extract_regex(array.filter(pa.array(simple)), COUNTER.pattern)
    # A name that does not match is a missing struct, whose fields read as "".
    matched = parts.is_valid().to_numpy(zero_copy_only=False)
    at = np.flatnonzero(simple)[matched]
    stems[at] = parts.field("stem").to_numpy(zero_copy_only=False)[matched]
    numbers[at] = parts.field("number").to_numpy(zero_copy_only=False)[matched]
    for i in np.flatnonzero(~simple).tolist():
        match = COUNTER.match(text.iat[i])
        if match:
            stems[i], numbers[i] = match.group("stem"), match.group("number")
    return stems, numbers


def _counts_up(g: pd.DataFrame) -> bool:
    """The numbers never decrease in start order, within each process."""
    for _pid, p in g.sort_values("start_ns", kind="stable").groupby("pid", sort=False):
        if (np.diff(p["number"].to_numpy()) < 0).any():
            return False
    return True


def _operator_families(names: pd.Series) -> np.ndarray:
    """emit_nvtx's names with `{n}` for seq and op_id, and for the input op ids."""
    codes, uniques = pd.factorize(names)  # once per distinct name
    text = pd.Series(np.asarray(uniques, dtype=object)).astype(str)
    text = text.str.replace(EMIT_NVTX_COUNTER, r"\g<1>" + PLACEHOLDER, regex=True)
    text = text.str.replace(OPERATOR_INPUTS, r"\g<1>" + PLACEHOLDER, regex=True)
    return text.to_numpy(dtype=object)[codes]


def family_numbers(domain: pd.Series, family: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(family_id, index) of each row: what `groupby([domain, family], sort=False)` gives
    as ngroup() and cumcount() (families numbered in order of first appearance; each
    instance's number in its family), for text keys that are never missing. Each text
    column is hashed once, then the grouping is by integers: grouping by the two text
    columns of ten million instances cost 2 s."""
    key, _ = pd.factorize(domain)
    family_codes, families = pd.factorize(family)
    key = key.astype("int64", copy=False)
    key *= max(len(families), 1)  # (domain, family) as one integer, in place
    key += family_codes
    del family_codes
    family_id = pd.factorize(key)[0].astype("int64", copy=False)
    del key
    # Kept with every instance to the end: 32-bit where they fit (76 MB at 10 M ranges).
    return compact_ids(family_id), compact_ids(_rank_in_group(family_id))


def _rank_in_group(group: np.ndarray) -> np.ndarray:
    """cumcount: each row's place among the earlier rows of its group. From one stable sort
    by group (a radix sort where there are few), the ranks written a step at a time."""
    n = len(group)
    order, bounds = group_order(group)
    heads = bounds[:-1]
    rank = np.empty(n, dtype="int64")
    for part in steps(n):
        place = np.arange(part.start, min(part.stop, n))
        rank[order[part]] = place - heads[np.searchsorted(heads, place, side="right") - 1]
    return rank


# Range families listed, drawn and judged at most: the heaviest (heaviest). A program that
# names each range after what it serves (`request 81723`) makes a family of every range: a
# million families as rows of a document were 690 MB, and 30 k of them judged one by one
# 30 k findings in 106 s.
MAX_RANGE_FAMILIES = 1000


def heaviest(busy: np.ndarray, wall: np.ndarray, limit: int) -> np.ndarray:
    """Positions, in order, of the `limit` heaviest of the families whose GPU busy and wall
    times in all are `busy` and `wall`: by GPU busy time (unknown as none), then wall time,
    equal ones in the order given. The one rule by which every format and check keeps
    families when there are too many."""
    if len(busy) <= limit:
        return np.arange(len(busy))
    busy = np.nan_to_num(np.asarray(busy, dtype="float64"), nan=0.0)
    wall = np.nan_to_num(np.asarray(wall, dtype="float64"), nan=0.0)
    return np.sort(np.lexsort((-wall, -busy))[:limit])  # lexsort is stable


def heaviest_rows(instances: InstanceTable, rows: np.ndarray, limit: int
                  ) -> tuple[np.ndarray, int]:
    """Which of `rows` (instances) belong to the `limit` heaviest of their families
    (heaviest, by the families' totals over `rows`), and how many families they hold."""
    family = pd.factorize(instances.values("family_id", rows))[0]
    count = int(family.max()) + 1 if len(family) else 0
    if count <= limit:
        return np.ones(len(rows), dtype=bool), count
    busy = np.bincount(family, np.nan_to_num(instances.values("gpu_busy_ns", rows), nan=0.0),
                       minlength=count)
    wall = np.bincount(family, np.nan_to_num(instances.values("cpu_ns", rows), nan=0.0),
                       minlength=count)
    kept = np.zeros(count, dtype=bool)
    kept[heaviest(busy, wall, limit)] = True
    return kept[family], count


def user_rows(instances: InstanceTable, all_domains: bool = False, by_start: bool = False
              ) -> np.ndarray:
    """Rows of the instances that findings cover: the user's own, not the harness's
    iterations, nor (unless `all_domains`) ranges of libraries' NVTX domains. With
    `by_start`, in start order, ties in the report's order (a stable sort, and only where
    they are not in order already: the loader puts the ranges in start order)."""
    mine = (instances["benchmark"] == "").to_numpy()
    if not all_domains:
        mine = mine & ~instances.values("library")
    rows = np.flatnonzero(mine)
    if by_start:
        start = instances.values("start_ns", rows)
        if len(start) > 1 and not (start[1:] >= start[:-1]).all():
            rows = rows[np.argsort(start, kind="stable")]
    return rows


def by_family(frame: pd.DataFrame, instances: InstanceTable
              ) -> Iterator[tuple[tuple[str, str], pd.DataFrame]]:
    """((domain, family), rows) of `frame` (rows of `instances`, by label, with its
    family_id column), as `frame.groupby(["domain", "family"], sort=False)` gives them:
    families in order of first appearance, rows in frame order. Grouped by the integer
    family_id: hashing two text columns of ten million instances, and taking them along
    with every group, cost seconds per finding."""
    for key, rows in family_positions(frame, instances):
        yield key, frame.iloc[rows]


def family_positions(frame: pd.DataFrame, instances: InstanceTable, min_size: int = 1,
                     keep: np.ndarray | None = None
                     ) -> Iterator[tuple[tuple[str, str], np.ndarray]]:
    """by_family's families with each one's positions in `frame` instead of its rows: for
    a caller that gathers the few columns it needs a family at a time rather than copying
    every column of `frame` for each. Only the positions where `keep` (one flag per row of
    `frame`) is true, and only families with at least `min_size` of them, families still
    in order of first appearance in `frame`: the families a check has no use for are
    skipped all at once, not one Python step each (a million distinct range names are a
    million families)."""
    ids = frame["family_id"].to_numpy()
    if len(ids) == 0:
        return
    order, bounds = group_order(ids)  # a radix sort where there are few families
    heads = bounds[:-1]
    first = order[heads]  # each family's first row (the sort is stable)
    if keep is not None:
        kept = np.asarray(keep, dtype=bool)[order]
        sizes = np.add.reduceat(kept.astype("int64"), heads)  # every run is non-empty
        order = order[kept]
        bounds = np.r_[0, np.cumsum(sizes)]
        heads = bounds[:-1]
    else:
        sizes = np.diff(bounds)
    wanted = np.flatnonzero(sizes >= max(min_size, 1))
    first, heads, ends = first[wanted], heads[wanted], bounds[1:][wanted]
    keys = instances.rows(frame.index[first].to_numpy(), ["domain", "family"]).to_numpy()
    for k in np.argsort(first, kind="stable"):
        yield (keys[k, 0], keys[k, 1]), order[heads[k]:ends[k]]
