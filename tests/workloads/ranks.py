"""A two-rank torch.distributed job on the CPU (gloo): each rank annotates its steps and
joins an all-reduce, for the per-rank end-to-end test of `nsyswrap run --ranks`."""

import os
import time

import torch
import torch.distributed as dist

import nsyswrap

dist.init_process_group("gloo")
rank = dist.get_rank()
x = torch.ones(1024) * (rank + 1)
for step in range(4):
    with nsyswrap.annotate("step", domain="ranks"):
        time.sleep(0.002 * (rank + 1))
        with nsyswrap.annotate("allreduce", domain="ranks"):
            dist.all_reduce(x)
print(f"rank {rank} of {dist.get_world_size()} done, pid {os.getpid()}", flush=True)
dist.destroy_process_group()
