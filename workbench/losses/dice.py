"""Dice family (Li et al. 2020, "Dice Loss for Data-imbalanced NLP Tasks"): ``dice``, ``tversky``, ``dsc``.

Notation: p_ic = softmax(logits_i)_c, y_ic = [label_i = c]. Binary tasks (C = 2) score the
positive class 1 only, as the paper does; for C > 2 each class is scored one-vs-rest and
the per-class losses are averaged (``class_reduction="mean"``) or summed (``"sum"``, as
the authors' code does).

Every member is 1 - (A_ic + gamma) / (B_ic + gamma) for a numerator A and denominator B:

* per sample (eq. 7, 10, 12): the ratio is taken per position, then averaged over positions;
* set level (eq. 8): A and B are summed over the batch first, one ratio per class.

A and B are linear in three per-position quantities of a member's score s (p, or f for
``dsc``) and the 0/1 target y: the overlap s y, the mass (s or s^2) and y itself. The set
level therefore sums those three over the kept positions and combines the ``(K,)`` sums,
instead of forming A and B at every position.

Optional OHEM (``ohem_ratio`` r > 0) keeps, per scored class, every positive and the
floor(r * #positives) negatives with the highest p_ic (the hardest); the rest are left out.

Everything is computed class-major, ``(K, M)`` for K scored classes and M positions (see
``log_softmax_columns`` in ``_base``): per-class sums run over the long innermost axis.
"""

from __future__ import annotations

import math

import torch

from workbench.losses._base import (
    FlatInputs,
    ImbalanceLoss,
    check_choice,
    check_range,
    flatten_inputs,
    log_one_minus_softmax_all,
    safe_divide,
)

CLASS_REDUCTIONS = ("mean", "sum")
SET_LEVEL_CHOICES = (False, True, "auto")


def scored_classes(num_classes: int) -> slice:
    """Binary tasks score class 1 only; multi-class tasks score every class."""
    return slice(1, 2) if num_classes == 2 else slice(0, num_classes)


