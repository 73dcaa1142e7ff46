"""A DDP training job (NCCL, one GPU per rank) with an optional straggler, for the
cross-rank analysis (`nsyswrap compare R0 R1`, `nsyswrap run --ranks N`).

    torchrun --nproc-per-node 2 torch_ddp_train.py [--straggler RANK] [--delay-ms 5]

Each step: train_step > data, forward, backward, optimizer (nsyswrap.annotate). DDP
all-reduces the gradients in buckets from autograd hooks while backward runs, so rank r's
all-reduce waits for the slowest rank to join each collective. With --straggler R, rank R
does --delay-ms of host work inside `forward` (after the forward kernels are queued, before
backward): every other rank then waits that long inside its first all-reduce of the step.
scripts/make_fixtures_multigpu.sh profiles it with and without a straggler.
"""

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import nsyswrap


def spin(seconds: float) -> None:
    """Host work that keeps the CPU busy (a sleep would too, but this is what slow data
    loading or Python logic looks like)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--straggler", type=int, default=-1)
    ap.add_argument("--delay-ms", type=float, default=5.0)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()

    dist.init_process_group("nccl")
    rank = dist.get_rank()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(4096, 4096), nn.GELU())])
    model = DistributedDataParallel(model.cuda(), device_ids=[local])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(512, 4096, device="cuda")
    host_batch = torch.randn(512, 4096).pin_memory()
    delay = args.delay_ms / 1e3 if rank == args.straggler else 0.0
    for step in range(args.steps):
        with nsyswrap.annotate("train_step"):
            with nsyswrap.annotate("data"):
                x.copy_(host_batch, non_blocking=True)
            with nsyswrap.annotate("forward"):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(x).float().pow(2).mean()
                if delay:
                    spin(delay)
            with nsyswrap.annotate("backward"):
                loss.backward()
            with nsyswrap.annotate("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    print(f"rank {rank} done (straggler {args.straggler}, delay {delay * 1e3:.1f} ms)",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
