"""Which line of the program's own code each thread was running, and since when: a trace of
the program's lines by sys.monitoring (Python 3.12 and newer), kept by `nsyswrap run`'s
runner beside the program's CUDA-event records (event_hooks.py writes both into the report).

Standard library only, and loaded by path: the profiled process imports nothing of nsyswrap.

Only the program's own code is traced. Every code object's first start is looked at once:
library code (the standard library, installed packages, nsyswrap; event_hooks decides) gets
DISABLE and is never seen again; the program's code gets LINE and return events of its own
(sys.monitoring.set_local_events). So a torch op costs nothing more; a line of the program
costs one callback (~0.3 µs on a 2-core machine, docs/where-in-your-code.md).

Per thread the trace is a list of (host clock, where): from that time on, the thread ran
that line (and whatever it called). A "where" is a line of the program with the where of the
line that called its function (the stack, as a tree); where 0 is outside the program's code
(a thread in library code, or the program's code returned into a library's). The analysis
(nsyswrap/analysis/code_lines.py) finds each CUDA call's line as the thread's last where at
or before the call.
"""

from __future__ import annotations

import array
import base64
import linecache
import operator
import os
import sys
import threading
import time
import zlib

# Keep in step with nsyswrap/instrument/schema.py (this file may not import it).
LINES_SCHEMA = "nsyswrap.lines/1"
# Off with `nsyswrap run --no-lines`.
ENABLE_ENV = "NSYSWRAP_LINES"
# Trace entries kept at most per thread (12 bytes each): past this the trace stops (its end
# time is written) and later CUDA calls have no line. It also bounds what the trace costs a
# program whose own code is a long pure-Python loop (~0.3 µs an entry: a few seconds).
MAX_ENTRIES = 1 << 23
# Distinct wheres (line, stack) at most: past it, deeper calls of new stacks share one.
MAX_WHERES = 1 << 20
OVERFLOW_WHERE = 1
# Frames above a where kept at most: deeper recursion shares the stack cut here.
MAX_DEPTH = 24
# Source lines written at most, and their length (the rest cut).
MAX_TEXTS = 20_000
TEXT_CHARS = 200
# Off with `nsyswrap run --no-source`: no line of the program's source in the report.
SOURCE_ENV = "NSYSWRAP_SOURCE"
# sys.monitoring tool ids tried, in order: 0-2 are taken by debuggers, coverage and
# profilers (cProfile under 3.12), 5 by optimizers.
TOOL_IDS = (4, 3)

_clock = time.perf_counter_ns


