"""Information entropy of k-way vs (k+n)-way outputs, for two-stage training with auxiliary labels.

Paper: "Complicate Then Simplify: A Novel Way to Explore Pre-trained Models for
Text Classification" (COLING 2022; first author Xu Zhang), Sec. 3.1. Stage 1 of
the method trains a head with k + n outputs, where the n auxiliary labels never
occur as gold labels ("simulating the existence of fine-grained label
categories"); stage 2 refits a k-way head on the frozen encoder. The paper
motivates the extra outputs with an entropy argument. Its text:

    "Suppose that, for a K classification task in which the prediction
    probabilities of the false labels are all gamma, the prediction probability
    of the true label is (1 - (k-1) gamma)."

    H_k     = - sum_{i=1}^{k-1} gamma log gamma - (1 - (k-1) gamma) log(1 - (k-1) gamma)        (eq. 2)
    H_{k+n} = - sum_{i=1}^{k+n-1} gamma log gamma - (1 - (k+n-1) gamma) log(1 - (k+n-1) gamma)  (eq. 3)
    H_{k+n} - H_k > 0                                                                         (eq. 4)

with the same gamma for the k + n labels. The sums have identical terms, so
eq. 2 is ``H_k = -(k-1) gamma log gamma - (1-(k-1) gamma) log(1-(k-1) gamma)``
(:func:`paper_entropy`); eq. 3 is the same function at k + n. It is defined
for gamma > 0 and (k-1) gamma < 1 (the true label keeps a positive
probability). Worked example (nats): k = 2, n = 2, gamma = 0.1 gives
H_2 = 0.325 and H_4 = 0.940. The paper prints no numbers for eq. 2-4; these
follow from the formula.

Eq. 4 holds wherever eq. 3 is defined: with q = 1 - (m-1) gamma > gamma the
true-label probability at m labels, H_{m+1} - H_m = f(q - gamma), where
f(r) = -gamma log gamma - r log r + (r + gamma) log(r + gamma); f(0) = 0 and
f'(r) = log((r + gamma) / r) > 0, so H_{k+n} grows strictly with n.

Aside (not the paper's quantity): the uniform entropy log k, the maximum of a
k-way output (:func:`uniform_entropy`, :func:`uniform_entropy_gain`), is kept
for comparison and is labelled as an aside wherever it is shown. It equals
eq. 2 only at gamma = 1/k, where eq. 3 is undefined for n > 0.

The workbench also measures a model's own output entropies (not in the paper):
for logits z over the k real labels and logit a for each auxiliary output,

    H(p) = - sum_i p_i log p_i
    H_k(z)     = H(softmax(z))                  = logsumexp(z) - sum_i softmax(z)_i z_i
    H_{k+n}(z) = H(softmax([z, a, ..., a]))     (n copies of a)

All entropies are in nats unless ``base`` is given (``base=2``: bits).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd


def _check_count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _log_base(base: float) -> float:
    if not (isinstance(base, (int, float)) and base > 0 and base != 1 and math.isfinite(base)):
        raise ValueError(f"base: must be a positive finite number other than 1, got {base!r}")
    return math.log(base)


def _check_logits(logits: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(logits, dtype=np.float64)
    if array.ndim < 1 or array.shape[-1] < 1 or not np.isfinite(array).all():
        raise ValueError(f"logits: must be a finite array with at least one class on the last axis, got shape {array.shape}")
    return array


def _check_gamma(gamma: float) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float, np.floating, np.integer)):
        raise ValueError(f"gamma: must be a number (the probability of each false label), got {gamma!r}")
    if not (math.isfinite(gamma) and gamma > 0.0):
        raise ValueError(f"gamma: must be a finite number > 0 (the probability of each false label), got {gamma!r}")
    return float(gamma)


def _entropy_nats(k: int, gamma: float) -> float:
    """Eq. 2 in nats for checked k, gamma with (k-1) gamma < 1."""
    false_mass = (k - 1) * gamma
    true_probability = 1.0 - false_mass
    entropy = -false_mass * math.log(gamma) - true_probability * math.log(true_probability)
    return entropy + 0.0  # k = 1: -0.0 -> 0.0


def paper_entropy(k: int, gamma: float, base: float = math.e) -> float:
    """The paper's H_k (eq. 2; eq. 3 is this function at k + n):

        H_k = -(k-1) gamma log gamma - (1 - (k-1) gamma) log(1 - (k-1) gamma)

    the entropy of a k-way prediction that gives every false label probability
    ``gamma`` and the true label 1 - (k-1) gamma. ``paper_entropy(2, 0.1)`` =
    0.325 and ``paper_entropy(4, 0.1)`` = 0.940 nats (H_2 and H_{2+2}).

    Raises ValueError unless k is an integer >= 1, gamma > 0 and (k-1) gamma < 1.
    """
    k = _check_count("k", k, 1)
    gamma = _check_gamma(gamma)
    log_base = _log_base(base)
    if (k - 1) * gamma >= 1.0:
        raise ValueError(
            f"gamma: must satisfy (k-1)*gamma < 1 (the true label keeps probability 1 - (k-1)*gamma > 0), "
            f"got gamma = {gamma!r} with k = {k}: (k-1)*gamma = {(k - 1) * gamma!r}"
        )
    return _entropy_nats(k, gamma) / log_base


def paper_entropy_gain(k: int, n: int, gamma: float, base: float = math.e) -> float:
    """Delta H = H_{k+n} - H_k (eq. 4: > 0 for every n > 0 where H_{k+n} is defined), same gamma for both."""
    k, n = _check_count("k", k, 1), _check_count("n", n, 0)
    return paper_entropy(k + n, gamma, base) - paper_entropy(k, gamma, base)


def uniform_entropy(num_labels: int, base: float = math.e) -> float:
    """Aside, not the paper's eq. 2: log k, the entropy of the uniform distribution over k labels
    (the largest entropy a k-way output can have)."""
    return math.log(_check_count("num_labels", num_labels, 1)) / _log_base(base)


def uniform_entropy_gain(k: int, n: int, base: float = math.e) -> float:
    """Aside, not the paper's eq. 4: log(k + n) - log k = log(1 + n / k)."""
    k, n = _check_count("k", k, 1), _check_count("n", n, 0)
    return math.log1p(n / k) / _log_base(base)


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
    n = _check_count("n", n, 0)
    if not math.isfinite(auxiliary_logit):
        raise ValueError(f"auxiliary_logit: must be finite, got {auxiliary_logit!r}")
    extra = np.full(z.shape[:-1] + (n,), float(auxiliary_logit))
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
    """One row per n = 0..n_max with the paper's quantities at false-label probability ``gamma``:
    ``H_k`` (eq. 2), ``H_k_plus_n`` (eq. 3) and ``delta_H`` = H_{k+n} - H_k (eq. 4).

    Eq. 3 needs (k+n-1) gamma < 1: rows beyond that have NaN in ``H_k_plus_n``
    and ``delta_H`` (H_k too is given on every row). The default gamma = 0.1 is
    the worked example of the module docstring, not a value from the paper.
    With ``uniform=True`` the aside columns ``uniform_H_k`` = log k,
    ``uniform_H_k_plus_n`` = log(k+n) and ``uniform_delta_H`` = log(1 + n/k)
    (not the paper's quantities). With ``logits`` (k values) also
    ``model_H_k`` and ``model_H_k_plus_n``: that prediction's entropy over k and
    over k + n outputs (auxiliary logits ``auxiliary_logit``).

    Raises ValueError for bad k or n_max, and (as :func:`paper_entropy`) when
    (k-1) gamma >= 1.
    """
    k, n_max = _check_count("k", k, 1), _check_count("n_max", n_max, 0)
    if logits is not None and len(logits) != k:
        raise ValueError(f"logits: must have k = {k} entries, got {len(logits)}")
    h_k = paper_entropy(k, gamma, base)
    rows = []
    for n in range(n_max + 1):
        defined = (k + n - 1) * float(gamma) < 1.0
        h_k_plus_n = paper_entropy(k + n, gamma, base) if defined else math.nan
        row = {"n": n, "H_k": h_k, "H_k_plus_n": h_k_plus_n, "delta_H": h_k_plus_n - h_k}
        if uniform:
            row["uniform_H_k"] = uniform_entropy(k, base)
            row["uniform_H_k_plus_n"] = uniform_entropy(k + n, base)
            row["uniform_delta_H"] = uniform_entropy_gain(k, n, base)
        if logits is not None:
            row["model_H_k"] = softmax_entropy(logits, base)
            row["model_H_k_plus_n"] = auxiliary_entropy(logits, n, auxiliary_logit, base)
        rows.append(row)
    return pd.DataFrame(rows)
