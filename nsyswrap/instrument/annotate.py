"""NVTX annotation for user code: `annotate` as decorator or context manager, and `mark`.

Wraps the `nvtx` package. Ranges go to the `nsyswrap` domain unless told otherwise. With no
profiler attached an annotate costs a few hundred nanoseconds (README, "Overhead").
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from typing import Any, TypeVar

import nvtx

from . import nvtx_compat  # noqa: F401  (must run before any nvtx domain is created)

DEFAULT_DOMAIN = "nsyswrap"
# nsys (and any NVTX tool) announces itself through this variable when it starts the process;
# without it every NVTX call is a no-op, so annotate skips the calls altogether.
PROFILER_ATTACHED = bool(os.environ.get("NVTX_INJECTION64_PATH"))
F = TypeVar("F", bound=Callable[..., Any])
# The names the nvtx package knows (nvtx/colors.py); it takes matplotlib's too, where that is
# installed.
COLOR_NAMES = ("green", "blue", "yellow", "purple", "rapids", "cyan", "red", "white",
               "darkgreen", "orange")
_ARGB_MAX = 0xFFFFFFFF


def check_color(color: str | int | None) -> None:
    """Raise a one-line ValueError for a colour nvtx cannot use, when the range is made
    rather than when a profiler first draws it."""
    if color is None or color in COLOR_NAMES:
        return
    if isinstance(color, int) and not isinstance(color, bool) and 0 <= color <= _ARGB_MAX:
        return
    if isinstance(color, str) and _matplotlib_color(color):
        return
    raise ValueError(f"color {color!r}: give one of {', '.join(COLOR_NAMES)}, or a number "
                     "0xRRGGBB (or, with matplotlib installed, one of its colours)")


def _matplotlib_color(color: str) -> bool:
    try:
        from matplotlib.colors import is_color_like
    except ImportError:
        return False
    return bool(is_color_like(color))


class annotate:  # noqa: N801 (used like a function: @annotate("name"), with annotate(...))
    """An NVTX push/pop range.

        @nsyswrap.annotate("forward")          # decorator (name defaults to the function's)
        def forward(x): ...

        @nsyswrap.annotate                     # the same, named after the function
        async def fetch(url): ...              # a coroutine: a start/end range per await

        with nsyswrap.annotate("load", domain="data", color="green", payload=step):
            batch = next(loader)

    color: a name (COLOR_NAMES) or 0xRRGGBB; category: a name or number; payload: int or
    float. An `async def` gets a start/end range (nvtxRangeStart/End) rather than a push
    and pop: coroutines that interleave on one thread would pop each other's ranges.
    """

    __slots__ = ("message", "domain", "color", "category", "payload", "_domain", "_attrs")

    def __new__(cls, message: str | Callable | None = None, **options):
        if callable(message):  # @annotate without parentheses: the function itself
            return cls(**options)(message)
        return super().__new__(cls)

    def __init__(self, message: str | None = None, *, domain: str = DEFAULT_DOMAIN,
                 color: str | int | None = None, category: str | int | None = None,
                 payload: int | float | None = None):
        if color is not None:
            check_color(color)
        self.message = message
        self.domain = domain
        self.color = color
        self.category = category
        self.payload = payload
        self._domain = None
        self._attrs = None

    def _prepare(self):
        # Resolved on first use, not at import: the profiler's injection is set up by then.
        self._domain = nvtx.get_domain(self.domain)
        self._attrs = self._domain.get_event_attributes(
            message=self.message, color=self.color, category=self.category,
            payload=self.payload,
        )

    def __enter__(self) -> annotate:
        if PROFILER_ATTACHED:
            if self._attrs is None:
                self._prepare()
            self._domain.push_range(self._attrs)
        return self

    def __exit__(self, *exc) -> bool:
        if PROFILER_ATTACHED:
            self._domain.pop_range()
        return False

    def __call__(self, fn: F) -> F:
        rng = self if self.message else annotate(
            fn.__qualname__, domain=self.domain, color=self.color, category=self.category,
            payload=self.payload)
        if inspect.iscoroutinefunction(fn):
            return rng._wrap_coroutine(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with rng:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    def _wrap_coroutine(self, fn: F) -> F:
        @functools.wraps(fn)
        async def wrapper(*args, **kwargs):
            if not PROFILER_ATTACHED:
                return await fn(*args, **kwargs)
            if self._attrs is None:
                self._prepare()
            started = self._domain.start_range(self._attrs)
            try:
                return await fn(*args, **kwargs)
            finally:
                self._domain.end_range(started)

        return wrapper  # type: ignore[return-value]


def mark(message: str, *, domain: str = DEFAULT_DOMAIN, color: str | int | None = None,
         payload: int | float | None = None) -> None:
    """An instantaneous NVTX event (shown as a marker in nsys)."""
    check_color(color)
    if not PROFILER_ATTACHED:
        return
    d = nvtx.get_domain(domain)
    d.mark(d.get_event_attributes(message=message, color=color, payload=payload))
