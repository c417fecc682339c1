"""Dice family (Li et al. 2020, "Dice Loss for Data-imbalanced NLP Tasks", arXiv 1911.02855): ``dice``,
``tversky``, ``dsc``.

For position i and scored class c: p = softmax probability, y = [label_i = c], and TP = p y, FP = p (1 - y),
FN = (1 - p) y. Binary tasks (C = 2) score class 1 only, as the paper does; C > 2 scores each class
one-vs-rest and averages (``class_reduction="mean"``) or sums (``"sum"``, the authors' code) the per-class
losses. Each member is 1 - (A + gamma) / (B + gamma): per sample (eq. 7, 10, 12) at each position, then
averaged over positions; at set level (eq. 8) A and B are summed over the batch first. Ignored (-100)
positions enter no sum. ``gamma`` > 0 keeps the ratio defined when a class has no positive and its
probabilities underflow.

OHEM (``ohem_ratio`` r > 0, the authors' code): per scored class, every positive and the floor(r #positives)
negatives with the highest p (ties broken by position) are kept; the other positions are left out.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from workbench.checks import Bounds
from workbench.losses._base import IGNORE_INDEX, LARGEST, NON_NEGATIVE, ImbalanceLoss, check_choice

DICE_GAMMA = Bounds(ge=1 / LARGEST, le=LARGEST)
"""gamma, the smoothing of every dice-family ratio (eq. 7, 8, 10, 12): in [1e-12, 1e12], > 0 so that the ratio stays
defined when a class has no positive."""
OHEM_RATIO = NON_NEGATIVE
"""r of online hard example mining (the authors' code): in [0, 1e12]; 0 is off."""
TVERSKY_ALPHA = NON_NEGATIVE
"""alpha of Tversky loss (eq. 10), the weight of false positives: in [0, 1e12]."""
TVERSKY_BETA = NON_NEGATIVE
"""beta of Tversky loss (eq. 10), the weight of false negatives: in [0, 1e12]."""
DSC_ALPHA = NON_NEGATIVE
"""alpha of the self-adjusting dice loss (eq. 12, generalised), the exponent of (1 - p): in [0, 1e12]."""
CLASS_REDUCTIONS = ("mean", "sum")


def ohem_keep_mask(p: torch.Tensor, y: torch.Tensor, valid: torch.Tensor, ratio: float) -> torch.Tensor:
    """Online hard example mining: bool (M, K), every valid positive and per class the k = floor(ratio #positives)
    valid negatives with the highest probability ``p`` (M, K), the first k of a stable descending sort.

    Args:
        p: probabilities of the scored classes; y: their 0/1 targets; valid: bool (M, 1); ratio: r >= 0.
    """
    positive = (y > 0) & valid
    negative = (y == 0) & valid
    hardness = p.detach().masked_fill(~negative, float("-inf"))
    rank = hardness.argsort(dim=0, descending=True, stable=True).argsort(dim=0)  # 0 = hardest negative of its class
    keep_count = (positive.sum(0).double() * ratio).floor()
    return positive | (negative & (rank < keep_count))


class DiceFamilyLoss(ImbalanceLoss):
    """The shared part: scores, masks, OHEM, per-sample or set-level ratio, reductions.

    A member gives ``score(logits)`` (p, or f for dsc; (M, C)) and ``ratio_terms(s, y)``: A and B without
    gamma, from scores and 0/1 targets that are 0 at left-out positions. ``choices["set_level"]`` are the member's
    (dsc adds "auto").
    """

    ranges = {"gamma": DICE_GAMMA, "ohem_ratio": OHEM_RATIO}
    choices = {**ImbalanceLoss.choices, "set_level": (True, False), "class_reduction": CLASS_REDUCTIONS}

    def __init__(
        self, gamma: float, set_level: bool | str, class_reduction: str, ohem_ratio: float, reduction: str
    ) -> None:
        check_choice("set_level", set_level, self.choices["set_level"])
        super().__init__(reduction)
        self.set_level = set_level
        self.gamma = DICE_GAMMA.check_number("gamma", gamma)
        self.class_reduction = check_choice("class_reduction", class_reduction, CLASS_REDUCTIONS)
        self.ohem_ratio = OHEM_RATIO.check_number("ohem_ratio", ohem_ratio)
        if reduction == "none" and self.is_batch_level:
            raise ValueError(
                "reduction: must be 'mean' or 'sum' for a set-level or OHEM dice loss (one value per batch), got 'none'"
            )

    @property
    def is_batch_level(self) -> bool:
        return self.set_level is not False or self.ohem_ratio > 0

    def score(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits, dim=-1)

    def ratio_terms(self, s: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        num_classes = logits.shape[-1]
        scored = slice(1, 2) if num_classes == 2 else slice(None)
        valid = (targets != IGNORE_INDEX).unsqueeze(-1)
        y = F.one_hot(targets.clamp_min(0), num_classes)[:, scored].to(logits.dtype)
        keep = valid
        if self.ohem_ratio > 0:
            keep = ohem_keep_mask(torch.softmax(logits, dim=-1)[:, scored], y, valid, self.ohem_ratio)
        numerator, denominator = self.ratio_terms(self.score(logits)[:, scored] * keep, y * keep)
        if self.set_level is True or (self.set_level == "auto" and num_classes == 2):  # eq. 8: one ratio per class
            per_class = 1 - (numerator.sum(0) + self.gamma) / (denominator.sum(0) + self.gamma)
        else:  # eq. 7, 10, 12: one ratio per position
            per_position = torch.where(keep, 1 - (numerator + self.gamma) / (denominator + self.gamma), 0.0)
            if self.reduction == "none":
                return self.reduce_classes(per_position)
            per_class = per_position.sum(0)
            if self.reduction == "mean":
                per_class = per_class / keep.sum(0).clamp_min(1)
        return self.reduce_classes(per_class)

    def reduce_classes(self, values: torch.Tensor) -> torch.Tensor:
        """Mean or sum over the scored classes (the last axis)."""
        return values.mean(-1) if self.class_reduction == "mean" else values.sum(-1)

    def extra_repr(self) -> str:
        return f"gamma={self.gamma}, set_level={self.set_level}, ohem_ratio={self.ohem_ratio}, {super().extra_repr()}"


class DiceLoss(DiceFamilyLoss):
    """Dice loss (Dice paper eq. 7): DL_i = 1 - (2 p_i1 y_i1 + gamma) / (p_i1^2 + y_i1^2 + gamma);
    ``square=False`` puts p + y in the denominator; ``set_level=True`` is eq. 8:
    DL = 1 - (2 sum_i p_i1 y_i1 + gamma) / (sum_i p_i1^2 + sum_i y_i1^2 + gamma).

    Args:
        gamma: smoothing, in [1e-12, 1e12].
        square: squared denominator (eq. 7, 8).
        set_level: eq. 8 instead of eq. 7.
        class_reduction: "mean" or "sum" over the classes of a C > 2 task.
        ohem_ratio: r >= 0, 0 is off.
        reduction: "mean", "sum" or "none" (per sample without OHEM only).
    """

    choices = {**DiceFamilyLoss.choices, "square": (True, False)}

    def __init__(
        self,
        gamma: float = 1.0,
        square: bool = True,
        set_level: bool = False,
        class_reduction: str = "mean",
        ohem_ratio: float = 0.0,
        reduction: str = "mean",
    ) -> None:
        check_choice("square", square, self.choices["square"])
        super().__init__(gamma, set_level, class_reduction, ohem_ratio, reduction)
        self.square = square

    def ratio_terms(self, s: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 2 * s * y, (s**2 + y**2 if self.square else s + y)


class TverskyLoss(DiceFamilyLoss):
    """Tversky loss (Dice paper eq. 10): TL_i = 1 - (TP + gamma) / (TP + alpha FP + beta FN + gamma),
    TP = p_i1 y_i1, FP = p_i1 y_i0, FN = p_i0 y_i1: ``alpha`` weighs false positives, ``beta`` false negatives.

    Args:
        alpha: weight of FP, in [0, 1e12].
        beta: weight of FN, in [0, 1e12].
        gamma, set_level, class_reduction, ohem_ratio, reduction: as for :class:`DiceLoss`.
    """

    ranges = {**DiceFamilyLoss.ranges, "alpha": TVERSKY_ALPHA, "beta": TVERSKY_BETA}

    def __init__(
        self,
        alpha: float = 0.5,
        beta: float = 0.5,
        gamma: float = 1.0,
        set_level: bool = False,
        class_reduction: str = "mean",
        ohem_ratio: float = 0.0,
        reduction: str = "mean",
    ) -> None:
        super().__init__(gamma, set_level, class_reduction, ohem_ratio, reduction)
        self.alpha = TVERSKY_ALPHA.check_number("alpha", alpha)
        self.beta = TVERSKY_BETA.check_number("beta", beta)

    def ratio_terms(self, s: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        tp, fp, fn = s * y, s * (1 - y), (1 - s) * y
        return tp, tp + self.alpha * fp + self.beta * fn


DSC_DEFAULTS = {"alpha": 1.0, "gamma": 1.0, "square": False, "set_level": False, "class_reduction": "mean"}
DSC_PRESETS: dict[str, dict[str, object]] = {
    "paper": dict(DSC_DEFAULTS),  # eq. 12 per sample: f = (1 - p) p, gamma = 1
    # ShannonAI/dice_loss_for_NLP scripts: alpha 0.01, smooth 1, squared denominator, one set-level
    # dice for binary tasks, per-sample per-class losses summed for C > 2.
    "reference": {"alpha": 0.01, "gamma": 1.0, "square": True, "set_level": "auto", "class_reduction": "sum"},
}


class SelfAdjustingDiceLoss(DiceFamilyLoss):
    """Self-adjusting dice loss (Dice paper eq. 12, generalised as in the authors' code):
    DSC_i = 1 - (2 f_i1 y_i1 + gamma) / (f_i1 + y_i1 + gamma), f = (1 - p)^alpha p; ``square`` uses f^2 + y^2.

    f = exp(alpha log(1 - p) + log p) with log(1 - p_c) = logsumexp_{k != c} log p_k: finite value and
    gradient when p rounds to 1 (the released code gives NaN there). Explicit arguments override the
    ``preset``: None or "paper" (eq. 12: alpha 1, gamma 1, non-squared, per sample) or "reference" (the
    released scripts: alpha 0.01, gamma 1, squared, set level for binary tasks, per-class sum for C > 2).

    Args:
        alpha: the exponent of (1 - p), in [0, 1e12].
        gamma, square, set_level ("auto": set level for binary tasks only), class_reduction, ohem_ratio,
        reduction: as for :class:`DiceLoss`.
        preset: None, "paper" or "reference".
    """

    ranges = {**DiceFamilyLoss.ranges, "alpha": DSC_ALPHA}
    choices = {
        **DiceFamilyLoss.choices,
        "set_level": (False, True, "auto"),
        "square": (True, False),
        "preset": (None, *DSC_PRESETS),
    }

    def __init__(
        self,
        alpha: float | None = None,
        gamma: float | None = None,
        square: bool | None = None,
        set_level: bool | str | None = None,
        class_reduction: str | None = None,
        preset: str | None = None,
        ohem_ratio: float = 0.0,
        reduction: str = "mean",
    ) -> None:
        check_choice("preset", preset, self.choices["preset"])
        chosen = dict(DSC_DEFAULTS if preset is None else DSC_PRESETS[preset])
        given = {
            "alpha": alpha,
            "gamma": gamma,
            "square": square,
            "set_level": set_level,
            "class_reduction": class_reduction,
        }
        chosen.update({key: value for key, value in given.items() if value is not None})
        check_choice("square", chosen["square"], self.choices["square"])
        super().__init__(chosen["gamma"], chosen["set_level"], chosen["class_reduction"], ohem_ratio, reduction)
        self.square = chosen["square"]
        self.alpha = DSC_ALPHA.check_number("alpha", chosen["alpha"])
        self.preset = preset

    def score(self, logits: torch.Tensor) -> torch.Tensor:
        log_p = F.log_softmax(logits, dim=-1)
        diagonal = torch.eye(logits.shape[-1], dtype=torch.bool, device=logits.device)
        # row c of the (M, C, C) tensor holds log p_k for k != c; <= 0 despite rounding
        log_one_minus_p = log_p.unsqueeze(-2).masked_fill(diagonal, float("-inf")).logsumexp(-1).clamp_max(0.0)
        return torch.exp(self.alpha * log_one_minus_p + log_p)

    def ratio_terms(self, f: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return 2 * f * y, (f**2 + y**2 if self.square else f + y)
