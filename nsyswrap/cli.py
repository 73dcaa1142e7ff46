"""The `nsyswrap` command: parses options and calls the library. No analysis lives here."""

from __future__ import annotations

import os

# Arrow's default pool (mimalloc) keeps freed buffers; the system allocator gives them back,
# which lowers the peak memory of `compare` on big reports. Only for this process, and only
# when the user chose nothing (pyarrow reads this when first imported).
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

from .common.memory import limit_malloc_arenas  # noqa: E402

limit_malloc_arenas()
import itertools
import shutil
import sys
from importlib import resources
from pathlib import Path

import click

from ._version import __version__

# Nothing imported here may import pandas (tests/test_cli.py checks it): `compare` starts
# the report's reads first, and they run while pandas and the analysis load.
from .capture import streams
from .capture.profile import DEFAULT_TRACE
from .common.errors import BadInputError, NsysWrapError
from .common.files import atomic_write, private_files, refuse_input_as_output
from .common.names import printable
from .diagnose import Thresholds
from .multi.thresholds import DiffThresholds, RankThresholds
from .read.redact import redact_text
from .render import FORMATS, RANKS_SECTIONS, SECTIONS, render_pieces

# Exit codes: 0 fine, 1 failure, 2 bad input or usage, 3 findings matched --fail-on.
EXIT_FINDINGS = 3
EXIT_INTERRUPTED = 130  # as a shell reports a program ended by Ctrl-C
EXIT_BROKEN_PIPE = 141  # as a shell reports a program ended by SIGPIPE
DEMO_REPORT = "scenarios-h100.sqlite"
# What `run` and `import` print (the page they write is a file of its own).
PRINT_FORMATS = sorted(name for name, f in FORMATS.items() if not f.makes_file)


