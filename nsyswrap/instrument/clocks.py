"""GPU clocks through nvidia-smi: read them, and lock them for a benchmark with a guaranteed
restore. Locking changes a machine-wide setting and needs root; nsyswrap never does it
unless asked (`benchmark(..., lock_clocks=...)`)."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator

from ..common.errors import NsysWrapError


def _smi() -> str | None:
    return shutil.which("nvidia-smi")


def _run(args: list[str], timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def read_clocks(device_index: int = 0) -> dict[str, float] | None:
    """Current and maximum SM clock in MHz, or None without nvidia-smi (never fails)."""
    smi = _smi()
    if smi is None:
        return None
    try:
        out = _run([smi, "-i", str(device_index), "--query-gpu=clocks.sm,clocks.max.sm",
                    "--format=csv,noheader,nounits"], timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    try:
        current, maximum = (float(x) for x in out.stdout.strip().splitlines()[0].split(","))
    except (ValueError, IndexError):
        return None
    return {"sm_mhz": current, "max_sm_mhz": maximum}


class NvmlClock:
    """Reads the current SM clock through NVML (pynvml, from nvidia-ml-py) in microseconds,
    cheap enough to sample once per timed iteration. `open` returns None without NVML."""

    def __init__(self, nvml, handle):
        self._nvml = nvml
        self._handle = handle
        self.max_mhz = float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM))

    @classmethod
    def open(cls, pci_bus_id: str | None = None, index: int = 0) -> NvmlClock | None:
        try:
            import pynvml as nvml
        except ImportError:
            return None
        try:
            nvml.nvmlInit()
            handle = None
            if pci_bus_id:
                try:
                    handle = nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
                except nvml.NVMLError:
                    handle = None
            if handle is None:  # CUDA and NVML number GPUs alike unless CUDA_VISIBLE_DEVICES
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            return cls(nvml, handle)
        except Exception:  # NVML missing or refusing: sampling is optional
            return None

    def read_mhz(self) -> float | None:
        try:
            return float(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None


def _fail_message(proc: subprocess.CompletedProcess) -> str:
    text = (proc.stdout + proc.stderr).strip().splitlines()
    return text[-1] if text else f"exit {proc.returncode}"


@contextlib.contextmanager
def locked_clocks(mhz: int | str = "max", device_index: int = 0) -> Iterator[int]:
    """Lock the SM clock (`nvidia-smi -lgc F,F`) for the duration, then restore it
    (`nvidia-smi -rgc`) however the block ends: normal exit, exception, Ctrl-C, SIGTERM or
    interpreter exit. Raises NsysWrapError when nvidia-smi is missing or refuses."""
    smi = _smi()
    if smi is None:
        raise NsysWrapError("lock_clocks needs nvidia-smi on PATH; run without lock_clocks")
    if mhz == "max":
        clocks = read_clocks(device_index)
        if clocks is None:
            raise NsysWrapError("could not read the maximum SM clock from nvidia-smi")
        mhz = int(clocks["max_sm_mhz"])
    mhz = int(mhz)
    proc = _run([smi, "-i", str(device_index), "-lgc", f"{mhz},{mhz}"])
    if proc.returncode != 0:
        raise NsysWrapError(
            f"nvidia-smi could not lock the clocks of GPU {device_index} at {mhz} MHz "
            f"({_fail_message(proc)}): locking needs root (sudo) on a GPU that allows it; "
            "run without lock_clocks to measure at the GPU's own clocks"
        )
    restored = threading.Event()

    def restore() -> None:
        if not restored.is_set():
            restored.set()
            _run([smi, "-i", str(device_index), "-rgc"])

    atexit.register(restore)
    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_sigterm(signum, frame):  # turn SIGTERM into an exception so `finally` runs
            raise SystemExit(128 + signum)

        previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield mhz
    finally:
        restore()
        atexit.unregister(restore)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
