"""The results page in markdown: a summary, the scale beside the papers', the rules, then each notebook's rows
(:func:`workbench.runs.page_section.notebook_section`; the page's cells: :mod:`workbench.runs.page_cells`).

Every number is printed from the notebooks' metrics.json ``evidence`` entries (checked by ``workbench.evidence.
check_record`` first) and every verdict is recomputed from them by ``workbench.evidence.assess``: the tested rows of
the page form one family, Holm-adjusted; rows that are not tests are set apart with their reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.evidence import (
    CI_RULE,
    DOES_NOT_HOLD,
    HOLDS,
    IDENTICAL,
    INCONCLUSIVE,
    NOT_TESTABLE,
    SCALE,
    VERDICT_RULE,
)
from workbench.runs.page_cells import count_text, metric_label, table_line
from workbench.runs.page_section import notebook_section

TITLE = "# Results: each paper's claim at this scale"


# ------------------------------------------------------------------------------------------------ the summary


def _where(name: str, row: Mapping[str, Any]) -> str:
    metric = f", {metric_label(row)}" if row["kind"] == "comparison" else ""
    return f"{name[:2]}: {row['method']} vs {row.get('baseline', 'the paper')} ({row['setting']}{metric})"


def summary(sections: Mapping[str, Mapping[str, Any]], judged: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """The page's first part: what was tested, what holds, what the design could detect, what can be concluded."""
    pairs = [
        (name, row, entry)
        for name, evidence in sections.items()
        for row, entry in zip(evidence["claims"], judged[name])
    ]
    tested = [(n, r, e) for n, r, e in pairs if e["verdict"] is not None]
    by_verdict = {v: [(n, r) for n, r, e in tested if e["verdict"] == v] for v in (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)}
    identical = [(n, r) for n, r, e in pairs if e["status"] == IDENTICAL]
    untestable = [(n, r, e) for n, r, e in pairs if e["status"] == NOT_TESTABLE]
    short = [(n, r) for n, r, e in tested if e["paper_excluded"]]
    lines = [
        "## Summary",
        "",
        f"- **Tested**: {len(pairs)} rows of {len(sections)} notebook(s); {len(tested)} tested as one family (Holm): "
        f"{len(by_verdict[HOLDS])} hold, {len(by_verdict[DOES_NOT_HOLD])} do not hold, "
        f"{len(by_verdict[INCONCLUSIVE])} inconclusive at this scale. Not verdicts: {len(identical)} identical by "
        f"construction, {len(untestable)} not testable at this scale.",
    ]
    for verdict, label in ((HOLDS, "Holds"), (DOES_NOT_HOLD, "Does not hold")):
        listed = "; ".join(_where(n, r) for n, r in by_verdict[verdict]) or "none"
        lines.append(f"- **{label}**: {listed}.")
    lines.append(
        "- **No paper-sized gain at this scale** (the difference lies significantly short of the paper's own, "
        "Holm-adjusted): " + ("; ".join(_where(n, r) for n, r in short) or "none") + "."
    )
    if identical:
        lines.append(
            "- **Identical by construction**: "
            + "; ".join(f"{_where(n, r)}: {r['reason']}" for n, r in identical)
            + "."
        )
    if untestable:
        lines.append(_untestable_line(untestable))
    lines += _power_line(tested)
    lines.append(f"- **What can be concluded**: {_conclusion(by_verdict, identical, untestable, short)}")
    return lines