class _Command(click.Command):
    """A subcommand whose usage errors are two lines (_usage_error)."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            where = f"{parent.command_path} {info_name}" if parent is not None else info_name
            _usage_error(e, where)


class _Group(click.Group):
    """Turns library errors into one line on stderr and an exit code, never a traceback."""

    command_class = _Command

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except NsysWrapError as e:
            _error(str(e))
            ctx.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("nsyswrap: interrupted", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:
            # The reader stopped reading (`| head`): quiet, as a shell reports a program
            # ended by SIGPIPE. Standard output goes nowhere, so its flush at exit cannot
            # fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(EXIT_BROKEN_PIPE)
        except click.UsageError as e:
            _usage_error(e, ctx.command_path)
        except (click.exceptions.Exit, click.ClickException, click.Abort):
            raise
        except Exception as e:  # a bug in nsyswrap: still one line unless asked for more
            if os.environ.get("NSYSWRAP_DEBUG"):
                raise
            _say(f"internal error: {type(e).__name__}: {e} "
                 "(set NSYSWRAP_DEBUG=1 for the traceback, and please report it)")
            ctx.exit(1)

    def make_context(self, info_name, args, parent=None, **extra):
        # The group's own options are parsed here, before invoke.
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            _usage_error(e, info_name)


def _usage_error(e: click.UsageError, command_path: str | None):
    """Two lines, not Click's four (usage, hint, blank, error): what is wrong, and where
    help is. A bare `nsyswrap` still shows the help it asks for."""
    # (Click 8.2 and later: the help a bare command asks for.)
    if isinstance(e, getattr(click.exceptions, "NoArgsIsHelpError", ())):
        raise e
    _error(e.format_message())
    where = e.ctx.command_path if e.ctx is not None else command_path
    if where:
        click.echo(_line(f"Try '{where} -h' for help."), err=True)
    raise click.exceptions.Exit(e.exit_code)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="nsyswrap")
def main() -> None:
    """Honest GPU timing: what the kernels did, next to what your timers said."""


def entry() -> None:
    """The `nsyswrap` console script (and `python -m nsyswrap`): `main`, then an exit that
    skips the interpreter's teardown when nothing is left to finish. Unloading pandas and
    its modules takes 0.16-0.25 s at every exit (docs/performance.md, "Start-up"). Only when
    no thread but this one and no child process is still running; exit handlers still run,
    and the output is flushed first. Otherwise, the usual exit."""
    streams.guard()  # before anything is opened: a closed stream's number stays its own
    try:
        main()
        code = 0
    except SystemExit as e:
        code = e.code
    if code is None:
        code = 0
    elif not isinstance(code, int):  # a message: printed, status 1, as Python does
        print(code, file=sys.stderr)
        code = 1
    if _nothing_left_running():
        import atexit

        atexit._run_exitfuncs()  # what Python's own exit runs (a private name, stable since 3.0)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more can reach it
                pass
        os._exit(code)
    sys.exit(code)


def _nothing_left_running() -> bool:
    import threading

    if any(t is not threading.main_thread() and not t.daemon and t.is_alive()
           for t in threading.enumerate()):
        return False
    mp = sys.modules.get("multiprocessing")  # imported only where workers were started
    return not (mp is not None and mp.active_children())


def _line(message: str) -> str:
    """A message as nsyswrap prints it, the one place: what looks like a credential
    redacted (redact.py: a command line quoted in an error) and control characters as
    escapes (render/names.printable: a file named with an escape sequence cannot retitle or
    recolour the terminal, one with a newline cannot forge a line; a name of megabytes is
    cut)."""
    return printable(redact_text(message))


def _say(message: str) -> None:
    click.echo(f"nsyswrap: {_line(message)}", err=True)


def _error(message: str) -> None:
    _say(f"error: {message}")


def _messages(steps):
    """Where one-line messages go: above the spinners where they are drawn (a message
    written past them would share the spinner's line), else plain lines on stderr."""
    say = getattr(steps, "say", None)
    return _say if say is None else lambda message: say(_line(message))


def _steps(fmt: str):
    """Spinners for the long steps, only for a person at a terminal: not into pipes or logs,
    and not beside machine-readable output."""
    from .common.progress import NO_PROGRESS, TerminalProgress

    if fmt in ("json", "csv") or not sys.stderr.isatty():
        return NO_PROGRESS
    return TerminalProgress()


def demo_report() -> Path:
    return Path(str(resources.files("nsyswrap") / "data" / DEMO_REPORT))


def _parse_thresholds(pairs: tuple[str, ...]) -> Thresholds:
    overrides = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise BadInputError(f"--threshold takes NAME=VALUE, not {pair!r}")
        overrides[name.strip()] = value.strip()
    return Thresholds().with_overrides(overrides)


def _parse_fail_on(value: str | None) -> set[str] | None:
    if not value:
        return None
    codes = {c.strip().upper() for c in value.split(",") if c.strip()}
    if "ANY" in codes:
        return {"ANY"}
    from .diagnose import CODES
    from .multi.checks import CODES as RANK_CODES

    known = (*CODES, *RANK_CODES)
    unknown = codes - set(known)
    if unknown:
        raise BadInputError(
            f"--fail-on: unknown code(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(known)} or 'any'"
        )
    return codes


def _thresholds_help(kind=Thresholds) -> str:
    return "\n".join(f"  {name} (default {default}): {text}"
                     for name, default, text in kind.describe())


ATTRIBUTION_OPTION = click.option(
    "--attribution", type=click.Choice(["process", "thread"]), default="process",
    show_default=True,
    help="Which GPU work a range owns. process: what its thread launched inside it, plus "
    "what other threads of its process launched while it was open and in no range of the "
    "user's own (PyTorch's backward runs on autograd threads). thread: nsys's rule "
    "(nvtx_gpu_proj_sum).")
ALL_DOMAINS_OPTION = click.option(
    "--all-domains", is_flag=True,
    help="Findings also for ranges of libraries' NVTX domains (NCCL, cuDNN, cuBLAS, ...) "
    "and PyTorch's operator ranges (aten::*); they are listed either way.")


JOBS_OPTION = click.option(
    "-j", "--jobs", type=click.IntRange(min=1), metavar="N",
    help="Analyse reports in N worker processes (default: one per core for 8 reports or "
    "more on more than 2 cores, else 1).")
DASK_OPTION = click.option(
    "--dask", metavar="ADDRESS", help="Analyse the reports on this Dask scheduler "
    "(tcp://host:8786; pip install 'nsyswrap[dask]'); the workers must see the files.")


def _split_thresholds(pairs: tuple[str, ...]):
    """NAME=VALUE pairs into the single-report thresholds and the cross-rank ones."""
    from .multi.thresholds import RankThresholds

    names = {n for n, _, _ in RankThresholds.describe()}
    ranks = tuple(p for p in pairs if p.partition("=")[0].strip() in names)
    single = tuple(p for p in pairs if p not in ranks)
    overrides = {p.partition("=")[0].strip(): p.partition("=")[2].strip() for p in ranks}
    return _parse_thresholds(single), RankThresholds().with_overrides(overrides)


def _output_multi(kind: str, result, fmt: str, output: Path | None, top: int,
                  color: bool | None, steps=None, inputs=(), **options) -> None:
    """Like _output, for ranks side by side or a diff. The ranks page links each rank's
    own page where one lies beside its report."""
    from .render.multi import render_diff, render_ranks

    renderer = render_ranks if kind == "ranks" else render_diff
    if kind == "ranks" and fmt == "html":
        from .multi.inputs import page_links

        options["pages"] = page_links([s.source for s in result.summaries], output)
    _output(result, fmt, output, top, color, renderer=renderer, steps=steps, inputs=inputs,
            **options)


def _exit_for_ranks(analysis, fail_codes: set[str] | None) -> None:
    """After the output for the reports that could be analysed: a line for each one that
    could not, then exit 2. The status says the input was not wholly usable, as for one
    bad report (a script testing for 0 sees it), while the output holds every rank that
    could be read and names the rest in its notes; no code of its own, so 2 keeps one
    meaning: bad input. It wins over --fail-on (findings over part of the ranks).
    Otherwise --fail-on over the cross-rank findings and every report's own."""
    for failure in analysis.failed:
        _error(f"{failure.describe()} (left out; the other reports were analysed)")
    if analysis.failed:
        sys.exit(BadInputError.exit_code)
    if not fail_codes:
        return
    codes = [f.code for f in analysis.findings] + [
        f["code"] for s in analysis.summaries for f in s.document["findings"]]
    hit = [c for c in codes if "ANY" in fail_codes or c in fail_codes]
    if hit:
        _say(f"{len(hit)} finding(s) match --fail-on ({', '.join(sorted(set(hit)))})")
        sys.exit(EXIT_FINDINGS)


@main.command("compare", epilog="\b\nThresholds (--threshold NAME=VALUE):\n"
              + _thresholds_help() + "\n\n\b\nAcross ranks:\n"
              + _thresholds_help(RankThresholds) + "\n\n\b\nExamples:\n"
              "  nsyswrap compare runs/ddp/*.rank*.sqlite\n"
              "  nsyswrap compare runs/ddp/ --format html -o ranks.html\n"
              "  nsyswrap compare --ranks one_report_all_ranks.sqlite --format json\n"
              "  nsyswrap compare run.sqlite\n"
              "  nsyswrap compare run.nsys-rep --format json -o verdict.json\n"
              "  nsyswrap compare run.sqlite --fail-on SYNC_IN_RANGE,TRANSFER_IN_RANGE\n"
              "  nsyswrap compare run.sqlite --format csv --section kernels\n"
              "  nsyswrap compare run.sqlite --format html -o report.html\n"
              "  nsyswrap compare run.sqlite --format trace -o trace.json   # for Perfetto")
@click.argument("reports", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default="table",
              show_default=True, help="Output format. json is the CI contract "
              "(schema nsyswrap.compare/1; nsyswrap.ranks/1 for several reports); html a "
              "self-contained page; trace Chrome trace-event JSON for ui.perfetto.dev or "
              "chrome://tracing (trace: one report).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to FILE instead of standard output.")
@click.option("--section", type=click.Choice(sorted(set(SECTIONS) | set(RANKS_SECTIONS))),
              help="csv: which table to write (one report: default the first with rows of "
              "ranges, timings, benchmarks, kernels; several reports: "
              f"{'|'.join(RANKS_SECTIONS)}, default ranks).")
@click.option("--instances", is_flag=True, help="json: add one row per NVTX range instance; "
              "json, csv, table, markdown: list every range family (default: the 1,000 "
              "with the most GPU time).")
@click.option("--top", type=int, default=10, show_default=True,
              help="table/markdown: kernels to list (0: all).")
@click.option("--full-names", is_flag=True, help="table/markdown/html: kernels' whole "
              "names (default: shortened, distinct kernels told apart).")
@click.option("-t", "--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Change a finding threshold (repeatable; names below).")
@click.option("--fail-on", metavar="CODE[,CODE]|any",
              help=f"Exit {EXIT_FINDINGS} when a finding with one of these codes is present.")
@click.option("--nsys", metavar="PATH", help="nsys binary, to export a .nsys-rep.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where .nsys-rep exports go (default $NSYSWRAP_CACHE or ~/.cache/nsyswrap).")
@click.option("--by-process", is_flag=True, help="Summarise NVTX ranges per process "
              "(worker processes, torchrun ranks).")
@ATTRIBUTION_OPTION
@ALL_DOMAINS_OPTION
@click.option("--ranks", "as_ranks", is_flag=True, help="Ranks side by side even for one "
              "report (its processes with GPU work are the ranks); on for several reports.")
@JOBS_OPTION
@DASK_OPTION
@click.option("--color/--no-color", default=None, help="Colour (default: only on a terminal).")
def compare_command(reports, fmt, output, section, instances, top, full_names, thresholds,
                    fail_on, nsys, cache_dir, by_process, attribution, all_domains, as_ranks,
                    jobs, dask, color):
    """Analyse an Nsight Systems report (.sqlite or .nsys-rep) and say what distorts its
    timings. Without REPORT, analyses the demo report bundled with nsyswrap.

    \b
    Several reports (files, folders, globs), or --ranks: ranks side by side (one report per
    rank, or one report with a process per rank), with STRAGGLER, COMM_WAIT, EXPOSED_COMM."""
    limits, rank_limits = _split_thresholds(thresholds)
    _check_destination(fmt, output)
    if reports:
        from .multi.inputs import expand

        paths = expand(reports)
        refuse_input_as_output(output, paths)
        if len(paths) > 1 or as_ranks:
            from .multi import compare_ranks

            _check_section(section, RANKS_SECTIONS, "with several reports (or --ranks)")
            fail_codes = _parse_fail_on(fail_on)
            if fmt == "trace":
                raise BadInputError("--format trace shows one report; for ranks side by "
                                    "side use html, table, json, csv or markdown")
            steps = _steps(fmt)
            analysis = compare_ranks(
                paths, thresholds=limits, rank_thresholds=rank_limits, jobs=jobs, dask=dask,
                compare_options={"attribution": attribution, "all_domains": all_domains},
                load_options={"cache_dir": cache_dir, "nsys": nsys}, progress=steps)
            _output_multi("ranks", analysis, fmt, output, top, color, steps=steps,
                          inputs=paths, section=section, full_names=full_names)
            _exit_for_ranks(analysis, fail_codes)
            return
        report = paths[0]
    else:
        report = None
    if report is None:
        report = demo_report()
        refuse_input_as_output(output, [report])
        _say(f"no report given; comparing the bundled demo report {report.name} "
             "(try: nsyswrap compare YOUR_REPORT.sqlite)")
    _check_section(section, SECTIONS, "for one report")
    steps = _steps(fmt)
    from .read.database import open_report

    # The report's bulk reads start now and run on their threads (SQLite in C, without the
    # GIL) while pandas and the analysis are imported: ~0.5 s of start-up overlapped with
    # the reads (docs/performance.md, "Start-up").
    # Formats that draw every GPU operation (a page's timeline, a trace) need them all;
    # the others get the same numbers from the operations streamed, in memory bounded by
    # the report's ranges, not its operations (docs/performance.md).
    with open_report(report, cache_dir=cache_dir, nsys=nsys, progress=steps,
                     stream_operations=not FORMATS[fmt].makes_file) as opened:
        fail_codes = _parse_fail_on(fail_on)
        from .comparison.single import compare

        result = compare(opened, limits, by_process=by_process, attribution=attribution,
                         all_domains=all_domains, progress=steps)
        read = [report, opened.db.path]
    if fmt == "csv":
        section = _csv_section(result, section, instances)
    _output(result, fmt, output, top, color, steps=steps, inputs=read, section=section,
            instances=instances, full_names=full_names)
    _exit_for([result], fail_codes)


# The text formats' width where COLUMNS and the terminal say nothing (pipes, files).
DEFAULT_WIDTH = 120
MIN_WIDTH = 40  # below this no table's numbers fit


def _text_width(to_terminal: bool) -> int:
    """The terminal's width; elsewhere COLUMNS where set (a pipe, a file, a CI log), else
    DEFAULT_WIDTH."""
    if to_terminal:
        width = shutil.get_terminal_size((DEFAULT_WIDTH, 40)).columns
    else:
        columns = os.environ.get("COLUMNS", "").strip()
        width = int(columns) if columns.isdigit() and int(columns) > 0 else DEFAULT_WIDTH
    return max(width, MIN_WIDTH)


def _check_section(section: str | None, valid, where: str) -> None:
    """A --section the output has no table of is a usage error naming those it has."""
    if section is not None and section not in valid:
        raise click.UsageError(f"--section {section}: no such table {where}; choose one of "
                               f"{', '.join(valid)}")


def _csv_section(result, section: str | None, every_family: bool = False) -> str:
    """The section CSV writes; where it has no rows, one line saying so and naming those
    that have (its header is still written); where it leaves range families out
    (document.range_families), one line saying so: a table has no room for it."""
    from .render.csv import default_section, section_size

    section = section or default_section(result)
    if not section_size(result, section):
        full = [s for s in SECTIONS if section_size(result, s)]
        _say(f"the {section} section is empty (header only); sections with rows: "
             f"{', '.join(full) or 'none'}")
    if section == "ranges" and not every_family:
        from .comparison.document import range_families
        from .render.views import families_left_out

        shown, left_out = range_families(result)
        if left_out:
            line = families_left_out(len(shown), left_out, "--instances writes every one")
            _say(f"csv ranges: {line[0].lower()}{line[1:]}")
    return section


def _output(result, fmt: str, output: Path | None, top: int, color: bool | None,
            renderer=render_pieces, steps=None, inputs=(), **options) -> None:
    """Render `result` to standard output or `output` (never one of `inputs`, written
    atomically: files.py); colour and width only on a terminal. A page or trace is not
    dumped onto a terminal: it asks for -o. `renderer` gives the text, or its pieces
    (written as they come: millions of instance rows stream)."""
    to_terminal = output is None and sys.stdout.isatty()
    _check_destination(fmt, output)
    use_color = color if color is not None else (to_terminal and "NO_COLOR" not in os.environ)
    width = _text_width(to_terminal)
    if steps is not None and FORMATS[fmt].makes_file:
        with steps.step(f"writing the {fmt} output"):
            text = renderer(result, fmt, color=use_color, width=width, top=top, **options)
    else:
        text = renderer(result, fmt, color=use_color, width=width, top=top, **options)
    pieces = iter([text] if isinstance(text, str) else text)
    # The first piece before anything is written: a renderer that fails, fails here.
    first = next(pieces, "")
    if output is None:
        click.echo(first, nl=False)
        for piece in pieces:
            click.echo(piece, nl=False)
        if FORMATS[fmt].makes_file:
            _say(f"wrote the {fmt} output to standard output (-o {_file_hint(fmt)} writes "
                 "a file)")
        return
    _write_pieces(output, first, pieces, inputs)
    _say(f"wrote {fmt} to {output}")


def _write_pieces(output: Path, first: str, rest, inputs=()) -> None:
    """Write the text to `output` atomically: should a later piece fail, an existing file
    is left as it was and no part of the new one remains."""
    atomic_write(output, itertools.chain([first], rest), inputs=inputs)


def _check_destination(fmt: str, output: Path | None) -> None:
    if output is None and streams.unusable(sys.stdout):
        raise BadInputError(f"standard output is closed: give -o {_file_hint(fmt)} to write "
                            f"the {fmt} output")
    if FORMATS[fmt].makes_file and output is None and sys.stdout.isatty():
        raise BadInputError(f"--format {fmt} makes a file: give -o {_file_hint(fmt)} "
                            "(or redirect standard output)")


def _file_hint(fmt: str) -> str:
    """The -o a format that makes a file suggests: FILE.html."""
    return f"FILE.{FORMATS[fmt].output_file_extension}"


def _exit_for(results, fail_codes: set[str] | None, workload_exit: int | None = None,
              shut_down_by_nsys: str | None = None) -> None:
    """The workload's exit code if it failed; else EXIT_FINDINGS when a finding of any of
    the comparisons (one per rank with --ranks) matches --fail-on."""
    if shut_down_by_nsys:
        _say("nsys ended the workload when its capture range ended (--capture-range-end="
             f"{shut_down_by_nsys}; =stop lets it run on)" + (
                 f": exit code {workload_exit} is nsys's doing" if workload_exit else ""))
    if workload_exit:
        _say(f"the workload exited with code {workload_exit}; nsyswrap does too")
        sys.exit(workload_exit)
    if fail_codes:
        hit = [f for r in results if r is not None for f in r.findings
               if "ANY" in fail_codes or f.code in fail_codes]
        if hit:
            codes = ", ".join(sorted({f.code for f in hit}))
            _say(f"{len(hit)} finding(s) match --fail-on ({codes})")
            sys.exit(EXIT_FINDINGS)


def _target(module: str | None, args: tuple[str, ...]) -> list[str]:
    if module:
        return [sys.executable, "-m", module, *args]
    if not args:
        raise BadInputError("nothing to run: give SCRIPT.py [ARGS], -m MODULE [ARGS], "
                            "or -- COMMAND [ARGS]")
    first = args[0]
    if first.endswith(".py"):
        if not Path(first).is_file():
            raise BadInputError(f"{first}: no such script")
        return [sys.executable, *args]
    if shutil.which(first) is None and not Path(first).is_file():
        raise BadInputError(f"{first}: no such command or script")
    return list(args)


@main.command("run", context_settings={"ignore_unknown_options": True,
                                       "allow_interspersed_args": False},
              epilog="\b\nExamples:\n"
              "  nsyswrap run train.py --epochs 1\n"
              "  nsyswrap run -m mypkg.bench\n"
              "  nsyswrap run --gpu-metrics -o runs/linear examples/scenarios.py\n"
              "  nsyswrap run -- torchrun --nproc-per-node 2 train.py")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("-m", "module", metavar="MODULE", help="Run a Python module, like python -m.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the report, its export and analysis.json (default: a new "
              "nsyswrap-runs/NAME-DATE-TIME); one holding another run's files needs --force.")
@click.option("--force", is_flag=True, help="Replace an earlier run's files in --output, once "
              "the new run is complete.")
@click.option("--nsys", metavar="PATH", help="nsys binary (default: $NSYS, PATH, usual places).")
@click.option("--trace", default=DEFAULT_TRACE, show_default=True, help="nsys -t.")
@click.option("--sample", is_flag=True, help="Turn on CPU sampling and context switches.")
@click.option("--gpu-metrics", is_flag=True, help="Sample GPU metrics, clocks included "
              "(nsys --gpu-metrics-devices=all).")
@click.option("--gpu-metrics-frequency", type=int, metavar="HZ", help="Sampling rate for "
              "--gpu-metrics.")
@click.option("--harness-only", is_flag=True, help="Collect from the first nsyswrap "
              "benchmark on (nsys --capture-range=nvtx).")
@click.option("--no-user-events", "no_user_events", is_flag=True,
              help="Do not record the program's own CUDA-event timings "
              "(torch.cuda.Event, triton's do_bench, torch's Timer).")
@click.option("--no-lines", "no_lines", is_flag=True,
              help="Do not trace the program's lines (where each kernel was launched from, "
              "where the host's time went; Python 3.12+).")
@click.option("--no-source", "no_source", is_flag=True,
              help="Keep the program's source text out of the report and its pages.")
@click.option("--ranks", type=click.IntRange(min=1), metavar="N",
              help="Start SCRIPT on N processes with torchrun, each rank under its own nsys: "
              "one report and one analysis per rank.")
@click.option("--nsys-arg", "nsys_args", multiple=True, metavar="ARG",
              help="Extra nsys profile argument (repeatable), e.g. --nsys-arg=--cudabacktrace=all")
@click.option("--format", "fmt", type=click.Choice(PRINT_FORMATS), default="table",
              show_default=True, help="How to print the analysis (analysis.json and "
              "report.html are always written).")
@click.option("--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Change a finding threshold (see `nsyswrap compare --help`).")
@click.option("--fail-on", metavar="CODE[,CODE]|any",
              help=f"Exit {EXIT_FINDINGS} when a finding with one of these codes is present.")
@ATTRIBUTION_OPTION
@ALL_DOMAINS_OPTION
@click.option("-v", "--verbose", is_flag=True, help="Show nsys's own output.")
@click.option("--color/--no-color", default=None)
def run_command(args, module, output, force, nsys, trace, sample, gpu_metrics,
                gpu_metrics_frequency, harness_only, no_user_events, no_lines, no_source,
                ranks, nsys_args, fmt,
                thresholds, fail_on, attribution, all_domains, verbose, color):
    """Profile a script (or -m module, or -- any command) under nsys, export the report and
    show the verdict. The workload's output streams through; its exit code is nsyswrap's."""
    from .capture.launch import interrupt_grace_s
    from .capture.pipeline import run, run_ranks
    from .capture.profile import ProfileOptions

    interrupt_grace_s()  # a bad NSYSWRAP_INTERRUPT_GRACE_S refused before anything is made
    limits, rank_limits = _split_thresholds(thresholds)
    fail_codes = _parse_fail_on(fail_on)
    target = _target(module, args)
    opts = ProfileOptions(trace=trace, sample=sample, gpu_metrics=gpu_metrics,
                          gpu_metrics_frequency=gpu_metrics_frequency,
                          harness_only=harness_only, extra_args=list(nsys_args), force=force,
                          verbose=verbose, user_events=not no_user_events,
                          lines=not no_lines, source=not no_source)
    # Machine-readable output owns standard output; the workload's goes to stderr then.
    quiet_stdout = fmt in ("json", "csv")
    analysis = {"attribution": attribution, "all_domains": all_domains}
    steps = _steps(fmt)
    say = _messages(steps)
    if ranks and target[0] != sys.executable:
        raise BadInputError("--ranks runs a Python SCRIPT or -m MODULE with torchrun; "
                            "for other commands use nsyswrap run -- torchrun ...")
    # The run's folder, captures, exports, log and pages are its owner's alone: they hold
    # the command line and the environment nsys saw (files.private_files).
    with private_files():
        if ranks:
            results = run_ranks(target, output, opts, ranks, limits, nsys=nsys,
                                progress=say, stdout_to_stderr=quiet_stdout,
                                compare_options=analysis, steps=steps)
        else:
            results = [run(target, output, opts, limits, nsys=nsys, progress=say,
                           stdout_to_stderr=quiet_stdout, compare_options=analysis,
                           steps=steps)]
    first = results[0].capture
    # The reader of standard output left (`| head`): the files are written; the rest goes
    # to standard error, and nsyswrap ends as a program killed by SIGPIPE would.
    printing = not first.stdout_closed and _stdout_open()
    analysed = [r.comparison for r in results if r.comparison is not None]
    if len(results) == 1 and analysed and printing:
        _output(analysed[0], fmt, None, 10, color)
    elif len(results) > 1 and analysed and printing:
        # The per-rank reports shrink to their findings inside the cross-rank summary.
        from .multi import ranks_of, summary_of

        ranks = ranks_of([summary_of(c) for c in analysed], rank_limits)
        _output_multi("ranks", ranks, fmt, None, 10, color)
    _say_files(results)
    if first.interrupted:
        _say("interrupted: the capture up to that point was kept")
        for rank, code in sorted(first.failed_ranks.items()):
            _say(f"rank {rank} ended with {_exit_status(code)} after the interrupt")
        if first.workload_exit not in (0, EXIT_INTERRUPTED, None) and not first.failed_ranks:
            _say(f"the workload exited with {_exit_status(first.workload_exit)}")
        sys.exit(EXIT_INTERRUPTED)
    if first.stdout_closed:
        sys.exit(EXIT_BROKEN_PIPE)
    failed = next((r.capture.workload_exit for r in results if r.capture.workload_exit), None)
    _exit_for([r.comparison for r in results], fail_codes, failed, first.shut_down_by_nsys)


def _stdout_open() -> bool:
    """False, with one line saying where the analysis is instead, when nsyswrap was started
    with standard output closed (`>&-`)."""
    if not streams.unusable(sys.stdout):
        return True
    _say("standard output is closed: the analysis is not shown; analysis.json and "
         "report.html hold it")
    return False


def _say_files(results) -> None:
    """Where each run's files are, in one block after the output."""
    sys.stdout.flush()  # the output first, where both streams reach one terminal
    for result in results:
        cap = result.capture
        if len(results) > 1:
            _say(f"--- {cap.name}")
        _say("files: " + ", ".join(str(p) for p in cap.files()))
        if result.comparison is not None:
            _say(f"analysis: {result.analysis_json}")
            _say(f"report: {result.report_html} (open it in a browser)")


def _exit_status(code: int) -> str:
    """'exit code 1', or 'SIGABRT (exit code 134)' for a shell's 128 + N."""
    import signal

    if 128 < code < 128 + signal.NSIG:
        try:
            return f"{signal.Signals(code - 128).name} (exit code {code})"
        except ValueError:  # a number no signal has
            pass
    return f"exit code {code}"


@main.command("diff", epilog="\b\nThresholds (--threshold NAME=VALUE):\n"
              + _thresholds_help(DiffThresholds) + "\n\n\b\nExamples:\n"
              "  nsyswrap diff before.sqlite after.sqlite\n"
              "  nsyswrap diff base/analysis.json new/analysis.json --format markdown\n"
              "  nsyswrap diff before.sqlite after.sqlite --format html -o diff.html\n"
              "  nsyswrap diff main.sqlite pr.sqlite --fail-on-regression 5   # CI gate")
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("new", type=click.Path(path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown", "csv",
                                                   "html"]),
              default="table", show_default=True,
              help="Output format (json: schema nsyswrap.diff/1; html: a self-contained "
              "page, written with -o FILE.html).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write to FILE instead of standard output.")
