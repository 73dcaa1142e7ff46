"""Progress of the long steps (exporting a big .nsys-rep, loading a big report, analysing,
writing a page), for a person watching a terminal.

Library code reports steps through the `Progress` its caller passes in and never prints.
The default does nothing; the CLI passes a `TerminalProgress` only when standard error is a
terminal and the output is not machine-readable (json, csv), so pipes and CI logs stay clean.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from .names import printable

Advance = Callable[..., None]


class Progress:
    """Does nothing: what library calls get unless a caller asks for more."""

    @contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Advance]:
        """A step; `total` known units make a bar, else a spinner. Yields `advance(n=1)`."""
        yield _ignore


def _ignore(n: int = 1) -> None:
    return None


NO_PROGRESS = Progress()


class TerminalProgress(Progress):
    """rich spinners and bars on standard error, gone when the step ends. Steps may nest
    (a report analysed inside a loop over reports): they share one live display."""

    def __init__(self, console=None):
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self._bar = None
        self._depth = 0

    def say(self, message: str) -> None:
        """'nsyswrap: MESSAGE' on a line of its own, above the spinners while they are
        drawn: text written to the terminal past the live display would land on the
        spinner's line and stay there."""
        from rich.text import Text

        self.console.print(Text(f"nsyswrap: {message}"), soft_wrap=True)

    @contextmanager
    def step(self, description: str, total: int | None = None) -> Iterator[Advance]:
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        if self._bar is None:
            # The description as text, not rich markup: it may name a file ('[red]x.sqlite').
            self._bar = RichProgress(SpinnerColumn(),
                                     TextColumn("{task.description}", markup=False),
                                     BarColumn(), TextColumn("{task.fields[counter]}"),
                                     TimeElapsedColumn(),
                                     console=self.console, transient=True)
            self._bar.start()
        bar = self._bar
        # Control characters as escapes: a file named with an escape sequence must not act
        # on the terminal (render/names.printable, as the CLI's messages).
        task = bar.add_task(f"nsyswrap: {printable(description)}", total=total,
                            counter=f"0/{total}" if total else "")
        self._depth += 1
        done = [0]

        def advance(n: int = 1) -> None:
            done[0] += n
            bar.update(task, advance=n, counter=f"{done[0]}/{total}" if total else "")

        try:
            yield advance
        finally:
            self._depth -= 1
            bar.remove_task(task)
            if self._depth == 0:
                bar.stop()
                self._bar = None
