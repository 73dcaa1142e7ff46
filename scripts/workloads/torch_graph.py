"""CUDA-graph replay next to eager launches, each replay inside an NVTX range.

Shows how graph kernels appear in the export (with --cuda-graph-trace=node they are
individual kernel rows launched by one cudaGraphLaunch call).
"""

import nvtx
import torch

dev = torch.device("cuda")


def main():
    x = torch.randn(256, 256, device=dev)
    w = torch.randn(256, 256, device=dev)

    def body():
        y = x
        for _ in range(8):
            y = torch.tanh(y @ w)
        return y

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            body()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = body()
    torch.cuda.synchronize()
    for _ in range(5):
        with nvtx.annotate("eager", domain="graph"):
            body()
        with nvtx.annotate("replay", domain="graph"):
            g.replay()
    torch.cuda.synchronize()
    print("graph done", float(out[0, 0]))


if __name__ == "__main__":
    main()
