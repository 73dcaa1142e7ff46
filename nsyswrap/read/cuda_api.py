"""What CUDA API names and CUPTI's enums mean for timing. Shared by the loader (which calls
to read, how to name copies) and the analyses (how to classify them), so the two can never
disagree."""

from __future__ import annotations

import re

# CUPTI enums (stable across CUPTI versions): ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND.
COPY_KINDS = {
    0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}
MEMORY_KINDS = {
    0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device static",
    6: "managed static", 7: "unknown",
}
# Pageable host memory: a copy from or to it is staged by the driver and blocks the host.
PAGEABLE = next(k for k, v in MEMORY_KINDS.items() if v == "pageable")

# nsys records runtime API names with a version suffix: cudaStreamSynchronize_v3020.
_VERSION_SUFFIX = re.compile(r"_v\d+$")

# Calls that put work on the GPU (the launch of each kernel, copy, memset or graph is one
# of these; seen: cudaLaunchKernel, cudaLaunchKernelExC, cuLaunchKernel(Ex), cudaGraphLaunch,
# cudaMemcpyAsync, cudaMemsetAsync). The loader also finds any other by correlation id.
LAUNCH_API = re.compile(r"^cu(da)?(Launch|GraphLaunch|Memcpy|Memset)")

# Calls that block the calling host thread until GPU work finishes.
SYNC_APIS = frozenset(
    {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
    }
)
# Copies that are synchronous with the host by API (not by memory kind).
SYNC_COPY_APIS = frozenset(
    {
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpy3D",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cudaMemcpyPeer",
        "cuMemcpy",
        "cuMemcpyHtoD",
        "cuMemcpyDtoH",
        "cuMemcpyDtoD",
        "cuMemcpy2D",
        "cuMemcpy3D",
    }
)
BLOCKING_APIS = SYNC_APIS | SYNC_COPY_APIS

# Which sync call a user most likely wrote, for messages.
SYNC_ORIGIN = {
    "cudaDeviceSynchronize": "torch.cuda.synchronize() / cudaDeviceSynchronize",
    "cuCtxSynchronize": "cuCtxSynchronize",
    "cudaStreamSynchronize": "a stream sync (.item(), .cpu(), .tolist(), print of a CUDA "
    "tensor, or stream.synchronize())",
    "cuStreamSynchronize": "a stream sync",
    "cudaEventSynchronize": "event.synchronize() / elapsed_time()",
    "cuEventSynchronize": "an event sync",
}


def base_name(api: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize."""
    return _VERSION_SUFFIX.sub("", api)


def sync_kind(api: str) -> str:
    """'explicit' for a sync the user wrote, 'implicit' for one hidden in another call."""
    if api in ("cudaDeviceSynchronize", "cuCtxSynchronize", "cudaEventSynchronize",
               "cuEventSynchronize"):
        return "explicit"
    if api in SYNC_COPY_APIS:
        return "synchronous copy"
    return "implicit"
