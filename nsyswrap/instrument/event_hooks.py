"""What the program's own timing code measured, recorded by `nsyswrap run`'s runner
(runner.py) with no change to the program.

Standard library only, and loaded by path: the profiled process imports nothing of nsyswrap
(nor torch: each hook is installed when the program itself imports the module it patches).

- ``torch.cuda.Event.record``: the host clock just before and after the call, the thread,
  the call site (file, line, function), the context (the program's frames that led to the
  call, with the arguments that tell one invocation of a timing helper from another), the
  stream, which event (a serial number given at its first record) and which record of it
  (1, 2, ...).
- ``torch.cuda.Event.elapsed_time``: the two events and which of their records it measured,
  the value it returned, the call site.
- ``triton.testing.do_bench`` and ``torch.utils.benchmark.Timer``'s measuring methods: what
  they returned, their call site and context, and the records and measurements made inside
  them; each Timer measurement (``_timeit``) also becomes an NVTX range.

Records and elapsed_time() calls made by nsyswrap's own code (the harness) are counted, not
kept: they are not the program's timings.

At exit it all goes into the report as NVTX marks (JSON holding zlib+base64 columns), with
clock marks that tie the host clock to the report's (each mark's time in the report lies
between the clock readings taken just before and after it), and the events' own cost (their
floor) measured once, after the program, so the program's own timings are not disturbed.
The analysis side is nsyswrap/analysis/user_events.py; the format is USER_EVENTS_SCHEMA.
"""

from __future__ import annotations

import atexit
import base64
import functools
import importlib.abc
import json
import os
import re
import struct
import sys
import sysconfig
import threading
import time
import types
import zlib

# Keep in step with nsyswrap/instrument/schema.py (this file may not import it).
USER_EVENTS_SCHEMA = "nsyswrap.user-events/2"
USER_EVENTS_PART_SCHEMA = USER_EVENTS_SCHEMA + "/part"
CLOCK_SCHEMA = "nsyswrap.clock/1"
FLOOR_RANGE = "nsyswrap.user-events [event floor]"
TIMER_RANGE_PREFIX = "nsyswrap.timer "
DO_BENCH_RANGE_PREFIX = "nsyswrap.do_bench "
# Off with `nsyswrap run --no-user-events`.
ENABLE_ENV = "NSYSWRAP_USER_EVENTS"
# The trace of the program's lines: off with `nsyswrap run --no-lines`.
LINES_ENV = "NSYSWRAP_LINES"
# Clock marks in a burst: each brackets the report's clock within a few µs; the analysis
# intersects them.
CLOCK_MARKS = 8
# A burst at most this often from elapsed_time() (called after a sync, outside any window).
CLOCK_EVERY_NS = 500_000_000

# One record() call, packed (little-endian, no padding): the host clock before the call, how
# long the call took, the thread (a code: Recorder.thread_ids), the event (a serial number)
# and which record of it this is (1, 2, ...), the call site (a code: Recorder.site_keys),
# the context (a code: Recorder.context_list), the stream (its cudaStream_t, as torch gives
# it).
RECORD_FORMAT = "<qqIIIIIq"
RECORD_FIELDS = ("before_ns", "took_ns", "thread", "event", "nth", "site", "context",
                 "stream")
# One elapsed_time() call: its clock, thread, the two events and which of their records it
# measured, the call site, and the value it returned (ms; NaN when it raised).
ELAPSED_FORMAT = "<qqIIIIIId"
ELAPSED_FIELDS = ("before_ns", "after_ns", "thread", "start_event", "start_nth",
                  "end_event", "end_nth", "site", "value_ms")
# Records kept at most (44 bytes each): beyond, they are counted, not kept. Likewise
# elapsed_time() calls (48 bytes each). The analysis inflates no more than these hold.
MAX_RECORDS = 4 << 20
MAX_ELAPSED = 4 << 20
# Distinct call sites, contexts and threads per process: past these, one overflow entry
# stands for all further ones (generated code can make any number of sites).
MAX_SITES = 1 << 20
MAX_CONTEXTS = 1 << 16
MAX_THREADS = 1 << 16
OVERFLOW_SITE = ("?", 0, "?")
OVERFLOW_CONTEXT = (("?", 0, "?", ()),)
OVERFLOW_THREAD_ID = 0
# The program's frames kept per context, innermost first, and the frames walked at most to
# find them (a deep framework's stack is not walked to its end).
CONTEXT_DEPTH = 8
FRAMES_WALKED = 64
# An argument's text at most; strings longer than STR_CHARS are given as their length.
ARGUMENT_CHARS = 60
STR_CHARS = 40
INTS_SHOWN = 8
# Parameters whose values are never written (their text is this).
SECRET_NAME = re.compile("token|secret|passw|key|auth|credential|cookie", re.IGNORECASE)
HIDDEN = "…"
# Records held as tuples (~250 bytes each) before they are packed: a program that records
# this many without an elapsed_time() pauses to pack them (~30 ms).
PENDING_MAX = 1 << 16
# The context of records made by nsyswrap's own code: counted at packing, not kept.
OWN_CONTEXT = -2
_RECORD = struct.Struct(RECORD_FORMAT)
_ELAPSED = struct.Struct(ELAPSED_FORMAT)
RECORD_SIZE, ELAPSED_SIZE = _RECORD.size, _ELAPSED.size

