"""The folder `nsyswrap run` and `nsyswrap import` write into: never shared, and filled
completely before anything of an earlier run is replaced.

- A folder nsyswrap creates is created exclusively (mkdir, never one that was there): the
  default `nsyswrap-runs/NAME-DATE-TIME` gets a random suffix when that name is taken (two
  runs started in the same second, or anything planted there). The run writes into it.
- Into a folder that exists (`-o DIR`), the new files are written in a fresh private folder
  inside it (`.nsyswrap-incomplete-XXXXXXXX`, mkdtemp, mode 0700) and moved into DIR only
  when the run is complete; on failure they stay there, named in the message (and by the
  next run into DIR), and DIR is as it was.
- A run leaves a manifest (`nsyswrap-run.json`: a random id and the names of its files).
  It is what `--force` replaces: the files of the one earlier run it names, never anything
  else. A file of a name the new run writes that no manifest claims (a report of another
  experiment, an earlier version's run) is refused with or without --force; an earlier
  run's files are refused without --force, the message listing exactly what would be
  replaced. With --force they are replaced only once the new run is complete, all together
  (moved aside, the new ones renamed in, the old ones removed; on a failure half-way both
  put back), so the folder never holds a mix of two runs that reads as one.
- Runs into one folder at once: the files go in under an exclusive lock of the folder
  (flock), and only while its manifest is the one the run saw when it started. The first
  to finish wins; the other says so and keeps its files in its private folder.
- `import` writes no manifest: it refuses the very files it writes, and replaces them with
  --force.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import fnmatch
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import BadInputError, NsysWrapError
from ..common.files import atomic_write

INCOMPLETE_PREFIX = ".nsyswrap-incomplete-"
REPLACED_PREFIX = ".nsyswrap-replaced-"
MANIFEST = "nsyswrap-run.json"
MANIFEST_SCHEMA = "nsyswrap.run/1"
# The names a manifest may claim: what runs write (nsys.log, analysis.json, report.html,
# analysis.NAME.json and report.NAME.html per rank, the captures and their exports). A
# manifest naming anything else (edited by hand, or planted) claims nothing of it.
RUN_FILES = (MANIFEST, "nsys.log", "analysis.json", "report.html", "analysis.*.json",
             "report.*.html", "*.nsys-rep", "*.qdstrm", "*.sqlite")
# Captures of a run that did not finish, looked for in its private folder.
CAPTURE_FILES = ("*.nsys-rep", "*.qdstrm")
# Names listed in a message, at most (a manifest could list thousands).
LISTED = 20


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@dataclass(frozen=True)
class Manifest:
    """What one run left in its folder: its id and the names of its files."""

    run: str
    files: tuple[str, ...]

    @classmethod
    def new(cls, files: Sequence[str]) -> Manifest:
        return cls(secrets.token_hex(8), tuple(sorted({*files, MANIFEST})))

    @classmethod
    def read(cls, folder: Path) -> Manifest | None:
        """The manifest in `folder`; None when there is none or it is not one of ours (not
        a regular file, not the document, a name outside RUN_FILES or with a folder)."""
        try:
            fd = os.open(folder / MANIFEST, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            if not os.fstat(fd).st_mode & 0o100000 or os.fstat(fd).st_size > 1 << 20:
                return None
            with os.fdopen(fd, "rb", closefd=False) as f:
                doc = json.loads(f.read().decode("utf-8"))
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)
        if not isinstance(doc, dict) or doc.get("nsyswrap") != MANIFEST_SCHEMA:
            return None
        run, files = doc.get("run"), doc.get("files")
        if not isinstance(run, str) or not isinstance(files, list) or not all(
                isinstance(n, str) and n == os.path.basename(n) and n not in ("", ".", "..")
                and _matches(n, RUN_FILES) for n in files):
            return None
        return cls(run, tuple(files))

    def text(self) -> str:
        return json.dumps({"nsyswrap": MANIFEST_SCHEMA, "run": self.run,
                           "files": list(self.files)}, indent=1) + "\n"

    def present(self, folder: Path) -> list[str]:
        """Its files that are in `folder` now (links included, never followed; folders
        are no run's files)."""
        return [n for n in self.files if (folder / n).is_symlink()
                or os.path.lexists(folder / n) and not (folder / n).is_dir()]


def unfinished_captures(folder: Path) -> list[Path]:
    """Captures left in the private folders of runs into `folder` that did not finish (an
    internal error, a kill): what `nsyswrap import` can finish."""
    found = []
    with contextlib.suppress(OSError):
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if entry.name.startswith(INCOMPLETE_PREFIX) and entry.is_dir(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    found += sorted(Path(entry.path) / n for n in os.listdir(entry.path)
                                    if _matches(n, CAPTURE_FILES))
    return found


class RunFolder:
    """Where one run's (or import's) files go: `stage` while it is made, `final` once it
    is complete (the same folder when nsyswrap created it). `earlier`: the manifest of the
    run whose files this one replaces (with --force); `unfinished`: captures of earlier
    runs into `final` that did not finish, for the caller to name."""

    def __init__(self, final: Path, stage: Path, force: bool, *, keeps_manifest: bool,
                 earlier: Manifest | None = None, names: Sequence[str] = (),
                 unfinished: Sequence[Path] = ()) -> None:
        self.final, self.stage, self.force = final, stage, force
        self.earlier, self.names, self.unfinished = earlier, tuple(names), list(unfinished)
        self._keeps_manifest = keeps_manifest

    @property
    def created(self) -> bool:
        """nsyswrap created `final` for this run: it writes there directly."""
        return self.stage == self.final

    @classmethod
    def for_run(cls, output: Path | None, stem: str, force: bool,
                names: Sequence[str] = ()) -> RunFolder:
        """`output` (None: a new folder under ./nsyswrap-runs) for a run that writes the
        files `names`; refused when it holds any of them that no earlier run's manifest
        claims, and an earlier run's files unless `force` (see the module docstring)."""
        if output is None or _create(output):
            final = output or _create_default(Path.cwd() / "nsyswrap-runs", stem)
            # Claimed at once: a run that fails before it completes leaves a folder whose
            # files --force may replace.
            atomic_write(final / MANIFEST, Manifest.new(names).text())
            return cls(final, final, force, keeps_manifest=True)
        earlier = Manifest.read(output)
        theirs = earlier.present(output) if earlier else []
        ours = {*names, MANIFEST}
        foreign = sorted(n for n in ours if os.path.lexists(output / n) and n not in theirs)
        if foreign:
            raise BadInputError(
                f"{output} holds files of the names this run writes that no earlier nsyswrap "
                f"run there made ({_listed(foreign)}): move them, or choose another --output")
        if theirs and not force:
            raise BadInputError(
                f"{output} holds an earlier run's files, which this run would replace "
                f"({_listed(theirs)}): choose another --output, or --force to replace "
                "exactly these once the new run is complete")
        return cls(output, _stage_in(output), force, keeps_manifest=True, earlier=earlier,
                   names=names, unfinished=unfinished_captures(output))

    @classmethod
    def for_import(cls, output: Path, names: Sequence[str], force: bool) -> RunFolder:
        """`output` for files named `names`; refused when any of them is there already,
        unless `force`."""
        if _create(output):
            return cls(output, output, force, keeps_manifest=False)
        taken = [output / n for n in names if os.path.lexists(output / n)]
        if taken and not force:
            raise BadInputError(
                f"{taken[0]} exists: choose another -o, or --force to replace it once the "
                "new files are complete")
        return cls(output, _stage_in(output), force, keeps_manifest=False, names=names)

    def final_path(self, path: Path | None) -> Path | None:
        """Where a file made in `stage` lies once committed."""
        if path is None or self.created:
            return path
        try:
            return self.final / path.relative_to(self.stage)
        except ValueError:  # not one of ours (an input elsewhere)
            return path

    def commit(self) -> None:
        """Move the complete run's files from `stage` into `final` (see the module
        docstring); a conflict that arose meanwhile leaves them in `stage`, named."""
        new = sorted(p for p in self.stage.iterdir() if not p.is_dir() and p.name != MANIFEST)
        if self._keeps_manifest:
            atomic_write(self.stage / MANIFEST,
                         Manifest.new([p.name for p in new]).text())
            new.append(self.stage / MANIFEST)  # renamed in last: it claims what is there
        if self.created:
            return
        with _locked(self.final):
            self._check_unchanged(new)
            if self.force:
                self._replace(new)
            else:
                self._add(new)
        with contextlib.suppress(OSError):
            self.stage.rmdir()

    def discard(self) -> None:
        """Remove what this run made (it ran nothing of the user's)."""
        shutil.rmtree(self.stage, ignore_errors=True)

    def _check_unchanged(self, new: list[Path]) -> None:
        """The folder as this run found it: the same earlier run, no file of the new ones'
        names that it may not replace."""
        now = Manifest.read(self.final) if self._keeps_manifest else None
        if self._keeps_manifest and now != self.earlier:
            raise NsysWrapError(
                f"another run finished into {self.final} while this one ran: its files are "
                f"there now, and this run's are kept in {self.stage}")
        mine = set(self._replaced())
        taken = sorted(p.name for p in new
                       if os.path.lexists(self.final / p.name) and p.name not in mine)
        if taken:
            raise NsysWrapError(
                f"{self.final} holds files of the new ones' names that appeared while this "
                f"run ran ({_listed(taken)}): they are left as they are, and this run's "
                f"files are kept in {self.stage}")

    def _replaced(self) -> list[str]:
        """The names --force replaces: the earlier run's files (a run's), or those of the
        new files' names (an import's)."""
        if self._keeps_manifest:
            return self.earlier.present(self.final) if self.earlier else []
        return [n for n in self.names if os.path.lexists(self.final / n)]

    def _add(self, new: list[Path]) -> None:
        """Each new file linked in only where nothing is (a hard link fails on anything
        there, a planted link included), then its staged name removed; on a conflict,
        those already placed are taken back."""
        placed: list[tuple[Path, Path, bool]] = []
        try:
            for p in new:
                placed.append((p, self.final / p.name, _place(p, self.final / p.name)))
        except OSError as e:
            for src, dst, linked in placed:
                with contextlib.suppress(OSError):
                    os.unlink(dst) if linked else os.rename(dst, src)
            raise NsysWrapError(
                f"cannot put the new files into {self.final} ({e.filename or ''}: "
                f"{e.strerror or e}); they are kept in {self.stage}") from None
        for src, _dst, linked in placed:
            if linked:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(src)

    def _replace(self, new: list[Path]) -> None:
        """The files to replace moved aside together, the new ones renamed in, the old
        ones removed; on a failure half-way, both put back as they were."""
        old = {n: self.final / n for n in self._replaced()}
        aside = Path(tempfile.mkdtemp(prefix=REPLACED_PREFIX, dir=self.final))
        moved_aside: list[str] = []
        moved_in: list[Path] = []
        try:
            for name, p in old.items():
                os.rename(p, aside / name)
                moved_aside.append(name)
            for p in new:
                os.rename(p, self.final / p.name)
                moved_in.append(p)
        except OSError as e:
            for p in moved_in:
                with contextlib.suppress(OSError):
                    os.rename(self.final / p.name, p)
            for name in moved_aside:
                with contextlib.suppress(OSError):
                    os.rename(aside / name, old[name])
            with contextlib.suppress(OSError):
                aside.rmdir()
            raise NsysWrapError(
                f"cannot replace the files in {self.final} ({e.strerror or e}); the new run's "
                f"files are kept in {self.stage}, the earlier ones as they were") from None
        shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock of `folder` itself (flock on its descriptor: nothing is created),
    held while one run's files go in."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise NsysWrapError(f"cannot open the output folder {folder}: {e.strerror or e}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)

def _place(src: Path, dst: Path) -> bool:
    """`src` at `dst` where nothing is: True when linked, False when renamed."""
    try:
        os.link(src, dst)
        return True
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # A file system without hard links: renamed, after a look that nothing is there.
        if os.path.lexists(dst):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst)) from None
        os.rename(src, dst)
        return False


