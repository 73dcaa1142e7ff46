"""GPU operations' packed columns decoded, and each operation joined to the runtime call
that launched it: one implementation for the loader (every operation at once, loader.py) and
the stream (a chunk at a time, operations.py).

The bulk reads pack ids two to an int64 (queries.kernels_sql, queries.launch_key_sql):
  launch_key     pid << 32 | correlation id: the launching call's key, unique per process
  device_stream  device id << 32 | stream id
  name_ids       short name's StringIds id << 32 | demangled name's (the short name's where
                 the export has none, LOW32 where neither)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .chunks import STEP_ROWS, compact_ids, even_bounds, map_chunks
from .database import Database
from .queries import (
    ID_MASK,
    LOW32,
    RUNTIME_TABLE,
    coded,
    launch_key_sql,
    pandas_frame,
    sql_list,
    times_present,
)
from .report import empty


def launch_pids(launch_key: np.ndarray) -> np.ndarray:
    """The launching process of each launch key, int32 (a pid has 24 bits)."""
    return ((launch_key >> 32) & ID_MASK).astype(np.int32)


def correlation_ids(launch_key: np.ndarray) -> np.ndarray:
    """The launching call's correlation id of each launch key (its low 32 bits)."""
    return launch_key & LOW32


def device_ids(device_stream: np.ndarray) -> np.ndarray:
    """The device of each kernel's packed device_stream column."""
    return device_stream >> 32


def stream_ids(device_stream: np.ndarray) -> np.ndarray:
    """The stream of each kernel's packed device_stream column."""
    return device_stream & LOW32


def short_name_ids(name_ids: np.ndarray) -> np.ndarray:
    """The StringIds id of each kernel's short name, from its packed name_ids."""
    return name_ids >> 32


def full_name_ids(name_ids: np.ndarray) -> np.ndarray:
    """The StringIds id of each kernel's demangled name, from its packed name_ids, -1 where
    the export has none."""
    full = name_ids & LOW32
    full[full == LOW32] = -1
    return full


def with_launch_ids(columns: pd.DataFrame | dict[str, np.ndarray]) -> None:
    """pid and correlation_id, unpacked from the launch_key column (of a frame, or of the
    numpy columns of one being built), as int32 where they fit: always for the pid (24
    bits), where they do for the correlation id (the low 32 bits, compact_ids)."""
    key = np.asarray(columns["launch_key"], dtype="int64")
    columns["pid"] = launch_pids(key)
    columns["correlation_id"] = compact_ids(correlation_ids(key))


def strings_of(db: Database, ids: Iterable[int]) -> dict[int, str]:
    """StringIds values for the given ids (only those: the table can be large)."""
    ids = sorted({int(i) for i in ids if i >= 0})
    out: dict[int, str] = {}
    for i in range(0, len(ids), 900):  # SQLite's default limit on bound parameters is 999
        chunk = ids[i : i + 900]
        out.update(db.rows(
            f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(chunk))})", chunk
        ))
    return out


def string_labels(ids: Iterable[int], strings: dict[int, str]) -> list[str]:
    """The text of each StringIds id (strings_of), a placeholder for ids the table lacks."""
    return [strings.get(int(u), f"<unknown string {u}>") for u in ids]


