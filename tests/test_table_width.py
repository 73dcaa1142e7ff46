"""The terminal output reads at any width: the verdict (findings) first, then the tables;
no line longer than the width and no name split across lines, at 80, 100 and 120 columns
(COLUMNS, for output that is not a terminal). Kernels are shortened so that distinct
kernels stay distinct, in every format; the kernel table has nsys's Avg and StdDev."""

from __future__ import annotations

import csv
import io
import math
import os
import re
import subprocess
import sys
from collections import defaultdict

import pytest
from conftest import DATA, DEMO, GPU_MIX, compared, has_table, sql

from nsyswrap.common.names import short_names
from nsyswrap.common.units import fmt_ns
from nsyswrap.render import render

pytestmark = pytest.mark.xdist_group("table_width")  # the demo runs once, in one worker

REPORTS = [DATA / "h100_torch_train.sqlite", DATA / "h100_harness_clock.sqlite",
           DATA / "cpu2022_families.sqlite", DATA / "h100_interrupted_lost.sqlite",
           DATA / "h100_user_seed.sqlite", DEMO]
WIDTHS = [80, 100, 120]
KERNEL_NAMES = ("SELECT s.value, count(*), sum(k.end - k.start) FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                "JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value")


def cli(*args, columns: int | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def demo_text():
    """`nsyswrap compare` (the bundled demo) into a pipe, per COLUMNS."""
    out = {}
    for width in [*WIDTHS, None]:
        res = cli("compare", columns=width)
        assert res.returncode == 0, res.stderr
        out[width] = res.stdout
    return out


def identifier(demangled: str) -> str:
    """A kernel's own name in its signature: 'void at::native::foo<(int)4, ...>(int)' ->
    'foo'."""
    head = re.split(r"[<(]", re.sub(r"^void ", "", demangled), maxsplit=1)[0]
    return head.rsplit("::", 1)[-1].strip()


def demo_benchmarks() -> list[str]:
    rows = sql(DEMO, "SELECT DISTINCT coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                     "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 59")
    return [name for (name,) in rows if not name.endswith("[event floor]")]


def top_kernels(path, n: int) -> list[tuple[str, int, int]]:
    return sorted(sql(path, KERNEL_NAMES), key=lambda r: (-r[2], r[0]))[:n]


# -- the demo at 80, 100 and 120 columns ---------------------------------------------------

@pytest.mark.parametrize("width", WIDTHS)
def test_demo_fits_and_no_name_is_split(demo_text, width):
    text = demo_text[width]
    lines = text.splitlines()
    assert not [ln for ln in lines if len(ln) > width]
    # Every benchmark's name whole on a line; every shown kernel's own name too.
    for name in demo_benchmarks():
        assert any(re.search(rf"\b{re.escape(name)}\b", ln) for ln in lines), (name, width)
    for name, _, _ in top_kernels(DEMO, 10):
        assert any(identifier(name) in ln for ln in lines), (identifier(name), width)
    # No word of a finding's subject folded: the first of its ranges on one line, the rest
    # counted (JSON names them all).
    for f in compared(DEMO).findings:
        if f.ranges:
            assert any(f.ranges[0] in ln for ln in lines), (f.ranges[0], width)
        if len(f.ranges) > 1:
            assert any(f"{f.ranges[0]} and {len(f.ranges) - 1} more" in ln
                       for ln in lines), (f.ranges, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_demo_verdict_comes_first(demo_text, width):
    text = demo_text[width]
    findings = text.index("Findings (")
    assert findings < text.index("GPU kernels") < text.index("Harness benchmarks")
    # A finding's message and suggestion use the width, not a narrow column.
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("Findings ("))
    block = lines[at:next(i for i, ln in enumerate(lines) if ln.startswith("GPU kernels"))]
    assert max(len(ln) for ln in block) > 0.85 * width


def test_columns_is_honoured_only_where_set(demo_text):
    """Not a terminal: COLUMNS where set, else 120."""
    assert demo_text[None] == demo_text[120]
    assert max(len(ln) for ln in demo_text[None].splitlines()) > 100
    assert demo_text[80] != demo_text[120]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", REPORTS, ids=lambda p: p.name)
def test_reports_fit(path, width):
    text = render(compared(path), "table", width=width)
    assert not [ln for ln in text.splitlines() if len(ln) > width]
    ranges = compared(path).analysis.ranges
    for name in ranges.loc[~ranges["harness"], "name"]:  # the range table's names, whole
        if len(name) < width - 2:
            assert any(name in ln for ln in text.splitlines()), (name, width)


# -- distinct kernels stay distinct --------------------------------------------------------

def table_kernel_names(text: str) -> list[str]:
    """The names in the kernel table of the terminal output, one per row: beside the
    numbers (cut at the first double space) or on a line of their own above them."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("GPU kernels"))
    rule = next(i for i in range(start, len(lines)) if lines[i].startswith("──"))
    names = []
    for ln in lines[rule + 1:]:
        if not ln.strip():
            break
        if not ln.startswith(" "):
            names.append(re.split(r"\s{2,}", ln.strip())[0])
    return names


def markdown_kernel_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("### GPU kernels"))
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            if rows:
                break
            continue
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]])
    return rows[2:]  # past the header and its rule


@pytest.mark.parametrize("path", [DEMO, DATA / "h100_torch_train.sqlite", GPU_MIX,
                                  DATA / "holdout" / "h100_holdout_cnn.sqlite"],
                         ids=lambda p: p.name)
def test_distinct_kernels_distinct_in_every_format(path):
    expected = {name for name, _, _ in sql(path, KERNEL_NAMES)}
    c = compared(path)
    for width in WIDTHS:
        shown = table_kernel_names(render(c, "table", width=width, top=0))
        assert len(shown) == len(expected) == len(set(shown)), width
    rows = markdown_kernel_rows(render(c, "markdown", top=0))
    assert len(rows) == len(expected) == len({r[0] for r in rows})
    page = render(c, "html")
    section = page[page.index("<section id=\"kernels\""):]
    section = section[:section.index("</section>")]
    cells = re.findall(r"<td class=\"name\" title=\"([^\"]*)\">([^<]*)</td>", section)
    assert len(cells) == len(expected) == len({shown for _, shown in cells})
    full = render(c, "table", width=120, top=0, full_names=True)
    for name in expected:  # --full-names: each whole, on one line or more
        assert "".join(name.split()) in "".join(full.split())


def test_every_fixtures_kernels_shorten_apart():
    """All the kernels of every fixture at once (torch's elementwise, reduce and
    distribution kernels, cuBLAS, cuDNN, CUTLASS, NCCL): distinct at any width, and within
    the width where it leaves room to tell them apart."""
    reports = [p for p in [*DATA.glob("*.sqlite"), *(DATA / "holdout").glob("*.sqlite")]
               if has_table(p, "CUPTI_ACTIVITY_KIND_KERNEL")]
    names = sorted({n for p in reports for n, _, _ in sql(p, KERNEL_NAMES)})
    assert len(names) > 50
    for width in (20, 40, 60, 80, 120):
        shown = short_names(names, width)
        assert len(set(shown.values())) == len(names), width
        # cuBLAS's sm80_xmma_gemm_* names differ at their middle and at their end both:
        # one cut within 60 characters cannot keep both, so below 80 one stays longer.
        if width >= 80:
            assert max(len(x) for x in shown.values()) <= width
        uncut = short_names(names, width, cut=False)
        assert len(set(uncut.values())) == len(names), width


def test_the_demos_alike_kernels_show_what_tells_them_apart():
    """Two FillFunctor kernels (281 and 337 calls) and three of torch's uniform
    distribution kernels read alike when shortened to their outer template: each shows
    the argument that differs."""
    names = [n for n, _, _ in sql(DEMO, KERNEL_NAMES)]
    fills = [n for n in names if "FillFunctor" in n and "(int)4" in n]
    assert len(fills) == 2
    c = compared(DEMO)
    for text in (render(c, "table", width=80, top=0), render(c, "table", width=120, top=0),
                 re.sub(r"\\(.)", r"\1", render(c, "markdown", top=0)), render(c, "html")):
        for n in fills:
            element = re.search(r"FillFunctor<([^>]*)>", n).group(1)
            assert f"FillFunctor<{element}>" in text.replace("&lt;", "<").replace("&gt;", ">")
        for element in ("float", "c10::Half", "c10::BFloat16"):
            shown = element.split("::")[-1]
            assert re.search(rf"uniform_and_transform<{shown}\b", text.replace("&lt;", "<")
                             ), (element, text[:200])


def test_diff_kernels_distinct_and_whole_at_80_columns():
    base, new = DATA / "h100_diff_base.sqlite", DATA / "h100_diff_slow.sqlite"
    res = cli("diff", base, new, "-j", "1", columns=80)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert not [ln for ln in lines if len(ln) > 80]
    # Every kernel of either run but the harness's own (its back-pressure spin).
    kernels = {n for p in (base, new) for n, _, _ in sql(p, KERNEL_NAMES)
               if "spin_kernel" not in n}
    rule = next(i for i, ln in enumerate(lines) if ln.startswith("──"))
    shown, pending = [], None
    for ln in lines[rule + 1:]:
        if not ln.strip() or ln.startswith("N: "):
            break
        if ln.lstrip().startswith("→"):
            continue
        if not ln.startswith(" "):  # a name: beside its numbers or above them
            parts = re.split(r"\s{2,}", ln.strip())
            pending = parts[0]
            if len(parts) > 1 and parts[1] == "kernel":
                shown.append(pending)
        elif pending is not None and ln.split()[0] == "kernel":
            shown.append(pending)
    assert len(shown) == len(kernels) == len(set(shown))
    for name in kernels:  # a kernel's own name whole, where a line can hold it
        if len(identifier(name)) < 78:
            assert any(identifier(name) in ln for ln in lines), identifier(name)


# -- Avg and StdDev as nsys's cuda_gpu_kern_sum -------------------------------------------

def sql_statistics(path) -> dict[str, tuple[int, float, float, float]]:
    """Per kernel: count, mean, population and sample standard deviations, from SQL."""
    durations = defaultdict(list)
    for name, d in sql(path, "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL "
                             "k JOIN StringIds s ON s.id = k.demangledName"):
        durations[name].append(d)
    out = {}
    for name, ds in durations.items():
        n = len(ds)
        mean = sum(ds) / n
        ss = sum((d - mean) ** 2 for d in ds)
        out[name] = (n, mean, math.sqrt(ss / n), math.sqrt(ss / (n - 1)) if n > 1 else 0.0)
    return out


def test_stddev_is_nsys_sample_standard_deviation():
    """NVIDIA's own cuda_gpu_kern_sum of the fixture: its StdDev is the sample standard
    deviation (n - 1), not the population's; Avg the mean."""
    stats = sql_statistics(GPU_MIX)
    nvidia = list(csv.DictReader(io.StringIO(
        (DATA / "h100_torch_mix.nsys_stats_cuda_gpu_kern_sum.csv").read_text())))
    differ = 0
    for row in nvidia:
        n, mean, population, sample = stats[row["Name"]]
        assert int(row["Instances"]) == n
        # nsys rounds to 0.1 ns
        assert float(row["Avg (ns)"]) == pytest.approx(mean, abs=0.051)
        assert float(row["StdDev (ns)"]) == pytest.approx(sample, abs=0.051)
        differ += abs(population - sample) > 0.1
    assert differ >= 3  # the two differ for these kernels: the test tells them apart
    c = compared(GPU_MIX)
    for k in c.analysis.kernels.itertuples():
        assert k.std_ns == pytest.approx(stats[k.name][3])
        assert k.mean_ns == pytest.approx(stats[k.name][1])


@pytest.mark.parametrize("width", WIDTHS)
def test_avg_and_stddev_in_text_and_markdown(width):
    stats = sql_statistics(GPU_MIX)
    c = compared(GPU_MIX)
    by_count = defaultdict(list)
    for n, mean, _, sample in stats.values():
        by_count[str(n)].append((fmt_ns(mean), fmt_ns(sample)))
    # Text: each numbers row, read under its header.
    text = render(c, "table", width=width, top=0)
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("GPU kernels"))
    header = re.split(r"\s{2,}", lines[start + 1].strip())
    assert "Avg" in header and "StdDev" in header
    rows = 0
    for ln in lines[start + 3:]:
        if not ln.strip():
            break
        cells = re.split(r"\s{2,}", ln.strip())
        if len(cells) == len(header) - 1:  # the numbers under a name on its own line
            cells = ["", *cells]
        if len(cells) != len(header):
            continue
        row = dict(zip(header, cells, strict=True))
        assert (row["Avg"], row["StdDev"]) in by_count[row["Count"]], row
        rows += 1
    assert rows == len(stats)
    # Markdown: every column, each kernel's Avg and StdDev.
    for cells in markdown_kernel_rows(render(c, "markdown", top=0)):
        count, avg, std = cells[1], cells[3], cells[7]
        assert (avg, std) in by_count[count], cells


# -- CSV sections -------------------------------------------------------------------------

def test_csv_of_the_demo_has_rows():
    res = cli("compare", "--format", "csv")
    assert res.returncode == 0
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert rows, res.stderr
    # The demo has no NVTX ranges of its own: its harness benchmarks come first.
    assert {r["benchmark"] for r in rows} == set(demo_benchmarks())
    assert "empty" not in res.stderr


def test_csv_of_an_empty_section_says_which_have_rows():
    res = cli("compare", "--format", "csv", "--section", "ranges")
    assert res.returncode == 0
    assert res.stdout.splitlines()[0].startswith("name,domain,")
    assert len(res.stdout.splitlines()) == 1  # the header alone
    said = [ln for ln in res.stderr.splitlines() if "empty" in ln]
    assert len(said) == 1 and "benchmarks" in said[0] and "kernels" in said[0]


@pytest.mark.parametrize("reports,section,valid", [
    ([DATA / "h200x2_ddp_control.rank0.sqlite", DATA / "h200x2_ddp_control.rank1.sqlite"],
     "kernels", "ranks, families, collectives, findings"),
    ([GPU_MIX], "collectives", "kernels, ranges"),
])
def test_a_section_the_output_lacks_is_a_usage_error(reports, section, valid):
    res = cli("compare", *reports, "--format", "csv", "--section", section)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert 1 <= len(lines) <= 2 and valid in lines[0] and "internal error" not in res.stderr
    assert res.stdout == ""
