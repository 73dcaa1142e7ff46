import time


class Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


class _CudaEventBase:
    """As torch._C._CudaEventBase: record(stream), elapsed_time(end) in ms."""

    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        self = super().__new__(cls)
        self.enable_timing = enable_timing
        self.recorded_ns = None
        return self

    def record(self, stream):
        self.recorded_ns = time.perf_counter_ns()

    def elapsed_time(self, end_event):
        if not (self.enable_timing and end_event.enable_timing):
            raise RuntimeError("Both events must be created with argument 'enable_timing=True'.")
        return (end_event.recorded_ns - self.recorded_ns) / 1e6


class Event(_CudaEventBase):
    def __new__(cls, enable_timing=False, blocking=False, interprocess=False):
        return super().__new__(cls, enable_timing=enable_timing, blocking=blocking,
                               interprocess=interprocess)

    def record(self, stream=None):
        if stream is None:
            import torch.cuda

            stream = torch.cuda.current_stream()
        super().record(stream)

    def elapsed_time(self, end_event):
        return super().elapsed_time(end_event)
