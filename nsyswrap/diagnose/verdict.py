"""A short verdict per harness benchmark: do the events agree with the kernels, and if not,
what inflates (or hides) them. The numbers sit beside it in every view."""

from __future__ import annotations

from ..common.units import fmt_ns, fmt_share
from . import cache, clock, cold_start, host_bound, window
from .finding import Finding

_CAUSES = (  # in order of how much they explain
    (window.SYNC, "sync in window"),
    (window.HOST, "host work in window"),
    (window.TRANSFER, "copies in window"),
    (window.LAUNCH, "launch overhead"),
)
_CAVEATS = (
    (host_bound.CODE, "host-bound in a loop"),
    (cold_start.CODE, "warmup too short"),
    (cache.CODE, "L2 state matters"),
    (clock.CODE, "clock varied"),
)


# Events reading this much above the kernels, all of it their own cost (the floor), still
# "agree", but the verdict says so: 3.7 us of events around a 1.3 us kernel is no agreement
# a reader would take on trust.
FLOOR_SHARE = 0.10
# "All of it" within the floor's own run-to-run spread (it is a median of its windows).
FLOOR_SLACK, FLOOR_SLACK_NS = 1.25, 100.0


def verdict(codes: set[str], event_ns: float, busy_ns: float, span_ns: float,
            floor_ns: float | None = None, timer: str = "events") -> str:
    """'agree', 'events inflated: launch overhead', 'events miss other streams'; caveats
    follow after a semicolon. Events that match the GPU span while the kernels leave part
    of it idle (short gaps between dependent kernels) also 'agree', with that said; so do
    events whose whole excess is their own floor (`floor_ns`, per call), when it is large
    against the kernels. `timer`: what measured, where not CUDA events ("Timer")."""
    if window.UNCOVERED in codes:
        head = "events miss work on other streams: trust the kernels"
    else:
        causes = [words for code, words in _CAUSES if code in codes]
        head = f"events inflated: {', '.join(causes)}" if causes else "agree"
        excess = event_ns - busy_ns
        if (not causes and floor_ns and floor_ns == floor_ns and busy_ns
                and FLOOR_SHARE * busy_ns < excess <= FLOOR_SLACK * floor_ns + FLOOR_SLACK_NS):
            head += (f" once the events' own cost is taken off (events +{fmt_ns(excess)} "
                     f"per call, their floor {fmt_ns(floor_ns)}): quote the kernels")
        elif (not causes and span_ns > busy_ns and busy_ns
              and (span_ns - busy_ns) / busy_ns > 0.05):
            head += (f" (with the GPU span; kernels idle {fmt_share((span_ns - busy_ns) / span_ns)}"
                     " of it between dependent launches)")
        elif (not causes and floor_ns and floor_ns == floor_ns and busy_ns
              and excess > max(FLOOR_SHARE * busy_ns, FLOOR_SLACK * floor_ns)):
            # Too little beyond the floor for a finding, too much to call agreement.
            head = (f"events read +{fmt_share(excess / busy_ns)} above the kernels "
                    f"(+{fmt_ns(excess)} per call, {fmt_ns(floor_ns)} of it the events' own "
                    "cost): quote the kernels")
    caveats = [words for code, words in _CAVEATS if code in codes]
    if timer != "events":
        head = head.replace("events", timer)
    return "; ".join([head, *caveats])


def codes_by_range(findings: list[Finding]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in findings:
        for label in f.ranges:
            out.setdefault(label, set()).add(f.code)
    return out
