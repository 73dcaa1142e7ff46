"""What tells the program's timed windows apart: one group per thing the program timed, a
stable key per group (the same in two runs of the program, for `diff`), and a label people
recognise.

Real timing code records from one place for many workloads: a helper `timed(name, fn)`
shared by a suite, one function called per variant (`for v in (1, 2, 3): test(v)`), a loop
over sizes. So a window is known by more than its two record() lines:

  process      the process that recorded it (by order of its first window)
  scope        the do_bench call or Timer measurement it was made in, or the events alone
  sites        the two record() lines
  contexts     the call stacks of the two records (the user's frames, library frames
               skipped) and the scalar arguments of each frame (the runner's snapshot:
               nsyswrap/instrument/event_hooks.py)
  work         within one such key, the shape of the GPU work between the records (kernel
               names and launch grids, copy sizes: `work_signature`), so that a sweep inside
               one function (`for n in sizes: s.record(); f(n); e.record()`) gives a row
               per size

Two rules keep rows from multiplying where nothing differs in what was timed:
- an argument that takes more than MAX_ARG_VALUES values among one pair of lines is a
  counter (an iteration number, a seed, a step), not a variant: it is left out of the key;
- the work splits a key only where each shape's windows come in one run, as a sweep's do,
  and there are at most MAX_SHAPES of them: a training step with a new sequence length each
  time is one row. A first window whose work differs from the run after it (lazy
  initialisation, autotuning) stays with that run, so its cold start can be seen.
"""

from __future__ import annotations

import collections
import hashlib
import os

import numpy as np
import pandas as pd

from .engine.windows import text_column as categorical
from .user_events import UserEvents

MAX_ARG_VALUES = 16
MAX_SHAPES = 16
# What a label's call part may take of the table's width (the row's site and what tells it
# from its neighbours come after).
CALL_WIDTH = 34
ARG_WIDTH = 18
WILDCARD = "*"


def identify(rows: pd.DataFrame, events: UserEvents) -> pd.DataFrame:
    """The event windows `rows` (user_timings' reconciled intervals) with `scope` (the
    do_bench call that made them, -1 none), `kind` ("events", "do_bench"), `key` and
    `label`. do_bench's own estimate windows (the calls it times to choose how many to
    repeat) are left out: do_bench's figure comes from its timed windows only."""
    rows = rows.reset_index(drop=True)
    contexts = _contexts_of(events)
    scope, scope_site, scope_context = _do_bench_scopes(rows, events)
    start_ctx, end_ctx = _record_contexts(rows, events)
    # The Python work is per distinct combination of codes, not per window (a million
    # windows usually come from a few lines).
    codes = pd.DataFrame({
        "pid": rows["pid"].to_numpy("int64"), "scope": scope, "scope_site": scope_site,
        "scope_context": scope_context, "start_site": rows["start_site"].to_numpy("int64"),
        "end_site": rows["end_site"].to_numpy("int64"), "start_ctx": start_ctx,
        "end_ctx": end_ctx}, copy=False)
    combo = codes.groupby(list(codes.columns), sort=False).ngroup().to_numpy()
    # Groups are numbered as they first appear: a group's first row is where its number
    # passes every number before it (a second hashing pass, drop_duplicates, took as long).
    new = np.r_[True, combo[1:] > np.maximum.accumulate(combo)[:-1]] if len(combo) else []
    firsts = codes.to_numpy("int64")[new]
    sites = {p.pid: p.sites for p in events.processes}
    ordinal = _process_ordinals(rows)
    ident = []
    for p, sc, s_site, s_ctx, a, b, ca, cb in firsts:
        p = int(p)
        if sc >= 0:
            ident.append(("do_bench", ordinal[p], (_site(sites, p, int(s_site)),),
                          (_context(contexts, p, int(s_ctx)),), (int(sc), int(a), int(b))))
        else:
            ident.append(("events", ordinal[p], (_site(sites, p, int(a)), _site(sites, p, int(b))),
                          (_context(contexts, p, int(ca)), _context(contexts, p, int(cb))),
                          None))
    estimate = _estimate_windows(ident, np.bincount(combo, minlength=len(ident)))
    ident = [_without_counters(x, c) for x, c in zip(ident, _counters(ident), strict=True)]
    base_text = [_text(x[:4]) for x in ident]
    base_code = pd.factorize(pd.Series(base_text))[0]
    keep = ~estimate[combo]
    rows = rows[keep].reset_index(drop=True)
    combo = combo[keep]
    rows["scope"] = scope[keep]
    base = base_code[combo]
    shape = _shapes(rows, base)
    rows["kind"] = categorical(combo, [x[0] for x in ident])
    # The key: the identity and, where the work splits it, which shape; numbered in order
    # of first appearance, its text made once per key.
    firsts, pair = np.unique(base * (int(shape.max(initial=0)) + 1) + shape,
                             return_index=True, return_inverse=True)[1:]
    by_appearance = np.argsort(firsts, kind="stable")
    key_code = np.empty(len(by_appearance), "int64")
    key_code[by_appearance] = np.arange(len(by_appearance))
    pair = key_code[pair.reshape(-1)]
    first_row = firsts[by_appearance]
    keys = [_digest(f"{base_text[int(np.flatnonzero(base_code == base[i])[0])]}|{shape[i]}")
            for i in first_row.tolist()]
    rows["key"] = categorical(pair, keys)
    first_combo: dict[str, int] = {}
    for k, i in zip(keys, first_row.tolist(), strict=True):
        first_combo.setdefault(k, int(combo[i]))
    labels = _labels(rows, {k: ident[c] for k, c in first_combo.items()},
                     {k: int(shape[i]) for k, i in zip(keys, first_row.tolist(), strict=True)},
                     ordinal)
    rows["label"] = categorical(pair, [labels[k] for k in keys])
    return rows


