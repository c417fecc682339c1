"""Name -> loss class registry, the single public constructor ``build_loss``, and what a loss declares about its
parameters: ``check_loss_params`` (checked without building the loss) and ``parameter_range`` (a number's bounds)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping

from torch import nn

from workbench.checks import Bounds, check_choice
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
    return loss_class(name, params)(**params)


def loss_class(name: str, params: Mapping[str, object] | None = None) -> type[nn.Module]:
    """The class registered as ``name``; ValueError for an unknown name (listing the available ones) or a parameter
    in ``params`` the class does not take (listing the ones it does)."""
    if name not in LOSSES:
        raise ValueError(f"name: must be one of {available_losses()}, got {name!r}")
    accepted = [p for p in inspect.signature(LOSSES[name].__init__).parameters if p != "self"]
    unknown = sorted(set(params or {}) - set(accepted))
    if unknown:
        raise ValueError(f"parameters of {name!r}: must be among {accepted}, got {unknown}")
    return LOSSES[name]


def check_loss_params(name: str, params: Mapping[str, object]) -> dict[str, object]:
    """Check the parameters of the loss ``name`` without building it (no label counts, no model, no data): what the
    runner checks before any kernel starts, with the very declarations the loss's constructor checks by.

    Args:
        name: one of :func:`available_losses`.
        params: some or all of its keyword arguments (``{"epsilon": 0.1}``).

    Returns:
        ``params`` as a dict. ValueError for an unknown loss or parameter (as :func:`build_loss`), a number outside
        its declared range (:func:`parameter_range`), a value not among its declared choices; None passes where the
        parameter's default is None. Per-class vectors (``label_counts``, ``weight``, ``cost_matrix``) and rules
        between parameters are checked when the loss is built.
    """
    declared = loss_class(name, params)
    defaults = inspect.signature(declared.__init__).parameters
    for parameter, value in params.items():
        if value is None and defaults[parameter].default is None:
            continue
        if parameter in declared.ranges:
            declared.ranges[parameter].check_number(parameter, value)
        elif parameter in declared.choices:
            check_choice(parameter, value, declared.choices[parameter])
    return dict(params)


def parameter_range(name: str, parameter: str) -> Bounds:
    """The declared :class:`~workbench.checks.Bounds` of the number ``parameter`` of the loss ``name`` (the module-level
    ``EPSILON`` of label smoothing and PCL, ``FOCAL_GAMMA``, ``DICE_GAMMA``, ...): the widgets keep their sliders
    within it. ValueError naming the loss's numbers when it declares none for ``parameter``."""
    declared = loss_class(name)
    if parameter not in declared.ranges:
        raise ValueError(
            f"parameter: must be a number {name!r} declares a range for, {sorted(declared.ranges)}, got {parameter!r}"
        )
    return declared.ranges[parameter]
