"""Each planted pathology in the torch_mix workload is flagged with its code; the clean
ranges are not. What was planted is known from the workload (scripts/workloads/torch_mix.py)
and the amounts are read back with SQL."""

from __future__ import annotations

import pytest
from conftest import CPU_2022, GPU_MIX, GPU_NO_CUDA, finding, sql

import nsyswrap
from nsyswrap.comparison.single import compare
from nsyswrap.diagnose import Thresholds
from nsyswrap.diagnose.cold_start import leading_outliers
from nsyswrap.diagnose.fp32_gemm import is_fp32_simt_gemm


@pytest.fixture(scope="module")
def mix():
    return compare(nsyswrap.load(GPU_MIX))


def codes_for(c, label):
    return {f.code for f in c.findings if label in f.ranges}


def test_syncs_flagged(mix):
    assert "SYNC_IN_RANGE" in codes_for(mix, "app:explicit_sync")
    assert "SYNC_IN_RANGE" in codes_for(mix, "app:item_sync")
    f = next(f for f in mix.findings if f.code == "SYNC_IN_RANGE" and f.range == "app:item_sync")
    assert f.evidence["apis"] == {"cudaStreamSynchronize": 1}
    assert f.evidence["kinds"] == ["implicit"]


def test_pageable_copy_flagged_with_its_bytes(mix):
    f = next(f for f in mix.findings
             if f.code == "TRANSFER_IN_RANGE" and f.range == "app:copy_pageable")
    (nbytes,) = sql(GPU_MIX, "SELECT bytes FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE srcKind = 0 "
                             "AND copyKind = 1")[0]
    assert f.evidence["bytes_total"] == nbytes
    assert f.evidence["pageable_copies"] == 1 and f.severity == "warning"
    (instances,) = sql(GPU_MIX, "SELECT count(*) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
                                "ON e.textId = s.id "
                                "WHERE coalesce(e.text, s.value) = 'copy_pageable'")[0]
    assert f"in {f.evidence['instances_with_copies']} of {instances} instance" in f.message
    pinned = next(f for f in mix.findings
                  if f.code == "TRANSFER_IN_RANGE" and f.range == "app:copy_pinned")
    assert pinned.evidence["pageable_copies"] == 0


def test_idle_gpu_says_which_cause(mix):
    tiny = next(f for f in mix.findings
                if f.code == "GPU_IDLE_IN_RANGE" and f.range == "app:tiny_kernels")
    assert tiny.evidence["cause"] == "launch_gaps"
    assert tiny.evidence["gpu_ops_median"] == 50
    stall = next(f for f in mix.findings
                 if f.code == "GPU_IDLE_IN_RANGE" and f.range == "app:host_stall")
    assert stall.evidence["cause"] == "host_stall"
    assert stall.evidence["max_gap_median_ns"] >= 2_000_000  # the planted time.sleep(0.002)


def test_cold_start_names_how_many_to_skip(mix):
    _, evidence = finding(mix.findings, "COLD_START", "app:gemm_fp32")
    assert evidence["skip"] >= 1
    first = sql(GPU_MIX, "SELECT e.end - e.start FROM NVTX_EVENTS e JOIN StringIds s "
                         "ON s.id = e.textId WHERE s.value = 'gemm_fp32' ORDER BY e.start")
    assert evidence["metrics"]["cpu_ns"]["first_ns"][0] == first[0][0]


def test_fp32_gemm_is_report_level(mix):
    f = next(f for f in mix.findings if f.code == "FP32_GEMM")
    assert f.range is None
    total = sql(GPU_MIX, "SELECT sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                         "JOIN StringIds s ON s.id = k.demangledName "
                         "WHERE s.value LIKE '%ffma%' OR s.value LIKE '%sgemm%'")[0][0]
    assert f.evidence["total_ns"] == total


def test_clean_ranges_have_no_gpu_findings(mix):
    for label in ("app:gemm_bf16", "app:gemm_fp32"):
        assert not codes_for(mix, label) & {"GPU_IDLE_IN_RANGE", "SYNC_IN_RANGE",
                                            "TRANSFER_IN_RANGE"}


def test_thresholds_change_the_verdict():
    strict = compare(nsyswrap.load(GPU_MIX), Thresholds(idle_share=1.01, fp32_gemm_share=1.01))
    assert not {f.code for f in strict.findings} & {"GPU_IDLE_IN_RANGE", "FP32_GEMM"}


def test_cpu_only_report_still_finds_cold_start():
    c = compare(nsyswrap.load(CPU_2022))
    _, evidence = finding(c.findings, "COLD_START", "app:iteration")
    assert evidence["skip"] == 1  # planted: first of 8 is 10x
    assert not any(f.code == "GPU_IDLE_IN_RANGE" for f in c.findings)


def test_no_cuda_report_has_no_gpu_findings():
    c = compare(nsyswrap.load(GPU_NO_CUDA))
    assert not {f.code for f in c.findings} & {"GPU_IDLE_IN_RANGE", "FP32_GEMM", "SYNC_IN_RANGE"}


@pytest.mark.parametrize(("values", "skip"), [
    ([100, 10, 10, 11, 10], 1),
    ([100, 50, 10, 10, 11, 10, 10], 2),
    ([10, 10, 11, 10], 0),
    ([100, 100, 100], 0),  # no outlier when all equal
])
def test_leading_outliers(values, skip):
    import numpy as np

    assert leading_outliers(np.array(values, dtype=float), 2.0, 0) == skip


def test_leading_outliers_is_its_definition_by_median():
    """Series with ties, cold heads of every length and both kinds of threshold: the count
    is the one the definition gives, each step's median taken afresh with np.median."""
    import numpy as np

    def by_definition(values, factor, min_excess):
        k = 0
        while k < len(values) // 2:
            rest = np.median(values[k + 1:])
            if not (values[k] > factor * rest and values[k] - rest >= min_excess):
                break
            k += 1
        return k

    rng = np.random.default_rng(7)
    seen = set()
    for trial in range(2000):
        n = int(rng.integers(0, 40))
        values = rng.integers(1, 4, n).astype(float) if trial % 2 else rng.random(n) * 10
        cold = int(rng.integers(0, n + 1))
        values[:cold] *= rng.choice([1.0, 3.0, 10.0], cold)
        factor, excess = float(rng.choice([1.0, 1.5, 2.0])), float(rng.choice([0, 0.5, 2]))
        expected = by_definition(values, factor, excess)
        assert leading_outliers(values, factor, excess) == expected, (values, factor, excess)
        seen.add(expected)
    assert len(seen) > 5  # cold heads of many lengths were met


@pytest.mark.parametrize(("name", "fp32"), [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x64x8_stage3_warpsize2x2x1_ffma_aligna4",
     True),
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(T1::Params)", True),
    ("ampere_sgemm_128x64_tn", True),
    ("sm80_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x16", False),
    ("nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT", False),
    ("ampere_dgemm_64x64_nn", False),
    ("void at::native::vectorized_elementwise_kernel<4>", False),
])
def test_fp32_gemm_names(name, fp32):
    assert is_fp32_simt_gemm(name) is fp32