@click.option("--section", type=click.Choice(["rows", "findings"]),
              help="csv: which table to write (default: rows).")
@click.option("--top", type=int, default=0, help="table/markdown: rows to list (0: all).")
@click.option("--full-names", is_flag=True, help="table/markdown/html: kernels' whole "
              "names (default: shortened, distinct kernels told apart).")
@click.option("-t", "--threshold", "thresholds", multiple=True, metavar="NAME=VALUE",
              help="Change a diff threshold (repeatable; names below).")
@click.option("--fail-on-regression", "fail_pct", type=click.FloatRange(min=0), metavar="PCT",
              help=f"Exit {EXIT_FINDINGS} when something got significantly slower by PCT "
              "percent or more.")
@click.option("--nsys", metavar="PATH", help="nsys binary, to export a .nsys-rep.")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where .nsys-rep exports go.")
@ATTRIBUTION_OPTION
@JOBS_OPTION
@DASK_OPTION
@click.option("--color/--no-color", default=None)
def diff_command(base, new, fmt, output, section, top, full_names, thresholds, fail_pct, nsys,
                 cache_dir, attribution, jobs, dask, color):
    """Compare two runs: BASE and NEW reports (.sqlite, .nsys-rep) or analysis.json files.
    Kernels by name, range families and harness benchmarks, each with base and new medians,
    the change, its bootstrap confidence interval and a verdict; comparability first."""
    from .multi import diff_reports

    overrides = {p.partition("=")[0].strip(): p.partition("=")[2].strip() for p in thresholds}
    if any("=" not in p for p in thresholds):
        raise BadInputError("--threshold takes NAME=VALUE")
    _check_destination(fmt, output)
    refuse_input_as_output(output, [base, new])
    steps = _steps(fmt)
    result = diff_reports(base, new, thresholds=DiffThresholds().with_overrides(overrides),
                          jobs=jobs, dask=dask, compare_options={"attribution": attribution},
                          load_options={"cache_dir": cache_dir, "nsys": nsys}, progress=steps)
    _output_multi("diff", result, fmt, output, top, color, steps=steps, inputs=[base, new],
                  section=section, full_names=full_names)
    if fail_pct is not None:
        worse = result.regressions(fail_pct)
        if len(worse):
            names = ", ".join(f"{r.name} {100 * r.change:+.1f}%"
                              for r in worse.head(5).itertuples())
            _say(f"{len(worse)} significant regression(s) of {fail_pct:g}% or more: {names}")
            sys.exit(EXIT_FINDINGS)