_clock = time.perf_counter_ns
# The trace of the program's lines (line_trace.LineTrace), when it runs; else why not.
LINES = None
LINES_NOTE: str | None = None


class Recorder:
    """The records of one process: record() and elapsed_time() calls packed in bytearrays
    (RECORD_FORMAT, ELAPSED_FORMAT), the call sites, contexts, threads and scopes beside
    them."""

    def __init__(self):
        self.pending: list[tuple] = []  # record() calls not packed yet (Recorder.pack)
        self.records = bytearray()
        self.elapsed = bytearray()
        self.dropped_records = 0  # past MAX_RECORDS
        self.dropped_elapsed = 0  # past MAX_ELAPSED
        self.own_records = 0  # made by nsyswrap's own code: not kept
        self.own_elapsed = 0
        self.elapsed_errors: dict[int, str] = {}  # elapsed row -> the exception it raised
        self.sites: dict[tuple, int] = {}  # (id(code), f_lasti) -> site code
        self.site_keys: list[tuple | None] = []  # site code -> its key (None: overflow)
        self.codes: dict[int, object] = {}  # id -> code object, kept alive
        self.contexts: dict[tuple, int] = {}  # context as rendered -> context code
        self.context_list: list[tuple] = []  # context code -> context
        self.snapshots = 0  # contexts taken (each a walk of the stack)
        # threading.get_ident() -> [the frame that recorded last on that thread, its
        # context code, the thread's code]: the frame is held (a strong reference) so that
        # no other invocation can be the same object while it is there.
        self.thread_states: dict[int, list] = {}
        # The calling thread's state as `state`: the hot path reads it there (an attribute
        # of a thread-local, 28 ns against 41 ns for the ident and the lookup above on the
        # 2-core machine), the lookup is made once per thread.
        self.local = threading.local()
        self.thread_ids: list[int] = []  # thread code -> OS thread id (nsys's tid)
        self.next_event = 1
        self.scopes: list[dict] = []
        self.clock: list[tuple[int, int, str]] = []  # (before, after, key) per clock mark
        self.last_clock_ns = 0
        self.floor_ms: list[float] = []
        self.notes: list[str] = []
        self.lock = threading.RLock()
        self.flushed = False

    @property
    def record_count(self) -> int:
        return len(self.records) // RECORD_SIZE + len(self.pending) + self.dropped_records

    def pack(self, pause: bool = False) -> None:
        """The pending record() calls into RECORD_FORMAT rows: done at each elapsed_time()
        (after a sync, outside the windows), at the end of do_bench and Timer calls and at
        exit. `pause`: done inside the program's time because PENDING_MAX were pending;
        that pause is a scope of its own ("pack") for the analysis to name. The frames
        held for the hot path are let go here, so a returned function's locals live no
        longer than to the next elapsed_time()."""
        self.drop_frames()
        with self.lock:
            pending = self.pending[:]
            del self.pending[:len(pending)]
        if not pending:
            return
        began = _clock()
        rows, sites = bytearray(), self.sites
        pack = _RECORD.pack
        room = max(0, MAX_RECORDS - len(self.records) // RECORD_SIZE)
        own = kept = 0
        for before, after, thread, event, nth, code, lasti, context, handle in pending:
            if context == OWN_CONTEXT:
                own += 1
                continue
            if kept == room:
                self.dropped_records += 1
                continue
            site = sites.get((id(code), lasti))
            if site is None:
                site = self.site_code_of(code, lasti)
            rows += pack(before, after - before, thread, event, nth, site, context, handle)
            kept += 1
        self.records += rows
        self.own_records += own
        if pause:
            self.scopes.append({"kind": "pack", "before_ns": began, "after_ns": _clock(),
                                "thread": self.thread_code()})

    def drop_frames(self) -> None:
        for state in list(self.thread_states.values()):
            state[0] = None

    @property
    def elapsed_count(self) -> int:
        return len(self.elapsed) // ELAPSED_SIZE

    # -- identities ------------------------------------------------------------------------

    def thread_state(self) -> list:
        """[last recording frame, its context, thread code] of the calling thread."""
        state = getattr(self.local, "state", None)
        if state is not None:
            return state
        ident = threading.get_ident()
        with self.lock:
            state = self.thread_states.get(ident)
            if state is None:
                state = [None, -1, self._new_thread_code()]
                self.thread_states[ident] = state
        self.local.state = state
        return state

    def _new_thread_code(self) -> int:
        if len(self.thread_ids) < MAX_THREADS:
            self.thread_ids.append(threading.get_native_id())
            return len(self.thread_ids) - 1
        if len(self.thread_ids) == MAX_THREADS:
            self.thread_ids.append(OVERFLOW_THREAD_ID)
            self.notes.append(f"more than {MAX_THREADS} threads recorded: the further ones "
                              "share one thread code (thread id 0)")
        return MAX_THREADS

    def thread_code(self) -> int:
        return self.thread_state()[2]

    def site_code(self, frame) -> int:
        return self.site_code_of(frame.f_code, frame.f_lasti)

    def site_code_of(self, code, lasti: int) -> int:
        """The code of a call site (a code object and an instruction in it), keyed by the
        code object's id: the object is kept (self.codes), so the id stays its own."""
        key = (id(code), lasti)
        site = self.sites.get(key)
        if site is None:
            self.codes.setdefault(id(code), code)
            site = self._numbered(self.sites, self.site_keys, key, MAX_SITES, None,
                                  f"more than {MAX_SITES} call sites recorded: the further "
                                  "ones share one site, [\"?\", 0, \"?\"]")
        return site

    def _numbered(self, codes: dict, listing: list, key, most: int, overflow,
                  note: str) -> int:
        """The code of `key` in `codes` (its place in `listing`), a new one if it has none;
        past `most` keys, the code of `overflow`, said once in the notes."""
        with self.lock:
            code = codes.get(key)
            if code is not None:
                return code
            if len(listing) >= most:
                if overflow not in codes:
                    self.notes.append(note)
                key = overflow
                code = codes.get(key)
                if code is not None:
                    return code
            code = codes[key] = len(listing)
            listing.append(key)
            return code

    def site_row(self, site: int) -> list:
        key = self.site_keys[site]
        if key is None:
            return list(OVERFLOW_SITE)
        code = self.codes[key[0]]
        return [code.co_filename, _line_of(code, key[1]), code.co_name]

    def user_site(self, frame) -> int:
        """The call site in the program: the first frame outside the library that called
        (torch's benchmark utilities, triton's testing module)."""
        while frame is not None and _is_library(frame.f_code.co_filename):
            frame = frame.f_back
        return self.site_code(frame) if frame is not None else -1

    def context_code(self, frame, recording) -> int:
        """The code of the context of `frame`: the program's frames from it outwards
        (library frames skipped), at most CONTEXT_DEPTH, each (file, line, function,
        its arguments as text). `recording` is the frame that recorded: its line is its
        function's first, so that a function's records share one context; every other
        frame's is the line it is running (the call)."""
        self.snapshots += 1
        frames = []
        codes, text_functions = _CODES, _TEXT_OF
        walked = 0
        while frame is not None and len(frames) < CONTEXT_DEPTH and walked < FRAMES_WALKED:
            walked += 1
            code = frame.f_code
            about = codes.get(id(code))
            if about is None or about[0] is not code:
                about = _about_code(code)
            if not about[1]:
                line = about[4] if frame is recording else frame.f_lineno
                parameters = about[5]
                arguments = ()
                if parameters:
                    values = frame.f_locals
                    texts = []
                    for name, secret in parameters:
                        if secret:
                            texts.append((name, HIDDEN))
                        elif name in values:
                            value = values[name]
                            text_of = text_functions.get(type(value))
                            if text_of is None:
                                text_of = _text_function(type(value))
                            texts.append((name, text_of(value)))
                    arguments = tuple(texts)
                frames.append((about[2], line if line and line > 0 else 0, about[3],
                               arguments))
            frame = frame.f_back
        key = tuple(frames)
        context = self.contexts.get(key)
        if context is None:
            context = self._numbered(self.contexts, self.context_list, key, MAX_CONTEXTS,
                                     OVERFLOW_CONTEXT,
                                     f"more than {MAX_CONTEXTS} contexts recorded: the "
                                     "further ones share one context, "
                                     "[[\"?\", 0, \"?\", []]]")
        return context

    def recording_context(self, frame, state: list) -> int:
        """The slow path of the record hook (a frame that did not record last on this
        thread): the frame's context, or OWN_CONTEXT for nsyswrap's own code; kept in
        `state` with the frame for the next record."""
        code = frame.f_code
        about = _CODES.get(id(code))
        if about is None or about[0] is not code:
            about = _about_code(code)
        own = about[6]
        context = OWN_CONTEXT if own else self.context_code(frame, frame)
        state[1] = context
        state[0] = frame
        return context

    # -- the report's clock ----------------------------------------------------------------

    def clock_burst(self, mark) -> None:
        """CLOCK_MARKS marks, each between two readings of the host clock."""
        for _ in range(CLOCK_MARKS):
            key = f"{os.getpid()}-{len(self.clock)}"
            text = json.dumps({"nsyswrap": CLOCK_SCHEMA, "key": key}, separators=(",", ":"))
            before = _clock()
            mark(text)
            after = _clock()
            self.clock.append((before, after, key))
        self.last_clock_ns = _clock()

    # -- writing into the report -------------------------------------------------------------

    def document(self) -> dict:
        self.pack()

        def packed(raw: bytes) -> str:
            return base64.b64encode(zlib.compress(bytes(raw), 6)).decode("ascii")

        return {
            "nsyswrap": USER_EVENTS_SCHEMA,
            "pid": os.getpid(),
            "clock": "perf_counter_ns",
            "record_format": RECORD_FORMAT,
            "record_fields": list(RECORD_FIELDS),
            "records": packed(self.records),
            # The rows each packed column holds: the analysis inflates no more than these.
            "records_rows": len(self.records) // RECORD_SIZE,
            "dropped_records": self.dropped_records,
            "own_records": self.own_records,
            "elapsed_format": ELAPSED_FORMAT,
            "elapsed_fields": list(ELAPSED_FIELDS),
            "elapsed": packed(self.elapsed),
            "elapsed_rows": self.elapsed_count,
            "dropped_elapsed": self.dropped_elapsed,
            "own_elapsed": self.own_elapsed,
            "elapsed_errors": {str(k): v for k, v in self.elapsed_errors.items()},
            "sites": [self.site_row(i) for i in range(len(self.site_keys))],
            "contexts": [[[file, line, function, [list(a) for a in arguments]]
                          for file, line, function, arguments in context]
                         for context in self.context_list],
            "threads": self.thread_ids,
            "scopes": self.scopes,
            "clock_marks": [[b, a, k] for b, a, k in self.clock],
            "floor_ms": self.floor_ms,
            "notes": self.notes,
            "hook_cost_ns": HOOK_COST_NS,
            "hook_cost_worst_ns": HOOK_COST_WORST_NS,
            "lines": None if LINES is None else LINES.document(),
            "lines_note": LINES_NOTE,
        }


def _line_of(code, lasti: int) -> int:
    """The source line of the instruction at byte offset `lasti` of `code`."""
    line = code.co_firstlineno
    for start, end, lineno in code.co_lines():
        if start <= lasti < end:
            return lineno if lineno is not None else line
        if lineno is not None:
            line = lineno
    return line


# -- what is the program's own code ---------------------------------------------------------

# The whole package, wherever it lies (a checkout on PYTHONPATH is no program's code either).
_OWN_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _library_prefixes() -> tuple[str, ...]:
    """The folders whose code is not the program's: the standard library, installed
    packages, nsyswrap's own package."""
    paths = sysconfig.get_paths()
    folders = {paths[name] for name in ("stdlib", "platstdlib", "purelib", "platlib")
               if paths.get(name)}
    folders |= {os.path.realpath(f) for f in folders}
    return tuple(sorted(f.rstrip(os.sep) + os.sep for f in folders)) + (_OWN_FOLDER,)


_LIBRARY_PREFIXES = _library_prefixes()
# Wherever torch or triton are, their benchmarking code is not the program's timing.
_LIBRARY_PARTS = (os.sep + os.path.join("torch", "utils", "benchmark") + os.sep,
                  os.sep + os.path.join("triton", "testing") + ".py",
                  os.sep + os.path.join("torch", "cuda") + os.sep,
                  os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)


def _is_library(filename: str) -> bool:
    return (filename.startswith(_LIBRARY_PREFIXES) or filename.startswith("<frozen ")
            or any(part in filename for part in _LIBRARY_PARTS) or _is_installed(filename))


# Folder -> whether a package installed there by pip sits in it (`pip install --target DIR`
# puts packages on PYTHONPATH outside site-packages: their *.dist-info lies beside them).
_INSTALLED: dict[str, bool] = {}
_INSTALLED_MAX = 1 << 12


def _is_installed(filename: str) -> bool:
    """Whether the file belongs to a distribution pip installed (a *.dist-info folder in one
    of the four folders above it), as opposed to the program's own files (an editable
    install's *.dist-info lies in site-packages, not beside the project's files)."""
    folder = os.path.dirname(filename)
    for _ in range(4):
        known = _INSTALLED.get(folder)
        if known is None:
            try:
                known = any(name.endswith(".dist-info")
                            for name in os.listdir(folder))
            except OSError:
                known = False
            if len(_INSTALLED) < _INSTALLED_MAX:
                _INSTALLED[folder] = known
        if known:
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return False


# What the slow path needs of a code object, once per code: id(code) -> (code, whether it is
# the library's, file, function, first line, its parameters as (name, whether secret),
# whether nsyswrap's own). Bounded: generated code can make any number of code objects.
_CODES: dict[int, tuple] = {}
_CACHE_MAX = 1 << 16


def _about_code(code) -> tuple:
    filename = code.co_filename
    count = code.co_argcount + code.co_kwonlyargcount
    if code.co_flags & 0x04:  # CO_VARARGS
        count += 1
    if code.co_flags & 0x08:  # CO_VARKEYWORDS
        count += 1
    parameters = tuple((name, SECRET_NAME.search(name) is not None)
                       for name in code.co_varnames[:count])
    about = (code, _is_library(filename), filename, getattr(code, "co_qualname", code.co_name),
             code.co_firstlineno, parameters, filename.startswith(_OWN_FOLDER))
    if len(_CODES) < _CACHE_MAX:
        _CODES[id(code)] = about  # holds the code: its id stays its own
    return about


# -- arguments as text ------------------------------------------------------------------------

_type_name = type.__dict__["__name__"].__get__
_type_qualname = type.__dict__["__qualname__"].__get__
_type_module = type.__dict__["__module__"].__get__
_type_mro = type.__dict__["__mro__"].__get__
_CALLABLE_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.MethodWrapperType,
                   types.MethodDescriptorType, types.WrapperDescriptorType,
                   types.ClassMethodDescriptorType)


