"""Profiling a workload under `nsys profile`, never losing what was captured.

nsys first writes a raw .qdstrm, then its importer turns it into .nsys-rep, which `nsys
export` turns into SQLite. On real machines the importer is often missing or broken
(docs/nsys-quirks.md); when nsys leaves only the .qdstrm we find the importer and import it
ourselves, or say exactly what is missing, and keep the .qdstrm. Ctrl-C and SIGTERM reach
the workload through nsys, so it flushes the capture. The workload's own output streams
through; nsys's progress noise does not (unless verbose).
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .errors import BadInputError, NsysWrapError
from .nsys import export_to, nsys_version, real_nsys_path, require_nsys
from .schema import CAPTURE_ENV, CAPTURE_RANGE

DEFAULT_TRACE = "cuda,nvtx,osrt"

# Lines nsys prints about itself, hidden unless verbose (the workload's lines pass through).
_NSYS_NOISE = re.compile(
    r"^(Collecting data\.\.\.|Generating '.*'|Generated:|\s+/\S+\.(nsys-rep|qdstrm|sqlite)$"
    r"|Importer error status:.*|Unable to retrieve the importer version.*"
    r"|Processing \[.*|Processing \d+ events.*|Exporting \d+ events.*|\[\d+/\d+\].*"
    r"|WARNING: CPU (IP/backtrace sampling|context switch tracing) not supported.*"
    r"|The target application returned non-zero exit code \d+"
    r"|.*nsys-report-\w+\.qdstrm.*|Capture range (started|ended).*"
    r"|Process is terminated\.|No reports were generated\.?|\s*)$"
)
_EXIT_CODE = re.compile(r"The target application returned non-zero exit code (\d+)")
# The dynamic loader's words when the importer lacks a library (libdw.so.1 is the one seen).
_MISSING_LIB = re.compile(r"(lib[\w.+-]+\.so[\.\d]*): cannot open shared object file")


@dataclass
class ProfileOptions:
    trace: str = DEFAULT_TRACE
    sample: bool = False  # CPU sampling and context switches: off, they bloat captures
    gpu_metrics: bool = False
    gpu_metrics_frequency: int | None = None
    harness_only: bool = False
    cuda_graph_trace: str | None = "node"  # per-kernel rows inside CUDA graphs
    extra_args: list[str] = field(default_factory=list)
    force: bool = False
    verbose: bool = False


@dataclass
class Capture:
    """The files one profiling run left, and how the workload ended."""

    output_dir: Path
    name: str
    command: list[str]
    nsys: str
    nsys_version: str | None
    workload_exit: int | None = None
    interrupted: bool = False
    log: Path | None = None
    rep: Path | None = None
    qdstrm: Path | None = None
    sqlite: Path | None = None
    notes: list[str] = field(default_factory=list)

    def files(self) -> list[Path]:
        return [p for p in (self.qdstrm, self.rep, self.sqlite, self.log) if p and p.exists()]


def default_output_dir(target: Sequence[str], base: Path | None = None) -> Path:
    stem = _target_stem(target)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (base or Path.cwd() / "nsyswrap-runs") / f"{stem}-{stamp}"


def _target_stem(target: Sequence[str]) -> str:
    for arg in target:
        if arg.endswith(".py"):
            return Path(arg).stem
    if len(target) >= 3 and target[1] == "-m":
        return target[2].split(".")[-1]
    return Path(target[0]).name if target else "run"


# Runs `python SCRIPT` / `python -m MODULE` so that an interrupt ends it through exit(),
# where nsys's CUDA trace is written (see the module's docstring).
TARGET_RUNNER = str(Path(__file__).with_name("_target.py"))
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")


def runnable_target(target: Sequence[str]) -> list[str]:
    """`target` with a plain `python SCRIPT ...` or `python -m MODULE ...` started through
    TARGET_RUNNER; any other command as it is."""
    if len(target) >= 2 and _PYTHON.match(Path(target[0]).name) and (
            target[1].endswith(".py") or (target[1] == "-m" and len(target) >= 3)):
        return [target[0], TARGET_RUNNER, *target[1:]]
    return list(target)


def profile_command(nsys: str, target: Sequence[str], out_base: Path,
                    opts: ProfileOptions) -> list[str]:
    cmd = [nsys, "profile", "-t", opts.trace, "-o", str(out_base),
           "--force-overwrite", "true" if opts.force else "false"]
    if not opts.sample:
        cmd += ["--sample=none", "--cpuctxsw=none"]
    if opts.cuda_graph_trace and "cuda" in opts.trace.split(","):
        cmd += [f"--cuda-graph-trace={opts.cuda_graph_trace}"]
    if opts.gpu_metrics:
        cmd += ["--gpu-metrics-devices=all"]
        if opts.gpu_metrics_frequency:
            cmd += [f"--gpu-metrics-frequency={opts.gpu_metrics_frequency}"]
    if opts.harness_only:
        cmd += ["--capture-range=nvtx", f"--nvtx-capture={CAPTURE_RANGE}@nsyswrap",
                "--capture-range-end=none"]
    cmd += list(opts.extra_args)
    return cmd + runnable_target(target)


def _file(base: Path, ext: str) -> Path:
    """base + ext, for bases that may hold dots (a script named my.bench.py)."""
    return base.with_name(base.name + ext)


def _clear_existing(bases: Sequence[Path], force: bool) -> None:
    existing = [_file(b, ext) for b in bases for ext in (".nsys-rep", ".sqlite", ".qdstrm")
                if _file(b, ext).exists()]
    if existing and not force:
        raise BadInputError(f"{existing[0]} exists: choose another --output, or --force to "
                            "overwrite it")
    for p in existing:
        p.unlink()


def profile(target: Sequence[str], output_dir: Path, opts: ProfileOptions, *,
            nsys: str | None = None, name: str | None = None,
            progress: Callable[[str], None] | None = None, quiet: bool = False,
            stdout_to_stderr: bool = False) -> Capture:
    """Run `target` under nsys; return what it left (at least the raw capture, or raise).

    The workload's output streams through (to stderr with `stdout_to_stderr`, which keeps
    standard output clean for machine-readable results)."""
    exe = require_nsys(nsys, purpose="profiling")
    name = name or _target_stem(target)
    make_output_dir(output_dir)
    base = output_dir / name
    _clear_existing([base], opts.force)
    cmd = profile_command(exe, target, base, opts)
    cap = Capture(output_dir, name, cmd, exe, nsys_version(exe), log=output_dir / "nsys.log")
    cap.workload_exit, cap.interrupted = _launch(cmd, target, cap, opts, progress, quiet,
                                                 stdout_to_stderr)
    _collect(cap, base)
    if cap.rep is None and cap.qdstrm is None:
        raise NsysWrapError(
            f"nsys made no report ({_last_nsys_line(cap.log) or 'no message'}); its full "
            f"output is in {cap.log}"
        )
    return cap


def make_output_dir(path: Path) -> None:
    """Create the run's folder, or refuse before anything runs: a path that cannot be
    written is the user's to fix (exit 2), not a crash after the workload ran."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInputError(f"cannot create the output folder {path}: "
                            f"{e.strerror or e}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInputError(f"cannot write to the output folder {path}: permission denied")


