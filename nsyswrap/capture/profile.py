"""Profiling a workload under `nsys profile`, never losing what was captured.

nsys first writes a raw .qdstrm, then its importer turns it into .nsys-rep, which `nsys
export` turns into SQLite. On real machines the importer is often missing or broken
(docs/nsys-quirks.md); when nsys leaves only the .qdstrm we find the importer and import it
ourselves, or say exactly what is missing, and keep the .qdstrm. A capture nsys could not
move into place (a full disk) is found in its temporary folder, moved beside the report or
kept where it is, and named. How nsys runs, the workload's own output channels and what
signals do meanwhile: launch.py.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import BadInputError, NsysWrapError
from ..common.files import UMASK_ENV, make_private, open_new, replacing, user_umask
from ..common.nsys import export_to, nsys_version, real_nsys_path, require_nsys
from ..instrument.schema import (
    CAPTURE_ENV,
    CAPTURE_RANGE,
    LINES_ENV,
    SOURCE_ENV,
    USER_EVENTS_ENV,
)
from ..read.redact import redact_args
from .launch import LOG_NAME, WRAPPER, Interrupts, Workspace, run_nsys
from .run_folder import INCOMPLETE_PREFIX

DEFAULT_TRACE = "cuda,nvtx,osrt"

# Lines nsys prints about itself, hidden unless verbose. Only nsys's own output is filtered:
# the workload's comes on channels of its own (launch.py) and passes untouched.
_NSYS_NOISE = re.compile(
    r"^(Collecting data\.\.\.|Generating '.*'|Generated:|\s+/.*\.(nsys-rep|qdstrm|sqlite)$"
    r"|Importer error status:.*|Unable to retrieve the importer version.*"
    r"|Processing \[.*|Processing \d+ events.*|Exporting \d+ events.*|\[\d+/\d+\].*"
    r"|WARNING: CPU (IP/backtrace sampling|context switch tracing) not supported.*"
    r"|The target application returned non-zero exit code \d+"
    r"|.*nsys-report-\w+\.qdstrm.*|Capture range (started|ended).*"
    r"|Process is terminated\.|No reports were generated\.?|\s*)$"
)
# Where nsys names its temporary capture ("Generating '/tmp/nsys-report-d181.qdstrm'") and
# what it made ("Generated:" then the paths, indented; spaces in them as they are).
_NSYS_NAMES = re.compile(r"^(?:Generating '(?P<quoted>/.+)'|\s+(?P<listed>/.+))$")
# The dynamic loader's words when the importer lacks a library (libdw.so.1 is the one seen).
_MISSING_LIB = re.compile(r"(lib[\w.+-]+\.so[\.\d]*): cannot open shared object file")
# torchrun's summary of a failed worker (each rank's worker is its nsys).
_FAILED_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)\s*\(local_rank.*\n\s*exitcode\s*:\s*(-?\d+)",
                          re.MULTILINE)
# nsys's lines that say what went wrong ("unrecognised option", "Failed to create ...").
_NSYS_ERROR = re.compile(r"(?i)error|fail|unrecogni[sz]ed|invalid|cannot|unable|no such|"
                         r"denied|no space|not found")
_NO_MODULE = "no-module"  # what runner.py writes into the status file, see there
_RANGE_ENDED = "Capture range ended"  # nsys 2022.4 and 2025.3 alike


@dataclass
class ProfileOptions:
    trace: str = DEFAULT_TRACE
    sample: bool = False  # CPU sampling and context switches: off, they bloat captures
    gpu_metrics: bool = False
    gpu_metrics_frequency: int | None = None
    harness_only: bool = False
    cuda_graph_trace: str | None = "node"  # per-kernel rows inside CUDA graphs
    extra_args: list[str] = field(default_factory=list)
    force: bool = False  # replace an earlier run's files (once the new run is complete)
    verbose: bool = False
    # The runner records the program's own CUDA-event timings (event_hooks.py).
    user_events: bool = True
    # ... and traces the program's lines (line_trace.py, Python 3.12+), with the source text
    # of those in its working folder.
    lines: bool = True
    source: bool = True


@dataclass
class Capture:
    """The files one profiling run left, and how the workload ended."""

    output_dir: Path
    name: str
    command: list[str]  # nsys's (or torchrun's around it)
    nsys: str
    nsys_version: str | None
    workload_exit: int | None = None
    interrupted: bool = False
    log: Path | None = None
    rep: Path | None = None
    qdstrm: Path | None = None
    sqlite: Path | None = None
    notes: list[str] = field(default_factory=list)
    nsys_lines: list[str] = field(default_factory=list)  # nsys's own last lines
    stdout_closed: bool = False  # the reader of standard output left (`| head`)
    # Captures nsys left elsewhere: moved into output_dir, or kept where they are.
    rescued: list[Path] = field(default_factory=list)
    kept_elsewhere: list[Path] = field(default_factory=list)
    kept_errno: int | None = None  # why the first kept elsewhere could not be moved here
    failed_ranks: dict[int, int] = field(default_factory=dict)  # rank -> its nsys's exit code
    # nsys shut the workload down when its capture range ended (the range-end mode named
    # here): a nonzero workload_exit is then nsys's doing, not the program's.
    shut_down_by_nsys: str | None = None
    target: list[str] = field(default_factory=list)  # the profiled command, as the user gave it

    def files(self) -> list[Path]:
        return [p for p in (self.qdstrm, self.rep, self.sqlite, self.log) if p and p.exists()]


def target_stem(target: Sequence[str]) -> str:
    """The run's name: the script's or module's, else the command's; made a name that any
    file system takes for a file of the output folder (`safe_stem`)."""
    for arg in target:
        if arg.endswith(".py"):
            return safe_stem(Path(arg).stem)
    if len(target) >= 3 and target[1] == "-m":
        return safe_stem(target[2].split(".")[-1])
    return safe_stem(Path(target[0]).name if target else "run")


# The room a run's name gets in a file name (255 bytes at most): its longest files are
# report.NAME.rankN.html and the default folder NAME-DATE-TIME-XXXXXX.
_STEM_BYTES = 200


def safe_stem(stem: str) -> str:
    """`stem` as the run's file names take it: "." and ".." (a script named `..py`) name
    folders, not files ("run" instead); a name too long for a file system is cut (at a
    whole character). Any other name is kept as it is, spaces, `%` and all: nsys's output
    name is escaped where it is given (`nsys_output_name`)."""
    if not stem.strip("."):
        return "run"
    data = stem.encode(errors="surrogateescape")
    if len(data) > _STEM_BYTES:
        stem = data[:_STEM_BYTES].decode(errors="ignore")
    return stem


def nsys_output_name(base: Path) -> str:
    """`base` as nsys profile's `-o` takes it: nsys expands %p, %h, %q{VAR} in it (in the
    folders' names too) and reads %% as % (nsys profile --help; docs/nsys-quirks.md)."""
    return str(base).replace("%", "%%")


