"""Judging the rows of a page together (:data:`~workbench.evidence.rules.VERDICT_RULE`): why a row is no test, the
sides at chance, the p-values (a rate's exact one), Holm's adjustment over the page's family and the verdicts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from scipy.stats import binom

from workbench.evidence.rules import (
    ALPHA,
    CONFIDENCE,
    DOES_NOT_HOLD,
    HOLDS,
    IDENTICAL,
    INCONCLUSIVE,
    MIN_SEEDS,
    MIN_TEST,
    NOT_TESTABLE,
    POWER,
    SCALE,
    orientation,
    verdict,
)
from workbench.metrics import LOWER_IS_BETTER
from workbench.stats import detectable_difference, holm, two_sided_p


def rate_p_value(successes: int, trials: int, low: float, high: float) -> float:
    """The exact two-sided p-value behind a rate's verdict, dual to its Clopper-Pearson interval: inside the paper's
    range, that of "the rate lies outside [low, high]" (2 max(P(X >= x | low), P(X <= x | high))); below or above
    it, that of "the rate lies within it" (2 P(X <= x | low) or 2 P(X >= x | high))."""
    value = successes / trials
    if value < low:
        p = 2 * binom.cdf(successes, trials, low)
    elif value > high:
        p = 2 * binom.sf(successes - 1, trials, high)
    else:
        p = 2 * max(binom.sf(successes - 1, trials, low), binom.cdf(successes, trials, high))
    return float(min(1.0, p))


def why_not_tested(row: Mapping[str, Any]) -> str:
    """The reason a row is not tested ("" when it is): :data:`VERDICT_RULE`'s conditions, each with its numbers."""
    if row["kind"] == "identity":
        return row["reason"]
    if row["kind"] == "rate":
        event = row.get("event") or "the event it counts"
        return "" if row["successes"] else f"{event} never occurs (0 of {row['trials']:,})"
    seeds = row["n_seeds"]
    if seeds < MIN_SEEDS:
        return f"{seeds} seed: no run-to-run variance to test against (a verdict needs at least {MIN_SEEDS} seeds)"
    if row["n_test"] < MIN_TEST:
        return f"{row['n_test']} test examples (a verdict needs at least {MIN_TEST})"
    failing = failing_sides(row)
    if failing:
        metric, trivial = row["metric"], row["trivial"]
        sides = [
            f"{name} [{_points(row[side]['low'], metric)}, {_points(row[side]['high'], metric)}]"
            for side, name in (("method_score", row["method"]), ("baseline_score", row["baseline"]))
            if name in failing
        ]
        verb, own = ("does not beat", "its") if len(sides) == 1 else ("do not beat", "their")
        return (
            f"{' and '.join(sides)} {verb} the trivial baseline ({trivial['rule']}: "
            f"{_points(trivial['score'], metric)}) by {own} 95% interval"
        )
    return ""


def failing_sides(row: Mapping[str, Any]) -> list[str]:
    """The sides of a comparison (method, baseline names) whose own 95% interval does not beat the trivial baseline."""
    lower = row["metric"] in LOWER_IS_BETTER
    failing = []
    for side, name in (("method_score", row["method"]), ("baseline_score", row["baseline"])):
        score = row[side]
        beaten = score["high"] < row["trivial"]["score"] if lower else score["low"] > row["trivial"]["score"]
        if not beaten:
            failing.append(name)
    return failing


def _points(value: float, metric: str) -> str:
    return f"{value:.3f}" if metric in SCALE else f"{100 * value:.2f}"


def assess(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Judge the rows of a page together (:data:`VERDICT_RULE`), from their recorded numbers alone. Per row:
    ``status`` (tested or one of :data:`NON_TESTS`), ``reason`` (why not tested), ``at_chance`` (the sides that do not
    beat the trivial baseline, when that is the reason), ``p`` and ``p_holm`` (the family
    of tested rows), ``verdict`` (None for a non-test), ``detectable`` (the difference found with 80% power, a
    comparison's), ``p_paper_holm`` and ``paper_excluded`` (the difference lies significantly short of the paper's;
    the family of tested rows with a paper difference). The rows must have passed :func:`check_record`."""
    judged = []
    for row in rows:
        reason = why_not_tested(row)
        status = IDENTICAL if row["kind"] == "identity" else (NOT_TESTABLE if reason else "tested")
        entry = {"status": status, "reason": reason, "p": None, "p_holm": None, "verdict": None}
        entry["at_chance"] = failing_sides(row) if status == NOT_TESTABLE and "trivial baseline" in reason else []
        entry.update(detectable=None, p_paper=None, p_paper_holm=None, paper_excluded=None)
        if row["kind"] == "comparison":
            df = math.inf if row["df"] is None else row["df"]
            entry["detectable"] = detectable_difference(row["se"], df, CONFIDENCE, POWER)
            if status == "tested":
                entry["p"] = two_sided_p(row["difference"], row["se"], df)
                if row.get("paper_difference"):
                    entry["p_paper"] = _paper_p(row, df)
        elif row["kind"] == "rate" and status == "tested":
            entry["p"] = rate_p_value(row["successes"], row["trials"], row["paper_low"], row["paper_high"])
        judged.append(entry)
    tested = [entry for entry in judged if entry["p"] is not None]
    for entry, adjusted in zip(tested, holm([entry["p"] for entry in tested]) if tested else []):
        entry["p_holm"] = adjusted
    for row, entry in zip(rows, judged):
        if entry["p_holm"] is None:
            continue
        if row["kind"] == "comparison":
            entry["verdict"] = verdict(entry["p_holm"], row["difference"], row["expected"], row["metric"])
        elif entry["p_holm"] >= ALPHA:
            entry["verdict"] = INCONCLUSIVE
        else:
            inside = row["paper_low"] <= row["value"] <= row["paper_high"]
            entry["verdict"] = HOLDS if inside else DOES_NOT_HOLD
    with_paper = [entry for entry in judged if entry["p_paper"] is not None]
    for entry, adjusted in zip(with_paper, holm([entry["p_paper"] for entry in with_paper]) if with_paper else []):
        entry["p_paper_holm"] = adjusted
    for row, entry in zip(rows, judged):
        if entry["p_paper_holm"] is not None:
            sign = orientation(row["expected"], row["metric"])
            short = sign * row["difference"] < _nearest_paper(row) * sign
            entry["paper_excluded"] = bool(entry["p_paper_holm"] < ALPHA and short)
    return judged


def _nearest_paper(row: Mapping[str, Any]) -> float:
    """The paper's difference nearest 0 (the smallest effect it prints)."""
    return min(row["paper_difference"], key=abs)


def _paper_p(row: Mapping[str, Any], df: float) -> float:
    """The two-sided p-value of "the true difference is the paper's" (the one nearest 0)."""
    return two_sided_p(row["difference"] - _nearest_paper(row), row["se"], df)
