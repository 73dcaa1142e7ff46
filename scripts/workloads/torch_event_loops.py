"""Hand-written CUDA-event timing, the way people time steps and ops (one function per
pattern, so the call sites tell them apart in nsyswrap's report):

  step_synced     a small MLP's training step, a sync after each: the GPU idles before
                  each window, so the events hold the host's launches
  step_item       the same step with `loss.item()` inside the window (a sync in it)
  many_tiny       50 tiny elementwise kernels between the events (launch overhead)
  side_stream     work on a side stream inside the window, not joined before end.record()
  joined_stream   the same, joined with wait_stream before end.record()
  host_copy       a pageable host-to-device copy inside the window
  pipelined_gemm  a large GEMM timed back to back with no sync between windows (healthy:
                  the events agree with the kernels)

Profiled unmodified through `nsyswrap run` by scripts/make_fixtures_gpu.sh.
"""

import torch

N = 20
dev = "cuda"


def pairs(n):
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n)]


def show(name, events):
    times = [s.elapsed_time(e) for s, e in events]
    print(f"{name}: " + " ".join(f"{t:.3f}" for t in times))


def mlp():
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=dev)
    return model, opt, x


def step_synced():
    model, opt, x = mlp()
    events = pairs(N)
    for i in range(N):
        start, end = events[i]
        start.record()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        end.record()
        torch.cuda.synchronize()
    show("step_synced", events)


def step_item():
    model, opt, x = mlp()
    events = pairs(N)
    for i in range(N):
        start, end = events[i]
        start.record()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        value = loss.item()
        end.record()
    torch.cuda.synchronize()
    show("step_item", events)


def many_tiny():
    y = torch.ones(1024, device=dev)
    events = pairs(N)
    for i in range(N):
        start, end = events[i]
        start.record()
        for _ in range(50):
            y.mul_(1.0001)
        end.record()
    torch.cuda.synchronize()
    show("many_tiny", events)


def side_stream():
    a = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
    small = torch.randn(256, 256, device=dev, dtype=torch.float16)
    side = torch.cuda.Stream()
    events = pairs(N)
    for i in range(N):
        start, end = events[i]
        start.record()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            big = a @ a
        small @ small
        end.record()
        torch.cuda.synchronize()
    show("side_stream", events)


def joined_stream():
    a = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
    small = torch.randn(256, 256, device=dev, dtype=torch.float16)
    side = torch.cuda.Stream()
    events = pairs(N)
    for i in range(N):
        start, end = events[i]
        start.record()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            big = a @ a
        small @ small
        torch.cuda.current_stream().wait_stream(side)
        end.record()
        torch.cuda.synchronize()
    show("joined_stream", events)


def host_copy():
    host = torch.randn(8 << 20)  # 32 MiB, pageable
    w = torch.randn(4096, 4096, device=dev)
    events = pairs(N)
    for i in range(N):
        start, end = events[i]
        start.record()
        d = host.to(dev)
        w @ w
        end.record()
        torch.cuda.synchronize()
    show("host_copy", events)


def pipelined_gemm():
    a = torch.randn(8192, 8192, device=dev, dtype=torch.float16)
    events = pairs(N)
    for _ in range(3):
        a @ a
    for i in range(N):
        start, end = events[i]
        start.record()
        a @ a
        end.record()
    torch.cuda.synchronize()
    show("pipelined_gemm", events)


if __name__ == "__main__":
    step_synced()
    step_item()
    many_tiny()
    side_stream()
    joined_stream()
    host_copy()
    pipelined_gemm()