def _create(path: Path) -> bool:
    """Create `path` (and its parents); False when it exists already (a folder)."""
    try:
        path.mkdir(parents=True)
    except FileExistsError:
        if not path.is_dir():
            raise BadInputError(f"cannot use {path} as the output folder: it is a file") from None
        _check_writable(path)
        return False
    except OSError as e:
        raise BadInputError(f"cannot create the output folder {path}: "
                            f"{e.strerror or e}") from None
    _check_writable(path)
    return True


def _create_default(base: Path, stem: str) -> Path:
    """base/STEM-DATE-TIME, or with a random suffix when that is taken; created here."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInputError(f"cannot create the output folder {base}: "
                            f"{e.strerror or e}") from None
    for attempt in range(100):
        path = base / (f"{stem}-{stamp}" if attempt == 0
                       else f"{stem}-{stamp}-{secrets.token_hex(3)}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as e:
            raise BadInputError(f"cannot create the output folder {path}: "
                                f"{e.strerror or e}") from None
        return path
    raise BadInputError(f"cannot create a new output folder in {base}: every name was taken")


def _stage_in(folder: Path) -> Path:
    try:
        return Path(tempfile.mkdtemp(prefix=INCOMPLETE_PREFIX, dir=folder))
    except OSError as e:
        raise BadInputError(f"cannot write to the output folder {folder}: "
                            f"{e.strerror or e}") from None


def _check_writable(path: Path) -> None:
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInputError(f"cannot write to the output folder {path}: permission denied")


def _listed(names: Sequence[str]) -> str:
    """Every name, up to LISTED of them."""
    shown = ", ".join(names[:LISTED])
    return shown + (f" and {len(names) - LISTED} more" if len(names) > LISTED else "")
