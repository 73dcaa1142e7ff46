"""Analyses over a report. Each module answers one question with DataFrames; `analyze`
(steps.py) runs the engine (engine/) over a loaded report, then the steps after it, and
returns the plain `Analysis` (result.py) that diagnose and render read; `analyze_streamed`
gives the same Analysis from the export's operations as they are read."""

from .result import Analysis, TimedWindows
from .steps import analyze, analyze_streamed

__all__ = ["Analysis", "TimedWindows", "analyze", "analyze_streamed"]
