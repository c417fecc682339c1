"""Shared machinery for the loss modules: argument checks, input flattening, reductions.

Every loss takes ``logits`` of shape ``(N, C)`` or ``(N, T, C)`` and integer ``labels``
of shape ``(N,)`` or ``(N, T)``; positions labelled ``IGNORE_INDEX`` (-100) carry no
loss and no gradient. Inputs are flattened to ``(M, C)`` rows; ignored rows are kept
(no data-dependent indexing) and masked out: by ``nll_loss``'s ``ignore_index``, by a
product with the 0/1 valid mask, by ``torch.where`` or by a 0/1 target that is 0 there.

Devices. Nothing in a forward or backward synchronises the host with the device: no
``.item()``, ``.tolist()``, ``nonzero``, boolean-mask indexing or Python ``if`` on tensor
values, and no tensor built from Python numbers per call (per-class constants are
converted once per module, device and dtype, see ``ImbalanceLoss.constant``). The one
device-dependent step is the label check (``flatten_inputs``): on CPU tensors the label
values are checked eagerly (ValueError, and the masks are skipped when no label is
-100, which is known then); on other devices they are not read on the host: the losses
always mask, and ``validate=True`` adds a ``torch._assert_async`` check. The layout
helpers (``log_softmax_rows``, ``class_major``) also branch on the device, for speed
only (the values are the same). Every such branch asks ``runs_on_host``.

Half precision: fp16 / bf16 logits are computed in float32 (every reduction then
accumulates in float32) and the loss is returned in the logits' dtype; inside a
``torch.autocast`` region the loss runs with autocast disabled, so its matrix products
(label smoothing, masked sums) stay in float32 too.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

IGNORE_INDEX = -100
REDUCTIONS = ("mean", "sum", "none")
HALF_DTYPES = (torch.float16, torch.bfloat16)
NLL_REDUCTION = {"none": 0, "mean": 1, "sum": 2}  # ATen's Reduction enum
# nll_loss's ATen op, which also returns the total weight (the mean's denominator).
nll_loss_forward = torch.ops.aten.nll_loss_forward.default


def check_choice(name: str, value: object, allowed: Sequence[object]) -> None:
    """Raise ValueError("name: must be one of [...], got value") unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name}: must be one of {list(allowed)}, got {value!r}")


def _bound(value: float) -> str:
    return f"{value:g}"


