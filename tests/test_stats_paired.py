"""Paired statistics of a comparison (workbench.stats) and the scores they resample (workbench.metrics):
values against hand computations, scikit-learn and scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import bootstrap
from sklearn.metrics import accuracy_score, f1_score

from workbench.metrics import (
    SCORES,
    classification_report,
    compute_score,
    confusion_scores,
    expected_calibration_error,
    macro_mae,
    reliability_bins,
)
from workbench.stats import mcnemar_test, paired_bootstrap_ci


def _predictions(seed: int = 0, n: int = 600, seeds: int = 3, k: int = 3) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, k, n)
    a = np.where(rng.random((seeds, n)) < 0.7, gold, rng.integers(0, k, (seeds, n)))
    b = np.where(rng.random((seeds, n)) < 0.6, gold, rng.integers(0, k, (seeds, n)))
    return gold, a, b


def test_confusion_scores_match_scikit_learn():
    gold, a, _ = _predictions(n=300, seeds=1)
    matrix = classification_report(gold, a[0], num_labels=3)["confusion_matrix"]
    assert confusion_scores(matrix, "macro_f1") == pytest.approx(f1_score(gold, a[0], average="macro"))
    assert confusion_scores(matrix, "accuracy") == pytest.approx(accuracy_score(gold, a[0]))
    assert confusion_scores(matrix, "f1_positive") == pytest.approx(f1_score(gold == 1, a[0] == 1))
    assert compute_score(gold, a[0], "macro_mae", 3) == pytest.approx(macro_mae(gold, a[0]))


def test_macro_mae_by_hand():
    # class 0: |1-0| and |0-0| -> 1/2; class 1: 0; class 2: |0-2| -> 2; mean over the three classes
    assert macro_mae([0, 0, 1, 2], [1, 0, 1, 0]) == pytest.approx((0.5 + 0 + 2) / 3)
    # a class absent from gold is left out: only classes 0 and 1 count
    assert macro_mae([0, 1, 1], [2, 1, 0]) == pytest.approx((2 + 0.5) / 2)
    assert compute_score([0, 1, 1], [2, 1, 0], "macro_mae", 3) == pytest.approx(1.25)


def test_f1_of_an_absent_class_is_zero_as_in_scikit_learn():
    assert confusion_scores([[2, 0, 0], [0, 1, 0], [0, 0, 0]], "macro_f1") == pytest.approx(2 / 3)


def test_expected_calibration_error_by_hand():
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.25, 0.75]])
    labels = np.array([0, 1, 1])
    # two bins (0, 0.5], (0.5, 1]: all three in the upper one; accuracy 2/3, mean confidence (0.9 + 0.6 + 0.75) / 3
    assert expected_calibration_error(probs, labels, n_bins=2) == pytest.approx(abs(2 / 3 - 2.25 / 3))
    # ten bins: each alone, ECE = mean |correct - confidence|
    assert expected_calibration_error(probs, labels, n_bins=10) == pytest.approx((0.1 + 0.6 + 0.25) / 3)
    bins = reliability_bins(probs, labels, n_bins=10)
    assert bins["count"].tolist() == [0, 0, 0, 0, 0, 1, 0, 1, 1, 0]
    assert bins["accuracy"][8] == 1.0 and np.isnan(bins["accuracy"][0])


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"probabilities": [[0.5, 0.6]], "labels": [0]}, "probabilities"),
        ({"probabilities": [[0.5, 0.5]], "labels": [2]}, "labels"),
        ({"probabilities": [[0.5, 0.5]], "labels": [0], "n_bins": 0}, "n_bins"),
    ],
)
def test_calibration_bad_input_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        expected_calibration_error(**kwargs)


@pytest.mark.parametrize("metric", SCORES)
@pytest.mark.parametrize("seeds", [1, 3])
def test_identical_predictions_give_exactly_zero(metric, seeds):
    gold, a, _ = _predictions(seeds=seeds)
    result = paired_bootstrap_ci(gold, a, a.copy(), metric=metric, n_resamples=200)
    assert (result["difference"], result["low"], result["high"]) == (0.0, 0.0, 0.0)


def test_estimate_is_the_mean_over_seeds_of_the_paired_differences():
    gold, a, b = _predictions()
    expected = np.mean(
        [f1_score(gold, a[s], average="macro") - f1_score(gold, b[s], average="macro") for s in range(3)]
    )
    result = paired_bootstrap_ci(gold, a, b, n_resamples=200)
    assert result["difference"] == pytest.approx(expected, abs=1e-12)
    assert result["low"] < result["difference"] < result["high"]
    assert (result["n_examples"], result["n_seeds"], result["resample_seeds"]) == (600, 3, True)


def test_a_difference_that_no_resample_changes_has_a_point_interval():
    gold = np.array([0, 1, 0, 1, 1])
    result = paired_bootstrap_ci(gold, gold, 1 - gold, metric="accuracy", n_resamples=100)
    assert (result["difference"], result["low"], result["high"]) == (1.0, 1.0, 1.0)


def test_seeds_are_paired_and_optionally_resampled():
    gold = np.array([0, 1, 0, 1, 1, 0])
    a = np.stack([gold, gold])  # both seeds right everywhere
    b = np.stack([gold, 1 - gold])  # seed 0: the same as a (difference 0); seed 1: wrong everywhere (difference 1)
    fixed = paired_bootstrap_ci(gold, a, b, metric="accuracy", n_resamples=400, resample_seeds=False)
    assert (fixed["difference"], fixed["low"], fixed["high"]) == (0.5, 0.5, 0.5)
    # resampling the two seed pairs: mean 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4
    both = paired_bootstrap_ci(gold, a, b, metric="accuracy", n_resamples=400, resample_seeds=True)
    assert (both["difference"], both["low"], both["high"]) == (0.5, 0.0, 1.0)


def test_one_seed_agrees_with_scipy_bootstrap():
    gold, a, b = _predictions(n=800, seeds=1)

    def difference(indices):
        return f1_score(gold[indices], a[0][indices], average="macro") - f1_score(
            gold[indices], b[0][indices], average="macro"
        )

    reference = bootstrap(
        (np.arange(gold.size),), difference, vectorized=False, n_resamples=2000, method="percentile", random_state=1
    ).confidence_interval
    ours = paired_bootstrap_ci(gold, a[0], b[0], n_resamples=2000, seed=3)
    assert ours["low"] == pytest.approx(reference.low, abs=0.012)
    assert ours["high"] == pytest.approx(reference.high, abs=0.012)


def test_the_same_seed_gives_the_same_interval():
    gold, a, b = _predictions()
    assert paired_bootstrap_ci(gold, a, b, seed=5, n_resamples=300) == paired_bootstrap_ci(
        gold, a, b, seed=5, n_resamples=300
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"pred_b": np.zeros((2, 600), dtype=int)}, "pred_b"),
        ({"metric": "auc"}, "metric"),
        ({"n_resamples": 10}, "n_resamples"),
        ({"confidence_level": 1.0}, "confidence_level"),
        ({"pred_a": np.zeros((3, 5), dtype=int)}, "pred_a"),
        ({"pred_a": np.zeros((3, 600))}, "pred_a"),
        ({"num_labels": 2}, "class ids"),
    ],
)
def test_bad_input_names_the_argument(kwargs, name):
    gold, a, b = _predictions()
    arguments = {"y_true": gold, "pred_a": a, "pred_b": b, **kwargs}
    with pytest.raises(ValueError, match=name):
        paired_bootstrap_ci(**arguments)


def test_mcnemar_exact_by_hand():
    gold = np.array([0, 1, 1, 0, 1, 0])
    a = gold.copy()
    b = gold.copy()
    b[:3] = 1 - b[:3]  # three examples only a gets right, none only b
    result = mcnemar_test(gold, a, b)
    assert (result["a_only"], result["b_only"]) == (3, 0)
    assert result["p_value"] == pytest.approx(2 * 0.5**3)  # two-sided exact binomial test of 3 of 3
    assert mcnemar_test(gold, a, a)["p_value"] == 1.0
    with pytest.raises(ValueError, match="one fit each"):
        mcnemar_test(gold, np.stack([a, a]), np.stack([b, b]))
