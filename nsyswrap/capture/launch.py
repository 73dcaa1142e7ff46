"""Running nsys (or torchrun around it) for `nsyswrap run`: the workload's own output
channels, nsys's temporary folder, the relay of both, and what signals do meanwhile.

- The workload writes to two FIFOs in a private folder, not to nsys's pipes: nsyswrap's
  runner (runner.py) or a one-line `sh` wrapper (WRAPPER) puts them on its fds 1 and 2
  before the program starts (nsys follows exec). So everything on nsys's pipes is nsys's
  (and torchrun's): nsys's noise is hidden only there, the workload's lines are never
  touched, and nothing the workload prints can pass for nsys.
- nsys writes its raw capture into $TMPDIR first (`nsys-report-XXXX.qdstrm`) and moves it
  to `-o` at the end; where that move fails (a full disk) or nsys is stopped, the capture is
  left there. nsys names it on its own output, which is why that output must be nsys's
  alone (capture.py finds it there). nsys keeps its TMPDIR: two nsys 2022.4 with different
  ones break each other (docs/nsys-quirks.md).
- Signals (SIGINT, SIGTERM, SIGHUP alike; `Interrupts`): the first interrupts the workload
  and lets nsys write what it captured; while the workload still runs, a second stops nsys
  (and sends the workload SIGTERM: nsys alone leaves one that ignores SIGINT running), a
  third insists. Once the workload has ended, nsys (and then the importer and the export)
  is writing the report: further signals are only acknowledged, once, never passed on.
- A reader that leaves (`| head`) stops only the relay to it: the workload's output is still
  drained into nsys.log, so the workload never blocks on a full pipe. The same for a stream
  nsyswrap was started with closed (streams.py) or one whose writes fail; those say so in
  one line. The workload's bytes are passed on as they are, whatever nsyswrap's encoding.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import math
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import BadInputError
from . import streams

# The environment that hands the workload its channels; runner.py (standard library only)
# reads the same names.
STDOUT_ENV = "NSYSWRAP_STDOUT"
STDERR_ENV = "NSYSWRAP_STDERR"
STATUS_ENV = "NSYSWRAP_STATUS"  # a file the runner writes when the program never started
# What a non-Python workload is started through: its output to the FIFOs, then exec (the
# same process: nsys traces the program).
WRAPPER = ["/bin/sh", "-c",
           f'exec >"${STDOUT_ENV}" 2>"${STDERR_ENV}" || exit 126\n'
           f'unset {STDOUT_ENV} {STDERR_ENV} {STATUS_ENV}\n'
           'exec "$@"', "nsyswrap"]
LOG_NAME = "nsys.log"  # the run's log: nsys's output and the workload's
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How long an interrupted workload gets to end (and flush its CUDA trace) before nsys is
# told to stop: time to save a checkpoint on KeyboardInterrupt, as training scripts do.
# NSYSWRAP_INTERRUPT_GRACE_S sets another (a longer checkpoint; the tests, a shorter one).
INTERRUPT_GRACE_S = 30.0
GRACE_ENV = "NSYSWRAP_INTERRUPT_GRACE_S"
# nsys's own processes (the CLI, its launcher, its output relay, the agent).
_NSYS_PROCESS = re.compile(r"^(nsys|QdstrmImporter)")
# nsys's lines once collection has ended: it is writing the report.
_NSYS_WRITING = re.compile(r"^(Generating '|Generated:|Processing |Saved report file|"
                           r"\[\d+/\d+\])")


class Workspace:
    """A private folder (mkdtemp, 0700) for one capture: the workload's two FIFOs and the
    runner's status file; a context manager that removes it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="nsyswrap-"))
        self.stdout = self.root / "stdout"
        self.stderr = self.root / "stderr"
        os.mkfifo(self.stdout, 0o600)
        os.mkfifo(self.stderr, 0o600)
        self.status = self.root / "status"

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *_exc) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def env(self, base: dict[str, str]) -> dict[str, str]:
        return {**base, STDOUT_ENV: str(self.stdout), STDERR_ENV: str(self.stderr),
                STATUS_ENV: str(self.status)}

    def runner_status(self) -> str:
        try:
            return self.status.read_text(errors="replace")
        except OSError:
            return ""

@dataclass
class Outcome:
    """How nsys ended, and what came through its pipes."""

    returncode: int
    nsys_lines: list[str] = field(default_factory=list)  # nsys's (and torchrun's) last lines
    stdout_closed: bool = False  # the reader of standard output left (`| head`)