def _str_text(value: str) -> str:
    return repr(value)[:ARGUMENT_CHARS] if len(value) <= STR_CHARS else f"str[{len(value)}]"


_INT_SHOWN = 10 ** (ARGUMENT_CHARS - 1)


def _int_text(value: int) -> str:
    return repr(value) if -_INT_SHOWN < value < _INT_SHOWN else "<int>"


def _ints_text(values) -> str | None:
    """A short tuple or list of ints as "(4096, 4096)"; None for anything else."""
    if len(values) > INTS_SHOWN:
        return None
    for v in values:
        if type(v) is not int:
            return None
    try:
        return (_INTS_FORMATS[len(values)] % tuple(values))[:ARGUMENT_CHARS]
    except ValueError:  # an int of more digits than Python writes
        return None


# "(%d, %d)" for two ints (exact ints only: the builtin formatting).
_INTS_FORMATS = ["()", "(%d,)"] + ["(" + ", ".join(["%d"] * n) + ")"
                                   for n in range(2, INTS_SHOWN + 1)]


def _sequence_text(values) -> str:
    return _ints_text(values) or f"<{type(values).__name__}>"


def _name_text(name) -> str:
    """A qualified name, its end kept where it is long (the end tells functions apart)."""
    name = str(name)
    return name if len(name) <= ARGUMENT_CHARS else HIDDEN + name[1 - ARGUMENT_CHARS:]


