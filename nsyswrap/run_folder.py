"""The folder `nsyswrap run` and `nsyswrap import` write into: never shared, and filled
completely before anything of an earlier run is replaced.

- A folder nsyswrap creates is created exclusively (mkdir, never one that was there): the
  default `nsyswrap-runs/NAME-DATE-TIME` gets a random suffix when that name is taken (two
  runs started in the same second, or anything planted there). The run writes into it.
- Into a folder that exists (`-o DIR`), the new files are written in a fresh private folder
  inside it (`.nsyswrap-incomplete-XXXXXXXX`, mkdtemp) and moved into DIR only when the run
  is complete; on failure they stay there, named in the message, and DIR is as it was.
- A folder holding files the new ones would replace is refused (exit 2) without --force:
  for `run`, any earlier run's files (RUN_FILES: its log, report, export, analysis, page);
  for `import`, the very files it writes. With --force they are replaced only once the new
  run is complete, all together (a run's are first moved aside, then the new ones in), so
  the folder never holds a mix of two runs that reads as one.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .errors import BadInputError, NsysWrapError

INCOMPLETE_PREFIX = ".nsyswrap-incomplete-"
REPLACED_PREFIX = ".nsyswrap-replaced-"
# What a run leaves: nsys.log, analysis.json, report.html (analysis.NAME.json and
# report.NAME.html per rank), the captures, and each capture's export.
RUN_FILES = ("nsys.log", "analysis.json", "report.html", "analysis.*.json", "report.*.html",
             "*.nsys-rep", "*.qdstrm")


def run_files(folder: Path) -> list[Path]:
    """The files of an earlier run in `folder` (links included, never followed): RUN_FILES,
    and the .sqlite export of a capture that is there."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    captures = {n.rsplit(".", 1)[0] for n in names if n.endswith((".nsys-rep", ".qdstrm"))}
    return sorted(folder / n for n in names
                  if any(fnmatch.fnmatchcase(n, p) for p in RUN_FILES)
                  or (n.endswith(".sqlite") and n[: -len(".sqlite")] in captures))


class RunFolder:
    """Where one run's (or import's) files go: `stage` while it is made, `final` once it
    is complete (the same folder when nsyswrap created it)."""

    def __init__(self, final: Path, stage: Path, force: bool, replaces_runs: bool) -> None:
        self.final, self.stage, self.force = final, stage, force
        self._replaces_runs = replaces_runs

    @property
    def created(self) -> bool:
        """nsyswrap created `final` for this run: it writes there directly."""
        return self.stage == self.final

    @classmethod
    def for_run(cls, output: Path | None, stem: str, force: bool,
                names: Sequence[str] = ()) -> RunFolder:
        """`output` (None: a new folder under ./nsyswrap-runs); refused when it holds an
        earlier run's files, or any of `names`, unless `force`."""
        if output is None:
            final = _create_default(Path.cwd() / "nsyswrap-runs", stem)
            return cls(final, final, force, True)
        if _create(output):
            return cls(output, output, force, True)
        taken = run_files(output) + [output / n for n in names
                                     if os.path.lexists(output / n)]
        if taken and not force:
            raise BadInputError(
                f"{output} holds another run's files ({_some(taken)}): choose "
                "another --output, or --force to replace them once the new run is complete")
        return cls(output, _stage_in(output), force, True)

    @classmethod
    def for_import(cls, output: Path, names: Sequence[str], force: bool) -> RunFolder:
        """`output` for files named `names`; refused when any of them is there already,
        unless `force`."""
        if _create(output):
            return cls(output, output, force, False)
        taken = [output / n for n in names if os.path.lexists(output / n)]
        if taken and not force:
            raise BadInputError(
                f"{taken[0]} exists: choose another -o, or --force to replace it once the "
                "new files are complete")
        return cls(output, _stage_in(output), force, False)

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
        if self.created:
            return
        new = sorted(p for p in self.stage.iterdir() if not p.is_dir())
        if self.force:
            self._replace(new)
        else:
            self._add(new)
        with contextlib.suppress(OSError):
            self.stage.rmdir()

    def discard(self) -> None:
        """Remove what this run made (it ran nothing of the user's)."""
        shutil.rmtree(self.stage, ignore_errors=True)

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
        old = {p.name: p for p in (run_files(self.final) if self._replaces_runs else [])}
        old.update({p.name: self.final / p.name for p in new
                    if os.path.lexists(self.final / p.name)})
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


def _some(paths: list[Path]) -> str:
    names = [p.name for p in paths[:3]]
    return ", ".join(names) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
