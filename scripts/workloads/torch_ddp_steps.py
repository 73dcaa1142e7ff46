"""A balanced DDP job (NCCL, bf16, two micro-batches per step with no_sync) that runs STEPS
steps (environment, default 16): scripts/probe_interrupt_ranks.sh interrupts it under
`nsyswrap run --ranks 2`."""

import contextlib
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import nsyswrap

dist.init_process_group("nccl")
rank = dist.get_rank()
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
torch.manual_seed(0)
layers = nn.Sequential(nn.Linear(2048, 8192), nn.GELU(), nn.Linear(8192, 2048))
model = DistributedDataParallel(layers.cuda(), device_ids=[local])
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
batches = [torch.randn(256, 2048, device="cuda") for _ in range(2)]
for step in range(int(os.environ.get("STEPS", "16"))):
    with nsyswrap.annotate(f"step {step}"):
        for i, x in enumerate(batches):
            # Gradients all-reduced on the last micro-batch only.
            sync = contextlib.nullcontext() if i == len(batches) - 1 else model.no_sync()
            with sync:
                with nsyswrap.annotate("forward"), torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(x).float().pow(2).mean()
                with nsyswrap.annotate("backward"):
                    loss.backward()
        with nsyswrap.annotate("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
torch.cuda.synchronize()
dist.destroy_process_group()
