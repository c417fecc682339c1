"""Information entropy of k-way vs (k+n)-way outputs, for two-stage training with auxiliary labels.

Xu Zhang et al., "Complicate Then Simplify: A Novel Way to Explore Pre-trained Models for Text Classification" (COLING
2022, ACL Anthology 2022.coling-1.97), sec. 3.1: "Suppose that, for a K classification task in which the prediction
probabilities of the false labels are all gamma, the prediction probability of the true label is (1 - (k-1) gamma)."

    H_k     = - sum_{i=1}^{k-1} gamma log gamma - (1 - (k-1) gamma) log(1 - (k-1) gamma)          (eq. 2)
    H_{k+n} = - sum_{i=1}^{k+n-1} gamma log gamma - (1 - (k+n-1) gamma) log(1 - (k+n-1) gamma)    (eq. 3)
    H_{k+n} - H_k > 0                                                                           (eq. 4)

with the same gamma for all labels; defined for gamma > 0 and (k-1) gamma < 1. Eq. 4 holds wherever eq. 3 is
defined: with q = 1 - (m-1) gamma > gamma, H_{m+1} - H_m = f(q - gamma), f(r) = -gamma log gamma - r log r +
(r + gamma) log(r + gamma), f(0) = 0 and f'(r) = log((r + gamma) / r) > 0. The paper prints no numbers; e.g. k = 2,
n = 2, gamma = 0.1: H_2 = 0.325, H_4 = 0.940 nats.

Not the paper's quantities, labelled as such where shown: the uniform entropy log k (:func:`uniform_entropy`), which
equals eq. 2 only at gamma = 1/k, and a model's own output entropy H(softmax(z)) over the k real logits and over
[z, a, ..., a] with n auxiliary logits a (:func:`softmax_entropy`, :func:`auxiliary_entropy`). Nats unless ``base``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from workbench.checks import check_int, check_number, is_number


def _log_base(base: float) -> float:
    if check_number("base", base, 0, low_inclusive=False) == 1:
        raise ValueError(f"base: must be a positive finite number other than 1, got {base!r}")
    return math.log(base)


def _check_logits(logits: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(logits, dtype=np.float64)
    if array.ndim < 1 or array.shape[-1] < 1 or not np.isfinite(array).all():
        raise ValueError(
            f"logits: must be a finite array with at least one class on the last axis, got shape {array.shape}"
        )
    return array


def paper_entropy(k: int, gamma: float, base: float = math.e) -> float:
    """The paper's H_k (eq. 2; eq. 3 is this function at k + n), every false label at probability ``gamma``:

        H_k = -(k-1) gamma log gamma - (1 - (k-1) gamma) log(1 - (k-1) gamma)

    ``paper_entropy(2, 0.1)`` = 0.325 and ``paper_entropy(4, 0.1)`` = 0.940 nats. Needs (k-1) gamma < 1.
    """
    check_int("k", k, 1)
    if not (is_number(gamma) and math.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma: must be a finite number > 0 (the probability of each false label), got {gamma!r}")
    false_mass = (k - 1) * gamma
    if false_mass >= 1.0:
        raise ValueError(
            f"gamma: must satisfy (k-1)*gamma < 1 (the true label keeps probability 1 - (k-1)*gamma > 0), "
            f"got gamma = {gamma!r} with k = {k}: (k-1)*gamma = {false_mass!r}"
        )
    entropy = -false_mass * math.log(gamma) - (1.0 - false_mass) * math.log(1.0 - false_mass)
    return (entropy + 0.0) / _log_base(base)  # + 0.0: k = 1 gives 0.0, not -0.0


def paper_entropy_gain(k: int, n: int, gamma: float, base: float = math.e) -> float:
    """Delta H = H_{k+n} - H_k (eq. 4: > 0 for every n > 0 where H_{k+n} is defined), same gamma for both."""
    check_int("k", k, 1)
    check_int("n", n, 0)
    return paper_entropy(k + n, gamma, base) - paper_entropy(k, gamma, base)


def uniform_entropy(num_labels: int, base: float = math.e) -> float:
    """Aside, not the paper's eq. 2: log k, the largest entropy a k-way output can have."""
    return math.log(check_int("num_labels", num_labels, 1)) / _log_base(base)