def scored_targets(labels: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """0/1 targets ``(K, M)`` of the scored classes: the label itself for binary tasks
    (class 1 only), one-hot ``c == labels`` for multi-class ones."""
    if num_classes == 2:
        return labels.unsqueeze(0).to(dtype)
    return (torch.arange(num_classes, device=labels.device).unsqueeze(-1) == labels.unsqueeze(0)).to(dtype)


def kth_largest_per_row(values: torch.Tensor, k: list[int]) -> torch.Tensor:
    """The k_c-th largest entry of each row c of ``values (K, M)``, for ``k`` (K ints) in [1, M].

    One ``kthvalue`` for all rows despite their different k: row c is padded with
    k_max - k_c entries of +inf, which rank above everything, so the k_max-th largest of
    the padded row is the k_c-th largest of the original one.
    """
    k_max = max(k)
    if k_max != min(k):
        padding = [[float("inf")] * (k_max - k_row) + [float("-inf")] * (k_row - min(k)) for k_row in k]
        values = torch.cat([values, torch.tensor(padding, dtype=values.dtype, device=values.device)], dim=1)
    return values.kthvalue(values.shape[1] - k_max + 1, dim=1).values


def ohem_keep_mask(
    scores: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor | None, ratio: float
) -> torch.Tensor:
    """Online hard example mining per class.

    ``scores`` and ``targets`` are ``(K, M)`` (probability and 0/1 target of each scored
    class at each position), ``valid`` is ``(M,)`` or None (every position valid). For each
    class keeps all valid positives and exactly k = min(floor(ratio * #positives),
    #negatives) valid negatives with the highest score, ties broken by position (the first
    k of a stable descending sort): every negative above the k-th largest negative score t,
    then the first ones equal to t until k are kept (all of them, without the position
    ``cumsum``, when exactly k remain).
    Returns a bool ``(K, M)`` mask (no gradient flows through the selection).
    """
    positives = targets > 0.5
    negatives = ~positives
    if valid is not None:
        positives, negatives = positives & valid, negatives & valid
    positive_counts = positives.sum(1).tolist()
    if valid is None:
        negative_counts = [scores.shape[1] - count for count in positive_counts]
    else:
        negative_counts = negatives.sum(1).tolist()
    counts = zip(positive_counts, negative_counts)
    keep_counts = [min(math.floor(positive * ratio), negative) for positive, negative in counts]
    if scores.shape[1] == 0 or max(keep_counts) == 0:
        return positives
    hardness = scores.detach().masked_fill(positives if valid is None else ~negatives, float("-inf"))
    threshold = kth_largest_per_row(hardness, [max(count, 1) for count in keep_counts])
    if min(keep_counts) == 0:
        nothing_kept = torch.tensor([count == 0 for count in keep_counts], device=scores.device)
        threshold = threshold.masked_fill(nothing_kept, float("inf"))
    threshold = threshold.unsqueeze(-1)
    above = hardness > threshold
    at_threshold = hardness == threshold
    kept = above | at_threshold
    keep_count = torch.tensor(keep_counts, device=scores.device)
    if torch.equal(kept.sum(1), keep_count):
        return positives | kept
    tied_needed = (keep_count - above.sum(1)).unsqueeze(-1)
    return positives | above | (at_threshold & (at_threshold.cumsum(1) <= tied_needed))


class DiceFamilyLoss(ImbalanceLoss):
    """Shared reduction logic; subclasses give the numerator and denominator terms."""

    def __init__(
        self,
        gamma: float,
        set_level: bool | str,
        class_reduction: str,
        ohem_ratio: float,
        reduction: str,
    ) -> None:
        super().__init__(reduction)
        self.gamma = check_range("gamma", gamma, 0.0)
        check_choice("set_level", set_level, SET_LEVEL_CHOICES)
        check_choice("class_reduction", class_reduction, CLASS_REDUCTIONS)
        self.set_level = set_level
        self.class_reduction = class_reduction
        self.ohem_ratio = check_range("ohem_ratio", ohem_ratio, 0.0)
        if reduction == "none" and self.is_batch_level:
            raise ValueError(
                "reduction='none' is not meaningful for a set-level or OHEM dice loss "
                "(one value per batch); use 'mean' or 'sum'"
            )

    @property
    def is_batch_level(self) -> bool:
        return self.set_level is not False or self.ohem_ratio > 0

    def scores(self, class_logits: torch.Tensor, classes: slice) -> torch.Tensor:
        """The member's score s ``(K, M)`` of the scored classes, from the class-major
        logits ``(C, M)``."""
        raise NotImplementedError

    def mass(self, scores: torch.Tensor) -> torch.Tensor:
        """The score mass entering the denominator: s (default) or s^2."""
        return scores

    def ratio_terms(
        self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Numerator A and denominator B from the overlap s y, the mass and the 0/1 targets
        y; linear, so it applies to per-position ``(K, M)`` values and to their ``(K,)`` sums."""
        raise NotImplementedError

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        flat = flatten_inputs(logits, labels)
        num_classes = flat.logits.shape[-1]
        classes = scored_classes(num_classes)
        targets = scored_targets(flat.labels, num_classes, flat.logits.dtype)
        class_logits = flat.logits.t().contiguous()
        scores = self.scores(class_logits, classes)
        overlap, mass = scores * targets, self.mass(scores)
        keep = flat.valid.unsqueeze(0).expand_as(overlap) if flat.has_ignored else None
        if self.ohem_ratio > 0:
            probabilities = torch.softmax(class_logits.detach(), dim=0)[classes]
            valid = flat.valid if flat.has_ignored else None
            keep = ohem_keep_mask(probabilities, targets, valid, self.ohem_ratio)
        set_level = self.set_level is True or (self.set_level == "auto" and num_classes == 2)
        if set_level:
            per_class = self.set_level_loss(overlap, mass, targets, keep)
        else:
            numerator, denominator = self.ratio_terms(overlap, mass, targets)
            per_class = self.per_sample_loss(numerator, denominator, keep, flat)
            if per_class.dim() == 2:  # reduction="none": (K, M) per-position values
                return self.reduce_classes(per_class).reshape(flat.label_shape)
        return self.reduce_classes(per_class)

    def set_level_loss(
        self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor | None
    ) -> torch.Tensor:
        """Eq. 8: 1 - (sum_i A_ic + gamma) / (sum_i B_ic + gamma) per class, shape ``(K,)``,
        with sum_i A_ic and sum_i B_ic formed from the sums of overlap, mass and targets.

        ``keep`` (K, M) marks the positions that count; None means all of them.
        """
        if keep is not None:
            overlap, mass, targets = (torch.where(keep, values, 0.0) for values in (overlap, mass, targets))
        numerator, denominator = self.ratio_terms(overlap.sum(1), mass.sum(1), targets.sum(1))
        return 1.0 - (numerator + self.gamma) / (denominator + self.gamma)

    def per_sample_loss(
        self, numerator: torch.Tensor, denominator: torch.Tensor, keep: torch.Tensor | None, flat: FlatInputs
    ) -> torch.Tensor:
        """Per position 1 - (A_ic + gamma) / (B_ic + gamma), reduced over kept positions per class."""
        ratio = 1.0 - (numerator + self.gamma) / (denominator + self.gamma)
        if keep is not None:
            ratio = torch.where(keep, ratio, 0.0)
        if self.reduction == "none":
            return ratio
        total = ratio.sum(1)
        if self.reduction == "sum":
            return total
        if keep is None:
            return total / max(ratio.shape[1], 1)
        return safe_divide(total, keep.sum(1).to(ratio.dtype))

    def reduce_classes(self, per_class: torch.Tensor) -> torch.Tensor:
        """Mean or sum over the class axis (dim 0) of ``(K,)`` or ``(K, M)`` values."""
        return per_class.mean(0) if self.class_reduction == "mean" else per_class.sum(0)

    def extra_repr(self) -> str:
        return (
            f"gamma={self.gamma}, set_level={self.set_level}, class_reduction={self.class_reduction!r}, "
            f"ohem_ratio={self.ohem_ratio}, {super().extra_repr()}"
        )


def dice_terms(overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A = 2 s y and B = s^2 + y^2 (mass s^2, ``square``) or s + y (mass s); y^2 = y for 0/1 y."""
    return 2.0 * overlap, mass + targets


class DiceRatioLoss(DiceFamilyLoss):
    """Members with the dice ratio A = 2 s y, B = s^2 + y^2 (``square``) or s + y."""

    square: bool

    def mass(self, scores: torch.Tensor) -> torch.Tensor:
        return scores * scores if self.square else scores

    def ratio_terms(
        self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return dice_terms(overlap, mass, targets)


class DiceLoss(DiceRatioLoss):
    """Dice loss. Per sample (Dice paper eq. 7, ``square=True``):
    DL_i = 1 - (2 p_i1 y_i1 + gamma) / (p_i1^2 + y_i1^2 + gamma);
    ``square=False`` uses p + y in the denominator; ``set_level=True`` is eq. 8:
    DL = 1 - (2 sum_i p_i1 y_i1 + gamma) / (sum_i p_i1^2 + sum_i y_i1^2 + gamma).
    ``gamma`` >= 0 is the smoothing term.
    """

    def __init__(
        self,
        gamma: float = 1.0,
        square: bool = True,
        set_level: bool = False,
        class_reduction: str = "mean",
        ohem_ratio: float = 0.0,
        reduction: str = "mean",
    ) -> None:
        check_choice("square", square, (True, False))
        check_choice("set_level", set_level, (True, False))
        super().__init__(gamma, set_level, class_reduction, ohem_ratio, reduction)
        self.square = square

    def scores(self, class_logits: torch.Tensor, classes: slice) -> torch.Tensor:
        return torch.softmax(class_logits, dim=0)[classes]


class TverskyLoss(DiceFamilyLoss):
    """Tversky loss (Dice paper eq. 10): TL_i = 1 - TI_i,
    TI_i = (p_i1 y_i1 + gamma) / (p_i1 y_i1 + alpha p_i1 y_i0 + beta p_i0 y_i1 + gamma),
    where p_i1 y_i0 is the false-positive mass (weighted by ``alpha``) and p_i0 y_i1 the
    false-negative mass (weighted by ``beta``). alpha = beta = 0.5 is the non-squared dice
    loss with smoothing 2 gamma.
    """

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
        check_choice("set_level", set_level, (True, False))
        super().__init__(gamma, set_level, class_reduction, ohem_ratio, reduction)
        self.alpha = check_range("alpha", alpha, 0.0)
        self.beta = check_range("beta", beta, 0.0)

    def scores(self, class_logits: torch.Tensor, classes: slice) -> torch.Tensor:
        return torch.softmax(class_logits, dim=0)[classes]

    def ratio_terms(
        self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # With 0/1 targets the false-positive mass p (1 - y) = p - p y and the false-negative
        # mass (1 - p) y = y - p y, so B = (1 - alpha - beta) p y + alpha p + beta y.
        denominator = (1.0 - self.alpha - self.beta) * overlap + self.alpha * mass + self.beta * targets
        return overlap, denominator


DSC_DEFAULTS = {"alpha": 1.0, "gamma": 1.0, "square": False, "set_level": False, "class_reduction": "mean"}
DSC_PRESETS: dict[str, dict[str, object]] = {
    # Dice paper eq. 12 per sample: factor (1 - p) p, gamma = 1.
    "paper": dict(DSC_DEFAULTS),
    # ShannonAI/dice_loss_for_NLP scripts: alpha 0.01, smooth 1, squared denominator,
    # one set-level dice for binary tasks, per-sample per-class losses summed for C > 2.
    "reference": {"alpha": 0.01, "gamma": 1.0, "square": True, "set_level": "auto", "class_reduction": "sum"},
}


class SelfAdjustingDiceLoss(DiceRatioLoss):
    """Self-adjusting dice loss (Dice paper eq. 12, generalised as in the authors' code):
    DSC_i = 1 - (2 f_i1 y_i1 + gamma) / (f_i1 + y_i1 + gamma),  f = (1 - p)^alpha p,
    with ``square=True`` using f^2 + y^2 in the denominator and ``set_level`` summing first.

    f is computed in log space, f = exp(alpha log(1 - p) + log p) with log(1 - p) from a
    logsumexp over the other logits, so value and gradient stay finite when p rounds to 1
    (the released code returns NaN there: d/dp (1 - p)^alpha is infinite at p = 1).

    ``preset``: None (eq. 12 defaults: alpha 1, gamma 1, non-squared, per sample),
    ``"paper"`` (the same, explicitly) or ``"reference"`` (alpha 0.01, gamma 1, squared,
    set level for binary, per-class losses summed for C > 2; ``set_level="auto"``).
    Explicit arguments override the preset's values. ``ohem_ratio`` as in the module doc
    (the released code keeps two fewer negatives than asked and crashes for C > 2).
    """

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
        check_choice("preset", preset, (None, *DSC_PRESETS))
        chosen = dict(DSC_DEFAULTS if preset is None else DSC_PRESETS[preset])
        given = {"alpha": alpha, "gamma": gamma, "square": square, "set_level": set_level, "class_reduction": class_reduction}
        chosen.update({key: value for key, value in given.items() if value is not None})
        check_choice("square", chosen["square"], (True, False))
        super().__init__(chosen["gamma"], chosen["set_level"], chosen["class_reduction"], ohem_ratio, reduction)
        self.square = chosen["square"]
        self.alpha = check_range("alpha", chosen["alpha"], 0.0)
        self.preset = preset

    def scores(self, class_logits: torch.Tensor, classes: slice) -> torch.Tensor:
        log_probs = torch.log_softmax(class_logits, dim=0)
        # log_softmax of log-probabilities is themselves, so they serve as the logits too.
        log_one_minus_p = log_one_minus_softmax_all(log_probs, log_probs, dim=0)[classes]
        return torch.exp(self.alpha * log_one_minus_p + log_probs[classes])
