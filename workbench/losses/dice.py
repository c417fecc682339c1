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
level therefore forms three ``(K,)`` sums over positions (the overlap and y need no mask:
y is 0 at -100 positions) and combines them, instead of forming A and B at every position.

Optional OHEM (``ohem_ratio`` r > 0) keeps, per scored class, every positive and the
floor(r * #positives) negatives with the highest p_ic (the hardest); the rest are left out.

Everything is class-major, ``(K, M)`` for K scored classes and M positions (``class_major``
in ``_base``: a contiguous copy on CPU, a transposed view elsewhere): per-class sums run
over the long axis.
"""

from __future__ import annotations

import math

import torch

from workbench.losses._base import (
    FlatInputs,
    ImbalanceLoss,
    check_choice,
    check_range,
    class_indices,
    class_major,
    log_one_minus_softmax_all,
    runs_on_host,
)

CLASS_REDUCTIONS = ("mean", "sum")
SET_LEVEL_CHOICES = (False, True, "auto")


def scored(values: torch.Tensor) -> torch.Tensor:
    """The scored classes of class-major ``(C, M)`` values: class 1 only for binary tasks,
    every class otherwise (returned as is: a full slice would still cost an autograd node,
    and a zero-fill and a copy in its backward)."""
    return values[1:2] if values.shape[0] == 2 else values


def scored_targets(targets: torch.Tensor, num_classes: int, dtype: torch.dtype) -> torch.Tensor:
    """0/1 targets ``(K, M)`` of the scored classes (0 at -100 positions): ``targets == 1``
    for binary tasks (class 1 only), one-hot ``c == targets`` for multi-class ones."""
    if num_classes == 2:
        return targets.eq(1).unsqueeze(0).to(dtype)
    return (class_indices(num_classes, targets.device) == targets).to(dtype)


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


def ohem_keep_mask(scores: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor | None, ratio: float) -> torch.Tensor:
    """Online hard example mining per class.

    ``scores`` and ``targets`` are ``(K, M)`` (probability and 0/1 target of each scored
    class at each position), ``valid`` is ``(M,)`` or None (every position valid). For each
    class keeps all valid positives and exactly k = min(floor(ratio * #positives),
    #negatives) valid negatives with the highest score, ties broken by position: the first
    k of a stable descending sort. Returns a bool ``(K, M)`` mask (no gradient flows
    through the selection).

    Two implementations of that one selection, by device (both tested against a
    stable-sort oracle): on CPU the counts are read on the host and one ``kthvalue`` finds
    the k-th largest negative score t (every negative above t is kept, then the first ones
    equal to t until k; a stable sort costs 4x more on CPU); elsewhere the counts stay on
    the device and each negative's rank in a stable descending ``argsort`` is compared
    with k (no host synchronisation).
    """
    positives = targets > 0.5
    negatives = ~positives
    if valid is not None:
        positives, negatives = positives & valid, negatives & valid
    hardness = scores.detach().masked_fill(~negatives, float("-inf"))
    if not runs_on_host(scores):
        keep_counts = torch.minimum(positives.sum(1).to(torch.float64).mul_(ratio).floor_(), negatives.sum(1).to(torch.float64))
        order = hardness.argsort(dim=1, descending=True, stable=True)
        positions = torch.arange(scores.shape[1], device=scores.device).expand_as(order)
        rank = torch.empty_like(order).scatter_(1, order, positions)
        return positives | (rank < keep_counts.unsqueeze(1))
    positive_counts = positives.sum(1).tolist()
    negative_counts = negatives.sum(1).tolist()
    counts = zip(positive_counts, negative_counts)
    keep_counts = [min(math.floor(positive * ratio), negative) for positive, negative in counts]
    if scores.shape[1] == 0 or max(keep_counts) == 0:
        return positives
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


def masked_sum(values: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    """Per-class sums over positions (dim 1) of ``values (K, M)`` where ``keep`` holds: None
    (everywhere), ``(M,)`` (one matrix-vector product with the 0/1 mask, a single kernel
    forward and backward) or ``(K, M)`` (OHEM)."""
    if keep is None:
        return values.sum(1)
    if keep.dim() == 1:
        return torch.mv(values, keep.to(values.dtype))
    return torch.where(keep, values, 0.0).sum(1)


class DiceFamilyLoss(ImbalanceLoss):
    """Shared reduction logic; subclasses give the score and the numerator and denominator terms."""

    def __init__(
        self,
        gamma: float,
        set_level: bool | str,
        class_reduction: str,
        ohem_ratio: float,
        reduction: str,
        validate: bool,
    ) -> None:
        super().__init__(reduction, validate)
        self.gamma = check_range("gamma", gamma, 0.0)
        check_choice("set_level", set_level, SET_LEVEL_CHOICES)
        check_choice("class_reduction", class_reduction, CLASS_REDUCTIONS)
        self.set_level = set_level
        self.class_reduction = class_reduction
        self.ohem_ratio = check_range("ohem_ratio", ohem_ratio, 0.0)
        if reduction == "none" and self.is_batch_level:
            raise ValueError(
                "reduction: must be 'mean' or 'sum' for a set-level or OHEM dice loss (one value per batch), got 'none'"
            )

    @property
    def is_batch_level(self) -> bool:
        return self.set_level is not False or self.ohem_ratio > 0

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        """The member's score s ``(K, M)`` of the scored classes, from the ``(M, C)`` logits."""
        raise NotImplementedError

    def mass(self, scores: torch.Tensor) -> torch.Tensor:
        """The score mass entering the denominator: s (default) or s^2."""
        return scores

    def ratio_terms(self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """B - A and B, for the numerator A and denominator B, from the overlap s y, the mass
        and the 0/1 targets y; linear, so it applies to per-position ``(K, M)`` values and to
        their ``(K,)`` sums. The member's loss 1 - (A + gamma) / (B + gamma) is formed as
        (B - A) / (B + gamma), in fewer kernels than A, the ratio and 1 - ratio."""
        raise NotImplementedError

    def compute(self, flat: FlatInputs) -> torch.Tensor:
        num_classes = flat.num_classes
        targets = scored_targets(flat.targets, num_classes, flat.logits.dtype)
        scores = self.scores(flat.logits)
        keep = flat.valid if flat.maybe_ignored else None
        if self.ohem_ratio > 0:
            probabilities = scored(class_major(torch.softmax, flat.logits.detach()))
            keep = ohem_keep_mask(probabilities, targets, keep, self.ohem_ratio)
        if self.set_level is True or (self.set_level == "auto" and num_classes == 2):
            return self.reduce_classes(self.set_level_loss(scores, targets, keep))
        per_class = self.per_sample_loss(scores, targets, keep)
        if per_class.dim() == 2:  # reduction="none": (K, M) per-position values
            return self.reduce_classes(per_class).reshape(flat.label_shape)
        return self.reduce_classes(per_class)

    def set_level_loss(self, scores: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        """Eq. 8: 1 - (sum_i A_ic + gamma) / (sum_i B_ic + gamma) per class, shape ``(K,)``,
        with sum_i A_ic and sum_i B_ic formed from the sums of overlap, mass and targets
        (``ratio_terms``).

        ``keep`` ((M,) or (K, M)) marks the positions that count; None means all of them. It
        holds at every valid positive (OHEM keeps them all), where alone overlap and
        targets are non-zero, so only the mass needs it.
        """
        overlap, mass, target_sum = (scores * targets).sum(1), masked_sum(self.mass(scores), keep), targets.sum(1)
        gap, denominator = self.ratio_terms(overlap, mass, target_sum)
        return gap / (denominator + self.gamma)

    def per_sample_loss(self, scores: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
        """Per position 1 - (A_ic + gamma) / (B_ic + gamma) = (B - A) / (B + gamma), reduced over
        the kept positions per class: ``(K,)``, or ``(K, M)`` (0 where not kept) for "none"."""
        gap, denominator = self.ratio_terms(scores * targets, self.mass(scores), targets)
        ratio = gap / (denominator + self.gamma)
        if self.reduction == "none":
            return ratio if keep is None else torch.where(keep, ratio, 0.0)
        total = masked_sum(ratio, keep)
        if self.reduction == "sum":
            return total
        if keep is None:
            return total / max(ratio.shape[1], 1)
        kept = keep.sum(-1)  # (K,) under OHEM, else the 0-d count of valid positions
        return total / kept.clamp_min(1)

    def reduce_classes(self, per_class: torch.Tensor) -> torch.Tensor:
        """Mean or sum over the class axis (dim 0) of ``(K,)`` or ``(K, M)`` values."""
        return per_class.mean(0) if self.class_reduction == "mean" else per_class.sum(0)

    def extra_repr(self) -> str:
        return (
            f"gamma={self.gamma}, set_level={self.set_level}, class_reduction={self.class_reduction!r}, "
            f"ohem_ratio={self.ohem_ratio}, {super().extra_repr()}"
        )


def dice_terms(overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """B - A and B for A = 2 s y and B = s^2 + y^2 (mass s^2, ``square``) or s + y (mass s);
    y^2 = y for 0/1 y."""
    denominator = mass + targets
    return torch.add(denominator, overlap, alpha=-2.0), denominator


class DiceRatioLoss(DiceFamilyLoss):
    """Members with the dice ratio A = 2 s y, B = s^2 + y^2 (``square``) or s + y."""

    square: bool

    def mass(self, scores: torch.Tensor) -> torch.Tensor:
        return scores * scores if self.square else scores

    def ratio_terms(self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return dice_terms(overlap, mass, targets)


def probability_scores(logits: torch.Tensor) -> torch.Tensor:
    """p ``(K, M)`` of the scored classes, class-major."""
    return scored(class_major(torch.softmax, logits))


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
        validate: bool = False,
    ) -> None:
        check_choice("square", square, (True, False))
        check_choice("set_level", set_level, (True, False))
        super().__init__(gamma, set_level, class_reduction, ohem_ratio, reduction, validate)
        self.square = square

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        return probability_scores(logits)


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
        validate: bool = False,
    ) -> None:
        check_choice("set_level", set_level, (True, False))
        super().__init__(gamma, set_level, class_reduction, ohem_ratio, reduction, validate)
        self.alpha = check_range("alpha", alpha, 0.0)
        self.beta = check_range("beta", beta, 0.0)

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        return probability_scores(logits)

    def ratio_terms(self, overlap: torch.Tensor, mass: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # A = p y. With 0/1 targets the false-positive mass p (1 - y) = p - p y and the false-
        # negative mass (1 - p) y = y - p y, so B - A = alpha p + beta y - (alpha + beta) p y.
        gap = torch.add(self.alpha * mass + self.beta * targets, overlap, alpha=-(self.alpha + self.beta))
        return gap, gap + overlap


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

    f is computed in log space, f = exp(alpha log(1 - p) + log p), with log(1 - p_1) = log p_0
    for binary tasks and ``log_one_minus_softmax_all`` (a logsumexp over the other classes
    for the argmax) otherwise, so value and gradient stay finite when p rounds to 1 (the
    released code returns NaN there: d/dp (1 - p)^alpha is infinite at p = 1).

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
        validate: bool = False,
    ) -> None:
        check_choice("preset", preset, (None, *DSC_PRESETS))
        chosen = dict(DSC_DEFAULTS if preset is None else DSC_PRESETS[preset])
        given = {"alpha": alpha, "gamma": gamma, "square": square, "set_level": set_level, "class_reduction": class_reduction}
        chosen.update({key: value for key, value in given.items() if value is not None})
        check_choice("square", chosen["square"], (True, False))
        super().__init__(chosen["gamma"], chosen["set_level"], chosen["class_reduction"], ohem_ratio, reduction, validate)
        self.square = chosen["square"]
        self.alpha = check_range("alpha", chosen["alpha"], 0.0)
        self.preset = preset

    def scores(self, logits: torch.Tensor) -> torch.Tensor:
        log_probs = class_major(torch.log_softmax, logits)
        if logits.shape[-1] == 2:  # class 1 only, and 1 - p_1 = p_0 exactly
            return torch.exp(torch.add(log_probs[1:2], log_probs[0:1], alpha=self.alpha))
        # log_softmax of log-probabilities is themselves, so they serve as the logits too
        log_one_minus_p = log_one_minus_softmax_all(log_probs, log_probs, dim=0)
        return torch.exp(torch.add(log_probs, log_one_minus_p, alpha=self.alpha))
