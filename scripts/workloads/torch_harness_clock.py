"""Harness runs captured with nsys GPU metrics (the GPC clock): a light control and a
sustained heavy GEMM that drives the GPU into its power limit."""

import torch

import nsyswrap


def main():
    a = torch.rand(20, 8192, dtype=torch.float16, device="cuda")
    b = torch.rand(5120, 8192, dtype=torch.float16, device="cuda")
    huge = torch.rand(8192, 8192, dtype=torch.bfloat16, device="cuda")
    nsyswrap.benchmark(lambda: torch.nn.functional.linear(a, b), name="light", iters=30)

    def sustained():
        for _ in range(8):
            huge @ huge

    nsyswrap.benchmark(sustained, name="sustained", iters=40, warmup=20, flush_l2="none")


if __name__ == "__main__":
    main()