def profile_ranks(target: Sequence[str], output_dir: Path, opts: ProfileOptions, ranks: int,
                  *, nsys: str | None = None, progress: Callable[[str], None] | None = None,
                  stdout_to_stderr: bool = False) -> list[Capture]:
    """Run a Python `target` on `ranks` processes with torchrun, each rank under its own
    nsys (one report per rank, named with nsys's %q{RANK}). Returns a Capture per rank
    that left anything; raises when none did."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise BadInputError("--ranks starts the ranks with torchrun, which needs PyTorch: "
                            "pip install torch (or run torchrun yourself: nsyswrap run -- "
                            "torchrun ...)")
    exe = require_nsys(nsys, purpose="profiling")
    name = _target_stem(target)
    make_output_dir(output_dir)
    bases = [output_dir / f"{name}.rank{r}" for r in range(ranks)]
    _clear_existing(bases, opts.force)
    inner = profile_command(exe, target, output_dir / f"{name}.rank%q{{RANK}}", opts)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
           "--no-python", *inner]
    first = Capture(output_dir, f"{name}.rank0", cmd, exe, nsys_version(exe),
                    log=output_dir / "nsys.log")
    # An interrupted rank exits with 0, or torchrun takes it for a failed worker and kills
    # the other ranks' nsys before they write their reports (nsyswrap/_target.py).
    exit_code, interrupted = _launch(cmd, target, first, opts, progress, False,
                                     stdout_to_stderr, {"NSYSWRAP_INTERRUPT_EXIT": "0"})
    captures = []
    for base in bases:
        cap = Capture(output_dir, base.name, cmd, exe, first.nsys_version, exit_code,
                      interrupted, first.log)
        _collect(cap, base)
        if cap.rep or cap.qdstrm:
            captures.append(cap)
    if not captures:
        raise NsysWrapError(f"no rank left a report ({_last_nsys_line(first.log) or 'no message'}"
                            f"); the full output is in {first.log}")
    return captures


def _launch(cmd, target, cap: Capture, opts: ProfileOptions, progress, quiet,
            stdout_to_stderr, extra_env: dict[str, str] | None = None) -> tuple[int, bool]:
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    if opts.harness_only:
        env[CAPTURE_ENV] = "1"
    if progress:
        progress(f"profiling with nsys {cap.nsys_version or '?'}: {shlex.join(target)}")
    with open(cap.log, "w") as log:
        log.write("$ " + shlex.join(cmd) + "\n")
        log.flush()
        return _run_streaming(cmd, env, log, opts.verbose, quiet, stdout_to_stderr)


def _collect(cap: Capture, base: Path) -> None:
    rep, qdstrm = _file(base, ".nsys-rep"), _file(base, ".qdstrm")
    cap.rep = rep if rep.exists() else None
    cap.qdstrm = qdstrm if qdstrm.exists() else None


def _run_streaming(cmd: list[str], env: dict, log, verbose: bool, quiet: bool = False,
                   stdout_to_stderr: bool = False) -> tuple[int, bool]:
    """Run nsys in its own session, relay output, forward Ctrl-C/SIGTERM. Returns (exit
    code of the workload as nsys reports it, whether we were interrupted)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)
    interrupted = []
    lock = threading.Lock()
    reported_exit: list[int] = []

    def relay(stream, sink):
        for raw in iter(stream.readline, b""):
            text = raw.decode(errors="replace")
            with lock:
                log.write(text)
                log.flush()
            for piece in text.replace("\r", "\n").splitlines():
                m = _EXIT_CODE.search(piece)
                if m:
                    reported_exit.append(int(m.group(1)))
            if quiet:
                continue
            if verbose or not all(_NSYS_NOISE.match(p) for p in text.replace("\r", "\n")
                                  .splitlines()):
                sink.write(text if verbose else _strip_noise(text))
                sink.flush()

    out = sys.stderr if stdout_to_stderr else sys.stdout
    threads = [threading.Thread(target=relay, args=(proc.stdout, out), daemon=True),
               threading.Thread(target=relay, args=(proc.stderr, sys.stderr), daemon=True)]
    for t in threads:
        t.start()

    def stop_nsys(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)

    def forward(signum, _frame):
        # First Ctrl-C/SIGTERM: interrupt the workload itself, as Ctrl-C in its terminal
        # would, and let nsys finish as it does when a program ends. Stopping nsys instead
        # makes it kill the workload (SIGTERM) before the CUDA activity buffered inside the
        # process is written: the report keeps the NVTX ranges and loses the kernels
        # (docs/nsys-quirks.md, "Signals"). If the workload does not end within
        # INTERRUPT_GRACE_S, or on a second signal, nsys is stopped; then insisted.
        interrupted.append(signum)
        if len(interrupted) == 1 and interrupt_workload(proc.pid):
            timer = threading.Timer(INTERRUPT_GRACE_S, stop_nsys, (signal.SIGINT,))
            timer.daemon = True
            timer.start()
            return
        stop_nsys(signal.SIGINT if len(interrupted) <= 2 else signal.SIGTERM)

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, forward)
    try:
        rc = proc.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for t in threads:
        t.join(timeout=5)
    # nsys returns the workload's exit code; it also prints it when non-zero.
    return (reported_exit[-1] if reported_exit else rc), bool(interrupted)