def _callable_text(value) -> str:
    return _name_text(value.__qualname__)


def _method_text(value) -> str:
    function = value.__func__
    return _callable_text(function) if type(function) in _CALLABLE_TYPES else "<method>"


def _partial_text(value) -> str:
    function = value.func
    inner = _callable_text(function) if type(function) in _CALLABLE_TYPES else "?"
    return f"partial({inner})"[:ARGUMENT_CHARS]


def _class_text(value) -> str:
    return _name_text(_type_qualname(value))


def _module_text(value) -> str:
    name = value.__dict__.get("__name__")
    return name[:ARGUMENT_CHARS] if type(name) is str else "<module>"


def _dtype_text(value) -> str:
    return str(value)[:ARGUMENT_CHARS]


def _size_text(value) -> str:
    return _ints_text(value) or "<Size>"


def _tensor_text(value) -> str:
    return "Tensor"


# How values of each type are shown as a context's arguments: a short text that tells values
# apart without running the program's code (no __repr__ or __str__ but those of the builtin
# types named here), and never the contents or shape of a tensor (a batch of each iteration
# must not make a context of its own). The builtin types by their own text, the others
# decided once per type (_text_function).
_TEXT_OF = {str: _str_text, int: _int_text, bool: repr, float: repr, type(None): repr,
            tuple: _sequence_text, list: _sequence_text, types.MethodType: _method_text,
            functools.partial: _partial_text, types.ModuleType: _module_text,
            **{kind: _callable_text for kind in _CALLABLE_TYPES}}


