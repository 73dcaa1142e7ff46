"""Errors a user can act on. The CLI prints them as one line and exits non-zero."""


class NsysWrapError(Exception):
    """A failure with a message that says what went wrong and what to do (exit code 1)."""

    exit_code = 1
    errno: int | None = None  # the system's error number, where a failed call caused it


class BadInputError(NsysWrapError):
    """The input (a path, a report, an option) cannot be used as given (exit code 2)."""

    exit_code = 2


class Interrupted(NsysWrapError):
    """Stopped by the user (Ctrl-C, SIGTERM, SIGHUP) after something was kept (exit 130)."""

    exit_code = 130
