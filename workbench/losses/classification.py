"""Cross-entropy family: ``ce``, ``wce`` (weighted CE), ``ls`` (label smoothing), ``focal``.

Notation: p = softmax(logits) over C classes, y the gold class, p_t = p_y.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from workbench.losses._base import (
    FlatInputs,
    PerSampleLoss,
    check_class_vector,
    check_num_classes,
    check_range,
    log_softmax_columns,
    log_softmax_rows,
    valid_count,
)


class CrossEntropyLoss(PerSampleLoss):
    """Cross-entropy  L_i = -w_{y_i} log p_{i, y_i}.

    With a class ``weight`` and ``reduction="mean"`` the value is torch's weighted mean
    sum_i w_{y_i} L_i / sum_i w_{y_i} (identical to ``F.cross_entropy``); its denominator
    depends on the batch, so ``is_batch_level`` is True then.
    """

    def __init__(self, weight: Sequence[float] | torch.Tensor | None = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.register_buffer(
            "weight", None if weight is None else check_class_vector("weight", weight, positive=False)
        )

    @property
    def is_batch_level(self) -> bool:
        return self.weight is not None and self.reduction == "mean"

    def check_inputs(self, flat: FlatInputs) -> None:
        check_num_classes("weight", self.weight, flat.logits.shape[-1])

    def class_weight(self, dtype: torch.dtype) -> torch.Tensor | None:
        return None if self.weight is None else self.weight.to(dtype)

    def per_sample_loss(self, flat: FlatInputs) -> torch.Tensor:
        weight = self.class_weight(flat.logits.dtype)
        return F.cross_entropy(flat.logits, flat.targets, weight=weight, reduction="none")

    def mean_denominator(self, flat: FlatInputs) -> torch.Tensor | int:
        if self.weight is None:
            return super().mean_denominator(flat)
        weight = self.class_weight(flat.logits.dtype)[flat.labels]
        return torch.where(flat.valid, weight, 0.0).sum()


def dice_paper_class_weights(label_counts: Sequence[float] | torch.Tensor, K: float = 1.0) -> torch.Tensor:
    """alpha_t = lg((n - n_t) / n_t + K), lg = log10 (Li et al. 2020, section 3.2).

    ``label_counts`` are the per-class counts n_t (all positive), n = sum_t n_t.
    """
    counts = check_class_vector("label_counts", label_counts, positive=True)
    K = check_range("K", K, 0.0, None, low_inclusive=False)
    alpha = torch.log10((counts.sum() - counts) / counts + K)
    if (alpha <= 0).any():
        raise ValueError(f"K={K} gives non-positive class weights {alpha.tolist()}; use K >= 1")
    return alpha


class WeightedCrossEntropyLoss(CrossEntropyLoss):
    """Weighted CE of the Dice paper (Li et al. 2020, "Dice Loss for Data-imbalanced NLP
    Tasks", section 3.2):  L = -(1/N) sum_i alpha_{y_i} log p_{i, y_i},
    alpha_t = lg((n - n_t) / n_t + K).

    Unlike ``ce`` with a weight, the mean divides by the number of positions N, as the
    paper's formula does, so the value decomposes over samples.
    """

    def __init__(
        self, label_counts: Sequence[float] | torch.Tensor | None = None, K: float = 1.0, reduction: str = "mean"
    ) -> None:
        if label_counts is None:
            raise ValueError("label_counts is required for wce: one positive count per class")
        super().__init__(weight=dice_paper_class_weights(label_counts, K), reduction=reduction)
        self.K = float(K)

    @property
    def is_batch_level(self) -> bool:
        return False

    def check_inputs(self, flat: FlatInputs) -> None:
        check_num_classes("label_counts", self.weight, flat.logits.shape[-1])

    def mean_denominator(self, flat: FlatInputs) -> torch.Tensor | int:
        return valid_count(flat, flat.logits.dtype)


def label_smoothing_loss(log_probs: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Per-row label-smoothed CE  -sum_k q_k log p_k,  q = (1 - eps) onehot(y) + eps / C,
    from the rows' ``log_probs (M, C)`` and gold ``labels (M,)``."""
    gold = log_probs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    return -(1.0 - epsilon) * gold - epsilon * log_probs.mean(dim=-1)


class LabelSmoothingLoss(PerSampleLoss):
    """Label-smoothing cross-entropy (Szegedy et al. 2016, eq. in section 7):
    L_i = -sum_k q_{ik} log p_{ik},  q_{ik} = (1 - eps) [k = y_i] + eps / C.

    Equals ``F.cross_entropy(logits, labels, label_smoothing=eps)``. ``epsilon`` in [0, 1).
    """

    def __init__(self, epsilon: float = 0.1, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)

    def per_sample_loss(self, flat: FlatInputs) -> torch.Tensor:
        return label_smoothing_loss(log_softmax_rows(flat.logits), flat.labels, self.epsilon)


class FocalTerms(torch.autograd.Function):
    """Per-row focal term L = -(1 - p_t)^gamma log p_t with its closed-form gradient.

    Forward, from lp = log_softmax(z): lq = log(1 - p_t) = logsumexp_{k != t} lp_k (finite
    when p_t rounds to 1), w = exp(gamma lq). Backward, with r = softmax of the logits
    other than t (r_t = 0) so that d lq / d z_j = r_j - p_j:

        dL/dz_j = -gamma w log p_t (r_j - p_j) - w ([j = t] - p_j),

    every factor bounded, so the gradient stays finite for gamma < 1 and extreme logits.
    One fused backward instead of autograd's chain of ~10 nodes.
    """

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, gamma: float) -> torch.Tensor:
        # Class-major (C, M) throughout: reductions over the short class axis are dim 0.
        gold = labels.unsqueeze(0)
        log_probs = log_softmax_columns(logits)
        log_gold = log_probs.gather(0, gold)
        log_others = log_probs.scatter(0, gold, float("-inf"))
        # lq = m + log sum_k exp(lp_k - m), m = max over the others (a logsumexp whose
        # shifted exponentials are kept: r = exp(lp - m) / sum, reused in backward).
        top_other = log_others.amax(0, keepdim=True)
        shifted = torch.exp(log_others - top_other)
        total = shifted.sum(0, keepdim=True)
        weight = torch.exp(gamma * (top_other + torch.log(total)))
        ctx.save_for_backward(log_probs, shifted, total, log_gold, weight, gold)
        ctx.gamma = gamma
        return (weight * log_gold).neg_().squeeze(0)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        log_probs, shifted, total, log_gold, weight, gold = ctx.saved_tensors
        grad_output = grad_output.unsqueeze(0)
        rest_coefficient = (-ctx.gamma) * weight * log_gold * grad_output  # multiplies r - p
        gold_coefficient = -weight * grad_output  # multiplies onehot(t) - p
        grad = (rest_coefficient / total) * shifted
        grad -= (rest_coefficient + gold_coefficient) * torch.exp(log_probs)
        return grad.scatter_add_(0, gold, gold_coefficient).t(), None, None


