"""`nsyswrap doctor`: is this machine ready to profile? One line per check, with the fix.

Each check returns a Check; nothing here raises. The checks run the real tools (nsys, its
importer, a tiny NVTX profile, nvidia-smi, torch), so a ✓ means it worked here, now.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..common.nsys import find_nsys, nsys_version, real_nsys_path
from ..common.progress import NO_PROGRESS, Progress
from . import profile as capture

OK, WARN, FAIL = "ok", "warn", "fail"
MIN_FREE_BYTES = 2 * 2**30  # a few minutes of CUDA+NVTX trace, with room for the export


@dataclass
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def each_check(nsys: str | None = None, workdir: Path | None = None,
               progress: Progress = NO_PROGRESS) -> Iterator[Check]:
    """The checks one at a time, each as it ends (a few seconds in all: a test profile,
    importing torch), each a step of `progress`."""
    with progress.step("looking for nsys"):
        exe = find_nsys(nsys)
        first = check_nsys(nsys, exe)
    yield first
    steps: list[tuple[str, Callable[[], Check]]] = []
    if exe:
        with progress.step("checking nsys's importer"):
            importer = check_importer(exe)
        yield importer
        # Without an importer the test profile cannot become a report: not tried (it took
        # a few seconds to fail with the importer's own error again).
        steps += [("profiling a test range (NVTX from Python)",
                   lambda: check_nvtx_injection(exe) if importer.status != FAIL else
                   Check("NVTX from Python", WARN, "not tried: no importer to read a test "
                         "profile with", importer.fix)),
                  ("checking CPU sampling", lambda: check_cpu_sampling(exe))]
    steps += [("importing torch", check_torch), ("asking nvidia-smi", check_gpu),
              ("checking free disk", lambda: check_disk(workdir or Path.cwd()))]
    for description, check in steps:
        with progress.step(description):
            result = check()
        yield result


def check_nsys(explicit: str | None, exe: str | None) -> Check:
    if exe is None:
        where = explicit or os.environ.get("NSYS")
        return Check("nsys", FAIL, f"not found{f' at {where}' if where else ''}",
                     capture_fix_missing_nsys())
    version = nsys_version(exe)
    if version is None:
        return Check("nsys", FAIL, f"{exe} does not answer --version",
                     "check the installation (run it by hand to see why)")
    return Check("nsys", OK, f"{version} at {exe}")


def capture_fix_missing_nsys() -> str:
    from ..common.nsys import NSYS_MISSING_HELP

    return NSYS_MISSING_HELP


def check_importer(exe: str) -> Check:
    """Can a raw capture become a report? nsys looks for its importer next to itself;
    nsyswrap also looks in the places distributions put it."""
    # Where nsys itself looks: beside its own folder (standard install; Nsight Compute's copy
    # uses the glibc-named folder). Debian's package puts the importer elsewhere.
    base = real_nsys_path(exe).parent.parent
    own = [base / d / "QdstrmImporter" for d in ("host-linux-x64",
                                                 "linux-desktop-glibc_2_11_3-x64")]
    importer = capture.find_importer(exe)
    if importer is None:
        return Check("importer", FAIL, "QdstrmImporter not found: nsys leaves only .qdstrm "
                     "files", "install the Nsight Systems host package (Debian: "
                     "nsight-systems), or set NSYSWRAP_IMPORTER=/path/to/QdstrmImporter")
    proc = subprocess.run([str(importer), "--help"], capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    lib = capture.missing_library(text)
    if lib:
        return Check("importer", FAIL, f"{importer} cannot start: {lib} is missing",
                     "install libdw (Debian/Ubuntu: apt install libdw1; RHEL/Fedora: dnf "
                     "install elfutils-libs), or put its folder on LD_LIBRARY_PATH")
    if importer not in own and not any(p.exists() for p in own):
        return Check("importer", WARN, f"nsys looks for {own[0]}, which is missing; nsyswrap "
                     f"imports with {importer} instead",
                     f"optional: ln -s {importer.parent} {own[0].parent}")
    return Check("importer", OK, str(importer))


def check_nvtx_injection(exe: str) -> Check:
    """Profile a one-range Python program and look for the range in the export."""
    code = ("import nsyswrap, nsyswrap.instrument.nvtx_compat as c\n"
            "with nsyswrap.annotate('doctor-range', domain='nsyswrap-doctor'): pass\n"
            "print('nvtx-gate:' + ('bypassed' if c.PATCHED else 'open'))\n")
    with tempfile.TemporaryDirectory(prefix="nsyswrap-doctor-") as tmp:
        opts = capture.ProfileOptions(trace="nvtx", force=True)
        try:
            cap = capture.profile([sys.executable, "-c", code], Path(tmp), opts, nsys=exe,
                                  name="doctor", quiet=True)
            cap = capture.finish(cap)
            from ..read.loader import load

            ranges = load(cap.sqlite).ranges
        except Exception as e:  # report every failure as a ✗ line, never a traceback
            return Check("NVTX from Python", FAIL, f"the test profile failed: {e}",
                         "run `nsyswrap run -v` on a small script to see nsys's output")
        found = ranges[(ranges["name"] == "doctor-range")
                       & (ranges["domain"] == "nsyswrap-doctor")]
        patched = "nvtx-gate:bypassed" in (cap.log.read_text(errors="replace") if cap.log else "")
        if found.empty:
            return Check("NVTX from Python", FAIL, "a test range from nsyswrap.annotate did "
                         "not reach the report", "check that `python -c 'import nvtx'` works "
                         "and that nsys traces NVTX (-t nvtx); `nsyswrap run -v` shows nsys's "
                         "own output")
        note = (" (the nvtx package's payload-extension gate bypassed: this nsys refuses "
                "the extension it asks for)" if patched else "")
        return Check("NVTX from Python", OK, f"a test range reached the report{note}")


def check_cpu_sampling(exe: str) -> Check:
    proc = subprocess.run([exe, "status", "-e"], capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    paranoid = re.search(r"Paranoid Level = (-?\d+)", text)
    level = f" (perf_event_paranoid {paranoid.group(1)})" if paranoid else ""
    if "Profiling Environment (process-tree): OK" in text or "Environment: OK" in text:
        return Check("CPU sampling", OK, f"allowed{level} (off by default in nsyswrap run; "
                     "--sample turns it on)")
    return Check("CPU sampling", WARN, f"not available{level}; nsyswrap run works without it",
                 "only for --sample: sudo sh -c 'echo 2 >/proc/sys/kernel/perf_event_paranoid'")


def check_torch() -> Check:
    try:
        import torch
    except ImportError:
        return Check("torch", WARN, "not installed: analysis works, the harness does not",
                     "pip install 'nsyswrap[torch]'")
    if not torch.cuda.is_available():
        return Check("torch", WARN, f"{torch.__version__}, no CUDA device visible",
                     "check the driver, CUDA_VISIBLE_DEVICES and the torch build (CPU-only?)")
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return Check("torch", OK, f"{torch.__version__}, CUDA {torch.version.cuda}: {names}")


def check_gpu() -> Check:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return Check("GPU", WARN, "nvidia-smi not found: no GPU, or no driver tools",
                     "install the NVIDIA driver to profile GPU work")
    fields = "name,driver_version,clocks.sm,clocks.max.sm,clocks.applications.graphics," \
             "clocks.default_applications.graphics"
    proc = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stdout + proc.stderr).strip().splitlines()
        return Check("GPU", WARN, f"no GPU reachable (nvidia-smi: "
                     f"{last[-1] if last else proc.returncode})",
                     "on a GPU machine: check the NVIDIA driver; CPU-side tracing still works")
    lines = []
    for row in proc.stdout.strip().splitlines():
        name, driver, sm, max_sm, app, default_app = (x.strip() for x in row.split(","))
        app_note = ("application clocks changed from their default"
                    if app != default_app else "application clocks at default")
        lines.append(f"{name}, driver {driver}, SM clock {sm} of {max_sm} MHz now, {app_note}")
    detail = "; ".join(lines)
    locked = _locked_clocks(smi)
    detail += f"; {locked}"
    return Check("GPU", OK, detail)


def _locked_clocks(smi: str) -> str:
    proc = subprocess.run([smi, "-q", "-d", "CLOCK"], capture_output=True, text=True)
    text = proc.stdout
    if re.search(r"Locked", text, re.IGNORECASE):
        line = next(ln.strip() for ln in text.splitlines() if "ocked" in ln)
        return f"clock lock reported: {line}"
    return "no clock lock reported (nvidia-smi shows none; times follow the GPU's own boost)"


def check_disk(path: Path) -> Check:
    usage = shutil.disk_usage(path if path.exists() else Path.cwd())
    free_gib = usage.free / 2**30
    if usage.free < MIN_FREE_BYTES:
        return Check("disk", WARN, f"{free_gib:.1f} GiB free in {path}",
                     "free some space or use nsyswrap run -o on another disk")
    return Check("disk", OK, f"{free_gib:.0f} GiB free in {path}")
