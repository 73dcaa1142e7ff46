"""nsyswrap: honest GPU timing with Nsight Systems."""

from .errors import BadInputError, NsysWrapError
from .loader import load
from .report import Report

__version__ = "0.1.0"
__all__ = ["BadInputError", "NsysWrapError", "Report", "load", "__version__"]