@main.command("import")
@click.argument("capture", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="Folder for the report, its export, analysis.json and report.html "
              "(default: the capture's folder).")
@click.option("--force", is_flag=True, help="Replace files of the same names there, once "
              "the new ones are complete.")
@click.option("--nsys", metavar="PATH", help="nsys binary (for the export).")
@click.option("--format", "fmt", type=click.Choice(PRINT_FORMATS), default="table",
              show_default=True)
@click.option("--color/--no-color", default=None)
def import_command(capture, output, force, nsys, fmt, color):
    """Finish a capture nsys could not: import a raw .qdstrm (or a .nsys-rep), export it to
    SQLite, and analyse it. The capture itself is kept as it is; nothing is written over
    without --force."""
    from .capture.pipeline import import_capture

    steps = _steps(fmt)
    with private_files():  # as a run's (run_command)
        result = import_capture(capture, nsys=nsys, output_dir=output, force=force,
                                progress=_messages(steps), steps=steps)
    if result.comparison is not None and _stdout_open():
        _output(result.comparison, fmt, None, 10, color)
    _say_files([result])


@main.command("doctor")
@click.option("--nsys", metavar="PATH", help="nsys binary to check.")
def doctor_command(nsys):
    """Check that this machine can profile: nsys, its importer, NVTX from Python, CPU
    sampling, torch and CUDA, the GPU and its clocks, free disk. Exit 1 if a check fails."""
    from .capture.doctor import FAIL, OK, each_check

    failed = False
    # Each line as its check ends, a spinner naming the one running (on a terminal).
    for c in each_check(nsys, progress=_steps("table")):
        mark = {OK: "✓", FAIL: "✗"}.get(c.status, "!")
        line = f"{mark} {c.name}: {c.detail}"
        if c.fix and c.status != OK:
            line += f"  → {c.fix}"
        click.echo(_line(line))
        failed = failed or c.status == FAIL
    if failed:
        sys.exit(1)
