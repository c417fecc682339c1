"""Entropy of K vs K+n outputs (workbench.information) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.information import (
    auxiliary_entropy,
    auxiliary_logits,
    entropy_gain,
    entropy_table,
    softmax_entropy,
    uniform_entropy,
)


def _entropy_by_hand(logits):
    exps = [math.exp(z) for z in logits]
    total = sum(exps)
    return -sum(e / total * math.log(e / total) for e in exps)


def test_uniform_entropies():
    assert uniform_entropy(1) == 0.0
    assert uniform_entropy(3) == pytest.approx(math.log(3))
    assert uniform_entropy(8, base=2) == pytest.approx(3.0)
    assert entropy_gain(2, 3) == pytest.approx(math.log(5) - math.log(2))
    assert entropy_gain(4, 0) == 0.0


def test_softmax_entropy_matches_hand_computation():
    logits = [2.0, -1.0, 0.5]
    assert softmax_entropy(logits) == pytest.approx(_entropy_by_hand(logits), rel=1e-12)
    assert softmax_entropy([0.0, 0.0, 0.0, 0.0]) == pytest.approx(math.log(4))
    batch = softmax_entropy(np.array([[1.0, 1.0], [1000.0, 0.0]]))  # the second is one-hot: stable, 0
    assert batch == pytest.approx([math.log(2), 0.0], abs=1e-12)


def test_auxiliary_entropy():
    logits = [1.5, -0.5]
    assert auxiliary_logits(logits, 2, -1.0).tolist() == [1.5, -0.5, -1.0, -1.0]
    assert auxiliary_entropy(logits, 3, 0.25) == pytest.approx(_entropy_by_hand([1.5, -0.5, 0.25, 0.25, 0.25]))
    assert auxiliary_entropy(logits, 0) == pytest.approx(softmax_entropy(logits))
    # all logits equal: the uniform entropy over k + n labels (eq. 3)
    assert auxiliary_entropy([0.7, 0.7], 5, 0.7) == pytest.approx(uniform_entropy(7))


def test_entropy_table():
    table = entropy_table(2, 3, logits=[1.0, 0.0], auxiliary_logit=-2.0)
    assert table["n"].tolist() == [0, 1, 2, 3]
    assert table["H_k"].tolist() == pytest.approx([math.log(2)] * 4)
    assert table["H_k_plus_n"].tolist() == pytest.approx([math.log(2 + n) for n in range(4)])
    assert (table["H_k_plus_n"] - table["H_k"]).tolist() == pytest.approx(table["delta_H"].tolist())
    assert table["model_H_k_plus_n"].tolist() == pytest.approx(
        [_entropy_by_hand([1.0, 0.0] + [-2.0] * n) for n in range(4)]
    )
    assert list(entropy_table(3, 0).columns) == ["n", "H_k", "H_k_plus_n", "delta_H"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: uniform_entropy(0), "num_labels must be an integer >= 1"),
        (lambda: uniform_entropy(2.5), "num_labels must be an integer >= 1"),
        (lambda: entropy_gain(2, -1), "n must be an integer >= 0"),
        (lambda: uniform_entropy(2, base=1), "base must be a positive finite number other than 1"),
        (lambda: softmax_entropy([]), "logits must be a finite array"),
        (lambda: softmax_entropy([1.0, float("nan")]), "logits must be a finite array"),
        (lambda: auxiliary_logits([1.0], 1, float("inf")), "auxiliary_logit must be finite"),
        (lambda: entropy_table(3, 2, logits=[1.0, 2.0]), "logits must have k = 3 entries"),
        (lambda: entropy_table(2, -1), "n_max must be an integer >= 0"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
