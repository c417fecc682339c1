"""The fair baselines against their printed formulas in float64: class-balanced CE (Cui et al. 2019), logit-adjusted
CE and the post-hoc correction (Menon et al. 2021), CORN (Shi et al.), and the decision rules tuned on validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from datasets import ClassLabel, Dataset, Features, Value

from workbench.config import LossSpec
from workbench.decisions import (
    DecisionRule,
    logit_adjustment_rule,
    posthoc_logit_adjustment,
    tune_offsets,
    tune_rule,
    tune_threshold,
)
from workbench.losses import (
    build_loss,
    class_balanced_weights,
    class_probabilities,
    num_outputs,
    predicted_labels,
)
from workbench.train import loss_from_spec

COUNTS = [30, 120, 10]


def _batch(seed: int = 0, n: int = 6, c: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, generator=generator, dtype=torch.float64) * 2, torch.randint(
        0, c, (n,), generator=generator
    )


def _log_softmax_row(row: list[float], k: int) -> float:
    return row[k] - math.log(sum(math.exp(value) for value in row))


def test_class_balanced_weights_by_hand():
    beta = 0.99
    raw = [(1 - beta) / (1 - beta**n) for n in COUNTS]
    expected = [3 * w / sum(raw) for w in raw]
    torch.testing.assert_close(class_balanced_weights(COUNTS, beta), torch.tensor(expected, dtype=torch.float64))
    assert class_balanced_weights(COUNTS, beta).sum().item() == pytest.approx(3.0)
    torch.testing.assert_close(class_balanced_weights(COUNTS, 0.0), torch.ones(3, dtype=torch.float64))


def test_class_balanced_value_is_the_weighted_mean_over_n():
    logits, labels = _batch()
    weights = class_balanced_weights(COUNTS, 0.999).tolist()
    rows = logits.tolist()
    expected = -sum(weights[y] * _log_softmax_row(row, y) for row, y in zip(rows, labels.tolist())) / len(rows)
    value = build_loss("class_balanced", label_counts=COUNTS, beta=0.999)(logits, labels)
    assert value.item() == pytest.approx(expected, rel=1e-12)
    torch.testing.assert_close(
        build_loss("class_balanced", label_counts=COUNTS, beta=0.0)(logits, labels), build_loss("ce")(logits, labels)
    )


def test_logit_adjusted_value_by_hand():
    logits, labels = _batch(1)
    tau = 1.5
    log_prior = [math.log(n / sum(COUNTS)) for n in COUNTS]
    expected = 0.0
    for row, y in zip(logits.tolist(), labels.tolist()):
        adjusted = [z + tau * lp for z, lp in zip(row, log_prior)]
        expected -= _log_softmax_row(adjusted, y)
    value = build_loss("logit_adjusted", label_counts=COUNTS, tau=tau)(logits, labels)
    assert value.item() == pytest.approx(expected / len(labels), rel=1e-12)
    torch.testing.assert_close(
        build_loss("logit_adjusted", label_counts=COUNTS, tau=0.0)(logits, labels), build_loss("ce")(logits, labels)
    )


def test_counted_baselines_take_the_training_counts_through_loss_from_spec():
    features = Features({"text": Value("string"), "label": ClassLabel(names=["a", "b", "c"])})
    train = Dataset.from_dict({"text": ["x"] * 5, "label": [0, 1, 1, 2, 1]}, features=features)
    loss = loss_from_spec(LossSpec("logit_adjusted"), train)
    torch.testing.assert_close(loss.log_prior, torch.log(torch.tensor([1, 3, 1], dtype=torch.float64) / 5))
    with pytest.raises(ValueError, match="^train_split"):
        loss_from_spec(LossSpec("class_balanced"))


def test_corn_loss_by_hand():
    # K = 3 ordered classes, K - 1 = 2 outputs per example
    logits = torch.tensor([[0.3, -1.2], [1.5, 0.4], [-0.7, 2.0], [0.1, 0.1]], dtype=torch.float64)
    labels = torch.tensor([0, 1, 2, -100])

    def log_sigmoid(x: float) -> float:
        return -math.log1p(math.exp(-x))

    total, pairs = 0.0, 0
    for row, y in zip(logits.tolist()[:3], labels.tolist()[:3]):
        for k in range(2):  # task k + 1: the examples with y > k - 1, target y > k
            if y > k - 1:
                total += log_sigmoid(row[k]) if y > k else log_sigmoid(row[k]) - row[k]  # log(1 - s) = log s - x
                pairs += 1
    value = build_loss("corn")(logits, labels)
    assert value.item() == pytest.approx(-total / pairs, rel=1e-12)
    assert pairs == 5  # task 1: three examples, task 2: the two with y > 0


def test_corn_probabilities_and_rank_rule_by_hand():
    loss = build_loss("corn")
    logits = torch.tensor([[2.0, -1.0], [-3.0, 0.5], [1.0, 3.0]], dtype=torch.float64)
    s = torch.sigmoid(logits)
    above_0, above_1 = s[:, 0], s[:, 0] * s[:, 1]  # P(y > 0), P(y > 1)
    expected = torch.stack([1 - above_0, above_0 - above_1, above_1], dim=1)
    torch.testing.assert_close(class_probabilities(loss, logits), expected)
    assert class_probabilities(loss, logits).sum(1).tolist() == pytest.approx([1.0, 1.0, 1.0])
    # ranks: the number of k with P(y > k) > 0.5
    assert predicted_labels(loss, logits).tolist() == [
        (above_0 > 0.5).long()[i] + (above_1 > 0.5).long()[i] for i in range(3)
    ]
    assert num_outputs(loss, 3) == 2 and num_outputs(build_loss("ce"), 3) == 3


def test_corn_refuses_other_reductions():
    with pytest.raises(ValueError, match="^reduction"):
        build_loss("corn", reduction="sum")


@pytest.mark.parametrize(
    ("name", "params", "parameter"),
    [
        ("class_balanced", {"label_counts": COUNTS, "beta": 1.0}, "beta"),
        ("class_balanced", {}, "label_counts"),
        ("logit_adjusted", {"label_counts": COUNTS, "tau": -1.0}, "tau"),
        ("logit_adjusted", {"label_counts": [1, 0, 2]}, "label_counts"),
    ],
)
def test_bad_parameters_name_the_parameter(name, params, parameter):
    with pytest.raises(ValueError, match=f"^{parameter}:"):
        build_loss(name, **params)


def test_posthoc_logit_adjustment_by_hand():
    probs = np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3]])
    counts = [60, 30, 10]
    # row 0: log p - log pi = log(0.6/0.6), log(0.3/0.3), log(0.1/0.1): a tie at 0 -> argmax takes class 0
    # row 1: log(0.2/0.6), log(0.5/0.3), log(0.3/0.1) -> class 2
    assert posthoc_logit_adjustment(probs, counts).tolist() == [0, 2]
    assert posthoc_logit_adjustment(probs, counts, tau=0.0).tolist() == [0, 1]
    assert logit_adjustment_rule(counts).predict(probs).tolist() == [0, 2]


def test_threshold_is_tuned_on_the_given_examples_only():
    probs = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.6, 0.4], [0.35, 0.65]])
    labels = np.array([0, 1, 1, 0, 1])
    # F1 of class 1 by threshold: >= 0.5 -> 1 TP (F1 0.5); >= 0.15 -> 3 TP, 1 FP, 0 FN (F1 6/7): the best
    assert tune_threshold(probs, labels) == pytest.approx(0.15)
    rule = tune_rule(probs, labels, "f1_positive")
    assert rule.kind == "threshold" and rule.values == pytest.approx((0.15,))
    assert rule.predict(probs).tolist() == [0, 1, 1, 1, 1]


def test_threshold_ties_go_to_the_one_nearest_one_half():
    probs = np.array([[0.2, 0.8], [0.9, 0.1]])
    assert tune_threshold(probs, np.array([1, 0]), "accuracy") == 0.5


def test_offsets_favour_a_class_the_argmax_never_predicts():
    probs = np.array([[0.5, 0.4, 0.1], [0.5, 0.3, 0.2], [0.1, 0.8, 0.1], [0.6, 0.3, 0.1]])
    labels = np.array([0, 2, 1, 0])
    offsets = tune_offsets(probs, labels, "macro_f1")
    assert offsets[0] == 0.0
    predictions = np.argmax(np.log(probs) + offsets, axis=1)
    assert predictions.tolist() == [0, 2, 1, 0]  # class 2 needs log(0.5/0.2) = 0.92 < b_2 while row 0 stays 0
    assert 0.9 < offsets[2] - offsets[0] < math.log(5)
    assert tune_rule(probs, labels, "macro_f1").kind == "offsets"


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: tune_threshold(np.ones((2, 3)) / 3, np.array([0, 1])), "probabilities"),
        (lambda: tune_threshold(np.array([[0.5, 0.5]]), np.array([2])), "labels"),
        (lambda: tune_offsets(np.array([[0.5, 0.5]]), np.array([0]), score="auc"), "score"),
        (lambda: posthoc_logit_adjustment(np.array([[0.5, 0.5]]), [1, 2, 3]), "label_counts"),
        (lambda: DecisionRule("median"), "kind"),
    ],
)
def test_decision_rule_errors_name_the_argument(call, name):
    with pytest.raises(ValueError, match=f"^{name}"):
        call()
