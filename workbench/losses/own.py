"""Your own loss on the bench: the checks a loss class passes when it is registered, and the adapter that serves it to
the workbench's trainers (docs/your_own_loss.md).

A loss of yours is an ``nn.Module`` class whose keyword arguments are its parameters and whose
``forward(logits, target)`` takes (N, C) logits and (N,) class ids and returns the mean over the N rows, as you would
write it for plain torch. :class:`OwnLoss` gives it what the trainers need: the ignore index (positions labelled -100
are dropped before your forward sees them), token-level (N, T, C) logits (flattened to rows), half-precision logits
(your forward gets float32 with autocast off; the loss comes back in the logits' dtype), an empty or all-ignored batch
(0, without calling your forward), the label checks of every workbench loss, and a check that your forward returned a
scalar. It serves ``finetune``, ``two_stage`` (stage 2), ``fusion_finetune`` and the studies' fitters (the character
probe and the transformer fitter); ``pretrain_mlm`` and ``pretrain_electra`` train with their ``objective`` section,
not with a registered loss. A class that subclasses :class:`~workbench.losses.ImbalanceLoss` already keeps that
contract and is built as it is.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

import torch
from torch import nn

from workbench.checks import IGNORE_INDEX
from workbench.losses._base import ImbalanceLoss, flatten

NAME_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
"""A registered name: a letter, then letters, digits, ``_``, ``.`` or ``-`` (it is written in YAML and on pages)."""
SERVED = ("finetune", "two_stage (stage 2)", "fusion_finetune", "the studies' fitters (probe, transformer)")
NOT_SERVED = ("pretrain_mlm", "pretrain_electra")
"""The trainers that take a registered loss, and those that train with their ``objective`` section instead."""


def check_name(name: Any) -> str:
    """``name`` when it matches :data:`NAME_PATTERN`; ValueError naming it otherwise."""
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ValueError(
            f"name: must be a letter followed by letters, digits, '_', '.' or '-' (it is written in YAML), got {name!r}"
        )
    return name


def class_parameters(loss_class: type[nn.Module]) -> dict[str, bool]:
    """The keyword parameters of ``loss_class`` (its ``__init__``, ``self`` left out), each mapped to whether it is
    required (has no default); a class without an ``__init__`` of its own has none."""
    if loss_class.__init__ is nn.Module.__init__:
        return {}
    parameters = list(inspect.signature(loss_class.__init__).parameters.values())[1:]
    return {parameter.name: parameter.default is inspect.Parameter.empty for parameter in parameters}


def check_loss_class(loss_class: Any) -> type[nn.Module]:
    """``loss_class`` when it is an ``nn.Module`` class whose parameters are named keyword arguments and whose
    ``forward`` can be called as ``forward(logits, target)``; TypeError naming the class and what is allowed
    otherwise."""
    if not (isinstance(loss_class, type) and issubclass(loss_class, nn.Module)):
        raise TypeError(f"loss_class: must be a torch.nn.Module class, got {loss_class!r}")
    name = loss_class.__qualname__
    if loss_class.__init__ is not nn.Module.__init__:
        kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        signature = inspect.signature(loss_class.__init__)
        loose = [str(parameter) for parameter in list(signature.parameters.values())[1:] if parameter.kind not in kinds]
        if loose:
            raise TypeError(
                f"{name}.__init__: its parameters must be named keyword arguments (each checked by build_loss), "
                f"got {loose} in __init__{signature}"
            )
    if loss_class.forward is nn.Module.forward:
        raise TypeError(f"{name}.forward: must be defined as forward(self, logits, target), got none")
    signature = inspect.signature(loss_class.forward)
    try:
        signature.bind(None, "logits", "target")
    except TypeError:
        raise TypeError(
            f"{name}.forward: must take (logits, target), (N, C) logits and (N,) class ids, and return the mean, "
            f"got forward{signature}"
        ) from None
    return loss_class


def describe(value: Any) -> str:
    """What a forward returned, for an error message: a tensor's shape and dtype, else its type."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype}"
    return f"a {type(value).__name__}"


class OwnLoss(ImbalanceLoss):
    """A registered loss of yours (``loss``, built by ``build_loss(name, ...)``) adapted to the workbench's trainers.

    ``forward(logits, labels)``: logits (N, C) or (N, T, C), labels (N,) or (N, T) with -100 ignored. The rows whose
    label is not -100 go to ``loss.forward`` as (M, C) float32 (float64 stays float64) logits and (M,) int64 class
    ids, autocast off; its value must be a floating-point scalar (a ValueError naming the loss otherwise), returned in
    the logits' dtype. No valid row: 0 (with a gradient of 0), ``loss`` not called. ``is_batch_level`` is the
    class's own attribute when it has one, else False (the mean of per-row terms, as registration asks): gradient
    accumulation then weighs micro-batches by their rows. Only ``reduction="mean"``.
    """

    def __init__(self, name: str, loss: nn.Module) -> None:
        super().__init__("mean")
        self.name = name
        self.loss = loss

    @property
    def is_batch_level(self) -> bool:
        return bool(getattr(self.loss, "is_batch_level", False))

    @property
    def rows_are_independent(self) -> bool:
        """False: a per-row value needs a batch of that row alone (the curves draw it so)."""
        return False

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        rows, targets = flatten(logits, labels)
        kept = targets != IGNORE_INDEX
        if not kept.all():
            rows, targets = rows[kept], targets[kept]
        if targets.numel() == 0:
            return logits.reshape(-1)[:0].sum()  # 0, with a graph: no NaN from an infinite ignored logit
        with torch.autocast(rows.device.type, enabled=False):
            value = self.loss(rows if rows.dtype == torch.float64 else rows.float(), targets)
        if not (isinstance(value, torch.Tensor) and value.dim() == 0 and value.is_floating_point()):
            raise ValueError(
                f"loss {self.name!r} ({type(self.loss).__qualname__}.forward): must return a floating-point scalar "
                f"tensor (the mean over the rows), got {describe(value)}"
            )
        return value.to(logits.dtype)

    def extra_repr(self) -> str:
        return f"name={self.name!r}, is_batch_level={self.is_batch_level}"
