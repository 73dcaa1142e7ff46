"""Edge cases of a program's own CUDA-event timing, for nsyswrap's matching (one function
each, so their call sites tell them apart):

  cross_stream    start recorded on one stream, end on another
  rerecorded      an event recorded twice before elapsed_time (the second record counts)
  measured_twice  elapsed_time called twice on one pair
  graph           records inside a CUDA graph's capture, the replay timed outside it
  threads         two threads, each timing its own work on its own stream
  no_timing       events made with enable_timing=False (elapsed_time raises)
  unmeasured      records never measured
  allocator       tensors used on a side stream (record_stream): torch's own event records
                  on the same thread, between the program's

Profiled unmodified through `nsyswrap run` by scripts/make_fixtures_gpu.sh.
"""

import threading

import torch

dev = "cuda"
a = torch.randn(2048, 2048, device=dev)


def ev():
    return torch.cuda.Event(enable_timing=True)


def cross_stream():
    side = torch.cuda.Stream()
    start, end = ev(), ev()
    start.record()
    a @ a
    side.wait_stream(torch.cuda.current_stream())
    end.record(side)
    torch.cuda.synchronize()
    print("cross_stream", start.elapsed_time(end))


def rerecorded():
    start, end = ev(), ev()
    start.record()
    a @ a
    start.record()
    a @ a
    end.record()
    torch.cuda.synchronize()
    print("rerecorded", start.elapsed_time(end))


def measured_twice():
    start, end = ev(), ev()
    start.record()
    a @ a
    end.record()
    end.synchronize()
    print("measured_twice", start.elapsed_time(end), start.elapsed_time(end))


def graph():
    static = torch.randn(1024, 1024, device=dev)
    g = torch.cuda.CUDAGraph()
    inner_start, inner_end = ev(), ev()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        static @ static  # warm up on the side stream, as torch's docs do
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        inner_start.record()
        out = static @ static
        inner_end.record()
    outer = [(ev(), ev()) for _ in range(5)]
    for start, end in outer:
        start.record()
        g.replay()
        end.record()
    torch.cuda.synchronize()
    print("graph replay", [round(s.elapsed_time(e), 4) for s, e in outer])
    try:
        print("graph inner", inner_start.elapsed_time(inner_end))
    except (RuntimeError, ValueError) as e:
        print("graph inner raised:", e)


def threads():
    results = {}

    def work(name, size):
        stream = torch.cuda.Stream()
        m = torch.randn(size, size, device=dev)
        with torch.cuda.stream(stream):
            times = []
            for _ in range(5):
                start, end = ev(), ev()
                start.record()
                m @ m
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
        results[name] = times

    workers = [threading.Thread(target=work, args=(f"t{i}", 1024 * (i + 1))) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("threads", results)


def no_timing():
    start = torch.cuda.Event()
    end = torch.cuda.Event()
    start.record()
    a @ a
    end.record()
    torch.cuda.synchronize()
    try:
        print("no_timing", start.elapsed_time(end))
    except (RuntimeError, ValueError) as e:  # torch 2.11 raises ValueError
        print("no_timing raised:", e)


def unmeasured():
    events = [ev() for _ in range(4)]
    for e in events:
        e.record()
        a @ a
    torch.cuda.synchronize()
    print("unmeasured: 4 records")


def allocator():
    side = torch.cuda.Stream()
    times = []
    for _ in range(5):
        start, end = ev(), ev()
        start.record()
        t = torch.randn(1024, 1024, device=dev)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            t.record_stream(side)
            t @ t
        del t  # freed: the allocator records an event on the side stream, from C++
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    print("allocator", times)


if __name__ == "__main__":
    cross_stream()
    rerecorded()
    measured_twice()
    graph()
    threads()
    no_timing()
    unmeasured()
    allocator()
