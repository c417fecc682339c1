"""Claims and their evidence: one row per claim and setting, the rules that judge it, and its assessment on a page.

A claim is what a paper prints (:class:`Claim`: the paper, its table or equation, the sentence quoted verbatim). A
row tests it in one setting of this workbench against one baseline, on the paper's metric:

* :func:`compare`: per-seed test scores of a method and its baseline under one decision rule for both (argmax, or a
  rule tuned on validation for both), the mean paired difference with its 95% CI and p-value
  (``workbench.stats.paired_ci``: test examples, seeds and their interaction each counted once), each side's own
  interval against the task's trivial baseline (:func:`trivial_baseline`) and the paper's own difference;
* :func:`identity`: a method that is the baseline by construction (a loss whose gradient is the baseline's), decided
  from the setting, with a one-line reason: no test;
* :func:`rate`: a measured proportion (the true-negatives paper's Table 2 rates) with its exact (Clopper-Pearson) 95%
  interval against the range the paper prints.

:func:`assess` judges the rows of a page together (:data:`VERDICT_RULE`): rows that cannot be tested are set apart
with their reason (:data:`NON_TESTS`), the tested rows form one family whose p-values Holm's procedure adjusts, and
each verdict is read from its adjusted p-value. A notebook of the ``results`` parameter set records its rows with
:func:`record` in its metrics.json (``evidence``); ``workbench.runs.results`` checks and prints them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import binom, binomtest

from workbench.checks import check_choice, check_int, check_text
from workbench.metrics import (
    LOWER_IS_BETTER,
    SCORES,
    compute_score,
    confusion_scores,
    expected_calibration_error,
    reliability_bins,
)
from workbench.redaction import redact
from workbench.stats import describe, detectable_difference, holm, paired_ci, two_sided_p
from workbench.stats import interval as interval_of

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive at this scale"
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)
IDENTICAL, NOT_TESTABLE = "identical by construction", "not testable at this scale"
NON_TESTS = (IDENTICAL, NOT_TESTABLE)
"""What a row is when it is not a test; never counted as a verdict."""
EXPECTATIONS = ("better", "worse")
"""What the paper says of the method against the baseline on the metric (macro-MAE: lower is better)."""
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
POWER = 0.8
MIN_SEEDS = 2
MIN_TEST = 100
N_RESAMPLES = 4000
VERDICT_RULE = (
    f"A row is tested only when both sides ran on at least {MIN_SEEDS} seeds and {MIN_TEST} test examples and each "
    "side's own 95% interval beats the task's trivial baseline on the metric (the best of always predicting one "
    "class and guessing by the training label prior); a rate is tested only when the event it counts occurs. A "
    "method that equals its baseline by construction (decided from the setting, e.g. a loss whose gradient is the "
    "baseline's) is identical by construction. Neither is a verdict. The tested rows of the page form one family: "
    "Holm's step-down procedure adjusts their p-values. A comparison holds when its Holm-adjusted p < 0.05 and the "
    "difference lies on the side the paper claims (above 0 for a claimed gain, below 0 for a claimed loss, the other "
    "way round for macro-MAE, where lower is better), does not hold when the adjusted p < 0.05 and it lies on the "
    "other side, and is otherwise inconclusive at this scale. A rate holds when its exact test that the rate lies "
    "within the paper's range has an adjusted p < 0.05, does not hold when the test that it lies outside has, and is "
    "otherwise inconclusive."
)
CI_RULE = (
    "Difference: the mean over seeds of metric(method, seed s) - metric(baseline, seed s), the same test set for "
    "both. Its variance counts each component of the crossed design once (workbench.stats.paired_ci): the test "
    "examples (a bootstrap of the examples, the same for every seed and both sides), the interaction of examples and "
    "seeds (a seed changes which examples are right) and whole runs (a seed moves the whole score; the variance of "
    "the per-seed differences less the interaction). The 95% CI is the difference -/+ Student's t times its "
    "standard error, on Satterthwaite's degrees of freedom (df; infinite when no run variance is estimated); p is "
    "the two-sided t-test of no difference. A simulation of the crossed design (python -m benchmarks intervals, "
    "docs/benchmarks.md) shows its coverage. Detectable: the smallest true difference this design detects at 80% "
    "power in a two-sided test at 0.05 (per row, before Holm's adjustment), (t(0.975, df) + t(0.8, df)) x SE. "
    "Paper: the paper's own difference, from its table; when it prints several (models or data sets), the one "
    'nearest 0. "No paper-sized gain": the difference lies significantly below the paper\'s (the t-test of the '
    "paper's difference, Holm-adjusted over the rows with one, p < 0.05)."
)
LABELS = {
    "macro_f1": "macro-F1",
    "accuracy": "accuracy",
    "f1_positive": "F1 of the minority (positive) class",
    "macro_mae": "macro-MAE",
}
SCALE = {"macro_mae": 1.0}  # the others are printed x 100, as the papers print them
ECE_BINS = 15


@dataclass(frozen=True)
class Claim:
    """A paper's claim: ``paper`` (an arXiv id or a venue), ``where`` (a table or an equation), ``quote`` (verbatim)."""

    paper: str
    where: str
    quote: str

    def __post_init__(self) -> None:
        for name in ("paper", "where", "quote"):
            check_text(name, getattr(self, name))


