"""Spawns two worker processes (multiprocessing, spawn), each annotating its own ranges:
for the end-to-end test that child processes are traced and grouped by process."""
import multiprocessing as mp
import time

import nsyswrap


def work(rank):
    for i in range(4):
        with nsyswrap.annotate("work", domain="workers", payload=rank):
            time.sleep(0.003 * (rank + 1))
    print("worker", rank, "done", flush=True)

if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=work, args=(r,)) for r in range(2)]
    for p in procs: p.start()
    with nsyswrap.annotate("parent", domain="workers"):
        for p in procs: p.join()
