"""Every file nsyswrap writes goes through here (standard library only: the CLI's start-up
imports it, and nothing on that path may import pandas).

The rules:
- A file is written to a fresh temporary name in its own folder (`.NAME.XXXXXXXX.tmp`,
  created with O_EXCL, never through a link), flushed and fsynced, then renamed onto its
  name: a reader sees the old file or the whole new one. Should anything fail (a full disk,
  a renderer raising half-way, Ctrl-C), the temporary file is removed and an existing file
  is left as it was, byte for byte.
- Nothing is written through a symbolic link nsyswrap did not create: a link at the target
  is refused (one line, exit 2). The only links followed are the system's device names
  under /dev (/dev/stdout, /dev/fd/N).
- A target that exists and is a character device or a pipe (/dev/null, a FIFO) is written
  in place: it cannot be renamed over, and it holds no document to keep.
- An output that is one of the inputs (the same path, or the same file by another
  spelling, a link or a hard link) is refused before anything is read or written.
- A replaced file keeps its permissions (and owner, where nsyswrap runs as root); a new one
  gets 0o666 less the umask, as `open` gives.
- What another program fills (`replacing`: a capture, an export) is private, 0600,
  whatever that program made of it: a capture and its export hold the profiled command line
  and the environment nsys saw (tokens, passwords). `nsyswrap run` and `import` create
  everything under `private_files` (umask 077): folders 0700, files 0600.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from .errors import BadInputError, NsysWrapError

# Errors about the path the user gave (exit 2); any other OSError (a full disk, an I/O
# error) is a failure to write (exit 1).
_PATH_ERRORS = {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EISDIR,
                errno.EROFS, errno.ENAMETOOLONG, errno.ELOOP, errno.EEXIST}
# Links under these folders are the system's names for open files and devices: only root
# can plant one there.
_SYSTEM_LINK_FOLDERS = ("/dev/",)
_OPEN_FLAGS = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# The temporary name's room for the target's name (a file name has at most 255 bytes).
_NAME_ROOM = 200
PRIVATE_FILE = 0o600
PRIVATE_FOLDER = 0o700
# The umask the user had, handed to the profiled program (nsyswrap/instrument/runner.py, which keeps
# its own copy of the name): nsyswrap's own files are private, the program's are as it
# would make them without nsyswrap (nsys 2022.4 itself runs it with umask 000).
UMASK_ENV = "NSYSWRAP_UMASK"
_user_umask: list[int] = []  # the umask outside `private_files`, while inside


@contextmanager
def private_files() -> Iterator[None]:
    """Files and folders created meanwhile, by nsyswrap and the programs it starts,
    readable by their owner only (umask 077: folders 0700, files 0600); the umask is
    restored after. nsys makes its shared folders and its raw capture itself, with modes of
    its own (capture.py makes the capture private afterwards)."""
    old = os.umask(0o077)
    _user_umask.append(old)
    try:
        yield
    finally:
        _user_umask.pop()
        os.umask(old)


def user_umask() -> int:
    """The user's umask: outside any `private_files`."""
    if _user_umask:
        return _user_umask[0]
    current = os.umask(0o077)
    os.umask(current)
    return current


def make_private(path: str | os.PathLike) -> None:
    """`path` (a file nsyswrap made, or nsys made for it) readable by its owner only; a
    file system that keeps no modes is left as it is."""
    try:
        os.chmod(path, PRIVATE_FILE, follow_symlinks=False)
    except (OSError, NotImplementedError):
        pass


def private_folder(path: str | os.PathLike) -> Path:
    """`path` and its missing parents created as folders only their owner can enter
    (0700); folders already there are left as they are."""
    path = Path(path)
    missing = []
    for folder in [path, *path.parents]:
        if os.path.lexists(folder):
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_FOLDER)
        except FileExistsError:  # made meanwhile (another nsyswrap); checked by the caller
            pass
    return path


def refuse_input_as_output(output: str | os.PathLike | None,
                           inputs: Iterable[str | os.PathLike | None],
                           option: str = "-o") -> None:
    """BadInputError when `output` is one of `inputs`: the same path however spelled
    (relative, absolute, through linked folders, even where it does not exist yet) or the
    same file (a link or a hard link to it). A `.nsys-rep` input brings the `.sqlite`
    export beside it, which is what gets read for it."""
    if output is None:
        return
    out = Path(output)
    for given in inputs:
        if given is None:
            continue
        path = Path(given)
        candidates = [(path, None)]
        if path.suffix in (".nsys-rep", ".qdrep"):
            candidates.append((path.with_suffix(".sqlite"), path))
        for candidate, report in candidates:
            if _same_file(out, candidate):
                what = ("one of the inputs" if report is None
                        else f"the export read for the input {report}")
                raise BadInputError(f"{option} {output} is {what}: nsyswrap never writes "
                                    "over its input")


