"""nsyswrap: honest GPU timing with Nsight Systems.

    import nsyswrap
    report = nsyswrap.load("run.sqlite")            # an nsys export (or .nsys-rep)
    result = nsyswrap.compare(report)               # analyses + findings
    with nsyswrap.annotate("step"): ...             # NVTX ranges from your code
    r = nsyswrap.benchmark(lambda: f(x), iters=50)  # CUDA-event timing, reconciled by compare
"""

from ._version import __version__
from .annotate import annotate, mark
from .compare import Comparison, compare
from .diagnose import Finding, Thresholds
from .errors import BadInputError, NsysWrapError
from .harness import BenchmarkResult, benchmark
from .loader import load
from .report import Report

__all__ = [
    "BadInputError", "BenchmarkResult", "Comparison", "Finding", "NsysWrapError", "Report",
    "Thresholds", "annotate", "benchmark", "compare", "load", "mark", "__version__",
]