def timer_keys(timers: pd.DataFrame, events: UserEvents) -> list[str]:
    """The key of each Timer measurement (user_timings' rows of kind "timer"): the process,
    where the Timer was called, from which stack, and what it timed."""
    ordinal = _process_ordinals(timers)
    sites = {p.pid: p.sites for p in events.processes}
    contexts = _contexts_of(events)
    scopes = {p.pid: p.scopes for p in events.processes}
    out = []
    for pid, site, scope, label in zip(timers["pid"], timers["start_site"], timers["scope"],
                                       timers["label"], strict=True):
        p = int(pid)
        sc = scopes[p][int(scope)] if 0 <= int(scope) < len(scopes.get(p, [])) else {}
        out.append(_digest(_text(("timer", ordinal[p], (_site(sites, p, int(site)),),
                                  (_context(contexts, p, int(sc.get("context", -1))),),
                                  str(label)))))
    return out


def distinct_labels(keys: pd.Series, labels: pd.Series) -> pd.Categorical:
    """Labels made distinct per key (a second key with the same label gets " #2"), keys in
    order of first appearance; a key's label is its last row's."""
    key_code = pd.factorize(keys)[0]
    last = len(key_code) - 1 - np.unique(key_code[::-1], return_index=True)[1]
    seen: dict[str, int] = {}
    out = []
    for t in labels.iloc[last].tolist():
        seen[t] = seen.get(t, 0) + 1
        out.append(t if seen[t] == 1 else f"{t} #{seen[t]}")
    return categorical(key_code, out)


def process_ordinals(pids) -> dict[int, int]:
    """Each process's number, in the order given (the order of their first windows)."""
    return {int(p): i for i, p in enumerate(pd.unique(pd.Series(pids, dtype="int64")))}


# -- the parts of a window's identity ---------------------------------------------------------

def _process_ordinals(rows: pd.DataFrame) -> dict[int, int]:
    order = rows.sort_values("measured_at_ns", kind="stable")["pid"]
    return process_ordinals(order)


