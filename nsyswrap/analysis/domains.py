"""Whose range is it: the user's own, or a library's.

Libraries annotate their own work in NVTX domains of their own (NCCL around every collective
and communicator set-up, cuDNN, cuBLAS, NVSHMEM, MPI, ...), and PyTorch's
`torch.autograd.profiler.emit_nvtx` names a range after every operator (`aten::mm`) in the
default domain. Those ranges are listed like any other, but:
  - findings with advice for the user cover the user's own ranges (and the harness's) only,
    unless `--all-domains` asks for the rest;
  - they are no ownership in attribution across threads: a thread inside NCCL's range is
    still working for whichever user range its process has open (analysis/attribution.py).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .texts import holding

# Compared case-insensitively. Names as the libraries register them (NCCL: "NCCL"; cuDNN's
# and cuBLAS's own NVTX; NVSHMEM; MPI and UCX wrappers; OpenMP and OpenACC tools; NVIDIA's
# inference and data libraries).
LIBRARY_DOMAINS = frozenset(d.lower() for d in (
    "NCCL", "RCCL", "cuBLAS", "cuBLASLt", "cuDNN", "cuFFT", "cuSOLVER", "cuSPARSE", "cuRAND",
    "cuTENSOR", "CUTLASS", "CCCL", "NVSHMEM", "MPI", "UCX", "UCC", "OpenMP", "OpenACC",
    "TensorRT", "NVIDIA TensorRT", "DALI", "nvJPEG", "NPP", "libcudf", "cudf_python",
))
# Operator ranges PyTorch opens in the default domain (emit_nvtx, record_function under
# nsys): "aten::addmm", "aten::add_, seq = 12", "c10d::allreduce_".
# `nsyswrap run`'s runner opens ranges of its own in the default domain: its event-floor
# windows, each Timer measurement and do_bench call (schema.py). Listed nowhere as the
# user's (as the harness's own ranges), and no findings.
RUNNER_RANGE_NAME = re.compile(r"^nsyswrap\.(user-events |timer |do_bench )")
LIBRARY_RANGE_NAME = re.compile(r"^(aten|c10d|prim|cudnn|autograd|torch|_c10d_functional)::"
                                "|" + RUNNER_RANGE_NAME.pattern)
# emit_nvtx names every range "{op}[, seq = N][, op_id = N][, sizes = ...][, input_op_ids
# = ...]" (torch/csrc/profiler/stubs/cuda.cpp, getNvtxStr), autograd's backward nodes
# included, which carry no namespace ("AddmmBackward0, seq = 15, op_id = 53") nor do some
# operators ("detach, op_id = 7"): the suffix is the signature.
EMIT_NVTX_COUNTER = re.compile(r"(, (?:seq|op_id) = )-?\d+")  # group 1: the label
EMIT_NVTX_SUFFIX = re.compile(EMIT_NVTX_COUNTER.pattern + r"(?:,|$)")


# What a name must hold for LIBRARY_RANGE_NAME or EMIT_NVTX_SUFFIX to match it: the names
# searched in Python (texts.holding).
OPERATOR_PREFILTER = {"literals": ("::", ", seq = ", ", op_id = "), "prefixes": ("nsyswrap.",)}


def library_mask(domains: pd.Series, names: pd.Series) -> np.ndarray:
    """True for ranges that belong to a library (see the module docstring)."""
    # Decided once per distinct domain and once per distinct name: millions of ranges
    # share a few, and where each has a name of its own, only names that could be an
    # operator's are searched in Python.
    dom_codes, dom_values = pd.factorize(domains)
    dom = pd.Series(np.asarray(dom_values, dtype=object)).astype(str)
    # A missing domain or name (code -1) takes the last place: no library's.
    in_domain = np.r_[dom.str.lower().isin(LIBRARY_DOMAINS).to_numpy(), False][dom_codes]
    default = np.r_[(dom == "").to_numpy(), False][dom_codes]
    if not default.any():
        return in_domain
    # Only the default domain's names are read as operator names: a user domain may name
    # ranges as it likes.
    name_codes, name_values = pd.factorize(names[default])
    operator = np.zeros(len(name_values) + 1, dtype=bool)
    candidates = np.flatnonzero(holding(name_values, **OPERATOR_PREFILTER))
    if len(candidates):
        name = pd.Series(np.asarray(name_values, dtype=object)[candidates]).astype(str)
        operator[candidates] = (
            name.str.match(LIBRARY_RANGE_NAME).to_numpy(dtype=bool)
            | np.fromiter((EMIT_NVTX_SUFFIX.search(n) is not None for n in name), bool,
                          len(name)))
    in_domain[default] |= operator[name_codes]
    return in_domain


def runner_ranges(domains: pd.Series, names: pd.Series) -> np.ndarray:
    """True for the ranges `nsyswrap run`'s runner opened (RUNNER_RANGE_NAME)."""
    return ((domains.astype(str) == "").to_numpy()
            & names.astype(str).str.match(RUNNER_RANGE_NAME).to_numpy(dtype=bool))
