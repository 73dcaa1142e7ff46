"""Markdown for a pull-request comment: the verdicts first, then the tables."""

from __future__ import annotations

from ..base import Renderer
from ..markdown import KERNEL_NAME_WIDTH, escape, table_lines
from .document import diff_section, ranks_section
from .views import IDENTITY_COLUMNS, RANK_COLUMNS, diff_columns, diff_names, family_rows


def _findings(findings: list[dict]) -> list[str]:
    if not findings:
        return ["No cross-rank findings."]
    return [f"- **{f['severity']} {f['code']}**: {escape(f['message'])}" for f in findings]


class RanksMarkdown(Renderer):
    def render(self, a, **_) -> str:
        ranks = ranks_section(a, "ranks")
        out = [f"## nsyswrap: {len(ranks)} ranks side by side", ""]
        out += _findings(ranks_section(a, "findings"))
        out += ["", "### Ranks", ""] + table_lines(IDENTITY_COLUMNS, ranks)
        out += ["", "### Per rank, per step (medians)", ""] + table_lines(RANK_COLUMNS, ranks)
        cols, rows = family_rows(ranks_section(a, "families"), [r["rank"] for r in ranks])
        if rows:
            out += ["", "### Range families per rank", ""] + table_lines(cols, rows)
        out += [f"> note: {escape(n)}" for n in a.notes]
        return "\n".join(out) + "\n"


class DiffMarkdown(Renderer):
    def render(self, d, *, top: int = 0, full_names: bool = False, **_) -> str:
        comp = d.comparability
        rows = diff_section(d, "rows")
        counts = d.rows["verdict"].value_counts()
        # The paths as escaped text, not code spans: a backtick in a file name would end one.
        out = [f"## nsyswrap diff: {escape(d.base.source)} → {escape(d.new.source)}",
               "",
               f"**{comp['level']}**" + "".join(f"; {escape(r)}" for r in
                                                comp["reasons"] + comp["cautions"]), "",
               "Verdicts: " + ", ".join(f"{int(n)} {v}" for v, n in counts.items())
               + f" ({comp['method']}, {comp['confidence']:.0%} interval, noise floor "
               f"{comp['noise_floor']:.0%})", ""]
        columns = diff_columns(diff_names(rows, KERNEL_NAME_WIDTH, full_names))
        significant = [r for r in rows if r["verdict"] in ("slower", "faster")]
        if significant:
            out += ["### Significant changes", ""] + table_lines(columns, significant)
        out += ["", "### All rows", ""] + table_lines(columns, rows[:top] if top else rows)
        changed = diff_section(d, "findings")
        if changed:
            out += ["", "### Findings", ""]
            out += [f"- {f['change']}: **{f['code']}** {escape(f['message'])}" for f in changed]
        return "\n".join(out) + "\n"
