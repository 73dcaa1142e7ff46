"""Analyses over a report. Each module answers one question with DataFrames; `analyze`
(engine/analyze.py) runs them all over a loaded report and returns the plain `Analysis`
(finish.py) that diagnose and render read; `analyze_streamed` gives the same Analysis from
the export's operations as they are read."""

from .engine.analyze import analyze, analyze_streamed
from .finish import Analysis, TimedWindows

__all__ = ["Analysis", "TimedWindows", "analyze", "analyze_streamed"]
