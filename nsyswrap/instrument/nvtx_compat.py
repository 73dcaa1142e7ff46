"""Make the PyPI `nvtx` package (>= 0.2.12) record under Nsight Systems 2022.x.

nvtx >= 0.2.12 hands out a no-op DummyDomain unless nvtxDomainIsEnabled() returns nonzero.
That function belongs to the NVTX payload extension, which the package requests at compatId
0x0104; nsys 2022.4 accepts only 0x0103, so it answers 0 and every range and mark is dropped
(only domain create/destroy reach the report). The core NVTX calls work, so we skip the gate.
Details and evidence: docs/nsys-python-nvtx-2022.md.

Applied once, on import of nsyswrap's annotation API. It changes nothing when no profiler is
attached (no NVTX_INJECTION64_PATH: the package keeps its cheap no-op) and nothing when the
tool accepts the extension (seen: nsys 2025.3.1 answers enabled, and the patch stays off).
"""

from __future__ import annotations

import os


def patch_nvtx_gate() -> bool:
    """Returns True when the patch was needed and applied."""
    try:
        import nvtx.nvtx as nvtx_py
        from nvtx._lib import lib
    except ImportError:
        return False
    domain_cls = getattr(lib, "Domain", None)
    handle_cls = getattr(lib, "DomainHandle", None)
    if domain_cls is None or not hasattr(handle_cls, "enabled"):
        return False  # nvtx <= 0.2.11: no gate
    if not os.environ.get("NVTX_INJECTION64_PATH"):
        return False  # no tool attached
    if handle_cls(None).enabled():
        return False  # the tool accepted the payload extension

    def __new__(cls, name=None):  # Domain.__new__ without the nvtxDomainIsEnabled gate
        obj = object.__new__(cls)
        obj.handle = handle_cls(name)
        return obj

    domain_cls.__new__ = __new__
    cached = getattr(nvtx_py, "_get_domain_cached", None) or getattr(nvtx_py, "get_domain", None)
    if hasattr(cached, "cache_clear"):
        cached.cache_clear()  # forget DummyDomains handed out before the patch
    return True


PATCHED = patch_nvtx_gate()
