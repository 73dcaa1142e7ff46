"""capture -> export -> load -> analyse, for `nsyswrap run` and `nsyswrap import`.

Every step keeps what the previous one produced: a failed import keeps the .qdstrm, a failed
export keeps the .nsys-rep, a failing workload still gets its capture exported and analysed;
a step that fails (a full disk, an interrupt) says where the capture is kept and how to
finish it. The files go into a folder of their own (run_folder.py): they replace an earlier
run's only once complete. Signals, from nsys's start until the export is written: launch.py.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..common.errors import BadInputError, Interrupted, NsysWrapError
from ..common.files import atomic_write
from ..common.nsys import find_nsys, nsys_version
from ..common.progress import NO_PROGRESS, Progress
from ..comparison.result import Comparison
from ..comparison.single import compare
from ..diagnose import Thresholds
from ..multi.samples import diff_samples, sample_rows
from ..read.loader import NO_CUDA_TRACE_NOTE, NO_NVTX_NOTE
from ..render.html import HtmlRenderer
from ..render.json import JsonRenderer
from .launch import Interrupts
from .profile import (
    LOG_NAME,
    Capture,
    ProfileOptions,
    ProgramNotStarted,
    finish,
    profile,
    profile_ranks,
    target_stem,
)
from .run_folder import RunFolder

ANALYSIS_JSON = "analysis.json"
REPORT_HTML = "report.html"


@dataclass
class RunResult:
    capture: Capture
    comparison: Comparison | None
    analysis_json: Path | None
    report_html: Path | None = None


def run(target: Sequence[str], output_dir: Path | None, opts: ProfileOptions,
        thresholds: Thresholds | None = None, *, nsys: str | None = None,
        progress: Callable[[str], None] | None = None,
        stdout_to_stderr: bool = False, compare_options: dict | None = None,
        steps: Progress = NO_PROGRESS) -> RunResult:
    """Profile `target` into `output_dir` (None: a new folder under ./nsyswrap-runs).
    `progress` gets one-line messages; `steps` shows the long steps (a spinner);
    compare_options: keyword arguments of `compare` (attribution, all_domains, ...)."""
    stem = target_stem(target)
    folder = RunFolder.for_run(output_dir, stem, opts.force, _run_names([stem]))
    _announce(folder, progress)
    with Interrupts(progress) as interrupts:
        try:
            cap = profile(target, folder.stage, opts, nsys=nsys, progress=progress,
                          stdout_to_stderr=stdout_to_stderr, interrupts=interrupts)
        except ProgramNotStarted:
            folder.discard()
            raise
        interrupts.writing("importing and exporting the capture")
        with _keeping([cap], say=progress), steps.step("importing and exporting the capture"):
            cap = finish(cap, progress)
    with _keeping([cap], say=progress):
        result = _analyse(cap, thresholds, progress, compare_options=compare_options,
                          steps=steps, final_dir=folder.final, cuda_traced=_traces(opts, "cuda"),
                          nvtx_traced=_traces(opts, "nvtx"))
        folder.commit()
    return _committed(result, folder)


def run_ranks(target: Sequence[str], output_dir: Path | None, opts: ProfileOptions, ranks: int,
              thresholds: Thresholds | None = None, *, nsys: str | None = None,
              progress: Callable[[str], None] | None = None,
              stdout_to_stderr: bool = False,
              compare_options: dict | None = None,
              steps: Progress = NO_PROGRESS) -> list[RunResult]:
    """torchrun with `ranks` processes, one nsys report and one analysis per rank."""
    stem = target_stem(target)
    names = _run_names([f"{stem}.rank{r}" for r in range(ranks)], per_capture=True)
    folder = RunFolder.for_run(output_dir, stem, opts.force, names)
    _announce(folder, progress)
    with Interrupts(progress) as interrupts:
        try:
            captures = profile_ranks(target, folder.stage, opts, ranks, nsys=nsys,
                                     progress=progress, stdout_to_stderr=stdout_to_stderr,
                                     interrupts=interrupts)
        except ProgramNotStarted:
            folder.discard()
            raise
        interrupts.writing("importing and exporting the ranks' captures")
        with _keeping(captures, say=progress), \
                steps.step("importing and exporting the ranks' captures"):
            captures = [finish(c, progress) for c in captures]
    results = []
    with _keeping(captures, say=progress), steps.step("analysing the ranks' reports",
                                        total=len(captures)) as advance:
        for c in captures:
            results.append(_analyse(c, thresholds, progress,
                                    json_name=f"analysis.{c.name}.json",
                                    html_name=f"report.{c.name}.html",
                                    compare_options=compare_options, steps=steps,
                                    final_dir=folder.final, cuda_traced=_traces(opts, "cuda"),
                                    nvtx_traced=_traces(opts, "nvtx")))
            advance()
        folder.commit()
    return [_committed(r, folder) for r in results]


def import_capture(path: Path, thresholds: Thresholds | None = None, *,
                   nsys: str | None = None, output_dir: Path | None = None,
                   force: bool = False,
                   progress: Callable[[str], None] | None = None,
                   steps: Progress = NO_PROGRESS) -> RunResult:
    """Finish a capture by hand: a .qdstrm (import + export) or a .nsys-rep (export), into
    `output_dir` (default: the capture's folder). The input is never changed; a file there
    already is replaced only with `force`, once the new ones are complete."""
    if not path.is_file():
        raise BadInputError(f"{path}: no such file")
    if not path.name.endswith((".qdstrm", ".nsys-rep")):
        raise BadInputError(f"{path}: give a .qdstrm (raw capture) or a .nsys-rep")
    stem = path.name.rsplit(".", 1)[0]
    names = ([f"{stem}.nsys-rep"] if path.name.endswith(".qdstrm") else []) + [
        f"{stem}.sqlite", ANALYSIS_JSON, REPORT_HTML]
    folder = RunFolder.for_import(output_dir or path.parent, names, force)
    exe = find_nsys(nsys)
    cap = Capture(folder.stage, stem, [], exe or "", nsys_version(exe) if exe else None)
    if path.name.endswith(".qdstrm"):
        cap.qdstrm = path
    else:
        cap.rep = path
    with _keeping([cap], importing=True):
        with steps.step(f"importing and exporting {path.name}"):
            cap = finish(cap, progress, keep_qdstrm=True)
        result = _analyse(cap, thresholds, progress, steps=steps, final_dir=folder.final)
        folder.commit()
    return _committed(result, folder)


def _run_names(stems: Sequence[str], per_capture: bool = False) -> list[str]:
    """The files a run writes: its log, each capture's report and export, and the analysis
    and page (one of each, or one per capture)."""
    names = [LOG_NAME] + [f"{s}{ext}" for s in stems for ext in (".nsys-rep", ".qdstrm",
                                                                   ".sqlite")]
    if per_capture:
        return names + [n for s in stems for n in (f"analysis.{s}.json", f"report.{s}.html")]
    return names + [ANALYSIS_JSON, REPORT_HTML]


def _announce(folder: RunFolder, progress: Callable[[str], None] | None) -> None:
    """Where the run's files are until it is complete (named before anything can end it, a
    kill included), and the captures of earlier runs into the folder that never finished."""
    if progress is None:
        return
    for capture in folder.unfinished:
        progress(f"{capture} is the capture of an earlier run into {folder.final} that did "
                 f"not finish: `{import_command(capture)}` finishes it")
    if not folder.created:
        progress(f"the run's files are written into {folder.stage} and moved into "
                 f"{folder.final} once the run is complete")


def import_command(source: Path) -> str:
    """The command that finishes a capture where it lies (with --force where files it
    would write, such as the export, are there already)."""
    stem = source.name.rsplit(".", 1)[0]
    made = [f"{stem}.sqlite", ANALYSIS_JSON, REPORT_HTML] + (
        [f"{stem}.nsys-rep"] if source.name.endswith(".qdstrm") else [])
    force = " --force" if any((source.parent / n).exists() for n in made) else ""
    return f"nsyswrap import {source}{force}"


@contextmanager
def _keeping(captures: Sequence[Capture], importing: bool = False,
             say: Callable[[str], None] | None = None) -> Iterator[None]:
    """A failure once a capture exists (a full disk, an interrupt, a failed import or
    export) says where the capture is kept and how to finish it, in one line. A bug in
    nsyswrap stays one (an internal error), after a line (`say`) that says the same."""
    try:
        yield
    except KeyboardInterrupt:
        raise Interrupted(f"interrupted; {_kept(captures, importing)}") from None
    except NsysWrapError as e:
        if "nsyswrap import" in str(e):  # it says so already
            raise
        err = NsysWrapError(f"{e}; {_kept(captures, importing)}")
        err.exit_code = e.exit_code
        raise err from None
    except OSError as e:
        where = f" {e.filename}" if e.filename else ""
        raise NsysWrapError(f"cannot write{where}: {e.strerror or e}; "
                            f"{_kept(captures, importing)}") from None
    except Exception:
        if say is not None:
            say(f"nsyswrap failed after the capture; {_kept(captures, importing)}")
        raise


def _kept(captures: Sequence[Capture], importing: bool) -> str:
    """Where the captures are, and the command that finishes the first."""
    cap = captures[0]
    if importing:
        made = [p for p in (cap.rep, cap.sqlite) if p is not None and p.exists()
                and p.parent == cap.output_dir]
        return "the input is kept as it was" + (
            f"; what was made from it is kept in {cap.output_dir}" if made else "")
    source = cap.rep or cap.qdstrm
    if source is None:
        return f"nothing was captured; nsys's output is in {cap.log}"
    where = (f"the capture is kept at {source}" if len(captures) == 1 else
             f"the ranks' captures are kept in {cap.output_dir}")
    return f"{where}: `{import_command(source)}` finishes it"


def _committed(result: RunResult, folder: RunFolder) -> RunResult:
    """`result` with the paths where its files lie once committed."""
    cap = result.capture
    for name in ("log", "rep", "qdstrm", "sqlite"):
        setattr(cap, name, folder.final_path(getattr(cap, name)))
    cap.rescued = [folder.final_path(p) for p in cap.rescued]
    cap.output_dir = folder.final
    result.analysis_json = folder.final_path(result.analysis_json)
    result.report_html = folder.final_path(result.report_html)
    return result


def analysis_json(c: Comparison) -> Iterator[str]:
    """The text of a run's analysis.json, in pieces: the nsyswrap.compare/1 document with
    the samples `nsyswrap diff` compares (multi/samples.py), so that two runs' documents
    diff as their reports do (the rows of --instances would run to millions)."""
    return JsonRenderer().pieces(c, extra={"samples": sample_rows(diff_samples(c))})


NO_CUDA_CALLS_NOTE = ("the program made no CUDA calls (CUDA was traced): no GPU work to "
                      "analyse")
NO_NVTX_CALLS_NOTE = ("the program opened no NVTX ranges (NVTX was traced): annotate code "
                      "with nsyswrap.annotate for the per-range analysis")


def _traces(opts: ProfileOptions, what: str) -> bool:
    return what in [t.strip() for t in opts.trace.split(",")]


def _analyse(cap: Capture, thresholds: Thresholds | None,
             progress: Callable[[str], None] | None,
             json_name: str = ANALYSIS_JSON, html_name: str = REPORT_HTML,
             compare_options: dict | None = None, steps: Progress = NO_PROGRESS,
             final_dir: Path | None = None, cuda_traced: bool = False,
             nvtx_traced: bool = False) -> RunResult:
    """Analyse the export; write analysis.json and the HTML report beside it. They name
    the report where it will lie in `final_dir`, once the run's files are moved there.
    `cuda_traced`, `nvtx_traced`: nsys traced them, so a report without their tables means
    a program that made no such call."""
    if cap.sqlite is None:
        return RunResult(cap, None, None)
    if progress:
        progress("analysing")
    result = compare(cap.sqlite, thresholds, progress=steps, **(compare_options or {}))
    result.info.notes.extend(cap.notes)
    if result.info.command is None and cap.target:  # nsys 2022.4 keeps none: the one run
        result.info.show_command(cap.target)
    # What nsys traced and the program never did is the program's, not the profile's.
    said = {NO_CUDA_TRACE_NOTE: NO_CUDA_CALLS_NOTE if cuda_traced else None,
            NO_NVTX_NOTE: NO_NVTX_CALLS_NOTE if nvtx_traced else None}
    result.info.notes[:] = [said.get(n) or n for n in result.info.notes]
    if final_dir is not None:
        result.info.path = result.info.source = final_dir / cap.sqlite.name
    read = (cap.sqlite, cap.rep, cap.qdstrm)
    out = cap.output_dir / json_name
    atomic_write(out, analysis_json(result), inputs=read)
    page = cap.output_dir / html_name
    with steps.step(f"writing {html_name}"):
        atomic_write(page, HtmlRenderer().render(result), inputs=read)
    return RunResult(cap, result, out, page)
