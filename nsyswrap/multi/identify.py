"""Which rank is this process? Read from the report, in this order of trust:

1. the rank variable of the environment nsys recorded for the profiled program (RANK set by
   torchrun, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK): one process per report, as
   `nsyswrap run --ranks` and per-rank `nsys profile` under torchrun/srun make them;
2. the file name: `NAME.rankN.sqlite` (or `_rankN`, `-rankN`);
3. several processes with GPU work in one report (nsys around the launcher): the process
   order by the lowest device each one used (one GPU per rank), then by pid.

What is left unnumbered is numbered by the combining side in the order the reports were
given (nsyswrap/multi/ranks.py), and says so.
"""

from __future__ import annotations

import re

import pandas as pd

from ..read.report import ReportInfo

RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK")
FILE_RANK = re.compile(r"(?:^|[._-])rank[._-]?(\d+)(?=[._-]|$)", re.IGNORECASE)

BY_ENV = "{var}={value} in the environment nsys recorded"
BY_FILE = "file name ({name})"
BY_DEVICE = "process {pid} on GPU {device}, numbered by device within the report"
BY_ORDER = "order the reports were given (nothing in the report names its rank)"


def identify_ranks(info: ReportInfo, processes: pd.DataFrame) -> list[tuple[int | None, str]]:
    """(rank, how it was found) for each row of `processes` (pid, devices): the processes
    of one report that ran GPU work."""
    n = len(processes)
    if n == 0:
        return []
    if n == 1:
        for var in RANK_VARIABLES:
            value = info.rank_env.get(var, "")
            if value.isdigit():
                return [(int(value), BY_ENV.format(var=var, value=value))]
        m = FILE_RANK.search(info.source.stem)
        if m:
            return [(int(m.group(1)), BY_FILE.format(name=info.source.name))]
        return [(None, BY_ORDER)]
    keys = [(min(d) if len(d) else 1 << 30, int(pid))
            for pid, d in zip(processes["pid"], processes["devices"], strict=True)]
    order = sorted(range(n), key=lambda i: keys[i])
    out: list[tuple[int | None, str]] = [(None, "")] * n
    for rank, i in enumerate(order):
        out[i] = (rank, BY_DEVICE.format(pid=keys[i][1], device=keys[i][0]))
    return out
