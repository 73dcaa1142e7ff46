"""Many reports at once: ranks side by side (`compare_ranks`), before and after (`diff`),
analysed in worker processes or on a Dask cluster. A sibling of the single-report
pipeline: it calls `compare` per report and combines the summaries."""

from __future__ import annotations

RANKS_SCHEMA = "nsyswrap.ranks/1"
DIFF_SCHEMA = "nsyswrap.diff/1"


def __getattr__(name: str):
    # The pipeline (compare_ranks, diff_reports, ...) loads on first use: the CLI imports
    # multi.thresholds for its options on every start, and a single report needs none of it.
    if name.startswith("__"):  # import machinery probing (__path__, __spec__, ...)
        raise AttributeError(name)
    from importlib import import_module

    api = import_module(f"{__name__}.api")
    try:
        return getattr(api, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
