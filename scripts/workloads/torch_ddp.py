"""Two-GPU torch.distributed workload (NCCL), for `nsyswrap run --ranks 2` and
`nsyswrap run -- torchrun --nproc-per-node 2`: each rank on its own GPU, annotated steps
with a matmul and an all-reduce, and one harness benchmark per rank."""

import os

import torch
import torch.distributed as dist

import nsyswrap

dist.init_process_group("nccl")
rank = dist.get_rank()
torch.cuda.set_device(rank)
a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
for step in range(6):
    with nsyswrap.annotate("step", domain="ddp"):
        with nsyswrap.annotate("compute", domain="ddp"):
            b = a @ a
        with nsyswrap.annotate("allreduce", domain="ddp"):
            dist.all_reduce(b)
torch.cuda.synchronize()
nsyswrap.benchmark(lambda: a @ a, name=f"matmul_rank{rank}", iters=20, warmup=5)
print(f"rank {rank} on GPU {torch.cuda.current_device()} done, pid {os.getpid()}", flush=True)
dist.destroy_process_group()