def _text_function(kind: type):
    """How values of a type are shown, from the type alone (torch's types by their names
    and modules: this file does not import torch)."""
    if issubclass(kind, type):
        text_of = _class_text
    else:
        names = [(_type_module(k), _type_name(k)) for k in _type_mro(kind)]
        if names[0] == ("torch", "dtype"):
            text_of = _dtype_text
        elif names[0] == ("torch", "Size"):
            text_of = _size_text
        elif ("torch", "Tensor") in names:
            text_of = _tensor_text
        else:
            # an nn.Module by its class's name, anything else as <its type's name>
            module = ("torch.nn.modules.module", "Module") in names
            text = _type_name(kind) if module else f"<{_type_name(kind)}>"
            text = text[:ARGUMENT_CHARS]

            def text_of(value):
                return text
    if len(_TEXT_OF) < _CACHE_MAX:
        _TEXT_OF[kind] = text_of
    return text_of


RECORDER: Recorder | None = None
# What the hooks add per record() on this host, measured once at install (see _hook_cost):
# the common path (a frame recording again) and a record that takes a context.
HOOK_COST_NS: float | None = None
HOOK_COST_WORST_NS: float | None = None


# -- the hooks -------------------------------------------------------------------------------

def _patch_event(module) -> None:
    """Wrap the Event class of torch.cuda.streams (torch.cuda.Event) in place."""
    event_cls = getattr(module, "Event", None)
    if event_cls is None or getattr(event_cls, "_nsyswrap_hooked", False):
        return
    base = event_cls.__mro__[1]
    if not hasattr(base, "record"):  # torch without CUDA: no events to time
        return
    base_record = base.record
    base_elapsed = base.elapsed_time
    rec = RECORDER
    pending = rec.pending
    append = pending.append
    getframe = sys._getframe
    local = rec.local
    new_thread = rec.thread_state
    recording_context = rec.recording_context
    clock = _clock
    current_stream = None

    # The hot path: it runs inside the program's timed windows, so it only appends what it
    # saw, as a tuple of ints and a code object (which the garbage collector stops tracking
    # at once); Recorder.pack makes codes and bytes of them later, outside the windows.
    # Hashing the code object here (a dict keyed by it) cost ~0.3 µs a record on the H100
    # host; packing in place ~0.2 µs more. A frame that recorded last on its thread reuses
    # its context (the thread's state and an identity test); a new one takes its context
    # before the clock is read, so that a start record's snapshot lies outside the window.
    def record(self, stream=None):
        nonlocal current_stream
        frame = getframe(1)
        try:
            state = local.state
        except AttributeError:
            state = new_thread()
        if frame is state[0]:
            context = state[1]
        else:
            context = recording_context(frame, state)
        before = clock()
        if stream is None:
            if current_stream is None:
                current_stream = sys.modules["torch.cuda"].current_stream
            stream = current_stream()
        base_record(self, stream)
        after = clock()
        # Ints and a code object only: a tuple of them is one the garbage collector stops
        # tracking (holding the event or stream objects here made the collector walk the
        # pending records: 3 µs a record on the H200 host, against 0.87 µs).
        try:
            event = self._nsyswrap_event
        except AttributeError:
            event = _new_event(self)
        nth = event[1] = event[1] + 1
        try:
            handle = stream.cuda_stream
        except AttributeError:
            handle = getattr(stream, "stream_id", -1)
        append((before, after, state[2], event[0], nth, frame.f_code, frame.f_lasti, context,
                handle))
        if len(pending) >= PENDING_MAX:
            rec.pack(pause=True)

    def elapsed_time(self, end_event):
        before = clock()
        try:
            value = base_elapsed(self, end_event)
        except BaseException as e:
            _note_elapsed(self, end_event, before, getframe(1), float("nan"), e)
            raise
        _note_elapsed(self, end_event, before, getframe(1), value, None)
        return value

    record.__wrapped__ = event_cls.record
    elapsed_time.__wrapped__ = event_cls.elapsed_time
    record.__doc__ = event_cls.record.__doc__
    elapsed_time.__doc__ = event_cls.elapsed_time.__doc__
    event_cls.record = record
    event_cls.elapsed_time = elapsed_time
    event_cls._nsyswrap_hooked = True
    event_cls._nsyswrap_base_record = base_record