def _untestable_line(untestable: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> str:
    """The rows not testable at this scale, grouped by notebook and cause (and the sides at chance)."""
    causes: dict[str, list] = {}
    for name, _, entry in untestable:
        if entry["at_chance"]:
            cause = "a side at or below the trivial baseline"
        else:
            cause = entry["reason"].split(" (")[0]
        causes.setdefault(f"{name[:2]}: {cause}", []).append(entry["at_chance"])
    parts = []
    for cause, sides in causes.items():
        named = sorted({side for group in sides for side in group})
        count = f"{len(sides)} {'row' if len(sides) == 1 else 'rows'}"
        parts.append(f"{cause}, {count}" + (f" ({', '.join(named)})" if named else ""))
    return "- **Not testable at this scale** (see each notebook's table of non-tests): " + "; ".join(parts) + "."


def _power_line(tested: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> list[str]:
    """The smallest differences the design detects at 80% power beside the papers' own (none without comparisons)."""
    detectable = [100 * e["detectable"] for n, r, e in tested if r["kind"] == "comparison" and r["metric"] not in SCALE]
    claimed = [abs(100 * min(r["paper_difference"], key=abs)) for n, r, e in tested if r.get("paper_difference")]
    if not detectable:
        return []
    papers = f"; the papers print {min(claimed):.2f} to {max(claimed):.2f}" if claimed else ""
    return [
        f"- **Power**: the smallest differences this design detects at 80% power are {min(detectable):.2f} to "
        f"{max(detectable):.2f} points{papers}."
    ]


def _conclusion(by_verdict: Mapping[str, list], identical: list, untestable: list, short: list) -> str:
    """One sentence from the counts: which claims this scale confirms, refutes, or cannot speak to."""
    parts = []
    holds, fails = len(by_verdict[HOLDS]), len(by_verdict[DOES_NOT_HOLD])
    parts.append("no claim is confirmed" if holds == 0 else f"{holds} row(s) confirm their claim at this scale")
    if fails:
        parts.append(f"{fails} row(s) show the opposite of the claim")
    if identical:
        parts.append(f"{len(identical)} row(s) are the same model as their baseline by construction")
    if short:
        parts.append(f"{len(short)} row(s) rule out a gain as large as the paper's")
    if untestable:
        parts.append(
            f"{len(untestable)} row(s) cannot be tested here (a side at chance level, too few seeds or examples)"
        )
    parts.append(
        f"the other {len(by_verdict[INCONCLUSIVE])} tested row(s) are inconclusive: at this scale the design cannot "
        "tell the papers' differences from none. A small model on a few thousand examples is not the papers' setting; "
        "none of this speaks for or against the claims at the papers' scale."
    )
    return "; ".join(parts[:-1]) + "; " + parts[-1] if len(parts) > 1 else parts[0]


# ------------------------------------------------------------------------------------------------ the scale


def scale_table(sections: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """This run's models and data (parameters, training examples, optimizer steps of one fit) beside the papers'."""
    lines = [
        "## Scale",
        "",
        "| notebook | this run: model | parameters | training examples | steps (one fit) | the paper: model | "
        "parameters | training examples |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, evidence in sections.items():
        paper = evidence.get("paper_scale") or {}
        paper_cells = [
            paper.get("model", "not recorded"),
            paper.get("parameters", ""),
            paper.get("training examples", ""),
        ]
        sizes = evidence.get("sizes") or [{"model": "not recorded"}]
        for index, line in enumerate(sizes):
            cells = [
                line["model"],
                count_text(line.get("parameters")),
                count_text(line.get("training_examples")),
                count_text(line.get("steps")),
            ]
            lines.append(
                table_line([name if index == 0 else "", *cells, *(paper_cells if index == 0 else ["", "", ""])])
            )
    return lines


# ------------------------------------------------------------------------------------------------ the page


def results_page(
    header: Mapping[str, Any],
    sections: Mapping[str, Mapping[str, Any]],
    judged: Mapping[str, Sequence[Mapping[str, Any]]],
    figures: Mapping[str, str] | None = None,
) -> str:
    """The results page of a run: ``header`` (``run_id``, ``command``, ``started``, ``finished``, ``machine``,
    ``params_set``), the summary, the scale table, the rules, then each notebook's :func:`notebook_section`.
    ``judged``: ``workbench.evidence.assess`` of every section's rows together; ``figures``: the relative paths of
    the static figures beside the page (``forest`` and one per notebook with reliability bins)."""
    figures = dict(figures or {})
    machine = header.get("machine") or {}
    seeds = sorted({len(section["seeds"]) for section in sections.values()})
    lines = [
        TITLE,
        "",
        f"Run `{header.get('run_id', '?')}` of the `{header.get('params_set', '?')}` parameter set: "
        f"`{header.get('command', '?')}`, started {header.get('started', '?')}, "
        f"finished {header.get('finished', '?')}.",
        "",
        "Machine: " + ", ".join(f"{key} {value}" for key, value in machine.items()) + ".",
        "",
    ]
    if not sections:
        lines += ["No notebook of this run recorded claims (the `results` parameter set turns them on)."]
        return "\n".join(lines) + "\n"
    lines += [*summary(sections, judged), "", *scale_table(sections), ""]
    lines += [
        "## How the rows are judged",
        "",
        f"Seeds per setting: {', '.join(map(str, seeds))}. Every number below is printed from the run's "
        "metrics.json files and every verdict recomputed from them (`python -m workbench results <run folder>`); "
        "scores are on the test split, x 100 (macro-MAE unscaled), mean ± sample std over the seeds.",
        "",
        f"**Verdicts.** {VERDICT_RULE}",
        "",
        f"**Statistics.** {CI_RULE}",
    ]
    if "forest" in figures:
        lines += ["", f"![Forest plot: every tested row's difference, its 95% CI and the paper's]({figures['forest']})"]
    names = list(sections)
    for name, evidence in sections.items():
        lines += ["", *notebook_section(name, evidence, judged[name], names, figures)]
    return "\n".join(lines) + "\n"