def points(metric: str) -> float:
    """The factor from a score to the page's units: x 100 (macro-MAE: 1)."""
    return SCALE.get(metric, 100.0)


def orientation(expected: str, metric: str) -> float:
    """+1 when a positive difference is the direction the paper claims, else -1 (a claimed loss, or macro-MAE)."""
    check_choice("expected", expected, EXPECTATIONS)
    return 1.0 if (expected == "better") != (metric in LOWER_IS_BETTER) else -1.0


def verdict(p_adjusted: float, difference: float, expected: str, metric: str) -> str:
    """:data:`VERDICT_RULE` for a tested comparison: its family-adjusted p-value and the sign of its difference."""
    if p_adjusted >= ALPHA:
        return INCONCLUSIVE
    return HOLDS if orientation(expected, metric) * difference > 0 else DOES_NOT_HOLD


def split_label(provenance: Mapping[str, Any] | None, split: str = "test") -> str:
    """A split's name on the page from a ``load_splits`` provenance: the release file's stem (``test_public``) when the
    split is that file, else ``<split> (cut from <file>)`` or ``<split> (generated)``."""
    entry = ((provenance or {}).get("splits") or {}).get(split, {})
    if "cut" in entry:
        return f"{split} (cut from {entry['cut']['from']})"
    if "file" in entry:
        return str(entry["file"]).rsplit("/", 1)[-1].split(".", 1)[0]
    return f"{split} (generated)" if "generated" in (provenance or {}) else split


def _matrix(name: str, predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    if isinstance(predictions, Mapping):
        predictions = [predictions[seed] for seed in sorted(predictions)]
    matrix = np.asarray(predictions)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"{name}: must be one test prediction array per seed, got shape {matrix.shape}")
    return matrix


def _paired_matrices(method_predictions: Any, baseline_predictions: Any) -> tuple[np.ndarray, np.ndarray]:
    """Both sides as (S, n) matrices, seed s with seed s; two mappings must name the same seeds."""
    a, b = _matrix("method_predictions", method_predictions), _matrix("baseline_predictions", baseline_predictions)
    if isinstance(method_predictions, Mapping) and isinstance(baseline_predictions, Mapping):
        if sorted(method_predictions) != sorted(baseline_predictions):
            raise ValueError(
                f"baseline_predictions: must hold the method's seeds {sorted(method_predictions)} to pair them, got "
                f"{sorted(baseline_predictions)}"
            )
    return a, b


