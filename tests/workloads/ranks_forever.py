"""A two-rank gloo job that runs until interrupted; rank 1 sleeps between steps, so that
when every rank gets Ctrl-C, rank 0 is usually blocked in C inside an all-reduce waiting for
rank 1: the case where one rank's report used to be lost (nsyswrap/instrument/runner.py)."""

import time

import torch
import torch.distributed as dist

import nsyswrap

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(1024)
print(f"rank {rank} running", flush=True)
while True:
    with nsyswrap.annotate("step", domain="ranks"):
        if rank == 1:
            time.sleep(0.05)
        dist.all_reduce(x)