class LineTrace:
    """The trace of one process: per thread, clocks and wheres in arrays; the wheres and the
    code objects they name beside them."""

    def __init__(self, is_library) -> None:
        self.is_library = is_library
        self.tool: int | None = None
        self.codes: dict[int, int] = {}  # id(code) -> code number, or -1: the library's
        self.code_list: list = []  # code number -> the code object (kept alive)
        # where -> (code number, line, the where that called, depth); 0: outside, 1: overflow
        self.where_list: list[tuple] = [(-1, 0, 0, 0), (-1, 0, 0, 0)]
        self.wheres: dict[tuple, int] = {}
        self.threads: dict[int, list] = {}  # get_ident() -> state (callbacks())
        self.stopped_ns: int | None = None  # the trace filled up then
        self.ended_ns: int | None = None  # the trace ended then (filled up, or at exit)
        self.lock = threading.Lock()

    # -- the callbacks (hot: closures over locals, ~0.2 µs a line on top of Python's own) --

    def callbacks(self) -> dict:
        """The sys.monitoring callbacks, by event name. Each thread's state is [stack,
        append to clocks, append to wheres, clocks, wheres, OS thread id]; the stack holds
        the current where of each of the program's frames on the thread, above two zeros (so
        that stack[-2], the caller's where, always exists)."""
        threads, wheres, codes = self.threads, self.wheres, self.codes
        get_ident, clock, new_where, about = (threading.get_ident, _clock, self._new_where,
                                              self._about)
        stop = self.stop

        def state() -> list:
            s = threads.get(get_ident())
            if s is None:
                clocks, places = array.array("q"), array.array("I")
                s = [[0, 0], clocks.append, places.append, clocks, places,
                     threading.get_native_id()]
                with self.lock:
                    s = threads.setdefault(get_ident(), s)
            return s

        def on_start(code, offset):
            number = codes.get(id(code))
            if number is None:
                number = about(code)
            if number < 0:
                return DISABLE
            stack = (threads.get(get_ident()) or state())[0]
            stack.append(stack[-1])  # until its first line: where its caller is
            return None

        def on_line(code, line):
            s = threads.get(get_ident()) or state()
            stack = s[0]
            where = wheres.get((id(code), line, stack[-2]))
            if where is None:
                where = new_where(code, line, stack[-2])
            stack[-1] = where
            if len(s[3]) >= MAX_ENTRIES:
                stop(full=True)
            s[1](clock())
            s[2](where)

        def on_resume(code, offset):
            stack = (threads.get(get_ident()) or state())[0]
            stack.append(stack[-1])
            on_line(code, sys._getframe(1).f_lineno)

        def on_return(code, offset, value):
            s = threads.get(get_ident()) or state()
            stack = s[0]
            if len(stack) > 2:
                stack.pop()
            s[1](clock())
            s[2](stack[-1])

        def on_unwind(code, offset, exception):
            number = codes.get(id(code))
            if number is not None and number >= 0:  # PY_UNWIND is global: any code raises
                on_return(code, offset, None)

        return {"PY_START": on_start, "PY_RESUME": on_resume, "LINE": on_line,
                "PY_RETURN": on_return, "PY_YIELD": on_return, "PY_UNWIND": on_unwind}

    # -- identities (once per code object, line and stack) --------------------------------------

    def _about(self, code) -> int:
        with self.lock:
            number = self.codes.get(id(code))
            if number is not None:
                return number
            if self.is_library(code.co_filename):
                number = -1
            else:
                number = len(self.code_list)
                self.code_list.append(code)
                events = sys.monitoring.events
                sys.monitoring.set_local_events(
                    self.tool, code, events.LINE | events.PY_RETURN | events.PY_YIELD
                    | events.PY_RESUME)
            self.codes[id(code)] = number
            return number

    def _new_where(self, code, line: int, parent: int) -> int:
        with self.lock:
            key = (id(code), line, parent)
            where = self.wheres.get(key)
            if where is not None:
                return where
            if len(self.where_list) >= MAX_WHERES:
                return OVERFLOW_WHERE
            depth = self.where_list[parent][3] + 1 if parent else 1
            if depth > MAX_DEPTH:  # the stack cut: this line under the outermost frames
                parent, depth = self._cut(parent), MAX_DEPTH
                key = (id(code), line, parent)
                where = self.wheres.get(key)
                if where is not None:
                    return where
            number = self.codes.get(id(code))
            if number is None or number < 0:  # a line of code whose start was not seen
                number = len(self.code_list)
                self.code_list.append(code)
                self.codes[id(code)] = number
            where = len(self.where_list)
            self.where_list.append((number, line, parent, depth))
            self.wheres[key] = where
            return where

    def _cut(self, where: int) -> int:
        while self.where_list[where][3] >= MAX_DEPTH:
            where = self.where_list[where][2]
        return where

    # -- start, stop, write -----------------------------------------------------------------

    def start(self) -> bool:
        monitoring = getattr(sys, "monitoring", None)
        if monitoring is None:
            return False
        for tool in TOOL_IDS:
            if monitoring.get_tool(tool) is None:
                break
        else:
            return False
        monitoring.use_tool_id(tool, "nsyswrap lines")
        self.tool = tool
        events = monitoring.events
        for name, callback in self.callbacks().items():
            monitoring.register_callback(tool, getattr(events, name), callback)
        monitoring.set_events(tool, events.PY_START | events.PY_UNWIND)
        return True

    def stop(self, full: bool = False) -> None:
        if self.tool is None:
            return
        monitoring = sys.monitoring
        tool, self.tool = self.tool, None
        monitoring.set_events(tool, 0)
        for code in self.code_list:
            try:
                monitoring.set_local_events(tool, code, 0)
            except ValueError:
                pass
        for event in (monitoring.events.PY_START, monitoring.events.PY_RESUME,
                      monitoring.events.LINE, monitoring.events.PY_RETURN,
                      monitoring.events.PY_YIELD, monitoring.events.PY_UNWIND):
            monitoring.register_callback(tool, event, None)
        monitoring.free_tool_id(tool)
        self.ended_ns = _clock()
        if full:
            self.stopped_ns = self.ended_ns

    def texts(self) -> dict[str, str]:
        """The source text of each traced line of the program's own files: those under its
        working folder or its script's (not the machine's other files), unless
        NSYSWRAP_SOURCE=0 (`nsyswrap run --no-source`)."""
        if os.environ.get(SOURCE_ENV, "1") == "0":
            return {}
        folders = {os.getcwd()}
        if sys.argv and sys.argv[0].endswith(".py"):
            folders.add(os.path.dirname(os.path.abspath(sys.argv[0])))
        here = tuple(os.path.realpath(f) + os.sep for f in folders)
        mine: dict[str, bool] = {}
        out: dict[str, str] = {}
        for number, line, _, _ in self.where_list[2:]:
            file = self.code_list[number].co_filename
            if file not in mine:
                mine[file] = os.path.realpath(os.path.abspath(file)).startswith(here)
            key = f"{file}:{line}"
            if mine[file] and key not in out and len(out) < MAX_TEXTS:
                out[key] = linecache.getline(file, line).rstrip()[:TEXT_CHARS]
        return out

    def document(self) -> dict:
        """The trace as the report holds it: under "lines" in the runner's document."""

        def packed(values: array.array) -> str:
            return base64.b64encode(zlib.compress(values.tobytes(), 6)).decode("ascii")

        threads = []
        for _, _, _, clocks, wheres, tid in list(self.threads.values()):
            if not clocks:
                continue
            # Deltas compress several times better than the clocks themselves.
            deltas = array.array("q", clocks[:1])
            deltas.extend(map(operator.sub, clocks[1:], clocks[:-1]))
            threads.append({"tid": tid, "rows": len(clocks), "clock_deltas": packed(deltas),
                            "wheres": packed(wheres)})
        return {
            "nsyswrap": LINES_SCHEMA,
            "texts": self.texts(),
            "codes": [[c.co_filename, c.co_qualname, c.co_firstlineno] for c in self.code_list],
            # [code number, line, the where that called it]
            "wheres": [[code, line, parent] for code, line, parent, _ in self.where_list],
            "threads": threads,
            "stopped_ns": self.stopped_ns,
            "ended_ns": self.ended_ns,
            "max_entries": MAX_ENTRIES,
        }


DISABLE = getattr(getattr(sys, "monitoring", None), "DISABLE", None)
TRACE: LineTrace | None = None


def start(is_library) -> LineTrace | None:
    """Start tracing the program's lines; None where sys.monitoring is missing (Python before
    3.12) or every tool id it offers is taken."""
    global TRACE
    if TRACE is not None:
        return TRACE
    trace = LineTrace(is_library)
    if trace.start():
        TRACE = trace
    return TRACE
