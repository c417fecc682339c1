from __future__ import annotations

import numpy as np
import pytest

from workbench.metrics import classification_report, far_error_rate

GOLD = [0, 0, 1, 1, 1, 2, 2, 0]
PRED = [0, 1, 1, 1, 0, 2, 0, 2]


def test_report_matches_hand_computation():
    report = classification_report(GOLD, PRED, label_names=["irrelevant", "related", "relevant"], ordinal=True)
    # confusion (rows gold, cols predicted): gold0 -> 0,1,2 ; gold1 -> 0,1,1 ; gold2 -> 0,2
    assert report["confusion_matrix"] == [[1, 1, 1], [1, 2, 0], [1, 0, 1]]
    assert report["accuracy"] == pytest.approx(4 / 8)
    # class 0: tp 1, predicted 3, gold 3 -> p = r = 1/3; class 1: tp 2, predicted 3, gold 3 -> 2/3;
    # class 2: tp 1, predicted 2, gold 2 -> 1/2
    expected_f1 = [1 / 3, 2 / 3, 1 / 2]
    assert report["macro_f1"] == pytest.approx(sum(expected_f1) / 3)
    per = report["per_class"]
    assert per["related"] == pytest.approx({"precision": 2 / 3, "recall": 2 / 3, "f1": 2 / 3, "support": 3})
    assert per["relevant"]["f1"] == pytest.approx(0.5)
    assert per["irrelevant"]["support"] == 3
    # far errors: gold 2 -> pred 0, gold 0 -> pred 2
    assert report["far_error_rate"] == pytest.approx(2 / 8)
    assert report["num_examples"] == 8


def test_absent_class_still_appears_with_zero_scores():
    report = classification_report([0, 1, 1], [0, 1, 0], num_labels=3)
    assert report["confusion_matrix"] == [[1, 0, 0], [1, 1, 0], [0, 0, 0]]
    assert report["per_class"]["2"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0}
    # macro-F1 averages over all K=3 classes: class0 f1 = 2/3, class1 f1 = 2/3, class2 = 0
    assert report["macro_f1"] == pytest.approx((2 / 3 + 2 / 3) / 3)


def test_always_majority_baseline_on_qbqtc_proportions():
    gold = np.array([0] * 245 + [1] * 630 + [2] * 125)
    report = classification_report(gold, np.ones_like(gold), ordinal=True)
    # f1 of class 1 = 2*0.63/(1+0.63); the README quotes about 25.8 macro-F1
    assert report["macro_f1"] == pytest.approx(2 * 0.63 / 1.63 / 3)
    assert report["accuracy"] == pytest.approx(0.63)
    assert report["far_error_rate"] == 0.0


def test_nominal_labels_have_no_far_error_rate():
    """Topics have no order: "two steps away" means nothing, so the report leaves the rate out."""
    assert "far_error_rate" not in classification_report(GOLD, PRED)
    assert classification_report(GOLD, PRED, ordinal=True)["far_error_rate"] == pytest.approx(2 / 8)


def test_far_error_rate_counts_distance_two_or_more():
    assert far_error_rate([0, 1, 2, 3], [2, 0, 0, 0]) == pytest.approx(3 / 4)
    assert far_error_rate(np.array([1, 1]), np.array([1, 2])) == 0.0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"labels": [0, 1], "predictions": [0]}, "predictions"),
        ({"labels": [], "predictions": []}, "labels"),
        ({"labels": [0, 3], "predictions": [0, 1], "num_labels": 3}, "labels"),
        ({"labels": [0, 1], "predictions": [0, -1], "num_labels": 3}, "predictions"),
        ({"labels": [0, 1], "predictions": [0, 1], "label_names": ["a"], "num_labels": 2}, "label_names"),
        ({"labels": [0, 1], "predictions": [0, 1], "num_labels": 0}, "num_labels"),
        ({"labels": [0.5, 1], "predictions": [0, 1]}, "labels"),
        ({"labels": [[0, 1]], "predictions": [[0, 1]]}, "labels"),
    ],
)
def test_bad_inputs_raise(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        classification_report(**kwargs)
