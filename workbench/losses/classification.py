"""Cross-entropy family: ``ce``, ``wce`` (weighted CE), ``ls`` (label smoothing), ``focal``.

Notation: p = softmax(logits) over C classes, y the gold class, p_t = p_y.

``ce``, ``wce`` and ``ls`` are one ``log_softmax`` and one ``nll_loss`` kernel (which
masks the -100 rows and, for ``mean``, counts them: ``_base.nll_reduce``), the kernels
of ``F.cross_entropy`` itself; label smoothing only adds a row mean and a ``lerp``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch.autograd.function import once_differentiable

from workbench.losses._base import (
    FlatInputs,
    ImbalanceLoss,
    check_class_vector,
    check_num_classes,
    check_range,
    log_softmax_rows,
    nll_reduce,
    reduce_terms,
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
        self.register_buffer(
            "weight", None if weight is None else check_class_vector("weight", weight, positive=False)
        )

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


def smoothed_log_probs(log_probs: torch.Tensor, epsilon: float) -> torch.Tensor:
    """sum_k q_k log p_k for the label-smoothed target q of every gold class, as an ``(M, C)``
    matrix whose entry [i, y] is (1 - eps) log p_iy + (eps / C) sum_k log p_ik
    (a ``lerp`` towards the row mean), so that LS_i = -matrix[i, y_i]."""
    if epsilon == 0.0:
        return log_probs
    return torch.lerp(log_probs, log_probs.mean(dim=-1, keepdim=True), epsilon)


def label_smoothing_loss(log_probs: torch.Tensor, labels: torch.Tensor, epsilon: float) -> torch.Tensor:
    """Per-row label-smoothed CE  -sum_k q_k log p_k,  q = (1 - eps) onehot(y) + eps / C,
    from the rows' ``log_probs (M, C)`` and gold ``labels (M,)`` (every label in [0, C))."""
    return -smoothed_log_probs(log_probs, epsilon).gather(-1, labels.unsqueeze(-1)).squeeze(-1)


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


class FocalTerms(torch.autograd.Function):
    """Per-row focal terms L_i = -a_{y_i} (1 - p_t)^gamma log p_t (0 at -100 rows) with a
    closed-form gradient; ``gamma`` > 0, ``class_weight`` a (C,) tensor a or None.

    Forward, from one lp = log_softmax(z): n = -lp_t (one ``nll_loss``, which also zeroes
    the -100 rows), w = (1 - p_t)^gamma with 1 - p_t = -expm1(-n), L = w n. Backward:
    with d log(1 - p_t) / dz_j = -p_t ([j = t] - p_j) / (1 - p_t),

        dL/dz_j = S_i (p_j - [j = t]),   S_i = a_{y_i} (w + gamma L p_t / (1 - p_t)),

    the cross-entropy gradient scaled per row. S is finite: L p_t / (1 - p_t) =
    w p_t n / (1 - p_t) -> w as p_t -> 1 (n ~ 1 - p_t), and when 1 - p_t rounds to 0,
    w = L = 0 (the denominator is clamped to the smallest normal number, so 0 / 0 never
    occurs). At a -100 row n = 0, so w = L = S = 0.
    """

    @staticmethod
    def forward(
        ctx, logits: torch.Tensor, targets: torch.Tensor, gamma: float, class_weight: torch.Tensor | None = None
    ) -> torch.Tensor:
        if not gamma > 0:
            raise ValueError(f"gamma: must be > 0 for FocalTerms (gamma = 0 is cross-entropy), got {gamma}")
        log_probs = log_softmax_rows(logits)
        nll = torch.nn.functional.nll_loss(log_probs, targets, reduction="none")
        log_gold = nll.neg()
        gold = log_gold.exp()
        one_minus = log_gold.expm1_().neg_()  # 1 - p_t
        weight = one_minus.pow(gamma)
        terms = weight * nll
        scale = torch.addcdiv(weight, terms * gold, one_minus.clamp_min_(torch.finfo(one_minus.dtype).tiny), value=gamma)
        safe_targets = targets.clamp_min(0)
        if class_weight is not None:
            row_weight = class_weight.take(safe_targets)
            terms, scale = terms * row_weight, scale * row_weight
        ctx.save_for_backward(log_probs, safe_targets, scale)
        return terms

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        log_probs, safe_targets, scale = ctx.saved_tensors
        coefficient = (grad_output * scale).unsqueeze(1)
        grad = torch.exp(log_probs).mul_(coefficient)
        return grad.scatter_add_(1, safe_targets.unsqueeze(1), coefficient.neg_()), None, None, None


class FocalLoss(ImbalanceLoss):
    """Focal loss (Lin et al. 2017, eq. 5; Dice paper section 3.2):
    L_i = -alpha_{y_i} (1 - p_t)^gamma log p_t, the mean over valid positions.

    ``FocalTerms`` computes it from one log_softmax with a closed-form gradient that stays
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
        if self.gamma == 0.0:
            return nll_reduce(log_softmax_rows(flat.logits), flat, self.reduction, alpha, mean_over_positions=True)
        return reduce_terms(FocalTerms.apply(flat.logits, flat.targets, self.gamma, alpha), flat, self.reduction)
