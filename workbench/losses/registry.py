"""Name -> loss class registry and the single public constructor ``build_loss``: the workbench's own losses
(:data:`LOSSES`) and yours (:func:`register_loss`; files of them: :func:`workbench.losses.import_loss_modules`,
docs/your_own_loss.md), and what a loss declares about its parameters: ``check_loss_params`` (checked without building
the loss) and ``parameter_range`` (a number's bounds)."""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Iterator, Mapping
from typing import Any

from torch import nn

from workbench.checks import Bounds, check_choice
from workbench.losses._base import ImbalanceLoss
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
from workbench.losses.own import OwnLoss, check_loss_class, check_name, class_parameters
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


OWN_LOSSES: dict[str, type[nn.Module]] = {}
"""The losses registered by :func:`register_loss` (yours), beside the workbench's own :data:`LOSSES`."""
MODULE_PREFIX = "workbench_loss_module_"
"""The start of the module name a file of ``loss_modules`` is imported under (a flat name: its classes pickle)."""
COUNTS_PARAMETER = "label_counts"
"""A parameter a loss of yours may require: ``workbench.train.loss_from_spec`` gives it the training split's counts."""


def register_loss(name: str, loss_class: type[nn.Module], replace: bool = False) -> type[nn.Module]:
    """Register ``loss_class`` under ``name``: :func:`build_loss` builds it (checking its parameters against the
    class's signature), :func:`available_losses` lists it, the configs, notebooks and curves take the name.

    Args:
        name: a letter, then letters, digits, ``_``, ``.`` or ``-``; not a name of the workbench's own losses.
        loss_class: an ``nn.Module`` class whose keyword arguments are its parameters and whose
            ``forward(logits, target)`` takes (N, C) logits and (N,) class ids and returns the mean
            (``workbench.losses.own``: how the trainers are served).
        replace: allow a name already registered by another class of yours. The same class registered again (its
            module re-imported, a notebook cell run again) replaces the earlier one without it.

    Returns:
        ``loss_class``. TypeError naming the class for a class that is not an ``nn.Module``, parameters that are not
        named keyword arguments, or a ``forward`` that cannot take (logits, target); ValueError naming the name for
        a bad name or a name taken.
    """
    check_name(name)
    check_loss_class(loss_class)
    if name in LOSSES:
        raise ValueError(
            f"name: {name!r} is one of the workbench's own losses ({LOSSES[name].__name__}), which the notebooks "
            f"compare against; register yours under another name, got {name!r} for {loss_class.__qualname__}"
        )
    earlier = OWN_LOSSES.get(name)
    again = earlier is not None and (earlier.__module__, earlier.__qualname__) == (
        loss_class.__module__,
        loss_class.__qualname__,
    )
    if earlier is not None and not again and not replace:
        raise ValueError(
            f"name: {name!r} is already registered for {earlier.__module__}.{earlier.__qualname__}; pass "
            f"replace=True to register {loss_class.__module__}.{loss_class.__qualname__} in its place, or choose "
            "another name"
        )
    OWN_LOSSES[name] = loss_class
    return loss_class


@contextlib.contextmanager
def registry_restored() -> Iterator[None]:
    """Inside, register and import as usual; after, the registrations and loss modules of the block are gone (the
    runner checks each notebook's ``loss_modules`` as that notebook's own kernel will see them)."""
    registered = dict(OWN_LOSSES)
    modules = set(sys.modules)
    try:
        yield
    finally:
        OWN_LOSSES.clear()
        OWN_LOSSES.update(registered)
        for name in set(sys.modules) - modules:
            if name.startswith(MODULE_PREFIX):
                del sys.modules[name]


def own_losses() -> list[str]:
    """Sorted names registered by :func:`register_loss` (yours)."""
    return sorted(OWN_LOSSES)


def available_losses() -> list[str]:
    """Sorted names accepted by ``build_loss``: the workbench's own and those registered by :func:`register_loss`."""
    return sorted({*LOSSES, *OWN_LOSSES})


def loss_class(
    name: str, params: Mapping[str, object] | None = None, name_key: str = "name", params_key: str | None = None
) -> type[nn.Module]:
    """The class registered as ``name`` (the workbench's or yours); ValueError for an unknown name (naming
    ``name_key`` and listing the available ones) or a parameter in ``params`` the class does not take (naming
    ``params_key`` when given, and listing the ones it takes)."""
    found = LOSSES.get(name) if isinstance(name, str) else None
    found = found or (OWN_LOSSES.get(name) if isinstance(name, str) else None)
    if found is None:
        raise ValueError(
            f"{name_key}: must be one of {available_losses()} (a loss of yours: workbench.losses.register_loss in a "
            f"module named by loss_modules), got {name!r}"
        )
    accepted = list(class_parameters(found))
    unknown = sorted(set(params or {}) - set(accepted))
    if unknown:
        where = f"{params_key}: " if params_key else ""
        raise ValueError(f"{where}parameters of {name!r}: must be among {accepted}, got {unknown}")
    return found


