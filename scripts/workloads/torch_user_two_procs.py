"""Two worker processes (multiprocessing's spawn, as CUDA programs start them) running the
same timing code on the same GPU: the same lines, the same arguments, so only the process
tells their windows apart (one row per process).
Profiled, unmodified, by scripts/make_fixtures_gpu.sh through `nsyswrap run`.
"""

import multiprocessing
import statistics


def work(n, repeats=10):
    import torch

    x = torch.randn(n, n, device="cuda", dtype=torch.float16)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    values = []
    for _ in range(repeats):
        start.record()
        x @ x
        end.record()
        end.synchronize()
        values.append(start.elapsed_time(end))
    print(f"worker {multiprocessing.current_process().name}: "
          f"{statistics.median(values):.4f} ms", flush=True)


if __name__ == "__main__":
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=work, args=(2048,)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
        assert w.exitcode == 0, w.exitcode