@dataclass
class Launches:
    """Runtime calls that launched GPU work, sorted by (process, correlation id) key: each
    one's start, duration and launching thread (a code into `threads`, the few distinct
    ids)."""

    key: np.ndarray
    start_ns: np.ndarray
    duration_ns: np.ndarray
    thread_code: np.ndarray
    threads: np.ndarray  # sorted thread ids

    def thread_ids(self) -> np.ndarray:
        return self.threads[self.thread_code]

    def frame(self) -> pd.DataFrame:
        """The calls as rows again (launch_key, start_ns, duration_ns, thread), to extend
        them."""
        return pd.DataFrame({"launch_key": self.key, "start_ns": self.start_ns,
                             "duration_ns": self.duration_ns, "thread": self.thread_ids()})

    def lookup(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(launch start, thread, launch duration) for each key, -1 where no call
        matches."""
        start = np.full(len(key), -1, "int64")
        thread = np.full(len(key), -1, "int64")
        duration = np.full(len(key), -1, self.duration_ns.dtype)
        if len(self.key) == 0:
            return start, thread, duration

        def part(lo: int, hi: int) -> None:
            # Searching sorted keys walks the table in order (nearly sorted already: stable
            # sort is quick); random probes into 10 M keys miss the cache at every step.
            # In chunks on every core; the chunk's temporaries, not the table's.
            order = np.argsort(key[lo:hi], kind="stable")
            probe = key[lo:hi][order]
            i = np.searchsorted(self.key, probe)
            np.minimum(i, len(self.key) - 1, out=i)
            found = self.key[i] == probe
            rows = order[found] + lo
            i = i[found]
            start[rows] = self.start_ns[i]
            thread[rows] = self.threads[self.thread_code[i]]
            duration[rows] = self.duration_ns[i]

        # Chunks of STEP_ROWS at most: each holds five chunk-sized arrays (order, probes,
        # places, matches, rows), ~200 MB at once on two cores with 10 M kernels in four
        # chunks.
        map_chunks(part, even_bounds(len(key), max_rows=STEP_ROWS))
        return start, thread, duration


def sorted_launches(df: pd.DataFrame) -> Launches:
    """`df` is emptied: each column is dropped as its sorted copy is made."""
    key = df.pop("launch_key").to_numpy(dtype="int64")
    order = np.argsort(key, kind="stable")
    key = key[order]
    start = df.pop("start_ns").to_numpy(dtype="int64")[order]
    duration = df.pop("duration_ns").to_numpy(dtype="int64")[order]
    return Launches(key, start, duration,
                     *coded(df.pop("thread").to_numpy(dtype="int64")[order]))


def launch_rows(db: Database, keys: np.ndarray) -> pd.DataFrame:
    """Every runtime call whose correlation id is one of the launch keys' (launch_key,
    start_ns, duration_ns, thread), in export order: a scan of the runtime table by
    correlation id, for operations whose launching call a name filter left out."""
    ids = sorted({int(k & LOW32) for k in keys})
    parts = [pandas_frame(db.arrow(f"""SELECT {launch_key_sql("globalTid", "correlationId")}
                                   AS launch_key, start AS start_ns, "end" AS end_ns,
                                   globalTid AS thread
                            FROM {RUNTIME_TABLE}
                            WHERE correlationId IN ({sql_list(ids[i:i + 5000])})
                              AND {times_present(db, RUNTIME_TABLE)}
                              AND globalTid IS NOT NULL  -- no key: it launched nothing known
                            ORDER BY rowid"""))
             for i in range(0, len(ids), 5000)]
    if not parts:
        return empty(["launch_key", "start_ns", "duration_ns", "thread"])
    rows = pd.concat(parts, ignore_index=True)
    # In int64, as the runtime read's slices (queries.RuntimeSlice.of): SQLite makes an end -
    # start past int64 (broken timestamps) a REAL, which no int64 column takes.
    duration = rows.pop("end_ns").to_numpy("int64") - rows["start_ns"].to_numpy("int64")
    rows.insert(2, "duration_ns", duration)
    return rows


def attach_launches(db: Database, launches: Launches,
                     *ops: pd.DataFrame) -> list[pd.DataFrame]:
    """Each operation with the start, thread and duration of the runtime call that
    launched it (launch_start_ns, thread, launch_ns; -1 when the report has none).
    Operations whose call the name filter of _runtime_calls left out are looked up again
    by correlation id, so no name list can drop work."""
    keys = [op["launch_key"].to_numpy(dtype="int64") for op in ops]
    found = [launches.lookup(k) for k in keys]
    missing = np.unique(np.concatenate([k[f[0] < 0] for k, f in zip(keys, found, strict=True)]
                                       or [np.array([], "int64")]))
    if len(missing) and RUNTIME_TABLE in db.tables:
        launches = sorted_launches(pd.concat([launches.frame(), launch_rows(db, missing)],
                                              ignore_index=True))
        found = [launches.lookup(k) for k in keys]
    # New frames over the same columns plus the two found (assign copies each array it
    # sets: 160 MB and 0.3 s at 10 M kernels).
    return [pd.DataFrame({**{c: op[c] for c in op.columns
                             if c not in ("launch_start_ns", "thread", "launch_ns")},
                          "launch_start_ns": start, "thread": thread, "launch_ns": duration},
                         copy=False)
            for op, (start, thread, duration) in zip(ops, found, strict=True)]