def _new_event(event) -> list[int]:
    rec = RECORDER
    with rec.lock:
        state = [rec.next_event, 0]
        rec.next_event += 1
        if state[0] == 1:
            # atexit runs last-in, first-out: registered at the first event, after torch's
            # import, the flush runs before torch's own exit handlers (flush runs once).
            atexit.register(flush)
    try:
        event._nsyswrap_event = state
    except AttributeError:  # an Event subclass with __slots__: counted, not told apart
        pass
    return state


def _state_of(event) -> list[int]:
    state = getattr(event, "_nsyswrap_event", None)
    return state if state is not None else [0, 0]


def _note_elapsed(start, end, before: int, frame, value: float, error) -> None:
    rec = RECORDER
    after = _clock()
    s, e = _state_of(start), _state_of(end)
    rec.pack()
    with rec.lock:
        if frame.f_code.co_filename.startswith(_OWN_FOLDER):  # the harness's: not kept
            rec.own_elapsed += 1
        elif rec.elapsed_count >= MAX_ELAPSED:
            rec.dropped_elapsed += 1
        else:
            if error is not None:
                rec.elapsed_errors[rec.elapsed_count] = \
                    f"{type(error).__name__}: {error}"[:300]
            rec.elapsed.extend(_ELAPSED.pack(before, after, rec.thread_code(), s[0], s[1],
                                             e[0], e[1], rec.site_code(frame), float(value)))
    if after - rec.last_clock_ns > CLOCK_EVERY_NS:
        mark = _mark_function()
        if mark is not None:
            rec.clock_burst(mark)


class _Scope:
    """A call of a benchmarking function: its call site and context (of the program's frame
    that called it: the context its records get), time, and the records and measurements
    made inside it (by row numbers), added to RECORDER.scopes at its end."""

    def __init__(self, kind: str, frame, **details):
        rec = RECORDER
        self.entry = {"kind": kind, "site": rec.user_site(frame),
                      "context": rec.context_code(frame, None), "thread": rec.thread_code(),
                      "first_record": rec.record_count, "first_elapsed": rec.elapsed_count,
                      **details}
        self.entry["before_ns"] = _clock()

    def close(self, **details) -> None:
        rec = RECORDER
        self.entry["after_ns"] = _clock()
        rec.pack()
        self.entry["end_record"] = rec.record_count
        self.entry["end_elapsed"] = rec.elapsed_count
        self.entry.update(details)
        with rec.lock:
            rec.scopes.append(self.entry)


def _plain(value):
    """A return value as JSON: floats, lists of floats, else its repr."""
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) for v in value):
        return [float(v) for v in value]
    return repr(value)[:200]


def _patch_do_bench(module) -> None:
    do_bench = getattr(module, "do_bench", None)
    if do_bench is None or getattr(do_bench, "_nsyswrap_hooked", False):
        return

    def wrapped(*args, **kwargs):
        scope = _Scope("do_bench", sys._getframe(1),
                       options={k: _plain(v) for k, v in kwargs.items()
                                if k in ("warmup", "rep", "quantiles", "return_mode",
                                         "percentiles")})
        _range_push(DO_BENCH_RANGE_PREFIX + _site_text(scope.entry["site"]))
        try:
            result = do_bench(*args, **kwargs)
        finally:
            _range_pop()
        scope.close(returned=_plain(result))
        return result

    wrapped.__wrapped__ = do_bench
    wrapped.__doc__ = do_bench.__doc__
    wrapped.__name__ = do_bench.__name__
    wrapped._nsyswrap_hooked = True
    module.do_bench = wrapped


# Timer's methods that measure, and what they return: one float (_timeit: seconds for
# `number` calls) or a Measurement (the others).
_TIMER_METHODS = ("timeit", "blocked_autorange", "adaptive_autorange")


