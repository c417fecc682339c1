"""One notebook's section of the results page: its scale, data and the texts removed from its splits, the choices
fixed and made on validation, its trivial baselines, one table of tested rows per claim (the quote above it), the
rows that are not tests and its calibration (:func:`notebook_section`; the page: :mod:`workbench.runs.results_page`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.evidence import DOES_NOT_HOLD, ECE_BINS, HOLDS, IDENTICAL, INCONCLUSIVE, LABELS, NOT_TESTABLE
from workbench.runs.page_cells import (
    count_text,
    escaped,
    interval,
    metric_label,
    number,
    p_text,
    signed,
    statistic,
    table_line,
)


def _data_sentence(data: Mapping[str, Any]) -> str:
    """The provenance of a notebook's splits in one sentence (every part from the record)."""
    if not data:
        return "Data: not recorded."
    parts = [f"Data: `{data.get('source', '?')}`"]
    if "data_root" in data:
        parts.append(" from the data root")
    if data.get("missing"):
        parts.append(", missing " + ", ".join(f"`{name}`" for name in data["missing"]))
    splits = []
    for name, entry in (data.get("splits") or {}).items():
        if "cut" in entry:
            origin = f"cut from `{entry['cut']['from']}` ({entry['cut']['method']}, seed {entry['cut']['seed']})"
        else:
            origin = f"`{entry['file']}`" if "file" in entry else "generated"
        first = f", the first {entry['first']:,}" if entry.get("first") else ""
        thinned = entry.get("downsampled")
        thinned = (
            f", positives down-sampled to {thinned['positive_share']:g} (seed {thinned['seed']})" if thinned else ""
        )
        splits.append(f"{name} {entry.get('examples', 0):,} ({origin}{first}{thinned})")
    return "".join(parts) + ("; " + "; ".join(splits) if splits else "") + "."


def _duplicates(
    data: Mapping[str, Any], what: str = "Texts shared between splits, removed before sampling (`load_splits`)"
) -> str:
    """The provenance's counts of removed duplicate texts (any key naming duplicates, top-level or per split) in one
    sentence beginning ``what``, or "". A ``removed`` record (``load_splits``, ``load_texts``: per split ``shared``,
    ``repeated``, ``of``) reads as counts; anything else as recorded."""
    found = {key: value for key, value in data.items() if "duplicate" in key}
    for split, entry in (data.get("splits") or {}).items():
        if isinstance(entry, Mapping):
            found |= {f"{split}.{key}": value for key, value in entry.items() if "duplicate" in key}
    if not found:
        return ""
    return f"{what}: " + "; ".join(_removed(key, value) for key, value in found.items()) + "."


def _removed(key: str, value: Any) -> str:
    """One duplicates record: per split, the examples it held, those removed because a split kept first holds them
    and the repeats within it (``removed``), with the rule (``normalisation``, ``priority``); else ``key`` and its
    JSON."""
    removed = value.get("removed") if isinstance(value, Mapping) else None
    counts = ("of", "shared", "repeated")
    if not isinstance(removed, Mapping) or not all(
        isinstance(entry, Mapping) and all(isinstance(entry.get(count), int) for count in counts)
        for entry in removed.values()
    ):
        return f"{key} {json.dumps(value, ensure_ascii=False)}"
    rule = [f"compared after {value['normalisation']}"] if isinstance(value.get("normalisation"), str) else []
    if isinstance(value.get("priority"), list):
        rule.append("a text shared by splits kept by the first of " + ", ".join(map(str, value["priority"])))
    order = [split for split in value.get("priority") or [] if split in removed]  # metrics.json sorts the keys
    order += [split for split in removed if split not in order]
    parts = [
        f"{split} {removed[split]['shared'] + removed[split]['repeated']:,} of {removed[split]['of']:,} removed "
        f"({removed[split]['shared']:,} held by a split before it, {removed[split]['repeated']:,} "
        f"repeat{'' if removed[split]['repeated'] == 1 else 's'})"
        for split in order
    ]
    return f"`{key}`" + (f" ({'; '.join(rule)})" if rule else "") + ": " + ", ".join(parts)


def _group_untestable(members: Sequence[tuple[str, Mapping[str, Any], Mapping[str, Any]]]) -> dict[str, list]:
    """One finding per cause: the sides at or below the trivial baseline (e.g. a loss that collapses to chance in
    every row it appears in, whatever the metric), else the reason itself (too few seeds, an event that never
    occurs)."""
    findings: dict[str, list] = {}
    for name, row, entry in members:
        if entry["at_chance"]:
            key = f"{name[:2]}: {' and '.join(entry['at_chance'])} at or below the trivial baseline"
        else:
            key = f"{name[:2]}: {entry['reason']}"
        findings.setdefault(key, []).append((name, row, entry))
    return findings


