"""Range families and libraries' ranges on a real CPU export (cpu2022_families.sqlite, made by
scripts/make_fixtures_cpu.sh from scripts/workloads/cpu_families.c with Debian's nsys 2022.4).

Expected values from direct SQL on NVTX_EVENTS; the rules are in docs/analyses.md."""

from __future__ import annotations

import json
import statistics

import pytest
from click.testing import CliRunner
from conftest import DATA, finding, sql

import nsyswrap
from nsyswrap.analysis import analyze
from nsyswrap.analysis.families import by_family
from nsyswrap.cli import main
from nsyswrap.diagnose import diagnose

FAMILIES = DATA / "cpu2022_families.sqlite"

DURATIONS = """
SELECT coalesce(e.text, s.value), e.end - e.start, coalesce(d.text, '')
FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
LEFT JOIN NVTX_EVENTS d ON d.eventType = 75 AND d.domainId = e.domainId
     AND (d.globalTid >> 24) = (e.globalTid >> 24)
WHERE e.eventType = 59 AND e.end IS NOT NULL ORDER BY e.start
"""


@pytest.fixture(scope="module")
def rows():
    return sql(FAMILIES, DURATIONS)


@pytest.fixture(scope="module")
def analysis():
    return analyze(nsyswrap.load(FAMILIES))


def _durations(rows, match) -> list[int]:
    return [d for name, d, _ in rows if match(name)]


def test_counter_names_form_one_family(analysis, rows):
    ranges = analysis.ranges.set_index("name")
    for family, prefix, count in (("step {n}", "step ", 8), ("iter_{n}", "iter_", 5)):
        durations = _durations(rows, lambda n, p=prefix: n.startswith(p))
        assert len(durations) == count
        row = ranges.loc[family]
        assert row["count"] == count
        assert row["names"] == count  # each instance keeps its own name
        assert row["cpu_median_ns"] == statistics.median(durations)
        assert row["cpu_total_ns"] == sum(durations)
    inst = analysis.instances.frame()
    steps = inst[inst["family"] == "step {n}"].sort_values("start_ns")
    assert list(steps["name"]) == [f"step {i}" for i in range(8)]


def test_cycling_numbered_names_stay_apart(analysis, rows):
    """layer1..layer3 recur in every step: three ranges, not a counter."""
    ranges = analysis.ranges.set_index("name")
    for layer in ("layer1", "layer2", "layer3"):
        durations = _durations(rows, lambda n, name=layer: n == name)
        assert ranges.loc[layer, "count"] == len(durations) == 8
        assert ranges.loc[layer, "cpu_median_ns"] == statistics.median(durations)
    assert not any("{n}" in n and n.startswith("layer") for n in ranges.index)


def test_cold_start_seen_on_the_family(analysis, rows):
    """Each step name occurs once, so only the family can show that step 0 was cold."""
    first = _durations(rows, lambda n: n == "step 0")[0]
    rest = statistics.median(
        _durations(rows, lambda n: n.startswith("step ") and n != "step 0"))
    findings = diagnose(analysis)
    _, evidence = finding(findings, "COLD_START", "step {n}")
    assert evidence["skip"] == 1
    assert evidence["metrics"]["cpu_ns"]["first_ns"] == [first]
    assert evidence["metrics"]["cpu_ns"]["median_rest_ns"] == rest


def test_library_ranges_are_listed_but_not_judged(analysis, rows):
    ranges = analysis.ranges.set_index("name")
    assert bool(ranges.loc["ncclAllReduce", "library"]) and bool(ranges.loc["aten::mm", "library"])
    assert ranges.loc["aten::mm", "count"] == len(_durations(rows, lambda n: n == "aten::mm"))
    assert not ranges.loc["step {n}", "library"]
    # Their first instances are planted slow (a cold start), yet no finding concerns them...
    named = {r for f in diagnose(analysis) for r in f.ranges}
    assert "NCCL:ncclAllReduce" not in named and "aten::mm" not in named
    # ...unless --all-domains asks.
    every = analyze(nsyswrap.load(FAMILIES), all_domains=True)
    named = {r for f in diagnose(every) for r in f.ranges}
    assert {"NCCL:ncclAllReduce", "aten::mm"} <= named


