"""Shared parts of the losses: argument checks, input checks, the forward template and the reductions.

Every loss takes logits (N, C) or (N, T, C) and integer labels (N,) or (N, T); positions labelled
IGNORE_INDEX (-100) carry no loss and no gradient. fp16 / bf16 logits are computed in float32 (every
sum accumulates in float32) with autocast off, and the loss is returned in the logits' dtype.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from workbench.checks import IGNORE_INDEX, Bounds, check_choice  # defined once, below the losses and the masking

REDUCTIONS = ("mean", "sum", "none")
# Bound of the otherwise unbounded parameters: their products with loss terms stay finite in float32.
LARGEST = 1e12
NON_NEGATIVE = Bounds(ge=0, le=LARGEST)
"""A weight or exponent with no bound of its own: [0, 1e12]."""


class DeclaredParameters:
    """What a loss class declares about its parameters, read by its constructor, by
    :func:`workbench.losses.check_loss_params` (a check without building the loss) and by the widgets' sliders
    (:func:`workbench.losses.parameter_range`): ``ranges`` maps a number's name to its :class:`~workbench.checks.Bounds`
    (the module-level ``EPSILON``, ``FOCAL_GAMMA``, ...), ``choices`` a name to the values it may take."""

    ranges: ClassVar[Mapping[str, Bounds]] = {}
    choices: ClassVar[Mapping[str, tuple[Any, ...]]] = {}


def check_label_counts(label_counts: Sequence[float] | torch.Tensor) -> torch.Tensor:
    """``label_counts`` as a float64 CPU vector of K >= 2 counts in [1e-12, 1e12]; ValueError naming it otherwise."""
    return check_class_vector("label_counts", label_counts, low=1 / LARGEST)


def check_class_vector(name: str, values: Sequence[float] | torch.Tensor, low: float = 0.0) -> torch.Tensor:
    """Per-class values as a 1-d float64 CPU tensor; ValueError unless flat, of length >= 2, in [low, LARGEST]."""
    try:
        vector = torch.as_tensor(values, dtype=torch.float64, device="cpu").clone()
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name}: must be a sequence of numbers, one per class, got {values!r}") from None
    if vector.dim() != 1 or vector.numel() < 2:
        raise ValueError(
            f"{name}: must be a flat sequence of numbers, one per class (2 or more), got shape {tuple(vector.shape)}"
        )
    if not ((vector >= low) & (vector <= LARGEST)).all():  # NaN fails both
        raise ValueError(f"{name}: must hold numbers in [{low:g}, {LARGEST:g}], got {vector.tolist()}")
    return vector


def per_class(name: str, values: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    """``values`` on the logits' device and dtype; ValueError unless there is one per class of the logits."""
    if values.numel() != logits.shape[-1]:
        raise ValueError(
            f"{name}: must have C={logits.shape[-1]} entries (one per class of the logits), got {values.numel()}"
        )
    return values.to(logits)


def flatten(
    logits: torch.Tensor, labels: torch.Tensor, num_classes: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Check shapes, dtypes and label values; return (M, C) logits and (M,) int64 targets (-100 kept). Labels lie in
    [0, ``num_classes``), by default C, the logits' last axis (an ordinal head has fewer outputs than classes)."""
    for name, value in (("logits", logits), ("labels", labels)):
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{name}: must be a torch.Tensor, got {type(value).__name__}")
    if logits.dim() not in (2, 3):
        raise ValueError(f"logits: must have shape (N, C) or (N, T, C), got {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise ValueError(f"logits: must be a floating-point tensor, got {logits.dtype}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"labels: must be an integer tensor, got {labels.dtype}")
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels: must have the logits' shape without the class axis {tuple(logits.shape[:-1])}, "
            f"got {tuple(labels.shape)}"
        )
    if num_classes is None and logits.shape[-1] < 2:
        raise ValueError(f"logits: must have C >= 2 classes (binary tasks use 2 logits), got C={logits.shape[-1]}")
    num_classes = logits.shape[-1] if num_classes is None else num_classes
    targets = labels.reshape(-1).long()
    bad = (targets != IGNORE_INDEX) & ((targets < 0) | (targets >= num_classes))
    if bad.any():  # one read of the labels on the host
        raise ValueError(
            f"labels: must lie in [0, {num_classes}) or equal {IGNORE_INDEX} (ignored), "
            f"got {targets[bad].unique().tolist()}"
        )
    return logits.reshape(-1, logits.shape[-1]), targets


