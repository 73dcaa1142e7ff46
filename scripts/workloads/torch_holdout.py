"""Held-out workload: not used while developing the analyses; its export checks them after
(kernel counts and totals against SQL, per-range GPU busy against the kernels launched inside,
range counts against NVTX events). A small CNN training loop annotated with nsyswrap, a
pinned-memory input pipeline, periodic .item() logging, and one harness benchmark."""

import torch

import nsyswrap

dev = torch.device("cuda")


def main():
    torch.manual_seed(2)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10),
    ).to(dev)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    batches = [(torch.randn(32, 3, 64, 64).pin_memory(), torch.randint(0, 10, (32,)).pin_memory())
               for _ in range(3)]
    for step in range(10):
        with nsyswrap.annotate("step", domain="train"):
            with nsyswrap.annotate("data", domain="train"):
                x, y = (t.to(dev, non_blocking=True) for t in batches[step % 3])
            with nsyswrap.annotate("forward", domain="train"):
                loss = torch.nn.functional.cross_entropy(net(x), y)
            with nsyswrap.annotate("backward", domain="train"):
                loss.backward()
            with nsyswrap.annotate("update", domain="train"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            if step % 5 == 4:
                with nsyswrap.annotate("log", domain="train"):
                    print("step", step, float(loss.item()))
    x = torch.randn(32, 3, 64, 64, device=dev)
    with torch.no_grad():
        r = nsyswrap.benchmark(lambda: net(x), name="cnn_forward", iters=20, warmup=5,
                               flush_l2="interleave")
    print(r)


if __name__ == "__main__":
    main()
