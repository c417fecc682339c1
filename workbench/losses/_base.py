"""Shared machinery for the loss modules: argument checks, input flattening, reductions.

Every loss takes ``logits`` of shape ``(N, C)`` or ``(N, T, C)`` and integer ``labels``
of shape ``(N,)`` or ``(N, T)``; positions labelled ``IGNORE_INDEX`` (-100) carry no
loss and no gradient. Inputs are flattened to ``(M, C)`` rows; ignored rows are kept
(so no data-dependent indexing is needed) but their label is replaced by 0 and their
loss masked out with ``torch.where``, which sends them exactly zero gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import nn

IGNORE_INDEX = -100
REDUCTIONS = ("mean", "sum", "none")


def check_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise ValueError unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def check_range(
    name: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``float(value)``; raise ValueError naming ``name`` if it lies outside the range."""
    value = float(value)
    too_low = low is not None and (value < low if low_inclusive else value <= low)
    too_high = high is not None and (value > high if high_inclusive else value >= high)
    if too_low or too_high or value != value:
        left = "[" if low_inclusive else "("
        right = "]" if high_inclusive else ")"
        interval = f"{left}{'-inf' if low is None else low}, {'inf' if high is None else high}{right}"
        raise ValueError(f"{name} must lie in {interval}, got {value}")
    return value


def check_class_vector(name: str, values: Sequence[float] | torch.Tensor, *, positive: bool) -> torch.Tensor:
    """Return a 1-d float64 tensor of per-class values; raise if any is negative (or non-positive)."""
    vector = torch.as_tensor(values, dtype=torch.float64).flatten().clone()
    if vector.numel() < 2:
        raise ValueError(f"{name} needs one value per class (at least 2), got {vector.numel()}")
    bad = (vector <= 0) if positive else (vector < 0)
    if bad.any() or not torch.isfinite(vector).all():
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{name} values must be finite and {kind}, got {vector.tolist()}")
    return vector


def check_num_classes(name: str, vector: torch.Tensor | None, num_classes: int) -> None:
    """Raise ValueError unless a per-class ``vector`` (if given) has ``num_classes`` entries."""
    if vector is not None and vector.numel() != num_classes:
        raise ValueError(
            f"{name} has {vector.numel()} entries but the logits have C={num_classes} classes"
        )


class FlatInputs(NamedTuple):
    """Inputs flattened to rows: ``logits (M, C)``, ``labels (M,)`` with ignored rows set to 0,
    ``valid (M,)`` bool, the original label shape (for ``reduction="none"``), ``targets
    (M,)`` the labels with -100 kept (for torch's ``ignore_index``) and ``has_ignored``
    (some position is -100, or M = 0: masks are needed)."""

    logits: torch.Tensor
    labels: torch.Tensor
    valid: torch.Tensor
    label_shape: torch.Size
    targets: torch.Tensor
    has_ignored: bool


def flatten_inputs(logits: torch.Tensor, labels: torch.Tensor) -> FlatInputs:
    """Validate shapes, dtypes and label values, then flatten to rows.

    One ``aminmax`` over the labels decides the common case (every label in [0, C): no
    masking needed); only when a label is negative are the -100 positions located and the
    remaining labels checked again.
    """
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise ValueError("logits and labels must be torch.Tensor")
    if logits.dim() not in (2, 3):
        raise ValueError(f"logits must have shape (N, C) or (N, T, C), got {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be a floating-point tensor, got {logits.dtype}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"labels must be an integer tensor, got {labels.dtype}")
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels shape {tuple(labels.shape)} must equal logits shape without the class axis "
            f"{tuple(logits.shape[:-1])}"
        )
    num_classes = logits.shape[-1]
    if num_classes < 2:
        raise ValueError(f"logits need C >= 2 classes (binary tasks use 2 logits), got C={num_classes}")
    targets = labels.reshape(-1).long()
    flat_logits = logits.reshape(-1, num_classes)
    if targets.numel() > 0:
        low, high = torch.aminmax(targets)
        low, high = low.item(), high.item()
        if low >= 0 and high < num_classes:
            all_valid = torch.ones_like(targets, dtype=torch.bool)
            return FlatInputs(flat_logits, targets, all_valid, labels.shape, targets, False)
    valid = targets != IGNORE_INDEX
    safe_labels = torch.where(valid, targets, 0)
    if targets.numel() > 0:
        low, high = (bound.item() for bound in torch.aminmax(safe_labels))
        if low < 0 or high >= num_classes:
            bad = targets[valid & ((targets < 0) | (targets >= num_classes))].unique().tolist()
            raise ValueError(
                f"labels must lie in [0, {num_classes}) or equal {IGNORE_INDEX} (ignored), got {bad}"
            )
    return FlatInputs(flat_logits, safe_labels, valid, labels.shape, targets, True)


def mask_ignored(terms: torch.Tensor, flat: FlatInputs) -> torch.Tensor:
    """``terms`` with rows at ignored positions set to exactly 0 (and sent no gradient).

    ``terms`` is ``(M,)`` or ``(M, K)``; returned unchanged when nothing is ignored.
    """
    if not flat.has_ignored:
        return terms
    valid = flat.valid if terms.dim() == 1 else flat.valid.unsqueeze(-1)
    return torch.where(valid, terms, 0.0)