def _patch_timer(module) -> None:
    timer_cls = getattr(module, "Timer", None)
    if timer_cls is None or getattr(timer_cls, "_nsyswrap_hooked", False):
        return
    timeit_once = timer_cls._timeit

    def _timeit(self, number):
        scope = _Scope("timer_measurement", sys._getframe(1), number=int(number))
        _range_push(TIMER_RANGE_PREFIX + _timer_label(self))
        try:
            seconds = timeit_once(self, number)
        finally:
            _range_pop()
        scope.close(returned=_plain(seconds))
        return seconds

    def measuring(method):
        def wrapped(self, *args, **kwargs):
            scope = _Scope(f"timer.{method.__name__}", sys._getframe(1),
                           label=_timer_label(self))
            m = method(self, *args, **kwargs)
            scope.close(returned={
                "raw_times": _plain(list(getattr(m, "raw_times", []))),
                "number_per_run": int(getattr(m, "number_per_run", 0) or 0),
                "median": _plain(getattr(m, "median", float("nan"))),
                "mean": _plain(getattr(m, "mean", float("nan")))})
            return m

        wrapped.__wrapped__ = method
        wrapped.__doc__ = method.__doc__
        wrapped.__name__ = method.__name__
        return wrapped

    timer_cls._timeit = _timeit
    for name in _TIMER_METHODS:
        if hasattr(timer_cls, name):
            setattr(timer_cls, name, measuring(getattr(timer_cls, name)))
    timer_cls._nsyswrap_hooked = True


def _timer_label(timer) -> str:
    spec = getattr(timer, "_task_spec", None)
    stmt = getattr(spec, "stmt", "") or ""
    label = getattr(spec, "label", None) or ""
    return (f"{label}: {stmt}" if label else stmt).strip()[:120]


def _site_text(site: int) -> str:
    if not 0 <= site < len(RECORDER.site_keys):
        return "?"
    file, line, _ = RECORDER.site_row(site)
    return f"{os.path.basename(file)}:{line}"


def _mark_function():
    """NVTX marks through torch (its CUDA builds carry NVTX; a CPU build's is a stub that
    raises), else the nvtx package; None without either."""
    cuda_nvtx = sys.modules.get("torch.cuda.nvtx")
    if cuda_nvtx is not None and type(getattr(cuda_nvtx, "_nvtx", None)).__name__ != \
            "_NVTXStub":
        return cuda_nvtx.mark
    try:
        import nvtx
    except Exception:
        return None
    _lift_nvtx_gate()
    return lambda text: nvtx.mark(message=text)


def _lift_nvtx_gate() -> None:
    """The nvtx package drops every mark under nsys 2022.x unless its domain gate is lifted
    (nsyswrap/instrument/nvtx_compat.py)."""
    try:
        _sibling("nvtx_compat").patch_nvtx_gate()
    except Exception as e:  # the marks may then be dropped: say so in the document
        if RECORDER is not None:
            RECORDER.notes.append(f"could not lift the nvtx package's gate: "
                                  f"{type(e).__name__}: {e}")


