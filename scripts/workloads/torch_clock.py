"""A few hundred milliseconds of matmuls, for a capture with GPU metrics (clocks) sampled."""

import nvtx
import torch

dev = torch.device("cuda")


def main():
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    torch.cuda.synchronize()
    for i in range(20):
        with nvtx.annotate("mm", domain="clock"):
            for _ in range(10):
                a @ a
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
