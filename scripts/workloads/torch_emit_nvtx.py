"""A training step under torch.autograd.profiler.emit_nvtx: PyTorch opens a range around
every operator ("aten::addmm, seq = 1, op_id = 5"), autograd's backward nodes included
("AddmmBackward0, seq = 15, op_id = 53", on the autograd thread), the second half with
input shapes in the names (record_shapes). For the tests that operator ranges are a
library's (no findings, no ownership of other threads' work) and are grouped per operator."""
import torch

import nsyswrap

torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(512, 512) for _ in range(8)]).cuda()
x = torch.randn(64, 512, device="cuda")
for record_shapes in (False, True):
    with torch.autograd.profiler.emit_nvtx(record_shapes=record_shapes):
        for _ in range(10):
            with nsyswrap.annotate("step"):
                model(x).sum().backward()
torch.cuda.synchronize()