def valid_count(flat: FlatInputs, dtype: torch.dtype) -> torch.Tensor | int:
    """Number of non-ignored positions: a Python int when nothing is ignored, else a tensor."""
    return flat.labels.numel() if not flat.has_ignored else flat.valid.sum().to(dtype)


def safe_divide(numerator: torch.Tensor, denominator: torch.Tensor | int) -> torch.Tensor:
    """``numerator / denominator``, or 0 where the denominator is 0 (an all-ignored batch)."""
    if isinstance(denominator, int):
        return numerator / max(denominator, 1)
    return numerator / torch.where(denominator > 0, denominator, 1.0)


def log_softmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the class axis of ``(M, C)`` rows, computed over dim 0 of the
    ``(C, M)`` transposed view, then made contiguous ``(M, C)`` again.

    The same value as ``torch.log_softmax(logits, -1)`` (up to rounding), but on CPU
    torch's softmax kernels are slow when the reduced axis is short and innermost and
    fast when it is not. Forward+backward of log_softmax then exp, including the copy:
    4096 x 3: 185 us as z - logsumexp(z) over the last axis, 150 us this way; 4096 x 9:
    305 us vs 263 us. The result is made contiguous because later ops over the class
    axis (argmax, gather, logsumexp) are several times slower on the transposed layout.
    """
    return torch.log_softmax(logits.t(), dim=0).t().contiguous()


def log_softmax_columns(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax of ``(M, C)`` rows, returned class-major as a contiguous ``(C, M)`` tensor.

    For losses that work per class (focal here; the dice family uses the same class-major
    layout): with the long position axis innermost, torch's CPU kernels for the class-axis
    softmax, reductions over positions and the broadcasts of autograd's backward run in
    long vectorised loops; on ``(M, C)`` with a short innermost C they loop over C-element
    rows (forward+backward of set-level Tversky at 4096 x 9 went from 0.43 ms row-major to
    0.26 ms class-major, including the copy).
    """
    return torch.log_softmax(logits.t().contiguous(), dim=0)


def log_one_minus_softmax_all(
    logits: torch.Tensor, log_probs: torch.Tensor | None = None, dim: int = -1
) -> torch.Tensor:
    """log(1 - p_c) for every class c, same shape as ``logits``, in O(M C); ``dim`` is the
    class axis (-1 for ``(M, C)`` rows, 0 for class-major ``(C, M)``).

    Every class but the row's argmax has p_c <= 1/2, where log1p(-p_c) is accurate; the
    argmax class m uses log(1 - p_m) = logsumexp_{k != m} log p_k, which stays finite
    (value and gradient) when p_m rounds to 1. The argmax entry is set to log p = -inf
    before log1p (derivative 0 there, so no NaN reaches the gradient) and then replaced.
    ``log_probs`` (= log_softmax(logits, dim)) may be passed in when already computed.
    """
    if log_probs is None:
        log_probs = torch.log_softmax(logits, dim)
    # max(...).indices, not argmax: argmax over a non-innermost axis is ~30x slower on CPU.
    top = log_probs.detach().max(dim, keepdim=True).indices
    without_top = log_probs.scatter(dim, top, float("-inf"))
    log_rest = torch.logsumexp(without_top, dim=dim, keepdim=True)
    return torch.log1p(-torch.exp(without_top)).scatter(dim, top, log_rest)


class ImbalanceLoss(nn.Module):
    """Base class: holds ``reduction`` and the ``is_batch_level`` flag.

    ``is_batch_level`` is False when the value is a mean of per-sample terms with a
    count denominator (so summing per-micro-batch sums and dividing by the total count
    reproduces the full-batch value under gradient accumulation); True when the value
    depends on the batch as a whole (set-level dice, OHEM, batch label counts, a
    weight-normalised mean).
    """

    allowed_reductions: tuple[str, ...] = REDUCTIONS

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        check_choice("reduction", reduction, self.allowed_reductions)
        self.reduction = reduction

    @property
    def is_batch_level(self) -> bool:
        return False

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, is_batch_level={self.is_batch_level}"


class PerSampleLoss(ImbalanceLoss):
    """A loss that is a reduction of one term per (non-ignored) position.

    Subclasses implement ``per_sample_loss(flat) -> (M,)`` (values at ignored rows are
    masked to 0 here); ``mean`` divides by ``mean_denominator`` (the number of valid
    positions unless overridden), ``none`` returns the terms in the labels' shape with 0
    at ignored positions.
    """

    def per_sample_loss(self, flat: FlatInputs) -> torch.Tensor:
        raise NotImplementedError

    def mean_denominator(self, flat: FlatInputs) -> torch.Tensor | int:
        return valid_count(flat, flat.logits.dtype)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        flat = flatten_inputs(logits, labels)
        self.check_inputs(flat)
        terms = mask_ignored(self.per_sample_loss(flat), flat)
        denominator = self.mean_denominator(flat) if self.reduction == "mean" else 1
        return reduce_terms(terms, flat, self.reduction, denominator)

    def check_inputs(self, flat: FlatInputs) -> None:
        """Hook for checks that need C (e.g. per-class vectors); default: none."""


def reduce_terms(
    terms: torch.Tensor, flat: FlatInputs, reduction: str, denominator: torch.Tensor | int
) -> torch.Tensor:
    """Apply ``reduction`` to masked per-position ``terms`` of shape ``(M,)``."""
    if reduction == "none":
        return terms.reshape(flat.label_shape)
    total = terms.sum()
    if reduction == "sum":
        return total
    return safe_divide(total, denominator)