def test_cli_all_domains_and_json_fields():
    runner = CliRunner()
    plain = json.loads(runner.invoke(main, ["compare", str(FAMILIES), "--format", "json"]).output)
    every = json.loads(runner.invoke(
        main, ["compare", str(FAMILIES), "--format", "json", "--all-domains"]).output)
    by_name = {r["name"]: r for r in plain["ranges"]}
    assert by_name["ncclAllReduce"]["domain"] == "NCCL" and by_name["ncclAllReduce"]["library"]
    assert by_name["step {n}"]["names"] == 8

    def judged(doc):
        return {r for f in doc["findings"] for r in f["ranges"]}
    assert "NCCL:ncclAllReduce" not in judged(plain)
    assert "NCCL:ncclAllReduce" in judged(every)


@pytest.mark.parametrize("report", [FAMILIES, DATA / "h100_torch_emit_nvtx.sqlite"])
def test_by_family_groups_as_groupby_does(report):
    """Findings walk families with families.by_family (grouped by the integer family_id):
    the same groups, keys, rows and order as groupby(["domain", "family"], sort=False), also
    on a subset of rows re-sorted by another column (as the host-bound check walks them)."""
    a = analyze(nsyswrap.load(report))
    inst = a.instances.frame()
    assert inst["family_id"].nunique() == inst.groupby(["domain", "family"]).ngroups > 3
    subsets = [inst, inst[inst["cpu_ns"] > inst["cpu_ns"].median()].sort_values("end_ns")]
    for frame in subsets:
        want = [(key, g.index.tolist())
                for key, g in frame.groupby(["domain", "family"], sort=False)]
        got = [(key, g.index.tolist()) for key, g in by_family(frame, a.instances)]
        assert got == want


@pytest.mark.parametrize("report", [FAMILIES, DATA / "h100_torch_emit_nvtx.sqlite"])
def test_family_positions_keep_and_min_size_skip_families_as_a_filter_would(report):
    """family_positions with `keep` and `min_size` gives what the plain walk gives with the
    rows not kept left out of each family, and families with fewer left skipped: the same
    keys, positions and order (families by first appearance among all rows)."""
    import numpy as np

    from nsyswrap.analysis.families import family_positions

    a = analyze(nsyswrap.load(report))
    frame = a.instances.frame()[["family_id"]]
    keep = np.random.default_rng(3).random(len(frame)) < 0.6
    for min_size in (1, 2, 4):
        want = []
        for key, at in family_positions(frame, a.instances):
            at = at[keep[at]]
            if len(at) >= min_size:
                want.append((key, at.tolist()))
        got = [(key, at.tolist())
               for key, at in family_positions(frame, a.instances, min_size, keep)]
        assert got == want and len(got) > 1


def test_counter_parts_are_the_counter_rules_match():
    """counter_parts (RE2 in C for ASCII names without a line break, Python for the rest)
    gives what COUNTER.match gives for every name: line breaks before and after the
    number, control characters, other scripts' digits, names that are only a number."""
    import numpy as np

    from nsyswrap.analysis.families import COUNTER, counter_parts

    rng = np.random.default_rng(11)
    alphabet = list("ab 0123456789_:-\n\r\t\x00\x1b{}") + ["\u0663", "\u00e9", "\u2028",
                                                              "\U0001d7d9"]
    names = ["step 12", "step 12\n", "ab\n12\n", "a5\n\n", "12", "", "x", "\u0661\u0662 x\u0663",
             *("".join(rng.choice(alphabet, rng.integers(0, 9))) for _ in range(3000))]
    stems, numbers = counter_parts(np.array(names, dtype=object))
    for name, stem, number in zip(names, stems, numbers, strict=True):
        m = COUNTER.match(name)
        assert (stem, number) == ((m.group("stem"), m.group("number")) if m else (None, None))


def test_library_mask_is_the_rule_for_each_name():
    """library_mask (only names that could be an operator's searched in Python) against
    the rule written out for each (domain, name): a library's domain, or in the default
    domain an operator's or the runner's name, emit_nvtx's suffix included."""
    import numpy as np
    import pandas as pd

    from nsyswrap.analysis.domains import (
        EMIT_NVTX_SUFFIX,
        LIBRARY_DOMAINS,
        LIBRARY_RANGE_NAME,
        library_mask,
    )

    rng = np.random.default_rng(5)
    names = ["aten::mm", "aten::add_, seq = 12", "AddmmBackward0, seq = 15, op_id = 53",
             "detach, op_id = 7", "x, seq = y", "nsyswrap.timer t", "nsyswrap.other", "step 3",
             "c10d::allreduce_", "my::thing", "a, op_id = -4", "b, seq = 5\n", "request 9"]
    domains = ["", "", "NCCL", "nccl", "mine", "cuDNN"]
    frame = pd.DataFrame({"domain": rng.choice(domains, 2000), "name": rng.choice(names, 2000)})
    want = [d.lower() in LIBRARY_DOMAINS or (d == "" and bool(
        LIBRARY_RANGE_NAME.match(n) or EMIT_NVTX_SUFFIX.search(n)))
        for d, n in zip(frame["domain"], frame["name"], strict=True)]
    for column in (frame["name"], frame["name"].astype("category")):
        assert library_mask(frame["domain"].astype("category"), column).tolist() == want