def _site(sites: dict, pid: int, code: int) -> tuple:
    table = sites.get(pid) or []
    if not 0 <= code < len(table):
        return ("?", 0, "?")
    file, line, function = table[code]
    return (os.path.basename(file), int(line), function)


def _contexts_of(events: UserEvents) -> dict[int, list]:
    return {p.pid: list(getattr(p, "contexts", None) or []) for p in events.processes}


def _context(contexts: dict, pid: int, code: int) -> tuple:
    """A context as (file's base name, line, function, args) frames: base names, so that the
    key is the same for a checkout in another folder."""
    table = contexts.get(pid) or []
    if not 0 <= code < len(table):
        return ()
    return tuple((os.path.basename(f), int(line), fn, tuple(tuple(a) for a in args))
                 for f, line, fn, args in table[code])


def _record_contexts(rows: pd.DataFrame, events: UserEvents) -> tuple[np.ndarray, np.ndarray]:
    rec = events.records
    if "context" not in rec or not len(rec):
        return np.full(len(rows), -1, "int64"), np.full(len(rows), -1, "int64")
    context = rec["context"].to_numpy("int64")
    return (context[rows["start_record"].to_numpy("int64")],
            context[rows["end_record"].to_numpy("int64")])


def _do_bench_scopes(rows: pd.DataFrame, events: UserEvents,
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The do_bench call each window was measured in (-1 none), its site and context."""
    scope = np.full(len(rows), -1, "int64")
    site = np.full(len(rows), -1, "int64")
    context = np.full(len(rows), -1, "int64")
    for p in events.processes:
        mine = np.flatnonzero(rows["pid"].to_numpy() == p.pid)
        elapsed_row = rows["elapsed_row"].to_numpy()[mine]
        for k, sc in enumerate(p.scopes):
            if sc.get("kind") != "do_bench":
                continue
            inside = (elapsed_row >= sc.get("first_elapsed", 0)) & (
                elapsed_row < sc.get("end_elapsed", 0))
            scope[mine[inside]] = k
            site[mine[inside]] = sc.get("site", -1)
            context[mine[inside]] = sc.get("context", -1)
    return scope, site, context


def _estimate_windows(ident: list[tuple], windows: np.ndarray) -> np.ndarray:
    """Per identity, whether it is do_bench's estimate: within one do_bench call, the
    record lines with fewer windows (it times a few calls once to choose how many to
    repeat)."""
    out = np.zeros(len(ident), bool)
    calls: dict[tuple, list[int]] = {}
    for i, x in enumerate(ident):
        if x[0] == "do_bench":
            calls.setdefault((x[1], x[2], x[3], x[4][0]), []).append(i)
    for members in calls.values():
        main = max(members, key=lambda i: windows[i])
        for i in members:
            out[i] = i != main
    return out


def _counters(ident: list[tuple]) -> list[frozenset]:
    """Per window, the arguments (context, frame, name) that are counters among the windows
    of its lines and functions: more than MAX_ARG_VALUES values."""
    values: dict[tuple, dict[tuple, set]] = {}
    for x in ident:
        skeleton = _skeleton(x)
        seen = values.setdefault(skeleton, {})
        for c, ctx in enumerate(x[3]):
            for f, frame in enumerate(ctx):
                for name, text in frame[3]:
                    seen.setdefault((c, f, name), set()).add(text)
    counters = {s: frozenset(a for a, v in seen.items() if len(v) > MAX_ARG_VALUES)
                for s, seen in values.items()}
    return [counters[_skeleton(x)] for x in ident]


def _skeleton(x: tuple) -> tuple:
    """A window's identity without its arguments."""
    return (x[0], x[1], x[2], tuple(tuple(f[:3] for f in ctx) for ctx in x[3]))


def _without_counters(x: tuple, counters: frozenset) -> tuple:
    if not counters:
        return x
    ctxs = tuple(
        tuple((f[0], f[1], f[2], tuple((n, WILDCARD if (c, k, n) in counters else t)
                                       for n, t in f[3]))
              for k, f in enumerate(ctx))
        for c, ctx in enumerate(x[3]))
    return (x[0], x[1], x[2], ctxs, x[4])


def _shapes(rows: pd.DataFrame, base: np.ndarray) -> np.ndarray:
    """Per window, which shape of work it is within its key (0, 1, ... in time order),
    where its key splits by the work (see the module's docstring); 0 elsewhere."""
    shape = np.zeros(len(rows), "int64")
    if "work_signature" not in rows or not len(rows):
        return shape
    signature = rows["work_signature"].to_numpy("int64")
    order = np.lexsort((rows["start_time_ns"].to_numpy("int64"), base))
    b, sig = base[order], signature[order]
    new_run = np.ones(len(b), bool)
    new_run[1:] = (b[1:] != b[:-1]) | (sig[1:] != sig[:-1])
    runs_per_base = np.bincount(b[new_run], minlength=int(b.max()) + 1)
    # Past twice MAX_SHAPES runs (a cold start may add one per shape) it is no sweep.
    for key in np.flatnonzero((runs_per_base >= 2) & (runs_per_base <= 2 * MAX_SHAPES)):
        at = np.flatnonzero(b == key)
        runs = _runs(sig[at])
        # A window alone whose work is done nowhere else in the key and differs from a run
        # of two or more after it (lazy initialisation, autotuning: a cold start) stays
        # with that run.
        seen = collections.Counter(sig[at].tolist())
        merged: list[tuple[object, list[int]]] = []
        for value, members in reversed(runs):
            if len(members) == 1 and seen[value] == 1 and merged and len(merged[0][1]) >= 2:
                merged[0] = (merged[0][0], [*members, *merged[0][1]])
            else:
                merged.insert(0, (value, members))
        distinct = {v for v, _ in merged}
        if len(merged) < 2 or len(distinct) != len(merged) or len(merged) > MAX_SHAPES:
            continue
        for n, (_, members) in enumerate(merged):
            shape[order[at[members]]] = n
    return shape


def _runs(values: np.ndarray) -> list[tuple[object, list[int]]]:
    """Consecutive equal values: (value, positions) per run."""
    out: list[tuple[object, list[int]]] = []
    for i, v in enumerate(values):
        if out and out[-1][0] == v:
            out[-1][1].append(i)
        else:
            out.append((v, [i]))
    return out


def _text(parts) -> str:
    return repr(parts)


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=6).hexdigest()


