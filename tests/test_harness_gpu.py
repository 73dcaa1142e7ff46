"""The harness on a real GPU (run on the GPU host: pytest -m gpu). CPU-only CI skips these."""

from __future__ import annotations

import os

import pytest

# No NVIDIA kernel driver loaded (the kernel lists it in /proc, containers included), no CUDA
# device for torch either: skipped without importing torch, which costs each test worker 2 s
# of its collection. (A device node alone proves nothing: containers without a GPU have one.)
if not os.path.exists("/proc/driver/nvidia/version"):
    pytest.skip("needs a CUDA GPU (no NVIDIA driver here)", allow_module_level=True)
torch = pytest.importorskip("torch")
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

import nsyswrap  # noqa: E402


def _linear():
    a = torch.rand(20, 8192, dtype=torch.float16, device="cuda")
    b = torch.rand(5120, 8192, dtype=torch.float16, device="cuda")
    return lambda: torch.nn.functional.linear(a, b)


def test_result_records_every_iteration_and_the_config(tmp_path):
    r = nsyswrap.benchmark(_linear(), name="lin", iters=12, warmup=3, save=tmp_path / "r.json")
    assert len(r.samples_ns) == 12 and all(s > 0 for s in r.samples_ns)
    assert r.cache == ["flushed"] * 12
    c = r.config
    assert c.warmup_iters == 3 and c.backpressure and c.sleep_ns >= 20_000
    assert c.flush_bytes == 2 * torch.cuda.get_device_properties(0).L2_cache_size
    assert (tmp_path / "r.json").exists()
    assert "lin" in repr(r) and r.min_ns <= r.median_ns


def test_interleave_and_graph_modes():
    f = _linear()
    r = nsyswrap.benchmark(f, name="mix", iters=10, warmup=2, flush_l2="interleave")
    assert r.cache == ["flushed", "hot"] * 5
    eager = nsyswrap.benchmark(f, name="eager", iters=10, warmup=2, flush_l2="none")
    graph = nsyswrap.benchmark(f, name="graph", iters=10, warmup=2, flush_l2="none",
                               cuda_graph=10)
    # per call, a graph replay of 10 calls costs about one eager call (within 50%)
    assert 0.5 < graph.median_ns / eager.median_ns < 1.5


def test_auto_warmup_and_decorator():
    @nsyswrap.benchmark(iters=5, warmup="auto")
    def scaled(x, k):
        return x * k

    r = scaled(torch.ones(1024, device="cuda"), 3.0)
    assert r.name.endswith("scaled") and r.config.warmup_iters >= 5
    assert len(r.samples_ns) == 5


def test_backpressure_removes_launch_gap():
    f = _linear()
    hot_bp = nsyswrap.benchmark(f, name="bp", iters=20, warmup=5, flush_l2="none")
    hot_naive = nsyswrap.benchmark(f, name="naive", iters=20, warmup=5, flush_l2="none",
                                   backpressure=False)
    assert hot_bp.median_ns < hot_naive.median_ns


def test_calls_per_window_share_the_event_cost():
    f = _linear()
    one = nsyswrap.benchmark(f, name="one", iters=10, warmup=2, flush_l2="none")
    ten = nsyswrap.benchmark(f, name="ten", iters=10, warmup=2, flush_l2="none", calls=10)
    assert ten.config.calls_per_window == 10
    assert ten.median_ns < one.median_ns  # the ~2.5 µs of event cost, shared by 10 calls
