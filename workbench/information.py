"""Information entropy of K-way vs (K+n)-way outputs, for two-stage training with auxiliary labels.

Stage 1 of the auxiliary-label method trains a head with K + n outputs, where
the n auxiliary labels never occur as gold labels; stage 2 refits a K-way head
on the frozen encoder. The argument for the extra outputs is an entropy one:

    H(p) = - sum_i p_i log p_i                                   (eq. 2, Shannon entropy)
    H_k = log k,   H_{k+n} = log(k + n)                          (eq. 3, uniform over k or k+n labels)
    Delta H = H_{k+n} - H_k = log(1 + n / k) > 0 for n > 0       (eq. 4)

so the (K+n)-way output space has the larger maximum entropy: more room for
the model's uncertainty before it commits to one of the K real labels.

The paper's text was not available when this was written; the equation numbers
follow the project's brief (eq. 2-4) and the definitions above are the ones
the workbench uses. For a model's prediction with logits z over the K real
labels and logit a for each auxiliary output,

    H_K(z)     = H(softmax(z))                  = logsumexp(z) - sum_i softmax(z)_i z_i
    H_{K+n}(z) = H(softmax([z, a, ..., a]))     (n copies of a)

All entropies are in nats unless ``base`` is given (``base=2``: bits).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd


def _check_count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _log_base(base: float) -> float:
    if not (isinstance(base, (int, float)) and base > 0 and base != 1 and math.isfinite(base)):
        raise ValueError(f"base must be a positive finite number other than 1, got {base!r}")
    return math.log(base)


def _check_logits(logits: Sequence[float] | np.ndarray) -> np.ndarray:
    array = np.asarray(logits, dtype=np.float64)
    if array.ndim < 1 or array.shape[-1] < 1 or not np.isfinite(array).all():
        raise ValueError(f"logits must be a finite array with at least one class on the last axis, got shape {array.shape}")
    return array


def uniform_entropy(num_labels: int, base: float = math.e) -> float:
    """H_k = log k: entropy of the uniform distribution over ``num_labels`` labels (eq. 3)."""
    return math.log(_check_count("num_labels", num_labels, 1)) / _log_base(base)


def entropy_gain(k: int, n: int, base: float = math.e) -> float:
    """Delta H = H_{k+n} - H_k = log(1 + n / k) (eq. 4)."""
    k, n = _check_count("k", k, 1), _check_count("n", n, 0)
    return math.log1p(n / k) / _log_base(base)


def softmax_entropy(logits: Sequence[float] | np.ndarray, base: float = math.e) -> np.ndarray | float:
    """H(softmax(z)) over the last axis, computed stably as logsumexp(z) - sum_i softmax(z)_i z_i (eq. 2)."""
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
        raise ValueError(f"auxiliary_logit must be finite, got {auxiliary_logit!r}")
    extra = np.full(z.shape[:-1] + (n,), float(auxiliary_logit))
    return np.concatenate([z, extra], axis=-1)


def auxiliary_entropy(
    logits: Sequence[float] | np.ndarray, n: int, auxiliary_logit: float = 0.0, base: float = math.e
) -> np.ndarray | float:
    """H_{K+n}(z) = H(softmax([z, a, ..., a])) with n auxiliary logits a."""
    return softmax_entropy(auxiliary_logits(logits, n, auxiliary_logit), base)


def entropy_table(
    k: int,
    n_max: int,
    logits: Sequence[float] | None = None,
    auxiliary_logit: float = 0.0,
    base: float = math.e,
) -> pd.DataFrame:
    """One row per n = 0..n_max: ``H_k``, ``H_k_plus_n``, ``delta_H`` (eq. 3-4).

    With ``logits`` (K values, K = k) also ``model_H_k`` and ``model_H_k_plus_n``:
    the entropy of that prediction over K and over K + n outputs.
    """
    k, n_max = _check_count("k", k, 1), _check_count("n_max", n_max, 0)
    if logits is not None and len(logits) != k:
        raise ValueError(f"logits must have k = {k} entries, got {len(logits)}")
    rows = []
    for n in range(n_max + 1):
        row = {
            "n": n,
            "H_k": uniform_entropy(k, base),
            "H_k_plus_n": uniform_entropy(k + n, base),
            "delta_H": entropy_gain(k, n, base),
        }
        if logits is not None:
            row["model_H_k"] = softmax_entropy(logits, base)
            row["model_H_k_plus_n"] = auxiliary_entropy(logits, n, auxiliary_logit, base)
        rows.append(row)
    return pd.DataFrame(rows)
