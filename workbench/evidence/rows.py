"""The rows of a page: :func:`compare` (a method against its baseline over the seeds' test predictions, with the
task's :func:`trivial_baseline`), :func:`identity` (equal by construction, not a test) and :func:`rate` (a measured
proportion against the range a paper prints)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np
from scipy.stats import binomtest

from workbench.checks import check_choice, check_int, check_text
from workbench.evidence.assessment import assess
from workbench.evidence.rules import CONFIDENCE, EXPECTATIONS, IDENTICAL, N_RESAMPLES, Claim, points
from workbench.metrics import LOWER_IS_BETTER, SCORES, compute_score, confusion_scores
from workbench.stats import describe, paired_ci


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
    row = {
        **_opening("comparison", claim, setting, method, baseline),
        "metric": metric,
        "expected": expected,
        "decision_rule": check_text("decision_rule", decision_rule),
        **_side_scores(gold, a, b, ci, metric, num_labels),
        **_paired_difference(ci),
        "test": check_text("test", test),
        "n_test": ci["n_examples"],
        "trivial": trivial_baseline(gold, train_counts, metric, num_labels),
        "paper_difference": _paper_difference(paper_difference, metric),
        "paper_basis": paper_basis,
        "note": note,
    }
    return _with_own_verdict(row)


def _opening(kind: str, claim: Claim, setting: str, method: str, baseline: str | None = None) -> dict[str, Any]:
    """The fields every row opens with: its ``kind``, the claim's, and the ``setting``, ``method`` and (a comparison's
    or an identity's) ``baseline`` it names, each checked as text."""
    opening = {
        "kind": kind,
        **asdict(claim),
        "setting": check_text("setting", setting),
        "method": check_text("method", method),
    }
    if baseline is not None:
        opening["baseline"] = check_text("baseline", baseline)
    return opening


def _side_scores(
    gold: np.ndarray, a: np.ndarray, b: np.ndarray, ci: Mapping[str, Any], metric: str, num_labels: int
) -> dict[str, dict[str, Any]]:
    """``method_score`` and ``baseline_score``: each side's mean, std and n of ``metric`` over its seeds (rows of
    ``a`` and ``b``) with its own 95% interval from the paired CI ``ci`` (``workbench.stats.paired_ci``)."""
    sides = {}
    for side, matrix, own in (("method_score", a, ci["scores"]["a"]), ("baseline_score", b, ci["scores"]["b"])):
        sides[side] = {**describe(compute_score(gold, row, metric, num_labels) for row in matrix)}
        sides[side].update(low=own["low"], high=own["high"])
    return sides


def _paired_difference(ci: Mapping[str, Any]) -> dict[str, Any]:
    """The paired difference's numbers as a row records them, from ``workbench.stats.paired_ci``'s result: ``df``
    None when it is infinite (JSON has no infinity), ``ci_low`` and ``ci_high`` its interval."""
    return {
        "difference": ci["difference"],
        "se": ci["se"],
        "df": None if math.isinf(ci["df"]) else ci["df"],
        "ci_low": ci["low"],
        "ci_high": ci["high"],
        "p_value": ci["p_value"],
        "confidence_level": ci["confidence_level"],
        "n_resamples": ci["n_resamples"],
        "n_seeds": ci["n_seeds"],
    }


def _with_own_verdict(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` with its ``verdict`` on its own p-value (:func:`assess` of the row alone), or its status when it is no
    test; the page's verdict adjusts the p-value for the page's family."""
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
        **_opening("identity", claim, setting, method, baseline),
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
        **_opening("rate", claim, setting, method),
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
    return _with_own_verdict(row)
