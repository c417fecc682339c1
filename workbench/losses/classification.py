"""Cross-entropy family (``ce``, ``wce``, ``ls``) and ``focal``: p = softmax(logits), y the gold class, p_t = p_y."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from workbench.checks import Bounds
from workbench.losses._base import (
    IGNORE_INDEX,
    NON_NEGATIVE,
    ImbalanceLoss,
    check_class_vector,
    check_label_counts,
    per_class,
)

EPSILON = Bounds(ge=0, lt=1)
"""eps of label smoothing (Szegedy et al. 2016, sec. 7), and of PCL, built on it: in [0, 1)."""
FOCAL_GAMMA = NON_NEGATIVE
"""gamma of focal loss (Lin et al. 2017 eq. 5): in [0, 1e12]; 0 is cross-entropy."""
WCE_K = Bounds(gt=0)
"""K of weighted CE (Dice paper eq. 2, sec. 3.2): > 0."""
CB_BETA = Bounds(ge=0, lt=1)
"""beta of class-balanced CE (Cui et al. 2019, sec. 3-4): in [0, 1); 0 is plain CE."""
TAU = NON_NEGATIVE
"""tau of logit-adjusted CE (Menon et al. 2021, sec. 5): in [0, 1e12]; 0 is plain CE."""


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
    counts = check_label_counts(label_counts)
    K = WCE_K.check_number("K", K)
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
    ranges = {"K": WCE_K}

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

    ranges = {"epsilon": EPSILON}

    def __init__(self, epsilon: float = 0.1, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.epsilon = EPSILON.check_number("epsilon", epsilon)

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

    ranges = {"gamma": FOCAL_GAMMA}

    def __init__(
        self, gamma: float = 2.0, alpha: Sequence[float] | torch.Tensor | None = None, reduction: str = "mean"
    ) -> None:
        super().__init__(reduction)
        self.gamma = FOCAL_GAMMA.check_number("gamma", gamma)
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


def class_balanced_weights(label_counts: Sequence[float] | torch.Tensor, beta: float = 0.9999) -> torch.Tensor:
    """w_k = (1 - beta) / (1 - beta^{n_k}), the inverse effective number of samples of class k, normalised so that
    sum_k w_k = C (Cui et al., 2019, "Class-Balanced Loss Based on Effective Number of Samples", CVPR, sec. 3-4).
    beta = 0 gives w = 1 (plain CE); beta -> 1 approaches inverse class frequency."""
    counts = check_label_counts(label_counts)
    beta = CB_BETA.check_number("beta", beta)
    weights = (1.0 - beta) / (1.0 - torch.pow(torch.tensor(beta, dtype=torch.float64), counts))
    return weights * len(counts) / weights.sum()


class ClassBalancedLoss(CrossEntropyLoss):
    """Class-balanced softmax CE (Cui et al., 2019, sec. 4): L = -(1/N) sum_i w_{y_i} log p_{i, y_i} with
    w_k = (1 - beta) / (1 - beta^{n_k}) normalised to sum to C (:func:`class_balanced_weights`).

    The mean divides by the number of valid positions N (the authors' reduction), so the value decomposes over samples.

    Args:
        label_counts: the class counts n_k of the training set, in [1e-12, 1e12].
        beta: in [0, 1); the paper's grid is 0.9, 0.99, 0.999, 0.9999.
        reduction: "mean", "sum" or "none".
    """

    weight_name = "label_counts"
    weighted_mean = False
    ranges = {"beta": CB_BETA}

    def __init__(
        self, label_counts: Sequence[float] | torch.Tensor | None = None, beta: float = 0.9999, reduction: str = "mean"
    ) -> None:
        if label_counts is None:
            raise ValueError("label_counts: must be given for class_balanced (one positive count per class), got None")
        super().__init__(weight=class_balanced_weights(label_counts, beta), reduction=reduction)
        self.beta = float(beta)


class LogitAdjustedLoss(ImbalanceLoss):
    """Logit-adjusted softmax CE (Menon et al., 2021, sec. 5): L_i = -log softmax(z_i + tau log pi)_{y_i}.

    "Long-tail learning via logit adjustment" (ICLR 2021); pi_k = n_k / n is the training prior. At prediction time
    the model's own logits z are used: the adjustment is a training-time margin that favours rare classes. The
    post-hoc form instead trains with CE and predicts argmax_k z_k - tau log pi_k
    (``workbench.decisions.posthoc_logit_adjustment``).

    Args:
        label_counts: the class counts n_k of the training set, in [1e-12, 1e12].
        tau: the scaling, in [0, 1e12]; tau = 1 is the paper's default, tau = 0 plain CE.
        reduction: "mean", "sum" or "none".
    """

    ranges = {"tau": TAU}

    def __init__(
        self, label_counts: Sequence[float] | torch.Tensor | None = None, tau: float = 1.0, reduction: str = "mean"
    ) -> None:
        super().__init__(reduction)
        if label_counts is None:
            raise ValueError("label_counts: must be given for logit_adjusted (one positive count per class), got None")
        counts = check_label_counts(label_counts)
        self.tau = TAU.check_number("tau", tau)
        self.register_buffer("log_prior", torch.log(counts / counts.sum()))

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        adjusted = logits + self.tau * per_class("label_counts", self.log_prior, logits)
        terms = F.cross_entropy(adjusted, targets, ignore_index=IGNORE_INDEX, reduction="none")
        return self.reduce(terms, targets)