def _same_file(a: Path, b: Path) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # either is missing or unreadable: not the same existing file
        return False


def atomic_write(path: str | os.PathLike, content: str | bytes | Iterable[str] | Iterable[bytes],
                 *, inputs: Iterable[str | os.PathLike | None] = (),
                 encoding: str = "utf-8") -> Path:
    """Write `content` (a text, bytes, or pieces of either, written as they come) to
    `path` by the rules above; `inputs` are refused as the target. Returns the path."""
    pieces = iter([content]) if isinstance(content, (str, bytes, bytearray)) else iter(content)
    first = next(pieces, "")  # a renderer that fails at once fails before anything is made
    with atomic_open(path, binary=isinstance(first, (bytes, bytearray)), inputs=inputs,
                     encoding=encoding) as f:
        f.write(first)
        for piece in pieces:
            f.write(piece)
    return Path(path)


@contextmanager
def atomic_open(path: str | os.PathLike, *, binary: bool = False,
                inputs: Iterable[str | os.PathLike | None] = (),
                encoding: str = "utf-8") -> Iterator[IO]:
    """A file object to write `path` through, by the rules above: the file takes its
    place when the block ends without an exception, and not at all otherwise. Text is
    written as given (no newline translation)."""
    path = Path(path)
    refuse_input_as_output(path, inputs, option="output")
    existing, in_place = _existing(path)
    if in_place:
        with _in_place(path, binary, encoding) as f:
            yield f
        return
    try:
        fd, tmp = _new_temp(path, existing)
    except OSError as e:
        raise write_error(path, e, _left(path, existing)) from None
    with _discarded_on_failure(tmp, path, existing), _fdopen(fd, binary, encoding) as f:
        yield f
        f.flush()
        os.fsync(f.fileno())
    _put_in_place(tmp, path, existing)


@contextmanager
def replacing(path: str | os.PathLike, *, suffix: str = "",
              inputs: Iterable[str | os.PathLike | None] = ()) -> Iterator[Path]:
    """A fresh, empty temporary file beside `path` (created with O_EXCL; its name ends in
    `suffix`) for another program to fill, e.g. `nsys export -o TMP`. When the block ends
    without an exception it is made private (0600: `nsys export --force-overwrite true`
    makes a new file, 0644 under the usual umask), fsynced and renamed onto `path`;
    otherwise removed, and an existing `path` is left as it was. OSErrors of the block itself
    pass through."""
    path = Path(path)
    refuse_input_as_output(path, inputs, option="output")
    existing, in_place = _existing(path)
    if in_place:
        raise BadInputError(f"cannot write {path}: it is not a regular file")
    try:
        fd, tmp = _new_temp(path, None, suffix, mode=PRIVATE_FILE)
        os.close(fd)
    except OSError as e:
        raise write_error(path, e, _left(path, existing)) from None
    try:
        yield tmp
    except BaseException:
        _discard(tmp)
        raise
    with _discarded_on_failure(tmp, path, existing):
        make_private(tmp)
        _fsync_file(tmp)
    _put_in_place(tmp, path, existing)


def _put_in_place(tmp: Path, path: Path, existing) -> None:
    """The written, fsynced temporary file renamed onto `path`, and the folder synced; on
    failure the temporary file is removed and `path` left as it was."""
    with _discarded_on_failure(tmp, path, existing):
        os.replace(tmp, path)
    _sync_folder(path.parent)


@contextmanager
def _discarded_on_failure(tmp: Path, path: Path, existing) -> Iterator[None]:
    """The temporary file for `path` removed when the block fails; an OSError said as a
    failure to write `path` (write_error), anything else passed on as it is."""
    try:
        yield
    except BaseException as e:
        _discard(tmp)
        if isinstance(e, OSError):
            raise write_error(path, e, _left(path, existing)) from None
        raise


