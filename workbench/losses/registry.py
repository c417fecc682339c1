"""Name -> loss class registry and the single public constructor ``build_loss``."""

from __future__ import annotations

import inspect

from torch import nn

from workbench.losses.classification import (
    ClassBalancedLoss,
    CrossEntropyLoss,
    FocalLoss,
    LabelSmoothingLoss,
    LogitAdjustedLoss,
    WeightedCrossEntropyLoss,
)
from workbench.losses.dice import DiceLoss, SelfAdjustingDiceLoss, TverskyLoss
from workbench.losses.mlm import HardCorrectionLoss, MaskedLMLoss, SoftRegularizationLoss
from workbench.losses.ordinal import CornLoss
from workbench.losses.pcl import PropensityCorrectedLoss

LOSSES: dict[str, type[nn.Module]] = {
    "ce": CrossEntropyLoss,
    "wce": WeightedCrossEntropyLoss,
    "ls": LabelSmoothingLoss,
    "focal": FocalLoss,
    "dice": DiceLoss,
    "tversky": TverskyLoss,
    "dsc": SelfAdjustingDiceLoss,
    "pcl": PropensityCorrectedLoss,
    "class_balanced": ClassBalancedLoss,
    "logit_adjusted": LogitAdjustedLoss,
    "corn": CornLoss,
    "mlm": MaskedLMLoss,
    "mlm_hc": HardCorrectionLoss,
    "mlm_sr": SoftRegularizationLoss,
}


def available_losses() -> list[str]:
    """Sorted names accepted by ``build_loss``."""
    return sorted(LOSSES)


def build_loss(name: str, **params: object) -> nn.Module:
    """Build the loss registered as ``name`` with keyword ``params``.

    Args:
        name: one of :func:`available_losses` (ce, wce, ls, focal, dice, tversky, dsc, pcl, class_balanced,
            logit_adjusted, corn, mlm, mlm_hc, mlm_sr).
        **params: the loss class's keyword arguments (docs/losses.md).

    Returns:
        The ``nn.Module``. Raises ValueError for an unknown name (listing the available ones), for a
        parameter the loss does not take (listing the ones it does), and for out-of-range or
        non-finite values ("param: must ..., got ...").
    """
    if name not in LOSSES:
        raise ValueError(f"name: must be one of {available_losses()}, got {name!r}")
    loss_class = LOSSES[name]
    accepted = [p for p in inspect.signature(loss_class.__init__).parameters if p != "self"]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"parameters of {name!r}: must be among {accepted}, got {unknown}")
    return loss_class(**params)
