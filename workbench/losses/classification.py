"""Cross-entropy family: ``ce``, ``wce`` (weighted CE), ``ls`` (label smoothing), ``focal``.

Notation: p = softmax(logits) over C classes, y the gold class, p_t = p_y.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from workbench.losses._base import (
    FlatInputs,
    PerSampleLoss,
    check_class_vector,
    check_num_classes,
    check_range,
    log_softmax_excluding,
)


def gold_log_prob(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p_t for rows ``logits (M, C)`` and gold ``labels (M,)``."""
    return F.log_softmax(logits, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


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

    def class_weight_of(self, labels: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        return None if self.weight is None else self.weight.to(dtype)[labels]

    def per_sample_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        loss = -gold_log_prob(logits, labels)
        weight = self.class_weight_of(labels, logits.dtype)
        return loss if weight is None else weight * loss

    def mean_denominator(self, flat: FlatInputs) -> torch.Tensor:
        weight = self.class_weight_of(flat.labels, flat.logits.dtype)
        if weight is None:
            return super().mean_denominator(flat)
        return torch.where(flat.valid, weight, torch.zeros_like(weight)).sum()


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

    def mean_denominator(self, flat: FlatInputs) -> torch.Tensor:
        return flat.valid.sum().to(flat.logits.dtype)


def label_smoothing_loss(logits: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Per-row label-smoothed CE  -sum_k q_k log p_k,  q = (1 - eps) onehot(y) + eps / C."""
    log_probs = F.log_softmax(logits, dim=-1)
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

    def per_sample_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return label_smoothing_loss(logits, labels, self.epsilon)


class FocalLoss(PerSampleLoss):
    """Focal loss (Lin et al. 2017, eq. 5; Dice paper section 3.2):
    L_i = -alpha_{y_i} (1 - p_t)^gamma log p_t.

    Computed in log space: (1 - p_t)^gamma = exp(gamma * log(1 - p_t)) with
    log(1 - p_t) = logsumexp(other logits) - logsumexp(all logits), so gamma < 1 and
    extreme logits (p_t rounding to 1) keep finite values and gradients w.r.t. the logits.
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

    def per_sample_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        log_pt = gold_log_prob(logits, labels)
        loss = -log_pt
        if self.gamma != 0.0:
            gold_mask = F.one_hot(labels, logits.shape[-1]).bool()
            loss = torch.exp(self.gamma * log_softmax_excluding(logits, gold_mask)) * loss
        if self.alpha is not None:
            loss = self.alpha.to(logits.dtype)[labels] * loss
        return loss
