"""Decision rules: how a classifier's probabilities p (n, K) become labels, tuned on validation only.

* ``argmax``: argmax_k p_k, what every fit predicts by default;
* ``threshold`` (binary tasks): predict class 1 when p_1 >= t, t tuned on validation (Lipton, Elkan and Naryanaswamy,
  2014, "Optimal Thresholding of Classifiers to Maximize F1 Measure": the F1-optimal threshold is rarely 0.5);
* ``offsets`` (K classes): argmax_k log p_k + b_k with b_0 = 0, the K - 1 offsets tuned on validation by coordinate
  ascent over a grid;
* ``logit_adjustment``: the post-hoc logit adjustment of Menon et al. (2021, "Long-tail learning via logit
  adjustment"), argmax_k log p_k - tau log pi_k with pi the training prior (nothing tuned; tau = 1 by default).

"An imbalance loss that wins only until the threshold is tuned has not won": the results page compares losses after
the same tuned rule. Tuning maximises one of ``workbench.metrics.SCORES`` (minimises macro_mae); the test split is
never read here.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.checks import check_choice, check_int, check_number
from workbench.metrics import LOWER_IS_BETTER, SCORES, confusion_scores

RULES = ("argmax", "threshold", "offsets", "logit_adjustment")
RULE_VALUES = {
    "argmax": "an argmax rule holds no values",
    "threshold": "a threshold rule holds one threshold in [0, 1]",
    "offsets": "an offsets rule holds one offset per class (K >= 2)",
    "logit_adjustment": "a logit_adjustment rule holds one tau >= 0",
}
"""What each rule's ``values`` hold (:class:`DecisionRule` checks them when it is made)."""
OFFSET_GRID = tuple(np.round(np.linspace(-3.0, 3.0, 61), 10))
"""Offsets tried per class, in log-probability units (steps of 0.1)."""


def _probabilities(probabilities: np.ndarray) -> np.ndarray:
    probs = np.asarray(probabilities, dtype=np.float64)
    if probs.ndim != 2 or probs.shape[1] < 2 or probs.shape[0] == 0:
        raise ValueError(f"probabilities: must have shape (n, K) with n >= 1 and K >= 2, got {probs.shape}")
    if not np.all(np.isfinite(probs)) or probs.min() < 0:
        raise ValueError("probabilities: must hold finite non-negative numbers")
    return probs


def _labels(labels: np.ndarray, probs: np.ndarray) -> np.ndarray:
    gold = np.asarray(labels)
    if gold.shape != (probs.shape[0],) or not np.issubdtype(gold.dtype, np.integer):
        raise ValueError(f"labels: must be {probs.shape[0]} integer class ids (one per row), got shape {gold.shape}")
    if gold.min() < 0 or gold.max() >= probs.shape[1]:
        raise ValueError(f"labels: must lie in [0, {probs.shape[1] - 1}], got range [{gold.min()}, {gold.max()}]")
    return gold.astype(np.int64)


def _one_class(gold: np.ndarray) -> int | None:
    """The one class of validation labels that hold a single class, else None."""
    present = np.unique(gold)
    return int(present[0]) if present.size == 1 else None


def _check_two_classes(gold: np.ndarray, what: str) -> None:
    """Tuning needs validation labels of two classes or more: on one class every rule that predicts it scores best,
    so the tuned value would be learnt from nothing (``tune_rule`` falls back to argmax instead)."""
    only = _one_class(gold)
    if only is not None:
        raise ValueError(
            f"labels: tuning {what} needs validation labels of two classes or more, got only class {only} "
            f"({gold.size} examples); tune on a validation split holding every class, or keep the argmax"
        )