def trivial_baseline(
    y_true: Sequence[int] | np.ndarray, train_counts: Sequence[int], metric: str, num_labels: int
) -> dict[str, Any]:
    """The task's trivial baseline on ``metric`` and the test labels: the best of always predicting one class (the
    training majority among them) and guessing by the training label prior (the score of the expected confusion
    matrix, test class counts times the prior). ``{"score", "rule", "majority", "prior"}``: the best score and its
    rule, and the majority class's and the prior guess's scores."""
    gold = np.asarray(y_true, dtype=np.int64)
    counts = np.asarray(train_counts, dtype=np.float64)
    if counts.shape != (num_labels,) or np.any(counts < 0) or counts.sum() <= 0:
        raise ValueError(f"train_counts: must be {num_labels} non-negative training label counts, got {train_counts!r}")
    test_counts = np.bincount(gold, minlength=num_labels).astype(np.float64)
    candidates = {}
    for label in range(num_labels):
        confusion = np.zeros((num_labels, num_labels))
        confusion[:, label] = test_counts
        candidates[f"always class {label}"] = float(confusion_scores(confusion, metric))
    prior = float(confusion_scores(np.outer(test_counts, counts / counts.sum()), metric))
    candidates["guessing by the training prior"] = prior
    pick = min if metric in LOWER_IS_BETTER else max
    rule = pick(candidates, key=candidates.get)
    majority = f"always class {int(np.argmax(counts))}"
    return {"score": candidates[rule], "rule": rule, "majority": candidates[majority], "prior": prior}


def compare(
    claim: Claim,
    *,
    setting: str,
    method: str,
    baseline: str,
    metric: str,
    y_true: Sequence[int] | np.ndarray,
    method_predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    baseline_predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    test: str,
    num_labels: int,
    train_counts: Sequence[int],
    expected: str = "better",
    decision_rule: str = "argmax",
    paper_difference: float | Sequence[float] | None = None,
    paper_basis: str = "",
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
    note: str = "",
) -> dict[str, Any]:
    """One comparison row: ``method`` against ``baseline`` (setting X against baseline Y) on ``metric`` (one of
    ``workbench.metrics.SCORES``) over the seeds' test predictions (one array per seed, or a mapping seed -> array;
    seed s of the method is paired with seed s of the baseline, so both must list the same seeds in the same order).

    ``decision_rule`` names the one rule both sides predict by ("argmax", or a rule tuned on each side's own
    validation probabilities): a row never sets an argmax method against a tuned baseline. ``train_counts`` (the
    training label counts) define the trivial baseline's prior. ``paper_difference`` is the paper's own difference
    (method minus baseline) in the page's units (points x 100, as the paper prints it; macro-MAE unscaled), one
    number or the several it prints (models, data sets), with ``paper_basis`` saying where they come from; None when
    the paper prints none. ``test`` names the split (its size is added).

    Returns a JSON-ready dict: the claim, the setting, per-side ``{"mean", "std", "n", "low", "high"}`` (the std over
    seeds; the side's own 95% interval), the paired ``difference`` with ``se``, ``df`` (None: infinite), ``ci_low`` /
    ``ci_high`` and ``p_value``, the ``trivial`` baseline, the paper's difference, and ``verdict``: the row's verdict
    on its own p-value (the page's verdict adjusts it for the page's family, :func:`assess`)."""
    check_choice("metric", metric, SCORES)
    check_choice("expected", expected, EXPECTATIONS)
    gold = np.asarray(y_true)
    a, b = _paired_matrices(method_predictions, baseline_predictions)
    ci = paired_ci(gold, a, b, metric, n_resamples, seed, CONFIDENCE, num_labels=num_labels)
    sides = {}
    for side, matrix, own in (("method_score", a, ci["scores"]["a"]), ("baseline_score", b, ci["scores"]["b"])):
        sides[side] = {**describe(compute_score(gold, row, metric, num_labels) for row in matrix)}
        sides[side].update(low=own["low"], high=own["high"])
    row = {
        "kind": "comparison",
        **asdict(claim),
        "setting": check_text("setting", setting),
        "method": check_text("method", method),
        "baseline": check_text("baseline", baseline),
        "metric": metric,
        "expected": expected,
        "decision_rule": check_text("decision_rule", decision_rule),
        **sides,
        "difference": ci["difference"],
        "se": ci["se"],
        "df": None if math.isinf(ci["df"]) else ci["df"],
        "ci_low": ci["low"],
        "ci_high": ci["high"],
        "p_value": ci["p_value"],
        "confidence_level": ci["confidence_level"],
        "n_resamples": ci["n_resamples"],
        "n_seeds": ci["n_seeds"],
        "test": check_text("test", test),
        "n_test": ci["n_examples"],
        "trivial": trivial_baseline(gold, train_counts, metric, num_labels),
        "paper_difference": _paper_difference(paper_difference, metric),
        "paper_basis": paper_basis,
        "note": note,
    }
    judged = assess([row])[0]
    return {**row, "verdict": judged["verdict"] or judged["status"]}