# -- labels -----------------------------------------------------------------------------------

def _labels(rows: pd.DataFrame, ident_of: dict[str, tuple], shape_of: dict[str, int],
            ordinal: dict[int, int]) -> dict[str, str]:
    """A label per key: where it was recorded, the call that tells it from the groups
    recorded at the same lines (the arguments that differ, else the caller's line), the
    work where that splits it, and the process where there are several."""
    siblings: dict[tuple, list[str]] = {}
    for k, x in ident_of.items():
        siblings.setdefault((x[0], x[2]), []).append(k)
    text_of: dict[str, str] = {}
    several = len(ordinal) > 1
    for (kind, where), members in siblings.items():
        recording = [ident_of[k][3][0] if ident_of[k][3] else () for k in members]
        varying = _varying_args(recording)
        caller = _differing_caller(recording)
        split = any(shape_of[k] > 0 for k in members)
        work = _work_texts(rows, members) if split else {}
        for k, ctx in zip(members, recording, strict=True):
            # Without the runner's contexts (an earlier runner's records): the function.
            call = _call_text(ctx, varying, kind) if ctx or kind != "events" else (
                where[0][2] if where[0][2] != "<module>" else "")
            place = _where_text(where) if kind == "events" else \
                f"do_bench at {_site_text(where[0])}"
            parts = [f"{call} at {place}" if call else place]
            if caller and len(ctx) > caller:
                parts.append(f"← {_site_text(ctx[caller])}")
            if split:
                parts.append(work[k])
            if several:
                parts.append(f"[process {ident_of[k][1] + 1}]")
            text_of[k] = " ".join(p for p in parts if p)
    # Groups the label does not tell apart (two shapes with the same main kernel and grid,
    # say) are numbered.
    seen: dict[str, int] = {}
    for k in ident_of:
        t = text_of[k]
        seen[t] = seen.get(t, 0) + 1
        if seen[t] > 1:
            text_of[k] = f"{t} #{seen[t]}"
    return text_of


