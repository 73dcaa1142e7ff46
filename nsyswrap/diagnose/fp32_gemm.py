"""FP32_GEMM: fp32 GEMMs on CUDA cores (SIMT/FFMA kernels) carry a large share of GPU time
on a GPU that has tensor cores."""

from __future__ import annotations

import re

from ..analysis import Analysis
from ..common.units import fmt_ns, fmt_share
from .finding import WARNING, Finding, Thresholds

CODE = "FP32_GEMM"
# Seen on the H100 with TF32 off: cuBLAS picks sm80_xmma_gemm_f32f32_f32f32_f32_..._ffma_...
# and cutlass::Kernel2<cutlass_80_simt_sgemm_...>. Older GPUs show ampere_sgemm_* / volta_sgemm_*.
FP32_SIMT_GEMM = re.compile(
    r"sgemm|(?:gemm|xmma).*(?:_ffma_|simt)|(?:simt|ffma).*gemm|gemm_f32f32_f32f32_f32(?!.*tf32)",
    re.IGNORECASE,
)
DOUBLE_OR_TF32 = re.compile(r"dgemm|tf32|f64", re.IGNORECASE)


def is_fp32_simt_gemm(name: str) -> bool:
    return bool(FP32_SIMT_GEMM.search(name)) and not DOUBLE_OR_TF32.search(name)


def _has_tensor_cores(a: Analysis) -> bool | None:
    ccs = [g.compute_capability for g in a.info.gpus if g.compute_capability]
    if not ccs:
        return None
    return any(float(cc) >= 8.0 for cc in ccs)  # TF32 and bf16 tensor cores: Ampere and later


def check(a: Analysis, t: Thresholds) -> list[Finding]:
    k = a.kernels
    if k.empty:
        return []
    fp32 = k[k["name"].map(is_fp32_simt_gemm)]
    share = float(fp32["share"].sum())
    tensor_cores = _has_tensor_cores(a)
    if fp32.empty or share < t.fp32_gemm_share or tensor_cores is False:
        return []
    gpu = a.info.gpus[0].name if a.info.gpus else "this GPU"
    top = fp32.head(3)
    return [Finding(
        code=CODE,
        severity=WARNING,
        range=None,
        message=(
            f"fp32 GEMMs on CUDA cores take {fmt_share(share)} of GPU time "
            f"({fmt_ns(float(fp32['total_ns'].sum()))} in {int(fp32['count'].sum())} kernels, "
            f"e.g. {top.iloc[0]['short_name']}) on {gpu}, whose tensor cores sit unused"
        ),
        evidence={
            "share": share,
            "total_ns": float(fp32["total_ns"].sum()),
            "kernels": [{"name": r.short_name, "count": int(r.count), "total_ns": float(r.total_ns),
                         "share": float(r.share)} for r in top.itertuples()],
            "tensor_cores": tensor_cores,
        },
        suggestion=(
            "Allow TF32 (torch.set_float32_matmul_precision('high')) or run the model under "
            "torch.autocast('cuda', dtype=torch.bfloat16); check accuracy after."
        ),
    )]
