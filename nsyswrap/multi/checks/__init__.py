"""Findings across ranks. One module per finding family, each with CODE and
`check(ranks, thresholds) -> list[Finding]`; STRAGGLER runs first because COMM_WAIT's
severity depends on whether a straggler explains the wait."""

from __future__ import annotations

from ...diagnose.finding import Finding
from ..ranks import RankAnalysis
from ..thresholds import RankThresholds
from . import comm_wait, exposed_comm, straggler

CHECKS = (straggler, comm_wait, exposed_comm)
CODES = tuple(c.CODE for c in CHECKS)


def diagnose_ranks(a: RankAnalysis, thresholds: RankThresholds | None = None) -> list[Finding]:
    thresholds = thresholds or a.thresholds
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check.check(a, thresholds, findings))
    return findings