# Runs `python SCRIPT` / `python -m MODULE` so that an interrupt ends it through exit(),
# where nsys's CUDA trace is written (see the module's docstring).
TARGET_RUNNER = str(Path(__file__).parents[1] / "instrument" / "runner.py")
_PYTHON = re.compile(r"^python(\d+(\.\d+)*)?$")


def runnable_target(target: Sequence[str]) -> list[str]:
    """`target` with a plain `python SCRIPT ...` or `python -m MODULE ...` started through
    TARGET_RUNNER; any other command through launch.WRAPPER. Both put the program's output
    on its own channels first."""
    if len(target) >= 2 and _PYTHON.match(Path(target[0]).name) and (
            target[1].endswith(".py") or (target[1] == "-m" and len(target) >= 3)):
        return [target[0], TARGET_RUNNER, *target[1:]]
    return [*WRAPPER, *target]


def profile_command(nsys: str, target: Sequence[str], out_base: Path,
                    opts: ProfileOptions, pattern: str = "") -> list[str]:
    """nsys profile's command line, its report written to `out_base` (a path, escaped for
    nsys) followed by `pattern` (nsys's own, e.g. %q{RANK}: expanded by nsys)."""
    # A fresh folder each run (pipeline.py): nsys never has anything to overwrite.
    cmd = [nsys, "profile", "-t", opts.trace, "-o", nsys_output_name(out_base) + pattern,
           "--force-overwrite", "false"]
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
    # nsys's default end of a range, stop-shutdown, kills the program mid-run, whose exit
    # code would then read as its own failure: collection stops, the program runs on.
    if capture_range_end(cmd) is None and nsys_option(cmd, "--capture-range", "-c") not in (
            None, "none"):
        cmd += ["--capture-range-end=stop"]
    return cmd + runnable_target(target)