def check_range(
    name: str,
    value: float,
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``float(value)``; raise ValueError("name: must lie in [low, high), got value")
    unless it is a finite number inside the interval.

    A missing bound is written -inf / inf and is open: inf, -inf and nan are always rejected.
    """
    left = "[" if low_inclusive and low is not None else "("
    right = "]" if high_inclusive and high is not None else ")"
    interval = f"{left}{'-inf' if low is None else _bound(low)}, {'inf' if high is None else _bound(high)}{right}"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a number in {interval}, got {value!r}") from None
    too_low = low is not None and (number < low if low_inclusive else number <= low)
    too_high = high is not None and (number > high if high_inclusive else number >= high)
    if too_low or too_high or not math.isfinite(number):
        raise ValueError(f"{name}: must lie in {interval}, got {number}")
    return number


def check_class_vector(name: str, values: Sequence[float] | torch.Tensor, *, positive: bool) -> torch.Tensor:
    """Return a 1-d float64 CPU tensor of per-class values; raise ValueError if any is not finite
    or is negative (non-positive when ``positive``)."""
    try:
        vector = torch.as_tensor(values, dtype=torch.float64, device="cpu").flatten().clone()
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"{name}: must be a sequence of numbers, one per class, got {values!r}") from None
    if vector.numel() < 2:
        raise ValueError(f"{name}: must have one value per class (at least 2), got {vector.numel()}")
    bad = (vector <= 0) if positive else (vector < 0)
    if bad.any() or not torch.isfinite(vector).all():
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{name}: must be finite and {kind}, got {vector.tolist()}")
    return vector


def check_num_classes(name: str, vector: torch.Tensor | None, num_classes: int) -> None:
    """Raise ValueError unless a per-class ``vector`` (if given) has ``num_classes`` entries."""
    if vector is not None and vector.numel() != num_classes:
        raise ValueError(f"{name}: must have C={num_classes} entries (one per class of the logits), got {vector.numel()}")


def runs_on_host(tensor: torch.Tensor) -> bool:
    """True for CPU tensors, where reading a value costs no device synchronisation.

    Every device-dependent branch of the losses asks this function (and only this one),
    so tests can run the accelerator path on CPU tensors by patching it.
    """
    return tensor.device.type == "cpu"


class FlatInputs:
    """Inputs flattened to rows.

    ``logits (M, C)`` (float32 for half-precision inputs), ``targets (M,)`` int64 with -100
    kept (for ``nll_loss``'s ``ignore_index``; ``targets.clamp_min(0)`` where a label must
    index), ``label_shape`` (for ``reduction="none"``) and ``maybe_ignored``: False only
    when it is known that no position is -100 (checked on the host, CPU tensors); then
    ``valid`` is never needed. ``valid`` and ``count`` (number of valid positions: an int
    when known, else a 0-d int64 tensor) are computed on first use (plain memoised
    properties: ``functools.cached_property`` takes a lock that ``torch.compile`` cannot
    trace).
    """

    def __init__(
        self,
        logits: torch.Tensor,
        targets: torch.Tensor,
        label_shape: torch.Size,
        maybe_ignored: bool,
        valid: torch.Tensor | None = None,
    ) -> None:
        self.logits = logits
        self.targets = targets
        self.label_shape = label_shape
        self.maybe_ignored = maybe_ignored
        self._valid = valid
        self._count: torch.Tensor | int | None = None

    @property
    def num_classes(self) -> int:
        return self.logits.shape[-1]

    @property
    def valid(self) -> torch.Tensor:
        if self._valid is None:
            self._valid = self.targets != IGNORE_INDEX
        return self._valid

    @property
    def count(self) -> torch.Tensor | int:
        if self._count is None:
            self._count = self.valid.sum() if self.maybe_ignored else self.targets.numel()
        return self._count


def check_labels_on_host(targets: torch.Tensor, num_classes: int) -> tuple[bool, torch.Tensor | None]:
    """Eager label check of a CPU tensor: (maybe_ignored, valid mask or None).

    One ``aminmax`` decides the common case (every label in [0, C): no masks needed); when
    a label is negative, the -100 positions are located and the others checked again.
    """
    if targets.numel() == 0:
        return True, None
    low, high = (bound.item() for bound in torch.aminmax(targets))
    if low >= 0 and high < num_classes:
        return False, None
    valid = targets != IGNORE_INDEX
    if low == IGNORE_INDEX and high < num_classes and torch.where(valid, targets, 0).amin().item() >= 0:
        return True, valid
    bad = targets[valid & ((targets < 0) | (targets >= num_classes))].unique().tolist()
    raise ValueError(f"labels: must lie in [0, {num_classes}) or equal {IGNORE_INDEX} (ignored), got {bad}")


def assert_labels_on_device(targets: torch.Tensor, num_classes: int) -> None:
    """``torch._assert_async`` that every label is in [0, C) or -100: no host synchronisation; a
    bad label stops the program at the next synchronisation with a device-side assertion."""
    ok = targets.ge(0).logical_and_(targets.lt(num_classes)).logical_or_(targets.eq(IGNORE_INDEX)).all()
    torch._assert_async(ok, f"labels: must lie in [0, {num_classes}) or equal {IGNORE_INDEX} (ignored)")


def flatten_inputs(logits: torch.Tensor, labels: torch.Tensor, validate: bool = False) -> FlatInputs:
    """Check shapes and dtypes (host metadata only), check label values (see the module
    doc: eagerly on CPU, with ``torch._assert_async`` elsewhere when ``validate``), then
    flatten to rows. Half-precision logits are upcast to float32."""
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"logits: must be a torch.Tensor, got {type(logits).__name__}")
    if not isinstance(labels, torch.Tensor):
        raise ValueError(f"labels: must be a torch.Tensor, got {type(labels).__name__}")
    if logits.dim() not in (2, 3):
        raise ValueError(f"logits: must have shape (N, C) or (N, T, C), got {tuple(logits.shape)}")
    if not logits.is_floating_point():
        raise ValueError(f"logits: must be a floating-point tensor, got {logits.dtype}")
    if labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool:
        raise ValueError(f"labels: must be an integer tensor, got {labels.dtype}")
    if labels.shape != logits.shape[:-1]:
        raise ValueError(
            f"labels: must have the logits' shape without the class axis {tuple(logits.shape[:-1])}, got {tuple(labels.shape)}"
        )
    num_classes = logits.shape[-1]
    if num_classes < 2:
        raise ValueError(f"logits: must have C >= 2 classes (binary tasks use 2 logits), got C={num_classes}")
    label_shape = labels.shape
    if logits.dim() == 3:  # a 2-d input is used as it is: a reshape would add an autograd node
        logits, labels = logits.reshape(-1, num_classes), labels.reshape(-1)
    targets = labels if labels.dtype == torch.int64 else labels.long()
    if logits.dtype in HALF_DTYPES:
        logits = logits.float()
    if runs_on_host(targets):
        maybe_ignored, valid = check_labels_on_host(targets, num_classes)
        return FlatInputs(logits, targets, label_shape, maybe_ignored, valid)
    if validate:
        assert_labels_on_device(targets, num_classes)
    return FlatInputs(logits, targets, label_shape, True)


def log_softmax_rows(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the class axis of ``(M, C)`` rows, contiguous ``(M, C)``.

    On CPU it runs over dim 0 of the ``(C, M)`` transposed view and is copied back: torch's
    CPU softmax kernels are slow when the reduced axis is short and innermost (forward +
    backward at 4096 x 3: 185 us over the last axis, 150 us this way, copy included). On
    other devices the plain last-axis kernel is the fast one and the copy would be two
    more kernels.
    """
    if runs_on_host(logits):
        return torch.log_softmax(logits.t(), dim=0).t().contiguous()
    return torch.log_softmax(logits, dim=-1)


def class_major(function: Callable[..., torch.Tensor], logits: torch.Tensor) -> torch.Tensor:
    """``function(x, dim)`` (softmax or log_softmax) over the class axis of ``(M, C)`` rows,
    returned class-major ``(C, M)``.

    On CPU it runs on a contiguous ``(C, M)`` copy: with the long position axis innermost,
    torch's CPU kernels for the softmax, the reductions over positions and autograd's
    broadcasts run in long vectorised loops (set-level Tversky at 4096 x 9 went from 0.43 ms
    to 0.26 ms forward + backward). On other devices the layout does not matter at these
    sizes and the copy is two more kernels: the result is the transposed view.
    """
    if runs_on_host(logits):
        return function(logits.t().contiguous(), 0)
    return function(logits, -1).t()


def log_one_minus_softmax_all(logits: torch.Tensor, log_probs: torch.Tensor | None = None, dim: int = -1) -> torch.Tensor:
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


def nll_reduce(
    log_probs: torch.Tensor,
    flat: FlatInputs,
    reduction: str,
    weight: torch.Tensor | None = None,
    *,
    mean_over_positions: bool = False,
) -> torch.Tensor:
    """The reduction of the per-position terms -w_{y_i} log_probs[i, y_i] (0 at -100 rows), in
    one ``nll_loss`` kernel that also masks the -100 rows.

    ``mean`` is torch's: divided by sum_i w_{y_i} over the valid rows (their count without a
    weight), or by the count of valid rows when ``mean_over_positions`` (the weight is then
    divided by the count first: still one kernel; a count of 0 gives an infinite weight that
    no row reads). A batch whose denominator is 0 (every position ignored) gives 0, not
    0/0: its gradient is already 0 (``nll_loss``'s backward only writes valid rows), so
    only the forward value is set, on a detached alias.
    """
    if reduction == "none":
        terms = F.nll_loss(log_probs, flat.targets, weight, ignore_index=IGNORE_INDEX, reduction="none")
        return terms if terms.shape == flat.label_shape else terms.reshape(flat.label_shape)
    if reduction == "mean" and weight is not None and mean_over_positions:
        weight = weight / flat.count
        reduction = "sum"
    total, total_weight = nll_loss_forward(log_probs, flat.targets, weight, NLL_REDUCTION[reduction], IGNORE_INDEX)
    if reduction == "mean":
        total.detach().masked_fill_(total_weight == 0, 0.0)
    return total


def positive_count(flat: FlatInputs) -> torch.Tensor | int:
    """The number of valid positions, at least 1: the denominator of a mean that is 0 for an
    all-ignored batch."""
    count = flat.count
    return max(count, 1) if isinstance(count, int) else count.clamp_min(1)


class ImbalanceLoss(nn.Module):
    """Base class: ``reduction``, ``validate``, the ``is_batch_level`` flag, the forward
    template and the per-device cache of constants.

    ``forward(logits, labels)`` flattens and checks the inputs (``flatten_inputs``), calls
    ``compute(flat)`` (with autocast disabled) and returns the loss in the logits' dtype. ``validate`` only matters
    off the CPU (see the module doc): True adds a ``torch._assert_async`` label check.

    ``is_batch_level`` is False when the value is a mean of per-sample terms with a
    count denominator (so summing per-micro-batch sums and dividing by the total count
    reproduces the full-batch value under gradient accumulation); True when the value
    depends on the batch as a whole (set-level dice, OHEM, batch label counts, a
    weight-normalised mean).
    """

    allowed_reductions: tuple[str, ...] = REDUCTIONS

    def __init__(self, reduction: str = "mean", validate: bool = False) -> None:
        super().__init__()
        check_choice("reduction", reduction, self.allowed_reductions)
        check_choice("validate", validate, (False, True))
        self.reduction = reduction
        self.validate = validate
        self._constants: dict[tuple, tuple[torch.Tensor, int, torch.Tensor]] = {}

    @property
    def is_batch_level(self) -> bool:
        return False

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        flat = flatten_inputs(logits, labels, self.validate)
        device_type = flat.logits.device.type
        if torch.is_autocast_enabled(device_type):  # the matrix products would run in half precision
            with torch.autocast(device_type, enabled=False):
                loss = self.compute(flat)
        else:
            loss = self.compute(flat)
        return loss if loss.dtype == logits.dtype else loss.to(logits.dtype)

    def compute(self, flat: FlatInputs) -> torch.Tensor:
        raise NotImplementedError

    def constant(self, name: str, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        """The tensor attribute ``name`` (a per-class constant built at construction) on
        ``device`` and in ``dtype``, converted once and cached per (name, device, dtype)
        until the attribute is replaced or modified in place. The copy to a device is
        ``non_blocking``, so even the first call does not synchronise."""
        source = getattr(self, name)
        key = (name, device, dtype)
        cached = self._constants.get(key)
        if cached is not None and cached[0] is source and cached[1] == source._version:
            return cached[2]
        converted = source.to(dtype=dtype).to(device, non_blocking=True)
        self._constants[key] = (source, source._version, converted)
        return converted

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}, is_batch_level={self.is_batch_level}"


@functools.lru_cache(maxsize=64)
def class_indices(num_classes: int, device: torch.device) -> torch.Tensor:
    """``arange(C)`` as a ``(C, 1)`` int64 column on ``device``, made once per (C, device)."""
    return torch.arange(num_classes, device=device).unsqueeze(1)