def _log(probs: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(probs)


def _scores(gold: np.ndarray, predictions: np.ndarray, k: int, score: str) -> np.ndarray:
    """``score`` of each row of ``predictions`` (R, n), signed so that larger is better."""
    cells = gold[None, :] * k + predictions
    counts = np.stack([np.bincount(row, minlength=k * k) for row in cells]).reshape(-1, k, k)
    values = confusion_scores(counts, score)
    return -values if score in LOWER_IS_BETTER else values


def posthoc_logit_adjustment(probabilities: np.ndarray, label_counts: Sequence[float], tau: float = 1.0) -> np.ndarray:
    """Labels argmax_k log p_k - tau log pi_k, pi_k = n_k / n from the training ``label_counts`` (Menon et al., 2021:
    the post-hoc correction of a classifier trained with plain CE)."""
    probs = _probabilities(probabilities)
    counts = np.asarray(label_counts, dtype=np.float64)
    if counts.shape != (probs.shape[1],) or not np.all(np.isfinite(counts)) or counts.min() <= 0:
        raise ValueError(
            f"label_counts: must be {probs.shape[1]} positive counts (one per class), got {label_counts!r}"
        )
    tau = check_number("tau", tau, 0.0)
    return np.argmax(_log(probs) - tau * np.log(counts / counts.sum()), axis=1)


def tune_threshold(probabilities: np.ndarray, labels: np.ndarray, score: str = "f1_positive") -> float:
    """The threshold t on p_1 (predict 1 when p_1 >= t) that maximises ``score`` on these (validation) examples: the
    candidates are 0.5 and the midpoints between consecutive distinct p_1; ties go to the t closest to 0.5."""
    probs = _probabilities(probabilities)
    if probs.shape[1] != 2:
        raise ValueError(f"probabilities: a threshold needs a binary task (K = 2), got K = {probs.shape[1]}")
    gold = _labels(labels, probs)
    check_choice("score", score, SCORES)
    _check_two_classes(gold, "a threshold")
    positive = np.unique(probs[:, 1])
    candidates = np.unique(np.concatenate([[0.5], (positive[1:] + positive[:-1]) / 2]))
    values = _scores(gold, (probs[None, :, 1] >= candidates[:, None]).astype(np.int64), 2, score)
    best = np.flatnonzero(values == values.max())
    return float(candidates[best[np.argmin(np.abs(candidates[best] - 0.5))]])


def tune_offsets(
    probabilities: np.ndarray,
    labels: np.ndarray,
    score: str = "macro_f1",
    grid: Sequence[float] = OFFSET_GRID,
    rounds: int = 3,
) -> np.ndarray:
    """Offsets b (K,), b_0 = 0, for argmax_k log p_k + b_k that maximise ``score`` on these (validation) examples:
    coordinate ascent from b = 0, ``rounds`` sweeps over classes 1 .. K - 1, each trying every ``grid`` value for
    one b_k with the others fixed and keeping the best (ties: the current value, then the smallest |b_k|)."""
    probs = _probabilities(probabilities)
    gold = _labels(labels, probs)
    check_choice("score", score, SCORES)
    _check_two_classes(gold, "offsets")
    check_int("rounds", rounds, 1)
    grid = np.asarray(sorted(set(float(check_number("grid", value)) for value in grid)), dtype=np.float64)
    if grid.size == 0:
        raise ValueError("grid: must hold at least one offset, got none")
    k = probs.shape[1]
    log_probs, offsets = _log(probs), np.zeros(k)
    for _ in range(rounds):
        for klass in range(1, k):
            trial = np.repeat(offsets[None, :], grid.size + 1, axis=0)
            trial[1:, klass] = grid  # row 0: the current offsets
            predictions = np.argmax(log_probs[None, :, :] + trial[:, None, :], axis=2)
            values = _scores(gold, predictions, k, score)
            best = np.flatnonzero(values == values.max())
            chosen = 0 if 0 in best else best[np.argmin(np.abs(trial[best, klass]))]
            offsets = trial[chosen]
    return offsets


@dataclass(frozen=True)
class DecisionRule:
    """A rule (one of :data:`RULES`) with its tuned ``values``: the threshold (one number), the offsets (K), or
    ``tau`` and the training ``label_counts`` for the logit adjustment; :meth:`predict` applies it."""

    kind: str
    values: tuple[float, ...] = field(default_factory=tuple)
    label_counts: tuple[float, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        check_choice("kind", self.kind, RULES)
        values = tuple(check_number("values", value) for value in self.values)
        fits = {
            "argmax": len(values) == 0,
            "threshold": len(values) == 1 and 0 <= values[0] <= 1,
            "offsets": len(values) >= 2,
            "logit_adjustment": len(values) == 1 and values[0] >= 0,
        }
        if not fits[self.kind]:
            raise ValueError(f"values: {RULE_VALUES[self.kind]}, got {self.values!r}")
        object.__setattr__(self, "values", values)

    def predict(self, probabilities: np.ndarray) -> np.ndarray:
        """Labels (n,) of ``probabilities`` (n, K) under this rule; ValueError naming ``probabilities`` when K is not
        the rule's (a threshold: K = 2; offsets: one per class)."""
        probs = _probabilities(probabilities)
        k = probs.shape[1]
        if self.kind == "threshold" and k != 2:
            raise ValueError(f"probabilities: a threshold rule needs a binary task (K = 2), got K = {k}")
        if self.kind == "offsets" and len(self.values) != k:
            raise ValueError(f"probabilities: this offsets rule holds {len(self.values)} offsets, got K = {k} classes")
        if self.kind == "threshold":
            return (probs[:, 1] >= self.values[0]).astype(np.int64)
        if self.kind == "offsets":
            return np.argmax(_log(probs) + np.asarray(self.values), axis=1)
        if self.kind == "logit_adjustment":
            return posthoc_logit_adjustment(probs, self.label_counts, self.values[0])
        return np.argmax(probs, axis=1)


def tune_rule(probabilities: np.ndarray, labels: np.ndarray, score: str) -> DecisionRule:
    """The tuned rule of these (validation) probabilities: a threshold for K = 2, offsets otherwise. Validation labels
    of one class tune nothing: the rule is the argmax, with a warning naming the class."""
    probs = _probabilities(probabilities)
    only = _one_class(_labels(labels, probs))
    if only is not None:
        warnings.warn(
            f"labels: the validation labels hold one class ({only}), from which no threshold or offset can be "
            "tuned; the decision rule stays the argmax",
            stacklevel=2,
        )
        return DecisionRule("argmax")
    if probs.shape[1] == 2:
        return DecisionRule("threshold", (tune_threshold(probs, labels, score),))
    return DecisionRule("offsets", tuple(float(value) for value in tune_offsets(probs, labels, score)))


def logit_adjustment_rule(label_counts: Sequence[float], tau: float = 1.0) -> DecisionRule:
    """The post-hoc logit adjustment as a :class:`DecisionRule` (nothing tuned)."""
    counts = tuple(float(count) for count in label_counts)
    return DecisionRule("logit_adjustment", (check_number("tau", tau, 0.0),), counts)


def tuned_predictions(fits: Mapping[int, Any], validation_labels: np.ndarray, score: str) -> dict[int, np.ndarray]:
    """Per seed, the test predictions of a fit (``validation_probabilities``, ``test_probabilities``; a
    ``workbench.train.Fit``) under the rule :func:`tune_rule` finds on its validation probabilities alone."""
    gold = np.asarray(validation_labels)
    return {
        seed: tune_rule(fit.validation_probabilities, gold, score).predict(fit.test_probabilities)
        for seed, fit in fits.items()
    }