def _tested_table(rows: Sequence[Mapping[str, Any]], judged: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "| setting | decision rule | method | baseline | metric | method: mean ± std | baseline: mean ± std "
        "| difference [95% CI] | SE (df) | p (Holm) | detectable (80%) | paper | paper-sized? | seeds x test "
        "| verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row, entry in zip(rows, judged):
        if row["kind"] == "rate":
            paper = f"{100 * row['paper_low']:.1f}% to {100 * row['paper_high']:.1f}%"
            cells = [
                row["setting"], "", row["method"], "", row["measure"], f"{row['successes']:,} of {row['trials']:,}",
                "", interval(row), "", f"{p_text(entry['p'])} ({p_text(entry['p_holm'])})", "", paper, "",
                f"1 x {row['trials']:,}",
                entry["verdict"],
            ]  # fmt: skip
        else:
            metric = row["metric"]
            df = "∞" if row["df"] is None else f"{row['df']:.1f}"
            paper = row.get("paper_difference")
            paper_cell = "none printed" if not paper else ", ".join(signed(value, metric) for value in paper)
            if entry["paper_excluded"] is None:
                sized = ""
            else:
                sized = "no paper-sized gain" if entry["paper_excluded"] else "not excluded"
            cells = [
                row["setting"],
                row["decision_rule"],
                row["method"],
                row["baseline"],
                f"{LABELS[metric]} (claimed: {row['expected']})",
                statistic(row["method_score"], metric),
                statistic(row["baseline_score"], metric),
                interval(row),
                f"{number(row['se'], metric)} ({df})",
                f"{p_text(entry['p'])} ({p_text(entry['p_holm'])})",
                number(entry["detectable"], metric),
                paper_cell,
                sized,
                f"{row['n_seeds']} x {row['n_test']:,}",
                entry["verdict"],
            ]
        lines.append(table_line(cells))
    return lines


def _non_test_table(name: str, members: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[str]:
    """Identities one per row; the rows not testable grouped into one line per finding."""
    lines = ["| finding | rows | why |", "|---|---|---|"]
    for row, entry in members:
        if entry["status"] == IDENTICAL:
            same = f"identical test predictions on {row['identical_seeds']} of {row['n_seeds']} seeds"
            lines.append(
                table_line(
                    [f"{IDENTICAL}: {row['method']} = {row['baseline']}", row["setting"], f"{row['reason']} ({same})"]
                )
            )
    grouped = _group_untestable([(name, row, entry) for row, entry in members if entry["status"] == NOT_TESTABLE])
    for finding, group in grouped.items():
        where = "; ".join(
            f"{row['setting']}: {row['method']} vs {row.get('baseline', 'the paper')}"
            + (f" ({metric_label(row)})" if row["kind"] == "comparison" else "")
            for _, row, _ in group
        )
        reasons = list(dict.fromkeys(entry["reason"] for _, _, entry in group))
        lines.append(table_line([f"{NOT_TESTABLE}: {finding.split(': ', 1)[1]}", where, "; ".join(reasons)]))
    return lines


def notebook_section(
    name: str,
    evidence: Mapping[str, Any],
    judged: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    figures: Mapping[str, str],
) -> list[str]:
    """One notebook's part of the page: scale, data, fixed choices, trivial baselines, one table of tested rows per
    claim (its quote above it), the rows that are not tests, calibration with its reliability diagrams."""
    rows = evidence["claims"]
    lines = _section_opening(name, evidence, names)
    lines += ["", *_trivial_table(rows)]
    lines += ["", _row_counts(rows, judged)]
    lines += _claim_tables(rows, judged)
    non_tests = [(row, entry) for row, entry in zip(rows, judged) if entry["status"] != "tested"]
    if non_tests:
        lines += ["", "### Not tests", "", *_non_test_table(name, non_tests)]
    if evidence.get("calibration"):
        lines += _calibration_table(name, evidence["calibration"], figures)
    if evidence.get("data"):
        shown = {key: value for key, value in evidence["data"].items() if key != "data_root"}  # a path of this machine
        provenance = json.dumps(shown, indent=1, ensure_ascii=False)
        lines += ["", f"Data provenance of {name} (`load_splits`):", "", "```json", provenance, "```"]
    return lines


def _section_opening(name: str, evidence: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """The heading, scale and seeds, the notebook's comment, its data (and the texts shared between splits removed),
    notebook 03's pre-training texts, the choices fixed for every side and those made on validation, and where rows
    recorded by another notebook are."""
    seeds = evidence["seeds"]
    lines = [
        f"## {name}: {evidence['title']}",
        "",
        f"Scale: {evidence['scale']} Seeds: {len(seeds)} ({', '.join(map(str, seeds))}).",
        "",
        *([evidence["comment"], ""] if evidence.get("comment") else []),
        _data_sentence(evidence.get("data") or {}),
    ]
    duplicates = _duplicates(evidence.get("data") or {})
    lines += ["", duplicates] if duplicates else []
    pretraining = evidence.get("pretraining")
    if isinstance(pretraining, Mapping):  # notebook 03: the texts it pre-trains on and holds out
        repeats = _duplicates(pretraining, "Pre-training texts (`load_texts`), each kept once")
        heldout = (
            f"Held-out texts: {count_text(pretraining.get('heldout_texts'))}, shared with the pre-training texts: "
            f"{count_text(pretraining.get('shared_with_pretraining'))}."
        )
        lines += [*(["", repeats] if repeats else []), "", heldout]
    if evidence.get("fixed"):
        fixed = ", ".join(f"{key} {json.dumps(value, ensure_ascii=False)}" for key, value in evidence["fixed"].items())
        lines += ["", f"Fixed, not chosen on validation (the same for every side): {fixed}."]
    if evidence.get("chosen"):
        chosen = "; ".join(f"{name}: {how}" for name, how in evidence["chosen"].items())
        lines += ["", f"Chosen on validation, the same way for every side: {chosen}."]
    for other, what in (evidence.get("see_also") or {}).items():
        present = (
            f"its section below or above, [{other}](#{other.replace('_', '-')})"
            if other in names
            else ("a notebook this run did not include")
        )
        lines += ["", f"{what}: recorded once, by {other} ({present}); this notebook does not repeat them."]
    return lines


def _row_counts(rows: Sequence[Mapping[str, Any]], judged: Sequence[Mapping[str, Any]]) -> str:
    """How many rows were tested (and their verdicts), identical by construction, not testable."""
    statuses = [entry["status"] for entry in judged]
    counts = {v: sum(e["verdict"] == v for e in judged) for v in (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)}
    return (
        f"{len(rows)} {'row' if len(rows) == 1 else 'rows'}: {sum(s == 'tested' for s in statuses)} tested ("
        + ", ".join(f"{count} {verdict}" for verdict, count in counts.items())
        + f"), {statuses.count(IDENTICAL)} identical by construction, {statuses.count(NOT_TESTABLE)} not testable."
    )


def _claim_tables(rows: Sequence[Mapping[str, Any]], judged: Sequence[Mapping[str, Any]]) -> list[str]:
    """One table of tested rows per claim (paper, where, quote), the quote above it and the rows' notes below."""
    claims: dict[tuple[str, str, str], list[int]] = {}
    for index, row in enumerate(rows):
        if judged[index]["status"] == "tested":
            claims.setdefault((row["paper"], row["where"], row["quote"]), []).append(index)
    lines = []
    for (paper, where, quote), indices in claims.items():
        block = [rows[i] for i in indices]
        lines += [
            "",
            f"### {paper}, {where}",
            "",
            f'> "{quote}"',
            "",
            *_tested_table(block, [judged[i] for i in indices]),
        ]
        notes = [row["note"] for row in block if row.get("note")]
        lines += ["", *(f"- {note}" for note in dict.fromkeys(notes))] if notes else []
    return lines


def _calibration_table(name: str, calibration: Sequence[Mapping[str, Any]], figures: Mapping[str, str]) -> list[str]:
    """Each setting's expected calibration error on test, and the notebook's reliability diagrams when drawn."""
    lines = [
        "",
        f"### Calibration (test): expected calibration error, {ECE_BINS} equal-width bins of the top-class "
        "probability, x 100, mean ± std over the seeds",
        "",
        "| setting | ECE |",
        "|---|---|",
    ]
    lines += [f"| {escaped(row['setting'])} | {statistic(row['ece'], 'ece')} |" for row in calibration]
    if name in figures:
        lines += ["", f"![Reliability diagrams of {name}]({figures[name]})"]
    return lines


def _trivial_table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The trivial baselines of the notebook's test splits, one line per split and metric."""
    seen: dict[tuple[str, str], Mapping[str, Any]] = {}
    for row in rows:
        if row["kind"] == "comparison":
            seen.setdefault((f"{row['test']}, n = {row['n_test']:,}", row["metric"]), row["trivial"])
    if not seen:
        return ["Trivial baselines: no comparison row."]
    lines = [
        "Trivial baselines (test split; the training majority class, guessing by the training label prior, and the "
        "best of every constant prediction and the prior guess, which a side must beat to be tested):",
        "",
        "| test split | metric | majority class | guessing by the prior | best trivial |",
        "|---|---|---|---|---|",
    ]
    for (test, metric), trivial in seen.items():
        best = f"{number(trivial['score'], metric)} ({trivial['rule']})"
        lines.append(
            table_line(
                [test, LABELS[metric], number(trivial["majority"], metric), number(trivial["prior"], metric), best]
            )
        )
    return lines