def loss_parameters(name: str) -> dict[str, bool]:
    """The parameters of the loss registered as ``name``, each mapped to whether it is required (has no default)."""
    return class_parameters(loss_class(name))


def loss_defaults(name: str) -> dict[str, Any]:
    """The default value of each parameter of the loss registered as ``name`` that has one (its class's
    ``__init__``): what a spec that leaves the parameter out builds the loss with."""
    found = loss_class(name)
    if found.__init__ is nn.Module.__init__:
        return {}
    parameters = list(inspect.signature(found.__init__).parameters.values())[1:]
    return {parameter.name: parameter.default for parameter in parameters if parameter.default is not parameter.empty}


def check_loss_parameters(
    name: str,
    params: Mapping[str, Any],
    name_key: str = "name",
    params_key: str | None = None,
    counts_supplied: bool = False,
) -> None:
    """ValueError unless ``name`` is registered and ``params`` holds only parameters its class takes and every one it
    requires (``label_counts`` counts as given when ``counts_supplied``: the training split's, added later). The
    messages name ``name_key`` / ``params_key`` (a config's ``loss.name``, a notebook's ``extra_settings['x']``),
    the loss and its parameters. The values are checked by :func:`check_loss_params` (declared ranges) and when the
    loss is built."""
    parameters = class_parameters(loss_class(name, params, name_key, params_key))
    given = set(params) | ({COUNTS_PARAMETER} if counts_supplied else set())
    missing = [parameter for parameter, required in parameters.items() if required and parameter not in given]
    if missing:
        where = f"{params_key}: " if params_key else ""
        raise ValueError(
            f"{where}parameters of {name!r}: must give {missing} (no default; its parameters: {list(parameters)}), "
            f"got {sorted(params)}"
        )


def build_loss(name: str, **params: object) -> nn.Module:
    """Build the loss registered as ``name`` with keyword ``params``.

    Args:
        name: one of :func:`available_losses`: the workbench's own (ce, wce, ls, focal, dice, tversky, dsc, pcl,
            class_balanced, logit_adjusted, corn, mlm, mlm_hc, mlm_sr) or one registered by :func:`register_loss`.
        **params: the loss class's keyword arguments (docs/losses.md).

    Returns:
        The ``nn.Module`` (a loss of yours inside an :class:`~workbench.losses.own.OwnLoss`, unless its class is an
        ``ImbalanceLoss``). Raises ValueError for an unknown name (listing the available ones), for a parameter the
        loss does not take or a required one not given (listing the ones it takes), and for out-of-range or
        non-finite values ("param: must ..., got ...").
    """
    check_loss_parameters(name, params)
    built = loss_class(name)(**params)
    if name in LOSSES or isinstance(built, ImbalanceLoss):
        return built
    return OwnLoss(name, built)


def check_loss_params(name: str, params: Mapping[str, object]) -> dict[str, object]:
    """Check the parameters of the loss ``name`` without building it (no label counts, no model, no data), with the
    very declarations the loss's constructor checks by (before any kernel starts, a notebook's checks cell builds
    each loss instead: ``workbench.train.check_loss_spec``, which also checks the rules between parameters).

    Args:
        name: one of :func:`available_losses`.
        params: some or all of its keyword arguments (``{"epsilon": 0.1}``).

    Returns:
        ``params`` as a dict. ValueError for an unknown loss or parameter (as :func:`build_loss`), a number outside
        its declared range (:func:`parameter_range`), a value not among its declared choices; None passes where the
        parameter's default is None. Per-class vectors (``label_counts``, ``weight``, ``cost_matrix``) and rules
        between parameters are checked when the loss is built; a loss of yours declares no ranges unless its class
        does (``ranges`` and ``choices``, as an ``ImbalanceLoss``), and checks its values when it is built.
    """
    declared = loss_class(name, params)
    defaults = inspect.signature(declared.__init__).parameters
    ranges = getattr(declared, "ranges", {})
    choices = getattr(declared, "choices", {})
    for parameter, value in params.items():
        if value is None and defaults[parameter].default is None:
            continue
        if parameter in ranges:
            ranges[parameter].check_number(parameter, value)
        elif parameter in choices:
            check_choice(parameter, value, choices[parameter])
    return dict(params)


def parameter_range(name: str, parameter: str) -> Bounds:
    """The declared :class:`~workbench.checks.Bounds` of the number ``parameter`` of the loss ``name`` (the module-level
    ``EPSILON`` of label smoothing and PCL, ``FOCAL_GAMMA``, ``DICE_GAMMA``, ...): the widgets keep their sliders
    within it. ValueError naming the loss's numbers when it declares none for ``parameter``."""
    ranges = getattr(loss_class(name), "ranges", {})
    if parameter not in ranges:
        raise ValueError(
            f"parameter: must be a number {name!r} declares a range for, {sorted(ranges)}, got {parameter!r}"
        )
    return ranges[parameter]
