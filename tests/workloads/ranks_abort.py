"""A two-rank gloo job where rank 0 dies by SIGABRT when interrupted (as gloo aborts a rank
whose peer left): torchrun then reports a failed worker."""
import os
import signal
import time

import torch
import torch.distributed as dist

import nsyswrap

dist.init_process_group("gloo")
rank = dist.get_rank()
if rank == 0:
    signal.signal(signal.SIGINT, lambda *_: os.abort())
x = torch.ones(1024)
print(f"rank {rank} running", flush=True)
while True:
    with nsyswrap.annotate("step", domain="ranks"):
        time.sleep(0.02)
        dist.all_reduce(x)