def _paper_difference(value: float | Sequence[float] | None, metric: str) -> list[float] | None:
    """The paper's printed differences, in the page's units, as fractions like the row's own (sorted)."""
    if value is None:
        return None
    values = [value] if isinstance(value, (int, float)) else list(value)
    if not values or not all(isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        raise ValueError(f"paper_difference: must be a number or numbers as the paper prints them, got {value!r}")
    return sorted(float(v) / points(metric) for v in values)


def identity(
    claim: Claim,
    *,
    setting: str,
    method: str,
    baseline: str,
    reason: str,
    method_predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    baseline_predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    test: str,
) -> dict[str, Any]:
    """A row for a method that equals its baseline by construction, which the caller decides from the setting (a
    loss whose gradient is the baseline's, a hyperparameter chosen equal to the baseline's), with its one-line
    ``reason``: not a test and not a verdict. It records on how many seeds the two made the same test predictions
    (all of them, unless the device is not deterministic)."""
    a, b = _paired_matrices(method_predictions, baseline_predictions)
    if a.shape != b.shape:
        raise ValueError(f"baseline_predictions: must have the method's shape {a.shape}, got {b.shape}")
    return {
        "kind": "identity",
        **asdict(claim),
        "setting": check_text("setting", setting),
        "method": check_text("method", method),
        "baseline": check_text("baseline", baseline),
        "reason": check_text("reason", reason),
        "n_seeds": int(a.shape[0]),
        "identical_seeds": int(sum(np.array_equal(x, y) for x, y in zip(a, b))),
        "test": check_text("test", test),
        "n_test": int(a.shape[1]),
        "verdict": IDENTICAL,
    }


def rate(
    claim: Claim,
    *,
    setting: str,
    method: str,
    measure: str,
    successes: int,
    trials: int,
    paper_range: tuple[float, float],
    test: str,
    note: str = "",
    event: str = "",
) -> dict[str, Any]:
    """One rate row: ``successes`` / ``trials`` with its exact 95% interval (``scipy.stats.binomtest``'s
    Clopper-Pearson ``proportion_ci``) against ``paper_range`` (low, high), proportions in [0, 1]; ``event`` says what
    a success is (the reason of a row whose event never occurs names it: not testable, :func:`why_not_tested`)."""
    trials = check_int("trials", trials, 1)
    successes = check_int("successes", successes, 0, trials)
    low, high = (float(value) for value in paper_range)
    if not 0 <= low <= high <= 1:
        raise ValueError(f"paper_range: must be (low, high) with 0 <= low <= high <= 1, got {paper_range!r}")
    interval = binomtest(successes, trials).proportion_ci(CONFIDENCE, method="exact")
    row = {
        "kind": "rate",
        **asdict(claim),
        "setting": check_text("setting", setting),
        "method": check_text("method", method),
        "measure": check_text("measure", measure),
        "value": successes / trials,
        "successes": successes,
        "trials": trials,
        "ci_low": float(interval.low),
        "ci_high": float(interval.high),
        "confidence_level": CONFIDENCE,
        "paper_low": low,
        "paper_high": high,
        "test": check_text("test", test),
        "note": note,
        **({"event": check_text("event", event)} if event else {}),
    }
    judged = assess([row])[0]
    return {**row, "verdict": judged["verdict"] or judged["status"]}


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


# ------------------------------------------------------------------------------------------------ assessment


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
        return (
            f"{' and '.join(sides)} does not beat the trivial baseline ({trivial['rule']}: "
            f"{_points(trivial['score'], metric)}) by its 95% interval"
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


# ------------------------------------------------------------------------------------------------ checking a record


def _get(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{where}: must be a JSON object, got {type(mapping).__name__}")
    if key not in mapping:
        raise ValueError(f"{where}.{key}: missing")
    return mapping[key]


def _number(mapping: Any, key: str, where: str, low: float = -math.inf, high: float = math.inf) -> float:
    value = _get(mapping, key, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}.{key}: must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{where}.{key}: must lie in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def _count_of(mapping: Any, key: str, where: str, low: int = 0) -> int:
    value = _get(mapping, key, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{where}.{key}: must be an integer >= {low}, got {value!r}")
    return value


def _text_of(mapping: Any, key: str, where: str, allowed: Sequence[str] | None = None) -> str:
    value = _get(mapping, key, where)
    if not isinstance(value, str) or (allowed is not None and value not in allowed):
        wanted = f"one of {list(allowed)}" if allowed is not None else "a string"
        raise ValueError(f"{where}.{key}: must be {wanted}, got {value!r}")
    return value


def _close(recorded: float, recomputed: float) -> bool:
    return abs(recorded - recomputed) <= 1e-9 + 1e-6 * abs(recomputed)


def _check_side(row: Mapping[str, Any], side: str, where: str, seeds: int) -> None:
    stats = _get(row, side, where)
    for key in ("mean", "low", "high"):
        _number(stats, key, f"{where}.{side}")
    if _get(stats, "std", f"{where}.{side}") is not None:
        _number(stats, "std", f"{where}.{side}", 0)
    if _count_of(stats, "n", f"{where}.{side}", 1) != seeds:
        raise ValueError(f"{where}.{side}.n: must equal the notebook's {seeds} seeds, got {stats['n']}")


def _check_comparison(row: Mapping[str, Any], where: str, seeds: int) -> None:
    for key in ("baseline", "decision_rule", "test"):
        _text_of(row, key, where)
    _text_of(row, "metric", where, SCORES)
    _text_of(row, "expected", where, EXPECTATIONS)
    if _count_of(row, "n_seeds", where, 1) != seeds:
        raise ValueError(f"{where}.n_seeds: must equal the notebook's {seeds} seeds, got {row['n_seeds']}")
    _count_of(row, "n_test", where, 1)
    for side in ("method_score", "baseline_score"):
        _check_side(row, side, where, seeds)
    difference, se = _number(row, "difference", where), _number(row, "se", where, 0)
    df = _get(row, "df", where)
    df = math.inf if df is None else _number(row, "df", where, 1e-9)
    _number(row, "p_value", where, 0, 1)
    if _number(row, "confidence_level", where, 0, 1) != CONFIDENCE:
        raise ValueError(f"{where}.confidence_level: must be {CONFIDENCE}, got {row['confidence_level']}")
    low, high = interval_of(difference, se, df)
    for key, recomputed in (("ci_low", low), ("ci_high", high)):
        if not _close(_number(row, key, where), recomputed):
            raise ValueError(
                f"{where}.{key}: {row[key]!r} disagrees with difference, se and df (recomputed {recomputed!r})"
            )
    trivial = _get(row, "trivial", where)
    for key in ("score", "majority", "prior"):
        _number(trivial, key, f"{where}.trivial")
    _text_of(trivial, "rule", f"{where}.trivial")
    paper = _get(row, "paper_difference", where)
    if paper is not None:
        if not isinstance(paper, list) or not paper:
            raise ValueError(f"{where}.paper_difference: must be null or a list of numbers, got {paper!r}")
        for index, value in enumerate(paper):
            _number({f"paper_difference[{index}]": value}, f"paper_difference[{index}]", where)


def _check_rate(row: Mapping[str, Any], where: str) -> None:
    _text_of(row, "measure", where)
    _text_of(row, "test", where)
    if "event" in row:
        _text_of(row, "event", where)
    trials = _count_of(row, "trials", where, 1)
    successes = _count_of(row, "successes", where, 0)
    if successes > trials:
        raise ValueError(f"{where}.successes: must be at most trials ({trials}), got {successes}")
    paper_low, paper_high = _number(row, "paper_low", where, 0, 1), _number(row, "paper_high", where, 0, 1)
    if paper_low > paper_high:
        raise ValueError(f"{where}.paper_low: must be at most paper_high ({paper_high}), got {paper_low}")
    if not _close(_number(row, "value", where, 0, 1), successes / trials):
        raise ValueError(f"{where}.value: {row['value']!r} disagrees with successes / trials ({successes / trials!r})")
    exact = binomtest(successes, trials).proportion_ci(CONFIDENCE, method="exact")
    for key, recomputed in (("ci_low", float(exact.low)), ("ci_high", float(exact.high))):
        if not _close(_number(row, key, where, 0, 1), recomputed):
            raise ValueError(
                f"{where}.{key}: {row[key]!r} disagrees with successes and trials (recomputed {recomputed!r})"
            )


def check_record(evidence: Any) -> None:
    """Refuse a notebook's ``evidence`` entry the page cannot print truthfully: a missing key, a value of the wrong
    type, a number that is not finite, an unknown metric, a row whose seed count disagrees with the notebook's, an
    interval that its own difference, standard error and df (or successes and trials) do not give. ValueError
    naming the key (``claims[3].ci_high``)."""
    _text_of(evidence, "title", "evidence")
    _text_of(evidence, "scale", "evidence")
    seeds = _get(evidence, "seeds", "evidence")
    if not isinstance(seeds, list) or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds):
        raise ValueError(f"evidence.seeds: must be a list of integers, got {seeds!r}")
    claims = _get(evidence, "claims", "evidence")
    if not isinstance(claims, list):
        raise ValueError(f"evidence.claims: must be a list of rows, got {type(claims).__name__}")
    for index, row in enumerate(claims):
        where = f"evidence.claims[{index}]"
        kind = _text_of(row, "kind", where, ("comparison", "identity", "rate"))
        for key in ("paper", "where", "quote", "setting", "method"):
            _text_of(row, key, where)
        if kind == "comparison":
            _check_comparison(row, where, len(seeds))
        elif kind == "rate":
            _check_rate(row, where)
        else:
            for key in ("baseline", "reason", "test"):
                _text_of(row, key, where)
            if _count_of(row, "n_seeds", where, 1) != len(seeds):
                raise ValueError(f"{where}.n_seeds: must equal the notebook's {len(seeds)} seeds, got {row['n_seeds']}")
            _count_of(row, "identical_seeds", where, 0)
            _count_of(row, "n_test", where, 1)
    for key in ("fixed", "chosen"):
        if not isinstance(evidence.get(key) or {}, Mapping):
            raise ValueError(f"evidence.{key}: must be a mapping of names, got {evidence[key]!r}")
    for name in evidence.get("chosen") or {}:
        _text_of(evidence["chosen"], name, "evidence.chosen")
    for index, row in enumerate(evidence.get("calibration") or []):
        where = f"evidence.calibration[{index}]"
        _text_of(row, "setting", where)
        _number(_get(row, "ece", where), "mean", f"{where}.ece", 0, 1)


# ------------------------------------------------------------------------------------------------ the record


def scale(**sections: Any) -> str:
    """The scale of a notebook's runs in one sentence, from its parameter sections as given (``model={...},
    data={...}, training={...}``): the page names encoder sizes and data caps from the run's own parameters."""
    if not sections:
        raise ValueError("sections: must name at least one parameter section, got none")
    shown = redact(sections)  # a section holding a secret (training.hub_token) shows its mark
    return "; ".join(f"{name} {json.dumps(value, ensure_ascii=False)}" for name, value in shown.items()) + "."


def size(model: str, parameters: int | None, training_examples: int, steps: int | None) -> dict[str, Any]:
    """One line of the page's scale table: the ``model`` (its name on the page), its trained ``parameters``, the
    ``training_examples`` and the optimizer ``steps`` of one fit (None where the fit did not report them)."""
    return {
        "model": check_text("model", model),
        "parameters": None if parameters is None else check_int("parameters", parameters, 1),
        "training_examples": check_int("training_examples", training_examples, 0),
        "steps": None if steps is None else check_int("steps", steps, 0),
    }


def fit_size(model: str, fit: Any, training_examples: int) -> dict[str, Any]:
    """:func:`size` of one fit (``workbench.train.Fit``: its ``num_parameters`` and ``steps``, None if absent)."""
    return size(model, getattr(fit, "num_parameters", None), training_examples, getattr(fit, "steps", None))


def run_size(model: str, metrics: Mapping[str, Any], training_examples: int) -> dict[str, Any]:
    """:func:`size` of a trainer run from its metrics.json: ``num_parameters`` (its ``total``) and ``train_steps``."""
    parameters = metrics.get("num_parameters")
    parameters = parameters.get("total") if isinstance(parameters, Mapping) else parameters
    return size(model, parameters, training_examples, metrics.get("train_steps"))


def record(
    title: str,
    scale: str,
    seeds: Sequence[int],
    rows: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any] | None,
    calibration: Sequence[Mapping[str, Any]] = (),
    comment: str = "",
    *,
    sizes: Sequence[Mapping[str, Any]] = (),
    paper_scale: Mapping[str, str] | None = None,
    fixed: Mapping[str, Any] | None = None,
    chosen: Mapping[str, str] | None = None,
    reliability: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    see_also: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A notebook's ``evidence`` entry for metrics.json: ``title`` (the paper), ``scale`` (encoder sizes and data caps,
    one sentence, :func:`scale`), ``seeds``, the ``data`` provenance of its splits (``load_splits``), the claim
    ``rows``, the ``calibration`` rows of :func:`calibration` (ECE per setting) with the ``reliability`` bins of each
    setting, a ``comment`` the page prints under the scale (what the setting stands for); ``sizes`` (:func:`size`
    lines of the scale table) beside the ``paper_scale`` (``{"model", "parameters", "training examples"}`` as the
    paper states them); ``fixed``: the hyperparameters the notebook fixes instead of choosing them on validation
    (name -> value, ``workbench.train.fixed_hyperparameters``); ``chosen``: what it chooses on validation, the same
    way for every side (name -> how); ``see_also``: another notebook's folder -> the rows of it this notebook would
    repeat."""
    return {
        "comment": comment,
        "title": check_text("title", title),
        "scale": check_text("scale", scale),
        "seeds": list(seeds),
        "data": dict(data or {}),
        "claims": [dict(row) for row in rows],
        "calibration": [dict(row) for row in calibration],
        "reliability": {setting: _finite_bins(bins) for setting, bins in (reliability or {}).items()},
        "sizes": [dict(line) for line in sizes],
        "paper_scale": dict(paper_scale or {}),
        "fixed": dict(fixed or {}),
        "chosen": {name: check_text(f"chosen[{name!r}]", how) for name, how in dict(chosen or {}).items()},
        "see_also": dict(see_also or {}),
    }


def _finite_bins(bins: Mapping[str, Sequence[float]]) -> dict[str, list[float | None]]:
    """Reliability bins as JSON takes them: an empty bin's NaN mean becomes None."""
    return {key: [None if math.isnan(value) else float(value) for value in values] for key, values in bins.items()}


# ------------------------------------------------------------------------------------------------ calibration


def calibration(
    probabilities: Mapping[str, Sequence[np.ndarray]], labels: Sequence[int] | np.ndarray, n_bins: int = ECE_BINS
) -> tuple[list[dict[str, Any]], dict[str, dict[str, list[float]]]]:
    """Per setting (name -> one test probability matrix per seed): the expected calibration error over seeds
    (``{"setting", "ece": {"mean", "std", "n"}}`` rows) and the reliability bins of the seeds pooled (for a
    reliability diagram, ``workbench.viz.reliability_diagram``, and the results page); ``workbench.metrics``
    computes both."""
    gold = np.asarray(labels)
    rows, bins = [], {}
    for setting, matrices in probabilities.items():
        errors = [expected_calibration_error(matrix, gold, n_bins) for matrix in matrices]
        rows.append({"setting": setting, "ece": describe(errors)})
        pooled = reliability_bins(np.concatenate(list(matrices)), np.tile(gold, len(matrices)), n_bins)
        bins[setting] = {key: values.tolist() for key, values in pooled.items()}
    return rows, bins
