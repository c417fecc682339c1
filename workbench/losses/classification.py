"""Cross-entropy family (``ce``, ``wce``, ``ls``) and ``focal``: p = softmax(logits), y the gold class, p_t = p_y."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from workbench.checks import check_number
from workbench.losses._base import IGNORE_INDEX, LARGEST, ImbalanceLoss, check_class_vector, per_class


class CrossEntropyLoss(ImbalanceLoss):
    """Cross-entropy (Dice paper eq. 1): L_i = -w_{y_i} log p_{i, y_i}, ``F.cross_entropy`` with ``weight``.

    With a weight the mean is torch's, sum_i L_i / sum_i w_{y_i} (0 when that is 0), so it is batch-level.

    Args:
        weight: optional per-class weights in [0, 1e12].
        reduction: "mean", "sum" or "none".
    """

    weight_name = "weight"  # the parameter named in errors about the per-class weights
    weighted_mean = True  # the mean divides by sum_i w_{y_i}; False: by the number of valid rows

    def __init__(self, weight: Sequence[float] | torch.Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer("weight", None if weight is None else check_class_vector("weight", weight))

    @property
    def is_batch_level(self) -> bool:
        return self.weight is not None and self.reduction == "mean" and self.weighted_mean

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        weight = None if self.weight is None else per_class(self.weight_name, self.weight, logits)
        terms = F.cross_entropy(logits, targets, weight=weight, ignore_index=IGNORE_INDEX, reduction="none")
        if weight is None or not self.weighted_mean:
            return self.reduce(terms, targets)
        return self.reduce(terms, targets, (weight[targets.clamp_min(0)] * (targets != IGNORE_INDEX)).sum())


def dice_paper_class_weights(label_counts: Sequence[float] | torch.Tensor, K: float = 1.0) -> torch.Tensor:
    """alpha_t = lg((n - n_t) / n_t + K), lg = log10 (Dice paper eq. 2, sec. 3.2), from the class counts n_t,
    n = sum_t n_t."""
    counts = check_class_vector("label_counts", label_counts, low=1 / LARGEST)
    K = check_number("K", K, 0.0, None, low_inclusive=False)
    alpha = torch.log10((counts.sum() - counts) / counts + K)
    if (alpha < 0).any():
        raise ValueError(
            f"K: must make every class weight non-negative (K >= 1 always does), got K={K} giving {alpha.tolist()}"
        )
    return alpha


class WeightedCrossEntropyLoss(CrossEntropyLoss):
    """Weighted CE (Dice paper eq. 2): L = -(1/N) sum_i alpha_{y_i} log p_{i, y_i}, alpha_t = lg((n - n_t) / n_t + K).

    The mean divides by the number of valid positions N, as eq. 2 does, so the value decomposes over samples.

    Args:
        label_counts: the class counts n_t of the training set, in [1e-12, 1e12].
        K: the paper's hyperparameter, > 0.
        reduction: "mean", "sum" or "none".
    """

    weight_name = "label_counts"
    weighted_mean = False

    def __init__(
        self, label_counts: Sequence[float] | torch.Tensor | None = None, K: float = 1.0, reduction: str = "mean"
    ) -> None:
        if label_counts is None:
            raise ValueError("label_counts: must be given for wce (one positive count per class), got None")
        super().__init__(weight=dice_paper_class_weights(label_counts, K), reduction=reduction)
        self.K = float(K)


class LabelSmoothingLoss(ImbalanceLoss):
    """Label smoothing (Szegedy et al. 2016, sec. 7): L_i = -sum_k q_ik log p_ik, q_ik = (1 - eps) [k = y_i] + eps / C;
    ``F.cross_entropy`` with ``label_smoothing=eps``.

    Args:
        epsilon: eps in [0, 1).
        reduction: "mean", "sum" or "none".
    """

    def __init__(self, epsilon: float = 0.1, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.epsilon = check_number("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        terms = F.cross_entropy(
            logits, targets, ignore_index=IGNORE_INDEX, label_smoothing=self.epsilon, reduction="none"
        )
        return self.reduce(terms, targets)


class FocalLoss(ImbalanceLoss):
    """Focal loss (Lin et al. 2017 eq. 5; Dice paper Table 2): L_i = -alpha_{y_i} (1 - p_t)^gamma log p_t.

    log(1 - p_t) is logsumexp_{k != t} log p_k, so value and gradient stay finite when p_t rounds to 1
    (the plain (1 - p_t)^gamma has an infinite derivative there for gamma < 1). gamma = 0 is cross-entropy.

    Args:
        gamma: the focusing exponent, in [0, 1e12].
        alpha: optional per-class weights in [0, 1e12].
        reduction: "mean" (over the valid positions), "sum" or "none".
    """

    def __init__(
        self, gamma: float = 2.0, alpha: Sequence[float] | torch.Tensor | None = None, reduction: str = "mean"
    ) -> None:
        super().__init__(reduction)
        self.gamma = check_number("gamma", gamma, 0.0, LARGEST)
        self.register_buffer("alpha", None if alpha is None else check_class_vector("alpha", alpha))

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        gold = targets.clamp_min(0).unsqueeze(-1)
        log_p = F.log_softmax(logits, dim=-1)
        log_p_t = log_p.gather(-1, gold).squeeze(-1)
        log_one_minus_p_t = log_p.scatter(-1, gold, float("-inf")).logsumexp(-1).clamp_max(0.0)  # <= 0 despite rounding
        terms = -torch.exp(self.gamma * log_one_minus_p_t) * log_p_t
        if self.alpha is not None:
            terms = per_class("alpha", self.alpha, logits)[gold.squeeze(-1)] * terms
        return self.reduce(torch.where(targets != IGNORE_INDEX, terms, 0.0), targets)
