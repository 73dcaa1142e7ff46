"""The analysis of a report whose GPU operations arrive as a stream of time-ordered chunks
(operations.OperationStream): engine.py runs it (analyze_streamed), totals.py adds each
chunk to the open ranges' numbers (with slots.py and open_values.py)."""

from .engine import analyze_streamed

__all__ = ["analyze_streamed"]