# How long an interrupted workload gets to end (and flush its CUDA trace) before nsys is
# told to stop: time to save a checkpoint on KeyboardInterrupt, as training scripts do.
INTERRUPT_GRACE_S = 30.0
# nsys's own processes (the CLI, its launcher, its output relay, the agent).
_NSYS_PROCESS = re.compile(r"^(nsys|QdstrmImporter)")


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name), from /proc; empty where there is no /proc."""
    table = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue  # ended meanwhile
            name = stat[stat.find("(") + 1: stat.rfind(")")]
            ppid = int(stat[stat.rfind(")") + 2:].split()[1])
            table[int(entry)] = (ppid, name)
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


def interrupt_workload(root: int) -> bool:
    """SIGINT to the process group of each profiled program below `root` (what Ctrl-C in
    its terminal would do). False when none was found (no /proc, or not started yet)."""
    sent = False
    for pid in workload_roots(root):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            group = os.getpgid(pid)
            if group == os.getpgid(root):  # shares nsys's group: the program alone
                os.kill(pid, signal.SIGINT)
            else:
                os.killpg(group, signal.SIGINT)
            sent = True
    return sent


def _strip_noise(text: str) -> str:
    lines = text.replace("\r", "\n").splitlines(keepends=True)
    kept = [ln for ln in lines if not _NSYS_NOISE.match(ln.rstrip("\n"))]
    return "".join(kept)


def _last_nsys_line(log: Path | None) -> str:
    if not log or not log.exists():
        return ""
    lines = [ln.strip() for ln in log.read_text(errors="replace").replace("\r", "\n")
             .splitlines() if ln.strip() and not ln.startswith("$ ")]
    return lines[-1] if lines else ""


# --- importing a raw capture -------------------------------------------------------------

def importer_candidates(nsys: str | None) -> list[Path]:
    """Where QdstrmImporter may live, for this nsys (most specific first)."""
    found: list[Path] = []
    if nsys:
        d = real_nsys_path(nsys).parent
        found += [d.parent / "host-linux-x64" / "QdstrmImporter",
                  d.parent / "linux-desktop-glibc_2_11_3-x64" / "QdstrmImporter",
                  d / "QdstrmImporter"]
        # Debian: nsys in /usr/lib/x86_64-linux-gnu/nsight-systems/target-linux-x64, the
        # importer in /usr/lib/nsight-systems/host-linux-x64.
        found.append(Path("/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter"))
    found += [Path(p) for p in sorted(glob.glob(
        "/opt/nvidia/nsight-systems/*/host-linux-x64/QdstrmImporter"), reverse=True)]
    out, seen = [], set()
    for p in found:
        if p not in seen:
            seen.add(p)
            out.append(p)
    return out


def missing_library(text: str) -> str | None:
    """'libdw.so.1' when a loader error names a shared library the importer lacks."""
    m = _MISSING_LIB.search(text)
    return m.group(1) if m else None


def find_importer(nsys: str | None) -> Path | None:
    """$NSYSWRAP_IMPORTER if set (and only it), else the first candidate that exists."""
    explicit = os.environ.get("NSYSWRAP_IMPORTER")
    if explicit is not None:
        p = Path(explicit)
        return p if p.is_file() and os.access(p, os.X_OK) else None
    for p in importer_candidates(nsys):
        if p.is_file() and os.access(p, os.X_OK):
            return p
    return None


def import_qdstrm(qdstrm: Path, nsys: str | None = None) -> Path:
    """Turn a raw .qdstrm into .nsys-rep beside it; the .qdstrm is kept either way."""
    importer = find_importer(nsys)
    if importer is None:
        looked = ", ".join(str(p) for p in importer_candidates(nsys)[:4])
        raise NsysWrapError(
            f"nsys left only the raw capture {qdstrm}: its importer (QdstrmImporter) is not "
            f"installed (looked in {looked}); install the full Nsight Systems host package, "
            f"then run `nsyswrap import {qdstrm}`"
        )
    proc = subprocess.run([str(importer), "-i", str(qdstrm)], capture_output=True, text=True)
    rep = qdstrm.with_name(qdstrm.name[: -len(".qdstrm")] + ".nsys-rep")
    if proc.returncode != 0 or not rep.exists():
        text = proc.stdout + proc.stderr
        lib = missing_library(text)
        if lib:
            raise NsysWrapError(
                f"nsys's importer {importer} cannot start: {lib} is missing "
                "(Debian/Ubuntu: apt install libdw1; RHEL/Fedora: dnf install elfutils-libs); "
                f"the raw capture is kept at {qdstrm}: run `nsyswrap import {qdstrm}` after "
                "installing it"
            )
        last = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
        raise NsysWrapError(
            f"{importer} could not import {qdstrm} "
            f"({last[-1].strip() if last else proc.returncode}); the raw capture is kept"
        )
    return rep


def finish(cap: Capture, progress: Callable[[str], None] | None = None) -> Capture:
    """Import (if nsys could not) and export to SQLite. Keeps every earlier file."""
    say = progress or (lambda _msg: None)
    if cap.rep is None and cap.qdstrm is not None:
        say("nsys could not import the capture itself; importing it")
        cap.rep = import_qdstrm(cap.qdstrm, cap.nsys)
        cap.notes.append(f"imported {cap.qdstrm.name} with QdstrmImporter (nsys did not)")
        # As nsys does after its own import: the report holds everything the raw capture did.
        cap.qdstrm.unlink()
        cap.qdstrm = None
    if cap.rep is not None:
        say("exporting to SQLite")
        cap.sqlite = export_to(cap.rep, cap.rep.with_name(cap.rep.name[: -len(".nsys-rep")]
                                                          + ".sqlite"), cap.nsys)
    return cap
