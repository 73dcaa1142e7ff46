"""Held-out workload: a small MLP training loop, annotated with NVTX like a user would.

Not used while developing the analyses; its export checks them afterwards (kernel counts,
range counts and per-range GPU busy against direct SQL).
"""

import nvtx
import torch

dev = torch.device("cuda")


def main():
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 2048), torch.nn.GELU(), torch.nn.Linear(2048, 512)
    ).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [torch.randn(256, 512) for _ in range(4)]
    for step in range(12):
        with nvtx.annotate("train_step", domain="mlp"):
            with nvtx.annotate("h2d", domain="mlp"):
                x = data[step % 4].to(dev)
            with nvtx.annotate("fwd", domain="mlp"):
                with torch.autocast("cuda", dtype=torch.bfloat16, enabled=step % 2 == 0):
                    loss = model(x).pow(2).mean()
            with nvtx.annotate("bwd", domain="mlp"):
                loss.backward()
            with nvtx.annotate("opt", domain="mlp"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            if step % 4 == 3:
                with nvtx.annotate("log", domain="mlp"):
                    print("step", step, "loss", loss.item())
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
