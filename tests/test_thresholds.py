"""Every threshold is checked by its own kind: a share, a duration, a whole number of
steps, resamples or samples, ... Each one's default is accepted and a value outside its
kind refused, by the library and by the command line (exit 2, one line)."""

from __future__ import annotations

import dataclasses

import pytest
from click.testing import CliRunner
from conftest import GPU_MIX

from nsyswrap.cli import main
from nsyswrap.common.errors import BadInputError
from nsyswrap.diagnose import Thresholds
from nsyswrap.multi.thresholds import DiffThresholds, RankThresholds

# name -> (another value its kind admits, a value its kind refuses), written here by what
# each threshold means, not read from the code's kinds.
SHARE = ("0.3", "1.5")
DURATION = ("250000.5", "-1")
FACTOR = ("3.5", "0.5")
RATIO = ("2.5", "-0.1")
EXPECTED = {
    Thresholds: {
        "idle_share": SHARE, "idle_min_span_ns": DURATION, "stall_share": SHARE,
        "cold_factor": FACTOR, "cold_min_excess_ns": DURATION,
        "cold_min_instances": ("5", "1"), "sync_share": SHARE, "transfer_share": SHARE,
        "fp32_gemm_share": SHARE, "overhead_share": SHARE, "overhead_min_ns": DURATION,
        "host_work_min_ns": DURATION, "dispatch_gap_ns": DURATION, "cache_min_share": SHARE,
        "host_bound_factor": FACTOR, "host_bound_min_ns": DURATION,
        "uncovered_tolerance": SHARE, "clock_min_share": SHARE, "clock_spread": RATIO,
    },
    RankThresholds: {
        "straggler_share": SHARE, "straggler_min_ns": DURATION, "straggler_spread": RATIO,
        "straggler_consistency": SHARE, "comm_wait_share": SHARE,
        "exposed_comm_share": SHARE, "skip_first_steps": ("0", "0.5"),
    },
    DiffThresholds: {
        "noise_floor": RATIO, "confidence": ("0.99", "1"), "resamples": ("5000", "50.5"),
        "min_samples": ("10", "1"), "count_tolerance": RATIO, "clock_tolerance": RATIO,
        "matched_share": SHARE,
    },
}
CASES = [(kind, name, values) for kind, table in EXPECTED.items()
         for name, values in table.items()]


@pytest.mark.parametrize("kind", list(EXPECTED))
def test_every_threshold_is_listed_here(kind):
    assert {f.name for f in dataclasses.fields(kind)} == set(EXPECTED[kind])


@pytest.mark.parametrize(("kind", "name", "values"), CASES,
                         ids=[name for _, name, _ in CASES])
def test_each_threshold_takes_its_own_kind(kind, name, values):
    default = getattr(kind(), name)
    assert getattr(kind().with_overrides({name: str(default)}), name) == default
    good, bad = values
    assert getattr(kind().with_overrides({name: good}), name) == float(good)
    with pytest.raises(BadInputError, match=f"threshold {name} needs"):
        kind().with_overrides({name: bad})
    for not_finite in ("1e400", "inf", "-inf", "nan"):
        with pytest.raises(BadInputError, match=f"threshold {name} needs a finite number"):
            kind().with_overrides({name: not_finite})


def test_whole_numbers_stay_whole():
    assert RankThresholds().with_overrides({"skip_first_steps": "3"}).skip_first_steps == 3
    assert isinstance(DiffThresholds().with_overrides({"resamples": "2e3"}).resamples, int)


def _run(*args):
    return CliRunner().invoke(main, list(map(str, args)), catch_exceptions=False)


@pytest.mark.parametrize("args", [
    ["compare", GPU_MIX, "--ranks", "-t", "straggler_min_ns=100000"],
    ["diff", GPU_MIX, GPU_MIX, "-t", "resamples=2000", "-t", "min_samples=3", "-j", "1"],
])
def test_the_defaults_on_the_command_line_are_accepted(args):
    res = _run(*args)
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize(("args", "words"), [
    (["compare", GPU_MIX, "-t", "overhead_min_ns=1e400"], "finite number"),
    (["compare", GPU_MIX, "--ranks", "-t", "skip_first_steps=0.5"], "whole number of steps"),
    (["diff", GPU_MIX, GPU_MIX, "-t", "resamples=10"], "resamples between"),
    (["diff", GPU_MIX, GPU_MIX, "-t", "min_samples=1"], "at least 2"),
])
def test_out_of_kind_on_the_command_line_is_one_line(args, words):
    res = _run(*args)
    assert res.exit_code == 2
    assert words in res.stderr and res.stderr.count("\n") == 1