def nsys_option(args: Sequence[str], long: str, short: str | None = None) -> str | None:
    """The value the last `long=V`, `long V` or `short V` among nsys's `args` gives."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(long + "="):
            value = arg[len(long) + 1:]
        elif arg in (long, short) and i + 1 < len(args):
            value = args[i + 1]
    return value


def capture_range_end(args: Sequence[str]) -> str | None:
    """The --capture-range-end given among `args` (None: nsys's default, stop-shutdown)."""
    return nsys_option(args, "--capture-range-end")


def shuts_down(args: Sequence[str]) -> str | None:
    """The range-end mode of nsys's command `args` when nsys ends the program as the capture
    range ends: stop-shutdown, or repeat-shutdown:N, unless --kill=none; else None."""
    if nsys_option(args, "--capture-range", "-c") in (None, "none"):
        return None
    end = capture_range_end(args) or "stop-shutdown"
    if "shutdown" not in end:
        return None
    return None if nsys_option(args, "--kill") == "none" else end


def _file(base: Path, ext: str) -> Path:
    """base + ext, for bases that may hold dots (a script named my.bench.py)."""
    return base.with_name(base.name + ext)


def _refuse_existing(bases: Sequence[Path]) -> None:
    existing = [_file(b, ext) for b in bases for ext in (".nsys-rep", ".sqlite", ".qdstrm")
                if os.path.lexists(_file(b, ext))]
    if existing:
        raise BadInputError(f"{existing[0]} exists: choose another --output, or --force to "
                            "replace it")


class ProgramNotStarted(BadInputError):
    """The profiled program never ran (python -m of a module that cannot be found)."""


def profile(target: Sequence[str], output_dir: Path, opts: ProfileOptions, *,
            nsys: str | None = None, name: str | None = None,
            progress: Callable[[str], None] | None = None, quiet: bool = False,
            stdout_to_stderr: bool = False, interrupts: Interrupts | None = None) -> Capture:
    """Run `target` under nsys into `output_dir` (an existing folder, where nothing of this
    name is yet); return what it left (at least the raw capture, or raise, naming any
    capture kept elsewhere).

    The workload's output streams through (to stderr with `stdout_to_stderr`, which keeps
    standard output clean for machine-readable results). `interrupts`: the caller's, when
    it goes on writing the report after nsys (pipeline.py); else one for nsys's run."""
    exe = require_nsys(nsys, purpose="profiling")
    name = name or target_stem(target)
    base = output_dir / name
    _refuse_existing([base])
    cmd = profile_command(exe, target, base, opts)
    cap = Capture(output_dir, name, cmd, exe, nsys_version(exe), log=output_dir / LOG_NAME,
                  target=list(target))
    _launch(cap, target, opts, progress, quiet, stdout_to_stderr, interrupts, rescue_as=name)
    _collect(cap, base)
    # A capture kept elsewhere is the whole one; anything nsys left here beside it is not.
    if cap.kept_elsewhere and cap.rep is None or cap.rep is None and cap.qdstrm is None:
        raise NsysWrapError(_no_report(cap, "nsys made no report"))
    return cap


def profile_ranks(target: Sequence[str], output_dir: Path, opts: ProfileOptions, ranks: int,
                  *, nsys: str | None = None, progress: Callable[[str], None] | None = None,
                  stdout_to_stderr: bool = False,
                  interrupts: Interrupts | None = None) -> list[Capture]:
    """Run a Python `target` on `ranks` processes with torchrun, each rank under its own
    nsys (one report per rank, named with nsys's %q{RANK}). Returns a Capture per rank
    that left anything; raises when none did."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise BadInputError("--ranks starts the ranks with torchrun, which needs PyTorch: "
                            "pip install torch (or run torchrun yourself: nsyswrap run -- "
                            "torchrun ...)")
    exe = require_nsys(nsys, purpose="profiling")
    name = target_stem(target)
    bases = [output_dir / f"{name}.rank{r}" for r in range(ranks)]
    _refuse_existing(bases)
    inner = profile_command(exe, target, output_dir / f"{name}.rank", opts, "%q{RANK}")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
           "--no-python", *inner]
    first = Capture(output_dir, f"{name}.rank0", cmd, exe, nsys_version(exe),
                    log=output_dir / LOG_NAME, target=list(target))
    # An interrupted rank exits with 0, or torchrun takes it for a failed worker and kills
    # the other ranks' nsys before they write their reports (nsyswrap/instrument/runner.py).
    # A capture nsys left in its temporary folder is no rank's by its name: moved as it is.
    _launch(first, target, opts, progress, False, stdout_to_stderr, interrupts,
            {"NSYSWRAP_INTERRUPT_EXIT": "0"})
    first.failed_ranks = failed_ranks(first.nsys_lines)
    captures = []
    for base in bases:
        cap = Capture(output_dir, base.name, cmd, exe, first.nsys_version,
                      first.workload_exit, first.interrupted, first.log,
                      nsys_lines=first.nsys_lines, stdout_closed=first.stdout_closed,
                      rescued=first.rescued, kept_elsewhere=first.kept_elsewhere,
                      failed_ranks=first.failed_ranks,
                      shut_down_by_nsys=first.shut_down_by_nsys, target=first.target)
        _collect(cap, base)
        if cap.rep or cap.qdstrm:
            captures.append(cap)
    if not captures:
        raise NsysWrapError(_no_report(first, "no rank left a report"))
    return captures


def failed_ranks(nsys_lines: Sequence[str]) -> dict[int, int]:
    """rank -> exit code of each worker torchrun's failure summary names."""
    return {int(r): int(code) for r, code in _FAILED_RANK.findall("\n".join(nsys_lines))}


def _no_report(cap: Capture, what: str) -> str:
    """Why there is no report in the output folder: nothing captured, or a capture nsys
    could not move there, kept where it is."""
    last = nsys_reason(cap.nsys_lines)
    if cap.kept_elsewhere:
        return _kept_elsewhere(cap, last)
    if cap.rescued:
        moved = cap.rescued[0]
        return (f"{what} ({last}); nsys's capture was moved to {moved}: `nsyswrap import "
                f"{moved}` finishes it")
    return f"{what} ({last}); its full output is in {cap.log}"


def _kept_elsewhere(cap: Capture, last: str) -> str:
    """Why the capture nsys left in its temporary folder could not be moved into the output
    folder (`cap.kept_errno`, nsys's own line `last`), where it is, and what to do."""
    kept = cap.kept_elsewhere[0]
    # The folder the user gave: a run into a folder that existed writes into a private
    # folder inside it (run_folder.py), which goes with it.
    folder = cap.output_dir
    if folder.name.startswith(INCOMPLETE_PREFIX):
        folder = folder.parent
    finish = f"`nsyswrap import {kept} -o {folder}`"
    if cap.kept_errno in (errno.ENOENT, errno.ENOTDIR) or not cap.output_dir.is_dir():
        return (f"the output folder {folder} was removed during the run ({last}); the "
                f"capture is kept at {kept}: {finish} finishes it")
    if cap.kept_errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        why = os.strerror(cap.kept_errno)
        why = last if why in last else f"{why}; {last}"
        return (f"the output folder {folder} is not writable ({why}); the capture is kept at "
                f"{kept}: make the folder writable, then {finish}, or import it into another "
                "folder with -o")
    if cap.kept_errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"nsys could not write the report into {folder} ({last}); the capture is "
                f"kept at {kept}: make room, then {finish}")
    return (f"nsys could not write the report into {folder} ({last}); the capture is kept "
            f"at {kept}: {finish} finishes it")