def uniform_entropy_gain(k: int, n: int, base: float = math.e) -> float:
    """Aside, not the paper's eq. 4: log(k + n) - log k = log(1 + n / k)."""
    return math.log1p(check_int("n", n, 0) / check_int("k", k, 1)) / _log_base(base)


def softmax_entropy(logits: Sequence[float] | np.ndarray, base: float = math.e) -> np.ndarray | float:
    """H(softmax(z)) over the last axis, computed stably as logsumexp(z) - sum_i softmax(z)_i z_i."""
    z = _check_logits(logits)
    shifted = z - z.max(axis=-1, keepdims=True)
    log_normaliser = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    probabilities = np.exp(shifted - log_normaliser)
    entropy = (log_normaliser[..., 0] - (probabilities * shifted).sum(axis=-1)) / _log_base(base)
    return float(entropy) if entropy.ndim == 0 else entropy


def auxiliary_logits(logits: Sequence[float] | np.ndarray, n: int, auxiliary_logit: float = 0.0) -> np.ndarray:
    """The K real logits followed by ``n`` auxiliary outputs, each with logit ``auxiliary_logit``."""
    z = _check_logits(logits)
    extra = np.full(z.shape[:-1] + (check_int("n", n, 0),), check_number("auxiliary_logit", auxiliary_logit))
    return np.concatenate([z, extra], axis=-1)


def auxiliary_entropy(
    logits: Sequence[float] | np.ndarray, n: int, auxiliary_logit: float = 0.0, base: float = math.e
) -> np.ndarray | float:
    """H_{K+n}(z) = H(softmax([z, a, ..., a])) with n auxiliary logits a (a model measurement, not eq. 3)."""
    return softmax_entropy(auxiliary_logits(logits, n, auxiliary_logit), base)


def entropy_table(
    k: int,
    n_max: int,
    logits: Sequence[float] | None = None,
    auxiliary_logit: float = 0.0,
    base: float = math.e,
    gamma: float = 0.1,
    uniform: bool = False,
) -> pd.DataFrame:
    """One row per n = 0..n_max: ``H_k`` (eq. 2), ``H_k_plus_n`` (eq. 3) and ``delta_H`` (eq. 4) at false-label
    probability ``gamma`` (0.1: the worked example, not the paper's), NaN where (k+n-1) gamma >= 1. ``uniform=True``
    adds the aside columns ``uniform_H_k``, ``uniform_H_k_plus_n``, ``uniform_delta_H``; ``logits`` (k values) add
    ``model_H_k`` and ``model_H_k_plus_n`` (auxiliary logits ``auxiliary_logit``)."""
    check_int("k", k, 1)
    check_int("n_max", n_max, 0)
    if logits is not None and len(logits) != k:
        raise ValueError(f"logits: must have k = {k} entries, got {len(logits)}")
    h_k = paper_entropy(k, gamma, base)
    rows = []
    for n in range(n_max + 1):
        h_k_plus_n = paper_entropy(k + n, gamma, base) if (k + n - 1) * float(gamma) < 1.0 else math.nan
        row = {"n": n, "H_k": h_k, "H_k_plus_n": h_k_plus_n, "delta_H": h_k_plus_n - h_k}
        if uniform:
            row.update(uniform_H_k=uniform_entropy(k, base), uniform_H_k_plus_n=uniform_entropy(k + n, base))
            row["uniform_delta_H"] = uniform_entropy_gain(k, n, base)
        if logits is not None:
            row.update(
                model_H_k=softmax_entropy(logits, base),
                model_H_k_plus_n=auxiliary_entropy(logits, n, auxiliary_logit, base),
            )
        rows.append(row)
    return pd.DataFrame(rows)