def open_new(path: str | os.PathLike, *, binary: bool = False,
             encoding: str = "utf-8") -> IO:
    """`path` created for writing only if nothing is there, not even a link (O_CREAT |
    O_EXCL | O_NOFOLLOW): for a file written as things happen (a log that a child process
    writes into) rather than replaced whole. BadInputError (one line) when it exists or
    cannot be made; the caller picks another name or says so."""
    path = Path(path)
    try:
        fd = os.open(path, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL, 0o666)
    except FileExistsError:
        raise BadInputError(f"cannot create {path}: something is already there "
                            "(nsyswrap never writes over it)") from None
    except OSError as e:
        raise write_error(path, e, "nothing was written") from None
    return _fdopen(fd, binary, encoding)


def write_error(path: Path, e: OSError, after: str) -> NsysWrapError:
    """One line for an OSError met while writing `path`; `after` says what became of it."""
    kind = BadInputError if e.errno in _PATH_ERRORS else NsysWrapError
    error = kind(f"cannot write {path}: {e.strerror or e}; {after}")
    error.errno = e.errno
    return error


def _left(path: Path, existing: os.stat_result | None) -> str:
    """What a failed replacement leaves: the old file as it was, or nothing."""
    return "nothing was written" if existing is None else f"{path} is unchanged"


def _existing(path: Path) -> tuple[os.stat_result | None, bool]:
    """What is at `path` now (None: nothing) and whether to write it in place, refusing
    what nsyswrap never writes to."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None, False
    except OSError as e:
        raise write_error(path, e, "nothing was written") from None
    if stat.S_ISLNK(st.st_mode):
        if not os.path.abspath(path).startswith(_SYSTEM_LINK_FOLDERS):
            raise BadInputError(f"{path} is a symbolic link: nsyswrap writes no file through "
                                "a link; remove it or write elsewhere")
        try:
            st = os.stat(path)
        except OSError as e:
            raise write_error(path, e, "nothing was written") from None
        if stat.S_ISREG(st.st_mode):  # /dev/stdout sent to a file: written where it points
            return st, True
    if stat.S_ISDIR(st.st_mode):
        raise BadInputError(f"cannot write {path}: it is a folder")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return st, True
    if not stat.S_ISREG(st.st_mode):
        raise BadInputError(f"cannot write {path}: it is not a regular file")
    return st, False


@contextmanager
def _in_place(path: Path, binary: bool, encoding: str) -> Iterator[IO]:
    """A device or pipe written as it is; only the system's links are followed. Appending:
    /dev/stdout sent to a file with `>>` must not start over its beginning."""
    flags = _OPEN_FLAGS | os.O_APPEND
    if os.path.abspath(path).startswith(_SYSTEM_LINK_FOLDERS):
        flags &= ~getattr(os, "O_NOFOLLOW", 0)
    try:
        with _fdopen(os.open(path, flags), binary, encoding) as f:
            yield f
    except OSError as e:
        raise write_error(path, e, "it may hold part of the output") from None


def _new_temp(path: Path, existing: os.stat_result | None, suffix: str = "",
              mode: int = 0o666) -> tuple[int, Path]:
    """A fresh file beside `path` (O_EXCL: never one that was there, never through a
    link), with the permissions `path` has, or `mode` less the umask."""
    base = path.name[:_NAME_ROOM]
    for attempt in range(100):
        tmp = path.with_name(f".{base}.{secrets.token_hex(4)}.tmp{suffix}")
        try:
            fd = os.open(tmp, _OPEN_FLAGS | os.O_CREAT | os.O_EXCL,
                         0o600 if existing is not None else mode)
            break
        except FileExistsError:
            if attempt == 99:
                raise
    if existing is not None:
        try:
            os.fchmod(fd, stat.S_IMODE(existing.st_mode) & 0o777)
            if os.geteuid() == 0 and (existing.st_uid, existing.st_gid) != (0, 0):
                os.fchown(fd, existing.st_uid, existing.st_gid)
        except OSError:  # a folder that keeps no modes or owners (vfat, some mounts)
            pass
    return fd, tmp


def _fdopen(fd: int, binary: bool, encoding: str) -> IO:
    if binary:
        return os.fdopen(fd, "wb")
    return os.fdopen(fd, "w", encoding=encoding, newline="")


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_folder(folder: Path) -> None:
    """The rename itself made durable; a folder that cannot be fsynced is left as it is."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _discard(tmp: Path) -> None:
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