class FocalLoss(PerSampleLoss):
    """Focal loss (Lin et al. 2017, eq. 5; Dice paper section 3.2):
    L_i = -alpha_{y_i} (1 - p_t)^gamma log p_t.

    Computed in log space: (1 - p_t)^gamma = exp(gamma * log(1 - p_t)) with
    log(1 - p_t) = logsumexp over the other classes of log p_k, so gamma < 1 and extreme
    logits (p_t rounding to 1) keep finite values and gradients w.r.t. the logits (see
    ``FocalTerms`` for the closed-form gradient).
    ``gamma`` >= 0 (gamma = 0 is CE); optional per-class ``alpha`` >= 0.
    """

    def __init__(
        self, gamma: float = 2.0, alpha: Sequence[float] | torch.Tensor | None = None, reduction: str = "mean"
    ) -> None:
        super().__init__(reduction)
        self.gamma = check_range("gamma", gamma, 0.0)
        self.register_buffer("alpha", None if alpha is None else check_class_vector("alpha", alpha, positive=False))

    def check_inputs(self, flat: FlatInputs) -> None:
        check_num_classes("alpha", self.alpha, flat.logits.shape[-1])

    def per_sample_loss(self, flat: FlatInputs) -> torch.Tensor:
        if self.gamma == 0.0:
            loss = F.cross_entropy(flat.logits, flat.targets, reduction="none")
        else:
            loss = FocalTerms.apply(flat.logits, flat.labels, self.gamma)
        if self.alpha is not None:
            loss = self.alpha.to(flat.logits.dtype)[flat.labels] * loss
        return loss
