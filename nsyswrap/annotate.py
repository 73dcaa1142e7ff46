"""NVTX annotation for user code: `annotate` as decorator or context manager, and `mark`.

Wraps the `nvtx` package. Ranges go to the `nsyswrap` domain unless told otherwise. With no
profiler attached an annotate costs a few hundred nanoseconds (README, "Overhead").
"""

from __future__ import annotations

import functools
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


class annotate:  # noqa: N801 (used like a function: @annotate("name"), with annotate(...))
    """An NVTX push/pop range.

        @nsyswrap.annotate("forward")          # decorator (name defaults to the function's)
        def forward(x): ...

        with nsyswrap.annotate("load", domain="data", color="green", payload=step):
            batch = next(loader)

    color: a name ("green") or 0xRRGGBB; category: a name or number; payload: int or float.
    """

    __slots__ = ("message", "domain", "color", "category", "payload", "_domain", "_attrs")

    def __init__(self, message: str | None = None, *, domain: str = DEFAULT_DOMAIN,
                 color: str | int | None = None, category: str | int | None = None,
                 payload: int | float | None = None):
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

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with rng:
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


def mark(message: str, *, domain: str = DEFAULT_DOMAIN, color: str | int | None = None,
         payload: int | float | None = None) -> None:
    """An instantaneous NVTX event (shown as a marker in nsys)."""
    if not PROFILER_ATTACHED:
        return
    d = nvtx.get_domain(domain)
    d.mark(d.get_event_attributes(message=message, color=color, payload=payload))