@pytest.mark.parametrize("few_keys", [True, False])
def test_family_numbers_are_groupbys_ngroup_and_cumcount(monkeypatch, few_keys):
    """Family ids and instance numbers by integer codes, as groupby of the two text
    columns numbers them (first appearance; rank within the family), ranks written in
    steps of a few rows, by the radix sort or (many families) the full one."""
    import numpy as np
    import pandas as pd

    from nsyswrap.analysis import grouped
    from nsyswrap.analysis.families import family_numbers
    from nsyswrap.read import chunks

    monkeypatch.setattr(chunks, "STEP_ROWS", 7)
    if not few_keys:
        monkeypatch.setattr(grouped, "SMALL_KEYS", 2)

    rng = np.random.default_rng(7)
    frame = pd.DataFrame({
        "domain": rng.choice(["", "user", "NCCL"], 500),
        # the same family text in two domains is two families
        "family": rng.choice(["step {n}", "fwd", "bwd", "", "layer1"], 500)})
    family_id, index = family_numbers(frame["domain"], frame["family"])
    groups = frame.groupby(["domain", "family"], sort=False)
    assert family_id.tolist() == groups.ngroup().tolist()
    assert index.tolist() == groups.cumcount().tolist()
    empty_id, empty_index = family_numbers(frame["domain"][:0], frame["family"][:0])
    assert len(empty_id) == len(empty_index) == 0


def test_text_helpers_give_the_same_texts_on_text_and_categorical_columns():
    """text_where and with_texts (the benchmark column, the families' renames) give the
    same texts whether names are text or a categorical, and a categorical keeps sorted
    categories with none left that no row holds."""
    import numpy as np
    import pandas as pd

    from nsyswrap.analysis.texts import text_copy, text_where, with_texts

    names = ["step 2", "layer", "step 1", "layer", "zeta", "step 3"]
    keep = np.array([True, False, True, True, False, True])
    renames = [(np.array([0, 2, 5]), "step {n}"), (np.array([4]), np.array(["alpha"]))]
    results = []
    for column in (pd.Series(names, dtype=str),
                   pd.Series(pd.Categorical(names, categories=sorted(set(names))))):
        family = with_texts(text_copy(column), renames)
        results.append((text_where(column, keep, "").astype(str).tolist(),
                        family.astype(str).tolist()))
        assert column.astype(str).tolist() == names  # the copy was renamed, not the column
        if isinstance(family.dtype, pd.CategoricalDtype):
            assert family.cat.categories.tolist() == ["alpha", "layer", "step {n}"]
    assert results[0] == results[1]
    assert results[0] == (["step 2", "", "step 1", "layer", "", "step 3"],
                          ["step {n}", "layer", "step {n}", "layer", "alpha", "step {n}"])


def test_every_groupby_on_a_text_key_passes_observed():
    """Names, domains, families and benchmarks may be categoricals (the loader's codes):
    grouped by them, pandas 2's default observed=False makes a group of every category,
    present or not (and of every combination with a second key). Each such groupby in the
    package says observed=True. Found in the source by its syntax: a groupby whose key is
    one of those column names, or a list holding one."""
    import ast
    from pathlib import Path

    import nsyswrap

    text_keys = {"name", "domain", "family", "benchmark", "short_name"}
    missing = []
    for path in Path(nsyswrap.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "groupby" and node.args):
                continue
            key = node.args[0]
            keys = key.elts if isinstance(key, ast.List) else [key]
            if not any(isinstance(k, ast.Constant) and k.value in text_keys for k in keys):
                continue
            if not any(kw.arg == "observed" and isinstance(kw.value, ast.Constant)
                       and kw.value.value is True for kw in node.keywords):
                missing.append(f"{path.name}:{node.lineno}")
    assert not missing, missing