class ImbalanceLoss(DeclaredParameters, nn.Module):
    """Base class: ``reduction``, ``is_batch_level``, the forward template and what a classifier trained with the
    loss predicts (``num_outputs``, ``probabilities``, ``predict``: softmax and argmax over one logit per class,
    except for an ordinal loss such as CORN).

    ``forward(logits, labels)`` checks and flattens the inputs, calls ``compute(logits (M, C), targets (M,))``
    in float32 or float64 with autocast off, and returns the loss in the logits' dtype (the labels' shape
    for ``reduction="none"``). ``is_batch_level`` is True when the value depends on the batch as a whole
    (set-level dice, OHEM, batch counts, a weight-normalised mean): gradient accumulation then cannot
    add up per-micro-batch sums.

    Args:
        reduction: "mean" (over the valid positions), "sum" or "none" (0 at ignored positions).
    """

    choices: ClassVar[Mapping[str, tuple[Any, ...]]] = {"reduction": REDUCTIONS}

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        self.reduction = check_choice("reduction", reduction, self.choices["reduction"])

    @property
    def is_batch_level(self) -> bool:
        return False

    def num_outputs(self, num_classes: int) -> int:
        """The classifier outputs this loss reads for ``num_classes`` classes: one logit per class."""
        return num_classes

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Class probabilities (N, K) of the logits: the softmax."""
        return torch.softmax(logits, dim=-1)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        """Predicted class ids (N,): the argmax of the logits."""
        return logits.argmax(-1)

    @property
    def rows_are_independent(self) -> bool:
        """True when each row's loss (``reduction="none"``) depends on that row alone, not on the rest of the batch."""
        return not self.is_batch_level

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        rows, targets = flatten(logits, labels)
        with torch.autocast(rows.device.type, enabled=False):
            loss = self.compute(rows if rows.dtype == torch.float64 else rows.float(), targets)
        if self.reduction == "none":
            loss = loss.reshape(labels.shape)
        return loss.to(logits.dtype)

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def reduce(
        self, terms: torch.Tensor, targets: torch.Tensor, denominator: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Per-row ``terms`` (0 at ignored rows) as they are ("none"), summed, or summed and divided by
        ``denominator`` (default: the number of valid rows); 0 when that is 0 (an all-ignored batch)."""
        if self.reduction == "none":
            return terms
        total = terms.sum()
        if self.reduction == "sum":
            return total
        if denominator is None:
            denominator = (targets != IGNORE_INDEX).sum()
        return total / torch.where(denominator > 0, denominator, 1)

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, is_batch_level={self.is_batch_level}"


def num_outputs(loss: nn.Module, num_classes: int) -> int:
    """The outputs a classifier trained with ``loss`` needs for ``num_classes`` classes (K, or K - 1 for CORN)."""
    return loss.num_outputs(num_classes) if isinstance(loss, ImbalanceLoss) else num_classes


def class_probabilities(loss: nn.Module, logits: torch.Tensor) -> torch.Tensor:
    """Class probabilities (N, K) of a classifier's outputs under ``loss`` (the softmax, or CORN's)."""
    return loss.probabilities(logits) if isinstance(loss, ImbalanceLoss) else torch.softmax(logits, dim=-1)


def predicted_labels(loss: nn.Module, logits: torch.Tensor) -> torch.Tensor:
    """Predicted class ids (N,) of a classifier's outputs under ``loss`` (the argmax, or CORN's rank rule)."""
    return loss.predict(logits) if isinstance(loss, ImbalanceLoss) else logits.argmax(-1)
