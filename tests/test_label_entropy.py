"""Entropy of K vs K+n outputs (workbench.label_entropy) against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.label_entropy import (
    auxiliary_entropy,
    auxiliary_logits,
    entropy_table,
    paper_entropy,
    paper_entropy_gain,
    softmax_entropy,
    uniform_entropy,
    uniform_entropy_gain,
)


def _entropy_by_hand(logits):
    exps = [math.exp(z) for z in logits]
    total = sum(exps)
    return -sum(e / total * math.log(e / total) for e in exps)


def test_uniform_entropies():
    assert uniform_entropy(1) == 0.0
    assert uniform_entropy(3) == pytest.approx(math.log(3))
    assert uniform_entropy(8, base=2) == pytest.approx(3.0)
    assert uniform_entropy_gain(2, 3) == pytest.approx(math.log(5) - math.log(2))
    assert uniform_entropy_gain(4, 0) == 0.0


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


def _paper_entropy_by_hand(m, gamma):
    # eq. 2 written out as the paper's sum: m - 1 false labels of probability gamma, the true one 1 - (m-1) gamma
    true_probability = 1.0 - (m - 1) * gamma
    return -sum(gamma * math.log(gamma) for _ in range(m - 1)) - true_probability * math.log(true_probability)


def test_paper_entropy_worked_example():
    # k = 2, n = 2, gamma = 0.1: H_2 = 0.325 and H_4 = 0.940 nats (three decimals)
    assert round(paper_entropy(2, 0.1), 3) == 0.325
    assert round(paper_entropy(4, 0.1), 3) == 0.940
    # float64 by hand: H_2 = -0.1 ln 0.1 - 0.9 ln 0.9, H_4 = -3 (0.1 ln 0.1) - 0.7 ln 0.7
    assert paper_entropy(2, 0.1) == pytest.approx(-0.1 * math.log(0.1) - 0.9 * math.log(0.9), rel=1e-15)
    assert paper_entropy(4, 0.1) == pytest.approx(-0.3 * math.log(0.1) - 0.7 * math.log(0.7), rel=1e-15)
    assert paper_entropy_gain(2, 2, 0.1) == pytest.approx(0.9404479886553264 - 0.3250829733914482, rel=1e-14)
    assert paper_entropy(2, 0.1, base=2) == pytest.approx(paper_entropy(2, 0.1) / math.log(2), rel=1e-15)


@pytest.mark.parametrize(("m", "gamma"), [(1, 0.3), (2, 0.25), (3, 0.2), (7, 0.14), (10, 0.05)])
def test_paper_entropy_matches_the_sum_of_eq_2(m, gamma):
    assert paper_entropy(m, gamma) == pytest.approx(_paper_entropy_by_hand(m, gamma), rel=1e-14, abs=0.0)


def test_paper_entropy_special_values():
    assert paper_entropy(1, 0.4) == 0.0  # one label: certain
    assert str(paper_entropy(1, 0.4)) == "0.0"  # not -0.0
    # gamma = 1/k spreads the mass evenly: eq. 2 meets the uniform entropy log k (the aside)
    assert paper_entropy(4, 0.25) == pytest.approx(uniform_entropy(4), rel=1e-15)
    assert paper_entropy(5, 0.1) < uniform_entropy(5)


@pytest.mark.parametrize("gamma", [0.01, 0.05, 0.1, 0.3])
def test_paper_entropy_grows_with_n_where_defined(gamma):
    # eq. 4: H_{k+n} - H_k > 0, and H_{k+n} strictly increases with n while (k+n-1) gamma < 1
    k = 2
    defined = [n for n in range(0, 200) if (k + n - 1) * gamma < 1.0]
    values = [paper_entropy(k + n, gamma) for n in defined]
    assert len(values) >= 2
    assert all(later > earlier for earlier, later in zip(values, values[1:]))
    assert all(paper_entropy_gain(k, n, gamma) > 0 for n in defined[1:])


def test_entropy_table():
    table = entropy_table(2, 3, logits=[1.0, 0.0], auxiliary_logit=-2.0, uniform=True)
    assert table["n"].tolist() == [0, 1, 2, 3]
    # the uniform aside (log k, log(k+n); not the paper's eq. 2-4)
    assert table["uniform_H_k"].tolist() == pytest.approx([math.log(2)] * 4)
    assert table["uniform_H_k_plus_n"].tolist() == pytest.approx([math.log(2 + n) for n in range(4)])
    assert (table["uniform_H_k_plus_n"] - table["uniform_H_k"]).tolist() == pytest.approx(
        table["uniform_delta_H"].tolist()
    )
    assert table["model_H_k_plus_n"].tolist() == pytest.approx(
        [_entropy_by_hand([1.0, 0.0] + [-2.0] * n) for n in range(4)]
    )
    assert list(entropy_table(3, 0).columns) == ["n", "H_k", "H_k_plus_n", "delta_H"]


def test_entropy_table_uses_the_papers_entropy():
    table = entropy_table(2, 3, gamma=0.1)
    assert table["H_k"].tolist() == pytest.approx([_paper_entropy_by_hand(2, 0.1)] * 4, rel=1e-14)
    assert table["H_k_plus_n"].tolist() == pytest.approx(
        [_paper_entropy_by_hand(2 + n, 0.1) for n in range(4)], rel=1e-14
    )
    assert table.loc[2, "H_k_plus_n"] == pytest.approx(0.9404479886553264, rel=1e-14)  # H_4 of the worked example
    assert table["delta_H"].tolist() == pytest.approx((table["H_k_plus_n"] - table["H_k"]).tolist(), rel=1e-14)
    assert table.loc[0, "delta_H"] == 0.0 and (table["delta_H"][1:] > 0).all()


def test_entropy_table_marks_where_eq_3_is_undefined():
    # k = 2, gamma = 0.25: (k+n-1) gamma < 1 for n <= 2; n = 3 gives exactly 1
    table = entropy_table(2, 5, gamma=0.25)
    assert table["H_k_plus_n"].notna().tolist() == [True, True, True, False, False, False]
    assert table["delta_H"].notna().tolist() == [True, True, True, False, False, False]
    assert table["H_k"].notna().all()
    with pytest.raises(ValueError, match=r"^gamma:"):
        paper_entropy(5, 0.25)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: uniform_entropy(0), r"^num_labels:"),
        (lambda: uniform_entropy(2.5), r"^num_labels:"),
        (lambda: uniform_entropy_gain(2, -1), r"^n:"),
        (lambda: uniform_entropy(2, base=1), r"^base:"),
        (lambda: softmax_entropy([]), r"^logits:"),
        (lambda: softmax_entropy([1.0, float("nan")]), r"^logits:"),
        (lambda: auxiliary_logits([1.0], 1, float("inf")), r"^auxiliary_logit:"),
        (lambda: entropy_table(3, 2, logits=[1.0, 2.0]), r"^logits:"),
        (lambda: entropy_table(2, -1), r"^n_max:"),
        (lambda: paper_entropy(2, 1.0), r"^gamma:"),
        (lambda: paper_entropy(3, 0.5), r"^gamma:"),
        (lambda: paper_entropy(11, 0.1), r"^gamma:"),
        (lambda: paper_entropy(2, 0.0), r"^gamma:"),
        (lambda: paper_entropy(2, -0.1), r"^gamma:"),
        (lambda: paper_entropy(2, float("nan")), r"^gamma:"),
        (lambda: paper_entropy(2, "0.1"), r"^gamma:"),
        (lambda: paper_entropy(0, 0.1), r"^k:"),
        (lambda: paper_entropy(2.0, 0.1), r"^k:"),
        (lambda: paper_entropy(True, 0.1), r"^k:"),
        (lambda: paper_entropy_gain(2, -1, 0.1), r"^n:"),
        (lambda: paper_entropy(2, 0.1, base=0), r"^base:"),
        (lambda: entropy_table(4, 2, gamma=0.4), r"^gamma:"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
