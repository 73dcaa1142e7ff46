"""Finding and driving the `nsys` binary: locate it, read its version, export reports.

nsys is often half-installed (see docs/nsys-quirks.md): Debian's package puts the importer
where its nsys does not look, the copy bundled with Nsight Compute cannot import without
libdw. This module knows where to look; `capture` uses it to profile.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from .errors import BadInputError, NsysWrapError
from .files import private_folder, replacing

# Where nsys lives when it is not on PATH, most specific first.
NSYS_SEARCH_GLOBS = (
    "/usr/local/cuda/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys",
)
NSYS_MISSING_HELP = (
    "install Nsight Systems (https://developer.nvidia.com/nsight-systems; on Debian: "
    "apt install nsight-systems nsight-systems-target from non-free), "
    "or point to it with --nsys PATH or $NSYS"
)


def find_nsys(explicit: str | None = None) -> str | None:
    """The nsys to use: `explicit`, $NSYS, PATH, then the usual install places (newest first)."""
    if explicit:
        return explicit if _is_executable(explicit) else None
    env = os.environ.get("NSYS")
    if env:
        return env if _is_executable(env) else None
    on_path = shutil.which("nsys")
    if on_path:
        return on_path
    for pattern in NSYS_SEARCH_GLOBS:
        for candidate in sorted(glob.glob(pattern), key=_version_key, reverse=True):
            if _is_executable(candidate):
                return candidate
    return None


def require_nsys(explicit: str | None = None, purpose: str = "this") -> str:
    nsys = find_nsys(explicit)
    if nsys is None:
        where = explicit or os.environ.get("NSYS")
        if where:
            raise NsysWrapError(f"nsys not found at {where}: check the path ({purpose})")
        raise NsysWrapError(f"nsys not found, needed for {purpose}: {NSYS_MISSING_HELP}")
    return nsys


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _version_key(path: str) -> tuple:
    return tuple(int(n) for n in re.findall(r"\d+", path))


def nsys_version(nsys: str) -> str | None:
    """'2025.3.1.0' from `nsys --version`, or None when it does not answer."""
    try:
        out = subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"(\d{4}\.\d+(?:\.\d+)*)", out.stdout + out.stderr)
    return m.group(1) if m else None


def real_nsys_path(nsys: str) -> Path:
    """The real binary behind wrappers and links (Debian's /usr/bin/nsys is a link)."""
    return Path(os.path.realpath(nsys))


def cache_root(explicit: str | os.PathLike | None = None) -> Path | None:
    """Where nsyswrap keeps exports and copies: `explicit` (--cache-dir), $NSYSWRAP_CACHE,
    $XDG_CACHE_HOME/nsyswrap, ~/.cache/nsyswrap; None where none is given and there is no
    home folder to hold one (HOME unset or missing: a service account, a container), which
    nsyswrap does not create."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("NSYSWRAP_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg) / "nsyswrap"
    home = os.path.expanduser("~")
    if home == "~" or not os.path.isdir(home):
        return None
    return Path(home) / ".cache" / "nsyswrap"


def cache_folder(explicit: str | os.PathLike | None, name: str) -> tuple[Path, str | None]:
    """The cache's folder `name`, made where missing (0700), and a note where it is a temporary
    one (no home folder: see cache_root). A folder that cannot be made or written is a
    one-line error that names it."""
    root = cache_root(explicit)
    note = None
    if root is None:
        root = _temporary_cache()
        note = (f"no home folder ({os.environ.get('HOME') or 'HOME unset'}): the cache is "
                f"{root}, a temporary folder; choose one with --cache-dir or $NSYSWRAP_CACHE")
    folder = root / name
    try:
        # Private: the exports hold the environment nsys saw (files.py).
        private_folder(folder)
        if not folder.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
    except OSError as e:
        raise BadInputError(f"cannot use the cache folder {folder}: {e.strerror or e} "
                            "(choose another with --cache-dir or $NSYSWRAP_CACHE)") from None
    return folder, note


def _temporary_cache() -> Path:
    """This user's folder in the system's temporary folder, private (0700, its own, not a
    link: in a shared /tmp anyone can make that name first); a fresh one where that name
    is taken by something else."""
    path = Path(tempfile.gettempdir()) / f"nsyswrap-cache-{os.getuid()}"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077:
            return path
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="nsyswrap-cache-"))


def export_report(rep: Path, *, cache_dir: str | os.PathLike | None = None,
                  nsys: str | None = None) -> tuple[Path, str]:
    """Export a .nsys-rep to SQLite without touching the original. Returns (sqlite, note).

    Uses a sibling `<name>.sqlite` newer than the report (what `nsys stats` reuses too);
    otherwise exports into the cache, keyed by the report's path, size and mtime, so a second
    `compare` of the same report costs nothing.
    """
    sibling = rep.with_suffix(".sqlite")
    if sibling.exists() and sibling.stat().st_mtime >= rep.stat().st_mtime:
        return sibling, f"read the existing export {sibling} (newer than {rep.name})"
    st = rep.stat()
    key = hashlib.sha1(f"{rep.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:12]
    folder, temporary = cache_folder(cache_dir, "exports")
    where = f" ({temporary})" if temporary else ""
    target = folder / f"{rep.stem}-{key}.sqlite"
    if target.exists():
        return target, f"read the cached export {target}{where}"
    if find_nsys(nsys) is None:
        raise BadInputError(
            f"{rep} is a .nsys-rep and reading it needs nsys to export it to SQLite: "
            f"{NSYS_MISSING_HELP}; or export it where nsys is installed "
            f"(nsys export --type sqlite {rep.name}) and pass the .sqlite"
        )
    export_to(rep, target, nsys)
    return target, f"exported {rep.name} to {target}{where}"


def export_to(rep: Path, target: Path, nsys: str | None = None) -> Path:
    """`nsys export --type sqlite` of `rep` into `target`, atomically (files.replacing): a
    failed or interrupted export leaves nothing that a later run would take for a good
    export, and an existing `target` as it was."""
    exe = require_nsys(nsys, purpose=f"exporting {rep.name} to SQLite")
    private_folder(target.parent)
    # No `inputs=[rep]`: files.py counts a report's .sqlite sibling as read for it, and
    # here that sibling is what is being made; the rename never touches the report.
    with replacing(target, suffix=".sqlite") as tmp:
        # In a session of its own: the terminal's Ctrl-C must not cut the export short
        # (nsyswrap run waits for it; elsewhere an interrupt ends it with nsyswrap).
        proc = subprocess.run(
            [exe, "export", "--type", "sqlite", "--force-overwrite", "true", "-o", str(tmp),
             str(rep)], capture_output=True, text=True, start_new_session=True,
        )
        if proc.returncode != 0 or os.path.getsize(tmp) == 0:
            detail = _last_line(proc.stderr) or _last_line(proc.stdout) or f"exit {proc.returncode}"
            raise NsysWrapError(f"nsys could not export {rep} ({detail}); {rep} is kept")
    return target


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.replace("\r", "\n").splitlines() if ln.strip()]
    return lines[-1] if lines else ""
