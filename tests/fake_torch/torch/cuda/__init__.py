import threading

from . import nvtx  # noqa: F401
from .streams import Event, Stream

_current = threading.local()
_default = Stream(7)


def current_stream(device=None):
    return getattr(_current, "stream", _default)


def set_stream(stream):
    _current.stream = stream


def is_initialized():
    return False


def synchronize():
    pass


__all__ = ["Event", "Stream", "current_stream", "set_stream"]