def _varying_args(contexts: list[tuple]) -> set[tuple]:
    """(frame, name) of the arguments whose text differs among `contexts` (or that some of
    them lack), or the first that alone differs in each; none where there is one."""
    if len(contexts) < 2:
        return set()
    values: dict[tuple, list] = {}
    for ctx in contexts:
        for f, frame in enumerate(ctx):
            for name, text in frame[3]:
                values.setdefault((f, name), []).append(text)
    varying = [a for a, v in values.items() if len(set(v)) > 1 or len(v) < len(contexts)]
    # One argument that alone tells them all apart is enough (name= and fn= of a helper
    # called per workload say the same thing twice).
    for a in varying:
        if len(values[a]) == len(contexts) and len(set(values[a])) == len(contexts):
            return {a}
    return set(varying)


def _differing_caller(contexts: list[tuple]) -> int:
    """The first caller frame (1, 2, ...) whose place differs among `contexts`; 0 none."""
    if len(contexts) < 2:
        return 0
    for f in range(1, max(len(c) for c in contexts)):
        if len({c[f][:3] if len(c) > f else None for c in contexts}) > 1:
            return f
    return 0


def _call_text(ctx: tuple, varying: set, kind: str) -> str:
    """`fn(a=1)`: the recording function with the arguments that tell it apart (those of
    callers after it, `via g(x=2)`); "" at module level."""
    if not ctx:
        return ""
    parts = []
    for f, frame in enumerate(ctx):
        args = [f"{n}={_short(t)}" for n, t in frame[3] if (f, n) in varying]
        if f == 0 and frame[2] != "<module>" and kind == "events":
            parts.append(f"{frame[2]}({', '.join(args)})" if args else frame[2])
        elif args:
            parts.append(f"via {frame[2]}({', '.join(args)})")
    text = " ".join(parts)
    return text if len(text) <= CALL_WIDTH else text[:CALL_WIDTH - 1] + "…"


def _short(text: str) -> str:
    return text if len(text) <= ARG_WIDTH else text[:ARG_WIDTH - 1] + "…"


def _site_text(site: tuple) -> str:
    return f"{site[0]}:{site[1]}"


def _where_text(where: tuple) -> str:
    a, b = where
    if a[0] == b[0]:
        return f"{a[0]}:{a[1]}→{b[1]}"
    return f"{_site_text(a)}→{_site_text(b)}"


def _work_texts(rows: pd.DataFrame, keys: list[str]) -> dict[str, str]:
    """What each group's windows ran, as the labels of groups split by their work show it:
    the longest kernel's grid where that tells them all apart, else its name, else how many
    operations; the grid where nothing does (the labels are then numbered)."""
    mine = rows[rows["key"].isin(keys)]
    by_key = {k: g for k, g in mine.groupby("key", sort=False)}
    options = [("main_grid", "grid {}"), ("main_kernel", "{}"), ("work_ops", "{} ops")]
    for column, form in options:
        values = {k: _common(by_key[k], column) if k in by_key else "" for k in keys}
        if all(v != "" for v in values.values()) and len(set(values.values())) == len(keys):
            return {k: f"({_short(form.format(v))})" for k, v in values.items()}
    return {k: f"(grid {_common(by_key[k], 'main_grid')})" if k in by_key else ""
            for k in keys}


def _common(frame: pd.DataFrame, column: str):
    if column not in frame or not len(frame):
        return ""
    values = frame[column].dropna()
    return values.mode().iat[0] if len(values) else ""
