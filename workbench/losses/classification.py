"""Cross-entropy family: ``ce``, ``wce`` (weighted CE), ``ls`` (label smoothing), ``focal``.

Notation: p = softmax(logits) over C classes, y the gold class, p_t = p_y.

``ce``, ``wce`` and ``ls`` are one ``log_softmax`` and one ``nll_loss`` kernel (which
masks the -100 rows and, for ``mean``, counts them: ``_base.nll_reduce``), the kernels of
``F.cross_entropy`` itself; label smoothing adds one (M, C) x (C, C) matrix product
(``smoothed_log_probs``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from workbench.losses._base import (
    FlatInputs,
    ImbalanceLoss,
    check_class_vector,
    check_num_classes,
    check_range,
    log_softmax_rows,
    nll_reduce,
    positive_count,
)


class CrossEntropyLoss(ImbalanceLoss):
    """Cross-entropy  L_i = -w_{y_i} log p_{i, y_i}.

    With a class ``weight`` and ``reduction="mean"`` the value is torch's weighted mean
    sum_i w_{y_i} L_i / sum_i w_{y_i} (identical to ``F.cross_entropy``; 0 when the
    denominator is 0); it depends on the batch, so ``is_batch_level`` is True then.
    """

    weight_name = "weight"  # the parameter named in errors about the per-class weights
    mean_over_positions = False  # mean divides by sum_i w_{y_i} (torch) or by the count

    def __init__(
        self, weight: Sequence[float] | torch.Tensor | None = None, reduction: str = "mean", validate: bool = False
    ) -> None:
        super().__init__(reduction, validate)
        self.register_buffer("weight", None if weight is None else check_class_vector("weight", weight, positive=False))

    @property
    def is_batch_level(self) -> bool:
        return self.weight is not None and self.reduction == "mean" and not self.mean_over_positions

    def compute(self, flat: FlatInputs) -> torch.Tensor:
        weight = None
        if self.weight is not None:
            check_num_classes(self.weight_name, self.weight, flat.num_classes)
            weight = self.constant("weight", flat.logits.device, flat.logits.dtype)
        return nll_reduce(
            log_softmax_rows(flat.logits), flat, self.reduction, weight, mean_over_positions=self.mean_over_positions
        )


def dice_paper_class_weights(label_counts: Sequence[float] | torch.Tensor, K: float = 1.0) -> torch.Tensor:
    """alpha_t = lg((n - n_t) / n_t + K), lg = log10 (Li et al. 2020, section 3.2).

    ``label_counts`` are the per-class counts n_t (all positive), n = sum_t n_t.
    """
    counts = check_class_vector("label_counts", label_counts, positive=True)
    K = check_range("K", K, 0.0, None, low_inclusive=False)
    alpha = torch.log10((counts.sum() - counts) / counts + K)
    if (alpha <= 0).any():
        raise ValueError(f"K: must make every class weight positive (use K >= 1), got K={K} giving {alpha.tolist()}")
    return alpha


class WeightedCrossEntropyLoss(CrossEntropyLoss):
    """Weighted CE of the Dice paper (Li et al. 2020, "Dice Loss for Data-imbalanced NLP
    Tasks", section 3.2):  L = -(1/N) sum_i alpha_{y_i} log p_{i, y_i},
    alpha_t = lg((n - n_t) / n_t + K).

    Unlike ``ce`` with a weight, the mean divides by the number of positions N, as the
    paper's formula does, so the value decomposes over samples.
    """

    weight_name = "label_counts"
    mean_over_positions = True

    def __init__(
        self,
        label_counts: Sequence[float] | torch.Tensor | None = None,
        K: float = 1.0,
        reduction: str = "mean",
        validate: bool = False,
    ) -> None:
        if label_counts is None:
            raise ValueError("label_counts: must be given for wce (one positive count per class), got None")
        super().__init__(weight=dice_paper_class_weights(label_counts, K), reduction=reduction, validate=validate)
        self.K = float(K)


@functools.lru_cache(maxsize=64)
def smoothing_matrix(num_classes: int, epsilon: float, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """Q = (1 - eps) I + (eps / C) 1 1^T (symmetric), made once per (C, eps, device, dtype)."""
    uniform = torch.full((num_classes, num_classes), epsilon / num_classes, dtype=torch.float64)
    matrix = uniform + (1.0 - epsilon) * torch.eye(num_classes, dtype=torch.float64)
    return matrix.to(dtype).to(device, non_blocking=True)


def smoothed_log_probs(log_probs: torch.Tensor, epsilon: float) -> torch.Tensor:
    """log p @ Q: entry [i, y] is sum_k q_k log p_ik for the label-smoothed target q =
    (1 - eps) onehot(y) + eps / C, so that LS_i = -(log p @ Q)[i, y_i], read by one
    ``nll_loss``. One matrix product (forward and backward), which is faster than a row
    mean and a ``lerp`` on CPU (0.74x vs 1.0x CE at 4096 x 3) and is one kernel less on GPUs."""
    if epsilon == 0.0:
        return log_probs
    return log_probs @ smoothing_matrix(log_probs.shape[-1], epsilon, log_probs.device, log_probs.dtype)


class LabelSmoothingLoss(ImbalanceLoss):
    """Label-smoothing cross-entropy (Szegedy et al. 2016, eq. in section 7):
    L_i = -sum_k q_{ik} log p_{ik},  q_{ik} = (1 - eps) [k = y_i] + eps / C.

    Equals ``F.cross_entropy(logits, labels, label_smoothing=eps)``. ``epsilon`` in [0, 1).
    """

    def __init__(self, epsilon: float = 0.1, reduction: str = "mean", validate: bool = False) -> None:
        super().__init__(reduction, validate)
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)

    def compute(self, flat: FlatInputs) -> torch.Tensor:
        return nll_reduce(smoothed_log_probs(log_softmax_rows(flat.logits), self.epsilon), flat, self.reduction)


def focal_parts(
    nll: torch.Tensor, targets: torch.Tensor, gamma: float, class_weight: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L, S) from the rows' cross-entropy n = -log p_t (no autograd).

    With w = (1 - p_t)^gamma, 1 - p_t = -expm1(-n), the focal term L = -a_{y_i} (1 - p_t)^gamma
    log p_t = a w n and, since d log(1 - p_t) / dz_j = -p_t ([j = t] - p_j) / (1 - p_t),

        dL/dz_j = S_i (p_j - [j = t]) = S_i dn/dz_j,   S_i = a (w + gamma w n / expm1(n)),

    the cross-entropy gradient scaled per row (p_t / (1 - p_t) = 1 / expm1(n)). S is finite:
    n / expm1(n) lies in (0, 1] (-> 1 as p_t -> 1), and where expm1(n) rounds to 0 so does w
    (the denominator is clamped to the smallest normal number: 0 / 0 never occurs).
    """
    if not gamma > 0:
        raise ValueError(f"gamma: must be > 0 for the focal terms (gamma = 0 is cross-entropy), got {gamma}")
    with torch.no_grad():
        weight = torch.expm1(-nll).neg_().pow_(gamma)  # (1 - p_t)^gamma
        terms = weight * nll
        scale = torch.addcdiv(weight, terms, torch.expm1(nll).clamp_min_(torch.finfo(nll.dtype).tiny), value=gamma)
        if class_weight is not None:
            row_weight = class_weight.take(targets.clamp_min(0))
            terms.mul_(row_weight)
            scale.mul_(row_weight)
    return terms, scale


def focal_reduce(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    gamma: float,
    class_weight: torch.Tensor | None,
    reduction: str,
    count: torch.Tensor | int = 1,
) -> torch.Tensor:
    """Focal terms of the rows' ``log_probs`` reduced by ``reduction`` ("none": per row, 0 at
    -100 rows; "mean": divided by ``count``, the number of valid rows), with the closed-form
    gradient of ``focal_parts``: the terms are computed without autograd and the gradient
    flows through the cross-entropy n, as L + S (n - n.detach()) (per row) or
    sum L + S . (n - n.detach()) (one dot product), whose values are exactly L and sum L.
    Two cheap autograd nodes on top of cross-entropy's, instead of a dozen (or a Python
    autograd.Function, whose call costs more than the kernels at these sizes)."""
    nll = torch.nn.functional.nll_loss(log_probs, targets, reduction="none")  # 0 at -100 rows
    terms, scale = focal_parts(nll.detach(), targets, gamma, class_weight)
    if reduction == "none":
        return terms + scale * (nll - nll.detach())
    total = terms.sum()
    if reduction == "mean":
        total, scale = total / count, scale / count
    return total + torch.dot(scale, nll - nll.detach())


def focal_terms(
    logits: torch.Tensor, targets: torch.Tensor, gamma: float, class_weight: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-row focal terms of ``(M, C)`` logits (0 at -100 rows), with the closed-form gradient."""
    return focal_reduce(log_softmax_rows(logits), targets, gamma, class_weight, "none")


class FocalLoss(ImbalanceLoss):
    """Focal loss (Lin et al. 2017, eq. 5; Dice paper section 3.2):
    L_i = -alpha_{y_i} (1 - p_t)^gamma log p_t, the mean over valid positions.

    Computed from one log_softmax with a closed-form gradient (``focal_parts``) that stays
    finite for gamma < 1 and extreme logits (p_t rounding to 1). ``gamma`` >= 0 (gamma = 0
    is cross-entropy, computed as such); optional per-class ``alpha`` >= 0.
    """

    def __init__(
        self,
        gamma: float = 2.0,
        alpha: Sequence[float] | torch.Tensor | None = None,
        reduction: str = "mean",
        validate: bool = False,
    ) -> None:
        super().__init__(reduction, validate)
        self.gamma = check_range("gamma", gamma, 0.0)
        self.register_buffer("alpha", None if alpha is None else check_class_vector("alpha", alpha, positive=False))

    def compute(self, flat: FlatInputs) -> torch.Tensor:
        alpha = None
        if self.alpha is not None:
            check_num_classes("alpha", self.alpha, flat.num_classes)
            alpha = self.constant("alpha", flat.logits.device, flat.logits.dtype)
        log_probs = log_softmax_rows(flat.logits)
        if self.gamma == 0.0:
            return nll_reduce(log_probs, flat, self.reduction, alpha, mean_over_positions=True)
        loss = focal_reduce(log_probs, flat.targets, self.gamma, alpha, self.reduction, positive_count(flat))
        return loss.reshape(flat.label_shape) if self.reduction == "none" else loss
