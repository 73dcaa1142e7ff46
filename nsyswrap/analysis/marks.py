"""The program's NVTX marks (`nsyswrap.mark("checkpoint")`, or any tool's), as a list to
show: nsyswrap's own marks, which carry its records as JSON, left out."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.report import thread_ids

MARK_COLUMNS = ["time_ns", "pid", "tid", "domain", "text"]
# How nsyswrap's own marks begin: the harness's benchmark documents and the runner's
# records and clock marks are JSON objects whose first key is "nsyswrap" (schema.py).
OWN_MARK_PREFIX = '{"nsyswrap":'


def user_marks(marks: pd.DataFrame) -> pd.DataFrame:
    """The report's marks (report.MARK_COLUMNS, in time order) but nsyswrap's own, with
    the thread's pid and tid (MARK_COLUMNS)."""
    text = marks["text"].astype(str)
    kept = marks[~text.str.startswith(OWN_MARK_PREFIX).to_numpy(dtype=bool)]
    pid, tid = thread_ids(kept["thread"].to_numpy(dtype="int64"))
    return pd.DataFrame({"time_ns": kept["time_ns"].to_numpy(dtype="int64"),
                         "pid": pid.astype(np.int64), "tid": tid.astype(np.int64),
                         "domain": kept["domain"].astype(str).to_numpy(dtype=object),
                         "text": kept["text"].astype(str).to_numpy(dtype=object)})