def run_nsys(cmd: list[str], env: dict[str, str], work: Workspace, log, interrupts: Interrupts,
             *, verbose: bool = False, quiet: bool = False,
             stdout_to_stderr: bool = False, noise: re.Pattern | None = None,
             say: Callable[[str], None] | None = None) -> Outcome:
    """Run `cmd` (nsys, or torchrun around it) in its own session; relay the workload's
    output from `work`'s FIFOs as it is and nsys's own without its `noise` (unless
    verbose); log both into `log` (binary, the run's nsys.log). Returns once nsys has ended.
    `say`: where a line about output that cannot be shown goes (else standard error)."""
    out = sys.stderr if stdout_to_stderr else sys.stdout
    relay = Relay(log, interrupts, verbose=verbose, quiet=quiet, noise=noise, say=say,
                  stdout_reserved=stdout_to_stderr)
    for sink in dict.fromkeys([out, sys.stderr]):
        if streams.unusable(sink):
            relay.closed(sink)
    fifos = [relay.open_fifo(work.stdout), relay.open_fifo(work.stderr)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    # nsys's own lines are diagnostics: standard error, whatever the format.
    threads = [threading.Thread(target=relay.workload, args=(fifos[0][0], out), daemon=True),
               threading.Thread(target=relay.workload, args=(fifos[1][0], sys.stderr),
                                daemon=True),
               threading.Thread(target=relay.nsys, args=(proc.stdout, sys.stderr), daemon=True),
               threading.Thread(target=relay.nsys, args=(proc.stderr, sys.stderr),
                                daemon=True)]
    for t in threads:
        t.start()
    interrupts.watch(proc)
    try:
        rc = proc.wait()
    finally:
        interrupts.nsys_ended()
        # The workload (and whatever of it lives on) holds the FIFOs' write ends; ours go,
        # so that the relay ends when theirs do.
        for _read, keep_open in fifos:
            os.close(keep_open)
    for t in threads:
        t.join(timeout=5)
    # As a shell reports it: 128 + N for an nsys ended by signal N.
    return Outcome(rc if rc >= 0 else 128 - rc, list(relay.nsys_lines), relay.stdout_closed)


class Relay:
    """Copies the workload's output and nsys's to the terminal and into the log, and goes
    on draining both when a reader leaves, a stream is closed or fails, or the log's disk
    is full: the workload never notices how nsyswrap's own streams are set up. What cannot
    be shown is still in the log, and one line says so (on a stream that still works)."""

    def __init__(self, log, interrupts: Interrupts, *, verbose: bool, quiet: bool,
                 noise: re.Pattern | None, say: Callable[[str], None] | None = None,
                 stdout_reserved: bool = False) -> None:
        self.log = log
        self.interrupts = interrupts
        self.verbose, self.quiet, self.noise = verbose, quiet, noise
        self.say = say
        # Standard output holds machine-readable output (--format json): no line of ours.
        self.stdout_reserved = stdout_reserved
        self.log_lock = threading.Lock()
        self.gone: set[int | None] = set()  # fds whose reader left or that cannot be written
        self.stdout_closed = False
        self.nsys_lines: collections.deque[str] = collections.deque(maxlen=400)

    @staticmethod
    def open_fifo(path: Path) -> tuple[int, int]:
        """Its read end, and a write end of ours that keeps it from reading EOF before the
        workload has opened it (both opened at once: neither side waits)."""
        read = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        keep_open = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(read, True)
        return read, keep_open

    def closed(self, sink) -> None:
        """`sink` was closed before nsyswrap started (streams.py): nothing is written to it."""
        self.gone.add(_fileno(sink))
        if not self.quiet:
            self._tell(f"{streams.name(sink)} is closed: what the workload writes there is "
                       f"kept only in the run's {LOG_NAME}")

    def workload(self, fd: int, sink) -> None:
        """The workload's bytes, as they come (a prompt without a newline too), passed on as
        bytes: never decoded and encoded again, so no encoding of nsyswrap's streams can
        refuse them (a sink without bytes underneath gets them decoded as UTF-8)."""
        raw = getattr(sink, "buffer", None) is not None
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            while chunk := os.read(fd, 65536):
                self._log(chunk)
                if not self.quiet:
                    self._write(sink, chunk if raw else decoder.decode(chunk))
        finally:
            os.close(fd)

    def nsys(self, stream, sink) -> None:
        """nsys's lines: the writing of the report noted, its noise hidden unless verbose."""
        for raw in iter(stream.readline, b""):
            self._log(raw)
            text = raw.decode(errors="replace")
            pieces = [p for p in text.replace("\r", "\n").splitlines() if p.strip()]
            self.nsys_lines.extend(pieces)
            if any(_NSYS_WRITING.match(p) for p in pieces):
                self.interrupts.nsys_writing()
            if self.quiet:
                continue
            if not self.verbose and self.noise is not None:
                text = "".join(ln for ln in text.replace("\r", "\n").splitlines(keepends=True)
                               if not self.noise.match(ln.rstrip("\n")))
            self._write(sink, text)

    def _log(self, raw: bytes) -> None:
        if self.log is None:
            return
        with self.log_lock:
            try:
                self.log.write(raw)
                self.log.flush()
            except (OSError, ValueError):  # a full disk: the terminal still gets it
                self.log = None

    def _write(self, sink, data: str | bytes) -> None:
        if not data:
            return
        fd = _fileno(sink)
        if fd in self.gone:
            return
        try:
            if isinstance(data, bytes):
                sink.flush()  # text of nsys's written before, in order
                sink.buffer.write(data)
                sink.buffer.flush()
            else:
                sink.write(data)
                sink.flush()
        except (OSError, ValueError) as e:
            # The reader left (`| head`), the terminal is gone, the disk behind it is full:
            # nothing more reaches it; what Python still buffers for it goes nowhere.
            self.gone.add(fd)
            if fd is not None:
                _to_devnull(fd)
            if isinstance(e, BrokenPipeError) and sink is sys.stdout:
                self.stdout_closed = True  # quiet, as for any program whose reader left
            elif not self.quiet:
                self._tell(f"cannot write to {streams.name(sink)} "
                           f"({getattr(e, 'strerror', None) or e}): what the workload "
                           f"writes there from now on is kept only in the run's {LOG_NAME}")

    def _tell(self, message: str) -> None:
        """One line on nsyswrap's messages' stream (standard error); where that is what
        failed, on standard output, unless machine-readable output owns it."""
        if _fileno(sys.stderr) not in self.gone and not streams.unusable(sys.stderr):
            try:
                if self.say is not None:
                    self.say(message)
                else:
                    print(f"nsyswrap: {message}", file=sys.stderr, flush=True)
                return
            except (OSError, ValueError):
                pass
        if not self.stdout_reserved and not streams.unusable(sys.stdout):
            self._write(sys.stdout, f"nsyswrap: {message}\n")


class Interrupts:
    """What SIGINT, SIGTERM and SIGHUP do from the start of nsys until the report is
    written (a context manager: the handlers are ours inside it; in threads other than the
    main one, where Python allows no handler, nothing changes). See the module docstring."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self._say = say or (lambda _message: None)
        self.received: list[int] = []
        self._proc: subprocess.Popen | None = None
        self._writing: str | None = None  # what is being written, once the workload ended
        self._workload_seen = False
        self._stops = 0  # signals that met the workload running
        self._told_writing = False
        self._timer: threading.Timer | None = None
        self._previous: dict[int, object] = {}
        self._lock = threading.RLock()
        self.grace_s = interrupt_grace_s()

    @property
    def interrupted(self) -> bool:
        return bool(self.received)

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *_exc) -> None:
        self._cancel_timer()
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def watch(self, proc: subprocess.Popen) -> None:
        """nsys is running: look for the workload below it until it shows up."""
        with self._lock:
            self._proc, self._workload_seen, self._writing = proc, False, None

        def look() -> None:
            while proc.poll() is None and not self._workload_seen:
                if workload_roots(proc.pid):
                    self._workload_seen = True
                    return
                time.sleep(0.2)

        threading.Thread(target=look, name="nsyswrap-workload-watch", daemon=True).start()

    def nsys_writing(self) -> None:
        """nsys said it is writing a report: a workload has been (under torchrun, one
        rank's may have ended while others run)."""
        self._workload_seen = True

    def nsys_ended(self) -> None:
        with self._lock:
            self._proc = None
            self._cancel_timer()
            self._writing = "the report is being written"

    def writing(self, what: str) -> None:
        """nsyswrap itself is finishing the report (import, export)."""
        with self._lock:
            self._writing = what

    def _handle(self, signum: int, _frame) -> None:
        with self._lock:
            self.received.append(signum)
            if signum == signal.SIGHUP:
                _leave_terminal()
            proc, writing = self._proc, self._writing
            if proc is None and writing is None:
                raise KeyboardInterrupt  # nothing started yet: stop as Python would
            if proc is None or proc.poll() is not None or writing is not None:
                self._tell_writing()
                return
            roots = workload_roots(proc.pid)
            if not roots and self._workload_seen:
                self._writing = "nsys is writing the report"
                self._tell_writing()
                return
            if not roots:  # nsys is still starting: nothing captured yet
                self._say("interrupted before the workload started: stopping nsys")
                _signal(proc.pid, signal.SIGINT)
                return
            self._stops += 1
            if self._stops == 1:
                interrupt_workload(proc.pid)
                self._say("interrupted: the workload is ending, and nsys will keep what it "
                          f"captured. If it has not ended in {self.grace_s:g} s, or on "
                          "a second Ctrl-C, nsys is stopped: the GPU trace the workload "
                          "still holds is then lost")
                self._timer = threading.Timer(self.grace_s, self._grace_over)
                self._timer.daemon = True
                self._timer.start()
            elif self._stops == 2:
                self._say("stopping nsys: it ends the workload and writes the report "
                          "without the GPU trace the workload still held; a third signal "
                          "ends nsys (SIGTERM), and what it has not written is lost")
                _stop_nsys(proc.pid)
            else:
                self._say("ending nsys (SIGTERM)")
                _signal(proc.pid, signal.SIGTERM)

    def _grace_over(self) -> None:
        with self._lock:
            proc = self._proc
            if proc is None or proc.poll() is not None or self._writing is not None:
                return
            if workload_roots(proc.pid):
                self._stops = max(self._stops, 2)
                self._say(f"the workload has not ended {self.grace_s:g} s after the "
                          "interrupt: stopping nsys (the GPU trace the workload still held is "
                          "lost)")
                _stop_nsys(proc.pid)

    def _tell_writing(self) -> None:
        if not self._told_writing:
            self._told_writing = True
            # nsys 2022.4 now and then never returns (docs/nsys-quirks.md): its pid is the
            # way out that this message must not take away.
            proc = self._proc
            way_out = (f"; to give the report up, end nsys itself: kill {proc.pid}"
                       if proc is not None and proc.poll() is None else "")
            self._say(f"{self._writing or 'nsys is writing the report'}; it will be kept — "
                      f"waiting (further signals are ignored until it is written{way_out})")

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def interrupt_grace_s() -> float:
    """INTERRUPT_GRACE_S, or the seconds NSYSWRAP_INTERRUPT_GRACE_S gives."""
    value = os.environ.get(GRACE_ENV)
    if value is None:
        return INTERRUPT_GRACE_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 <= seconds < math.inf:
        raise BadInputError(f"{GRACE_ENV}={value!r}: give the seconds an interrupted workload "
                            f"gets to end before nsys is stopped (default {INTERRUPT_GRACE_S:g})")
    return seconds


def _signal(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _fileno(stream) -> int | None:
    try:
        return stream.fileno()
    except (OSError, ValueError, AttributeError):
        return None


def _to_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _leave_terminal() -> None:
    """After SIGHUP the terminal is gone (writes fail with EIO): what nsyswrap still says
    goes nowhere, as under nohup, while the capture is finished and analysed."""
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            if stat.S_ISCHR(os.fstat(fd).st_mode) and not os.path.samefile(
                    f"/proc/self/fd/{fd}", os.devnull):
                _to_devnull(fd)


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of the live processes (zombies left out: a
    program that has exited is no longer running), from /proc; empty without /proc."""
    table = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat_line = f.read()
            except OSError:
                continue  # ended meanwhile
            name = stat_line[stat_line.find("(") + 1: stat_line.rfind(")")]
            state, ppid = stat_line[stat_line.rfind(")") + 2:].split()[:2]
            if state not in ("Z", "X"):
                table[int(entry)] = (int(ppid), name)
    return table


def workload_roots(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """The profiled programs below `root`: each process whose parent is one of nsys's own
    and which is not nsys's itself (nsys's launcher starts the program in a process group
    of its own). Under torchrun (--ranks), one per rank."""
    table = _process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _name) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in sorted(children.get(pid, [])):
            parent_is_nsys = bool(_NSYS_PROCESS.match(table.get(pid, (0, ""))[1]))
            if parent_is_nsys and not _NSYS_PROCESS.match(table[child][1]):
                found.append(child)  # a program nsys started: its own subtree is its business
            else:
                todo.append(child)
    return found


def interrupt_workload(root: int, sig: int = signal.SIGINT,
                       roots: list[int] | None = None) -> bool:
    """`sig` (SIGINT: what Ctrl-C in its terminal would do) to the process group of each
    profiled program below `root` (or of `roots`, found before). False when none was found
    (no /proc, or not started yet)."""
    sent = False
    for pid in workload_roots(root) if roots is None else roots:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group == os.getpgid(root):  # shares nsys's group: the program alone
                os.kill(pid, sig)
            else:
                os.killpg(group, sig)
            sent = True
    return sent


def _stop_nsys(root: int) -> None:
    """SIGINT to nsys: it stops collecting and writes the report. It passes the SIGINT on to
    the workload and nothing more: a workload that ignores it runs on, and nsys 2022.4
    returns only when the workload ends, or ~20 s later leaving it running below nobody
    (docs/nsys-quirks.md, "Signals"). So the workload gets SIGTERM, as nsys's --kill
    would send it: the runner (runner.py) turns that into an exit like Ctrl-C's."""
    roots = workload_roots(root)  # before nsys is told: its launcher may go first
    _signal(root, signal.SIGINT)
    interrupt_workload(root, signal.SIGTERM, roots)