@functools.cache
def _sibling(name: str) -> types.ModuleType:
    """nsyswrap/instrument/<name>.py, standard library only, loaded by path as this file is
    (importing it would import nsyswrap)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"_nsyswrap_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _range_push(name: str) -> None:
    cuda_nvtx = sys.modules.get("torch.cuda.nvtx")
    try:
        cuda_nvtx.range_push(name)
    except Exception:
        pass


def _range_pop() -> None:
    cuda_nvtx = sys.modules.get("torch.cuda.nvtx")
    try:
        cuda_nvtx.range_pop()
    except Exception:
        pass


# -- import hooks ------------------------------------------------------------------------------

# Module -> what to patch once the program has imported it.
_PATCHES = {
    "torch.cuda.streams": _patch_event,
    "triton.testing": _patch_do_bench,
    "torch.utils.benchmark.utils.timer": _patch_timer,
}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader, patch):
        self.loader, self.patch = loader, patch

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            self.patch(module)
        except Exception as e:  # never break the program: note it and go on
            if RECORDER is not None:
                RECORDER.notes.append(f"could not hook {module.__name__}: "
                                      f"{type(e).__name__}: {e}")

    def __getattr__(self, name):  # get_code, get_source, is_package, ... as the real one
        return getattr(self.loader, name)


class _PatchingFinder(importlib.abc.MetaPathFinder):
    """Finds the modules in _PATCHES with the other finders and patches them once loaded."""

    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


# CONTEXT_DEPTH functions of a program, each calling the next, the innermost recording once:
# every call of the outermost is a new invocation, whose record takes its context.
_CHAIN_SOURCE = "".join(
    f"def level{i}(event, stream, size, name, shape):\n"
    + ("    event.record(stream)\n" if i == 0 else
       f"    level{i - 1}(event, stream, size, name, shape)\n")
    for i in range(CONTEXT_DEPTH))


def hook_costs(rounds: int = 5, records: int = 2000,
               invocations: int = 100) -> tuple[list[float], list[float]]:
    """ns that the record hook adds per call on this host, per round: on the common path (a
    frame recording again: `records` records in a loop), and on a record of a new invocation
    CONTEXT_DEPTH frames of the program deep (its context taken); the hook's own steps
    around a stand-in for the CUDA call, against the stand-in alone, rounds alternated."""
    class Base:
        def record(self, stream=None):
            return None

        def elapsed_time(self, end_event):
            return 0.0

    class Stream:
        cuda_stream = 0

    stream = Stream()

    class Plain(Base):
        def record(self, stream=None):
            if stream is None:
                stream = Stream()
            super().record(stream)

    saved = RECORDER
    try:
        globals()["RECORDER"] = Recorder()
        fake = type("FakeModule", (), {})()

        class Event(Base):
            pass

        fake.Event = Event
        _patch_event(fake)
        program: dict = {}
        exec(compile(_CHAIN_SOURCE, "<nsyswrap hook cost>", "exec"), program)
        outermost = program[f"level{CONTEXT_DEPTH - 1}"]
        hooked, plain = Event(), Plain()
        common, new_invocation = [], []
        shape = (4096, 4096)
        for _ in range(rounds):
            t0 = _clock()
            for _ in range(records):
                plain.record(stream)
            t1 = _clock()
            for _ in range(records):
                hooked.record(stream)
            t2 = _clock()
            common.append(((t2 - t1) - (t1 - t0)) / records)
            t0 = _clock()
            for i in range(invocations):
                outermost(plain, stream, i, "matmul", shape)
            t1 = _clock()
            for i in range(invocations):
                outermost(hooked, stream, i, "matmul", shape)
            t2 = _clock()
            new_invocation.append(((t2 - t1) - (t1 - t0)) / invocations)
        return common, new_invocation
    finally:
        globals()["RECORDER"] = saved


def _hook_cost() -> tuple[float, float]:
    """(common, worst): the median over rounds of hook_costs' two figures."""
    common, new_invocation = hook_costs()
    return (max(0.0, sorted(common)[len(common) // 2]),
            max(0.0, sorted(new_invocation)[len(new_invocation) // 2]))


def _measure_floor() -> None:
    """The events' own cost on this GPU: pairs of events around one tiny kernel, each after
    a GPU sleep that outlasts the host's enqueue (as the harness's floor), in an NVTX range
    the analysis finds by name."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return
    event_cls = torch.cuda.Event
    record = getattr(event_cls, "_nsyswrap_base_record", None)
    if record is None:
        return
    base_elapsed = event_cls.elapsed_time.__wrapped__
    try:
        tiny = torch.zeros(1, device="cuda")
        stream = torch.cuda.current_stream()
        times = []
        for i in range(23):
            start = event_cls(enable_timing=True)
            end = event_cls(enable_timing=True)
            record(start, stream)
            record(end, stream)
            torch.cuda._sleep(400_000)  # >= 200 µs at <= 2 GHz
            _range_push(FLOOR_RANGE)
            record(start, stream)
            tiny.zero_()
            record(end, stream)
            _range_pop()
            end.synchronize()
            if i >= 3:
                times.append(base_elapsed(start, end))
        RECORDER.floor_ms = times
    except Exception as e:
        RECORDER.notes.append(f"the events' floor was not measured: {type(e).__name__}: {e}")


def flush(measure_floor: bool = True) -> None:
    """Write everything recorded into the report (once), as NVTX marks."""
    rec = RECORDER
    if rec is None or rec.flushed:
        return
    rec.flushed = True
    rec.pack()
    if LINES is not None:
        LINES.stop()
    if not rec.records and not rec.scopes and not rec.elapsed and not _lines_kept():
        return
    mark = _mark_function()
    if mark is None:
        sys.stderr.write("nsyswrap: could not write the program's CUDA-event timings into "
                         "the report (no NVTX: neither torch.cuda.nvtx nor nvtx works)\n")
        return
    try:
        if measure_floor and rec.elapsed:
            _measure_floor()
        rec.clock_burst(mark)
        text = json.dumps(rec.document(), separators=(",", ":"))
        for part in _sibling("mark_parts").mark_texts(text, USER_EVENTS_PART_SCHEMA,
                                                      f"{os.getpid()}-{time.time_ns()}"):
            mark(part)
    except Exception as e:
        sys.stderr.write(f"nsyswrap: could not write the program's CUDA-event timings into "
                         f"the report: {type(e).__name__}: {e}\n")


def _trace_lines() -> None:
    """The program's lines traced beside its records (line_trace.py), unless `nsyswrap run
    --no-lines` set NSYSWRAP_LINES=0; Python before 3.12 has no sys.monitoring: a note."""
    global LINES, LINES_NOTE
    if os.environ.get(LINES_ENV, "1") == "0":
        LINES_NOTE = "the run was made with --no-lines"
        return
    if not hasattr(sys, "monitoring"):
        LINES_NOTE = (f"Python {sys.version_info[0]}.{sys.version_info[1]} has no "
                      "sys.monitoring; 3.12 does")
        return
    # Code compiled from text ("<string>": dataclasses', namedtuples') is no line to show.
    LINES = _sibling("line_trace").start(lambda f: f.startswith("<") or _is_library(f))
    if LINES is None:
        LINES_NOTE = "every sys.monitoring tool id nsyswrap may use was taken"


def _lines_kept() -> bool:
    return LINES is not None and any(len(t[3]) for t in list(LINES.threads.values()))


def install() -> bool:
    """Start recording (unless NSYSWRAP_USER_EVENTS=0). Call before the program runs."""
    global RECORDER, HOOK_COST_NS, HOOK_COST_WORST_NS
    if os.environ.get(ENABLE_ENV, "1") == "0" or RECORDER is not None:
        return False
    HOOK_COST_NS, HOOK_COST_WORST_NS = _hook_cost()
    RECORDER = Recorder()
    _trace_lines()
    sys.meta_path.insert(0, _PatchingFinder())
    atexit.register(flush)  # a fallback: _new_event registers it again, to run earlier
    return True
