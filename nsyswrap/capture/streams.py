"""nsyswrap's own standard output and error, however it was started (standard library only:
the CLI's start-up imports it).

- A stream started closed (`>&-`, `2>&-`: Python then sets sys.stdout or sys.stderr to
  None) gets /dev/null on its file descriptor before anything else is opened. Otherwise
  the next file nsyswrap opens would take that number (a FIFO, nsys.log) and receive what
  is meant for the stream, and a child that inherits it would write there too. The stream
  is remembered as closed (`unusable`): what would go there is kept elsewhere (the
  workload's output in nsys.log, launch.Relay) and one line says so on the other stream.
- Text nsyswrap writes that the stream's encoding cannot hold (PYTHONIOENCODING=latin-1,
  an ASCII locale) is written as JSON's escapes (`\\u2192`), never a UnicodeEncodeError: a
  table stays readable and a JSON document valid. The workload's output is not text to
  nsyswrap: launch.Relay passes its bytes on as they are.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import sys

# The error handler that escapes what an encoding cannot hold (codecs.register_error).
ESCAPE_ERRORS = "nsyswrap.json-escape"
_closed: list = []  # the streams that nsyswrap was started with closed


def _json_escape(error: UnicodeError) -> tuple[str | bytes, int]:
    """`\\uXXXX` for a character the encoding cannot hold (a surrogate pair beyond the BMP),
    as JSON writes it; a byte that could not be decoded (surrogateescape's U+DC80-U+DCFF)
    as that byte again."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    code = ord(error.object[error.start])
    if 0xDC80 <= code <= 0xDCFF:
        return bytes([code - 0xDC00]), error.start + 1
    if code > 0xFFFF:
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}", error.start + 1
    return f"\\u{code:04x}", error.start + 1


codecs.register_error(ESCAPE_ERRORS, _json_escape)


def guard() -> None:
    """Make nsyswrap's standard output and error safe to use (see the module docstring).
    Call once, first thing, before any file is opened."""
    for fd, attr in ((1, "stdout"), (2, "stderr")):
        stream = getattr(sys, attr)
        if stream is None or _is_closed(fd):
            if _is_closed(fd):
                devnull = os.open(os.devnull, os.O_WRONLY)
                if devnull != fd:
                    os.dup2(devnull, fd)
                    os.close(devnull)
                stream = open(fd, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            else:  # another file holds the number already: never write into it
                stream = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
            _closed.append(stream)
            setattr(sys, attr, stream)
        if getattr(stream, "errors", None) in ("strict", "surrogateescape"):
            with contextlib.suppress(AttributeError, ValueError, OSError):
                stream.reconfigure(errors=ESCAPE_ERRORS)


def unusable(stream) -> bool:
    """Nothing written to `stream` can reach anyone: None, or a stream nsyswrap was started
    with closed (now /dev/null)."""
    return stream is None or any(stream is s for s in _closed)


def name(stream) -> str:
    """What to call `stream` in a message."""
    return "standard error" if stream is sys.stderr else "standard output"


def _is_closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False
