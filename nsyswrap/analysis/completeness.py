"""Is the GPU trace whole? A process that dies by a signal loses the CUDA activity it had
buffered (docs/nsys-quirks.md, "Signals"): nothing at all when it never filled a buffer (the
loader says so), or the last part when it did. NVTX ranges always arrive, so a repeated range
that launched GPU work in every earlier instance and has instances after the last CUDA call
of the report shows a lost tail.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..common.units import fmt_ns
from ..read.report import ReportInfo
from .families import by_family, user_rows
from .instance_table import InstanceTable

# Instances needed on each side of the last CUDA call before a tail reads as lost.
MIN_INSTANCES = 3


def lost_tail(info: ReportInfo, instances: InstanceTable) -> pd.Index:
    """The instances whose GPU work the report lost: of range families that launched GPU
    work in all their earlier instances, the MIN_INSTANCES or more that started after the
    report's last CUDA call. Alerts (ReportInfo.alert) when there are any."""
    last = info.last_cuda_call_ns
    if last is None or not info.has_gpu_activity or instances.empty:
        return instances.index[:0]
    # Only the columns read here, decoded at the user's rows: most reports have no family
    # with instances after the last call, and then only two columns are read.
    rows = user_rows(instances)
    family = instances.values("family_id", rows)
    late = np.bincount(family[instances.values("start_ns", rows) > last],
                       minlength=int(family.max(initial=-1)) + 1)
    candidates = instances.rows(rows[late[family] >= MIN_INSTANCES],
                                ["start_ns", "end_ns", "gpu_ops", "family_id"])
    del family
    cut, lost = [], []
    for (_domain, name), g in by_family(candidates, instances):
        before, after = g[g["start_ns"] <= last], g[g["start_ns"] > last]
        if (len(before) >= MIN_INSTANCES and len(after) >= MIN_INSTANCES
                and (before["gpu_ops"] > 0).all() and (after["gpu_ops"] == 0).all()):
            cut.append((name, len(after), len(g)))
            lost.append(after.index)
    if cut:
        what = ", ".join(f"{n} of {total} `{family}`" for family, n, total in cut[:3])
        end = info.end_ns if info.end_ns is not None else int(
            instances.values("end_ns", rows).max())
        info.alert(
            f"GPU trace incomplete: the last CUDA call in the report is {fmt_ns(end - last)} "
            f"before its end, and ranges that launched GPU work every time before have none "
            f"after it ({what}): the program was most likely ended by a signal before its last "
            "CUDA buffers were written; those instances' GPU numbers are unknown")
    return lost[0].append(lost[1:]) if lost else instances.index[:0]