def nsys_reason(lines: Sequence[str]) -> str:
    """nsys's last line that reads as an error (else its last line): what to quote."""
    for line in reversed(lines):
        if _NSYS_ERROR.search(line) and not _NSYS_NOISE.match(line):
            return line.strip()
    return lines[-1].strip() if lines else "no message"


def _launch(cap: Capture, target, opts: ProfileOptions, progress, quiet, stdout_to_stderr,
            interrupts: Interrupts | None, extra_env: dict[str, str] | None = None,
            rescue_as: str | None = None) -> None:
    """Run nsys for `cap`; fill in how it ended and rescue what it left in its temporary
    folder (named `rescue_as`; None: as nsys named it)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    env[UMASK_ENV] = f"{user_umask():03o}"  # the program's own files as without nsyswrap
    if opts.harness_only:
        env[CAPTURE_ENV] = "1"
    if not opts.user_events:
        env[USER_EVENTS_ENV] = "0"
    if not opts.lines:
        env[LINES_ENV] = "0"
    if not opts.source:
        env[SOURCE_ENV] = "0"
    if progress:
        progress(f"profiling with nsys {cap.nsys_version or '?'}: {_shown(target)}")
    with contextlib.ExitStack() as stack:
        if interrupts is None:
            interrupts = stack.enter_context(Interrupts(progress))
        log = stack.enter_context(open_new(cap.log, binary=True))
        log.write(("$ " + _shown(cap.command) + "\n").encode())
        log.flush()
        work = stack.enter_context(Workspace())
        outcome = run_nsys(cap.command, work.env(env), work, log, interrupts,
                           verbose=opts.verbose, quiet=quiet,
                           stdout_to_stderr=stdout_to_stderr, noise=_NSYS_NOISE, say=progress)
        cap.workload_exit, cap.nsys_lines = outcome.returncode, outcome.nsys_lines
        cap.stdout_closed, cap.interrupted = outcome.stdout_closed, interrupts.interrupted
        status = work.runner_status().splitlines()
    end = shuts_down(cap.command)
    if end and any(line.startswith(_RANGE_ENDED) for line in cap.nsys_lines):
        cap.shut_down_by_nsys = end
    if status and status[0] == _NO_MODULE:
        raise ProgramNotStarted(f"{status[1] if len(status) > 1 else 'no module'} "
                                f"(python {_shown(target[1:])}); nothing was profiled")
    _rescue(cap, _named_by_nsys(cap.nsys_lines, cap.output_dir), rescue_as)


def _shown(command: Sequence[str]) -> str:
    """A command line as nsyswrap prints or logs it: quoted as a shell would read it, what
    looks like a credential redacted (redact.py)."""
    return shlex.join(redact_args(command).args)


def _named_by_nsys(lines: Sequence[str], output_dir: Path) -> list[Path]:
    """Captures nsys's own lines name outside the output folder: its temporary capture
    ("Generating '/tmp/nsys-report-XXXX.qdstrm'") where it could not move it, or was
    stopped while writing it. Only nsys's lines: the workload's come on other channels."""
    found = []
    for line in lines:
        m = _NSYS_NAMES.match(line)
        path = Path(m.group("quoted") or m.group("listed")) if m else None
        if (path is not None and path.name.endswith((".qdstrm", ".nsys-rep"))
                and path.is_file() and not path.is_symlink()
                and not path.resolve().is_relative_to(output_dir.resolve())
                and path not in found):
            found.append(path)
    return found


def _rescue(cap: Capture, left: Sequence[Path], name: str | None) -> None:
    """Move each capture nsys left elsewhere into the output folder (as `name` if free,
    else as nsys named it); one that cannot be moved (a full disk) stays where it is."""
    for src in left:
        make_private(src)  # nsys made it 0664, in a folder everyone reads (/tmp)
        ext = ".qdstrm" if src.name.endswith(".qdstrm") else ".nsys-rep"
        dst = _file(cap.output_dir / name, ext) if name else cap.output_dir / src.name
        if os.path.lexists(dst):
            dst = cap.output_dir / src.name
        try:
            move_file(src, dst)
        except (OSError, NsysWrapError) as e:
            cap.kept_elsewhere.append(src)
            if cap.kept_errno is None:
                cap.kept_errno = e.errno
            cap.notes.append(f"nsys left its capture at {src}; it could not be moved into "
                             f"{cap.output_dir} ({getattr(e, 'strerror', None) or e})")
            continue
        cap.rescued.append(dst)
        cap.notes.append(f"nsys left its capture in its temporary folder; moved to {dst}")


def move_file(src: Path, dst: Path) -> None:
    """Rename `src` to `dst` (nothing there yet); across file systems a copy under a
    temporary name, renamed when whole, then `src` removed. `src` stays if it fails."""
    try:
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, "exists", str(dst))
        os.rename(src, dst)
        return
    except OSError as e:
        if e.errno != errno.EXDEV:
            raise
    with replacing(dst, suffix=dst.suffix) as tmp:
        shutil.copyfile(src, tmp)
    os.unlink(src)


def _collect(cap: Capture, base: Path) -> None:
    rep, qdstrm = _file(base, ".nsys-rep"), _file(base, ".qdstrm")
    cap.rep = rep if rep.is_file() else None
    cap.qdstrm = qdstrm if qdstrm.is_file() else None
    for made in (cap.rep, cap.qdstrm):
        # nsys makes its captures 0664 whatever the umask (docs/nsys-quirks.md): they hold
        # the command line and the environment.
        if made is not None and not made.is_symlink():
            make_private(made)


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


def import_qdstrm(qdstrm: Path, nsys: str | None = None, rep: Path | None = None, *,
                  untouched: bool = False) -> Path:
    """Turn a raw .qdstrm into `rep` (default: the .nsys-rep beside it), written whole or
    not at all; the .qdstrm is kept either way. QdstrmImporter rewrites the end of the
    .qdstrm it reads (docs/nsys-quirks.md): with `untouched` (a user's file) it reads a
    copy made beside `rep`."""
    importer = find_importer(nsys)
    if importer is None:
        looked = ", ".join(str(p) for p in importer_candidates(nsys)[:4])
        raise NsysWrapError(
            f"nsys left only the raw capture {qdstrm}: its importer (QdstrmImporter) is not "
            f"installed (looked in {looked}); install the full Nsight Systems host package, "
            f"then run `nsyswrap import {qdstrm}`"
        )
    rep = rep or qdstrm.with_name(qdstrm.name[: -len(".qdstrm")] + ".nsys-rep")
    # The importer wants a name ending in .nsys-rep, and -f for the empty file made for it.
    with contextlib.ExitStack() as stack:
        source = stack.enter_context(_copy_beside(qdstrm, rep)) if untouched else qdstrm
        tmp = stack.enter_context(replacing(rep, suffix=".nsys-rep", inputs=[qdstrm]))
        # In a session of its own: the terminal's Ctrl-C must not cut the report short.
        proc = subprocess.run([str(importer), "-f", "-i", str(source), "-o", str(tmp)],
                              capture_output=True, text=True, start_new_session=True)
        if proc.returncode != 0 or os.path.getsize(tmp) == 0:
            raise NsysWrapError(_import_failure(importer, qdstrm, proc))
    return rep


@contextlib.contextmanager
def _copy_beside(qdstrm: Path, rep: Path):
    """A copy of `qdstrm` in `rep`'s folder (a fresh name) for the importer to read,
    removed after."""
    fd, name = tempfile.mkstemp(prefix=f".{rep.name}.", suffix=".input.qdstrm", dir=rep.parent)
    os.close(fd)
    try:
        try:
            shutil.copyfile(qdstrm, name)
        except OSError as e:
            raise NsysWrapError(f"cannot copy {qdstrm} into {rep.parent} to import it "
                                f"without changing it: {e.strerror or e}") from None
        yield Path(name)
    finally:
        os.unlink(name)


def _import_failure(importer: Path, qdstrm: Path, proc: subprocess.CompletedProcess) -> str:
    text = proc.stdout + proc.stderr
    lib = missing_library(text)
    if lib:
        return (f"nsys's importer {importer} cannot start: {lib} is missing "
                "(Debian/Ubuntu: apt install libdw1; RHEL/Fedora: dnf install elfutils-libs); "
                f"the raw capture is kept at {qdstrm}: run `nsyswrap import {qdstrm}` after "
                "installing it")
    last = [ln for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return (f"{importer} could not import {qdstrm} "
            f"({last[-1].strip() if last else proc.returncode}); the raw capture is kept")


def finish(cap: Capture, progress: Callable[[str], None] | None = None, *,
           keep_qdstrm: bool = False) -> Capture:
    """Import (if nsys could not) and export to SQLite, into `cap.output_dir`. Keeps every
    earlier file, except a run's own .qdstrm once imported (`keep_qdstrm`: a user's)."""
    say = progress or (lambda _msg: None)
    if cap.rep is None and cap.qdstrm is not None:
        say("nsys could not import the capture itself; importing it")
        stem = cap.qdstrm.name[: -len(".qdstrm")]
        cap.rep = import_qdstrm(cap.qdstrm, cap.nsys, _file(cap.output_dir / stem, ".nsys-rep"),
                                untouched=keep_qdstrm)
        cap.notes.append(f"imported {cap.qdstrm.name} with QdstrmImporter (nsys did not)")
        if not keep_qdstrm:
            # As nsys does after its own import: the report holds all the raw capture did.
            cap.qdstrm.unlink()
            cap.qdstrm = None
    if cap.rep is not None:
        say("exporting to SQLite")
        stem = cap.rep.name[: -len(".nsys-rep")]
        cap.sqlite = export_to(cap.rep, _file(cap.output_dir / stem, ".sqlite"), cap.nsys)
    return cap
