"""Analyses over a loaded Report. Each module answers one question with DataFrames;
`analyze` (whole.py) runs them all and returns the plain `Analysis` (finish.py) that
diagnose and render read; streamed/ gives the same Analysis from a stream of operations."""

from .finish import Analysis, TimedWindows
from .whole import analyze

__all__ = ["Analysis", "TimedWindows", "analyze"]
