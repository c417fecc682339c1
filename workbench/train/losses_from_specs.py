"""Building a loss from its spec (a config's ``loss`` section, :class:`~workbench.config.LossSpec`), with the
training split's label counts.

The one place that owns the label-count rule: ``wce`` (class weights alpha_t from the counts,
Dice paper sec. 3.2), ``class_balanced`` (effective numbers, Cui et al. 2019), ``logit_adjusted`` (the prior,
Menon et al. 2021) and ``pcl`` with ``counts="global"`` (PCL+ and PCL- from the counts, PCL paper eq. 2-3) take
``label_counts``; when the spec's params do not give them, :func:`loss_from_spec` counts the labels of the training
split (``workbench.data.label_counts``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from torch import nn

from workbench.config import LossSpec
from workbench.data import label_counts, label_names
from workbench.losses import build_loss

COUNTED_LOSSES = ("wce", "class_balanced", "logit_adjusted")
"""Losses built from the training split's label counts (besides global-count pcl)."""


def needs_label_counts(spec: LossSpec) -> bool:
    """True for wce, class_balanced, logit_adjusted, and for pcl with global counts (``counts="batch"`` takes none),
    unless the params already give ``label_counts``."""
    params = spec.params
    if "label_counts" in params:
        return False
    counted = spec.name in COUNTED_LOSSES
    return counted or (spec.name == "pcl" and params.get("counts", "global") == "global")


def split_label_counts(train_split: Any) -> list[int]:
    """Per-class counts ``[n_0, ..., n_{K-1}]`` of a split with an integer ``label`` column whose
    ClassLabel feature names the K classes. Raises ValueError naming a class with no example."""
    names = label_names(train_split)
    counts = label_counts(train_split)
    empty = [name for name, count in zip(names, counts) if count == 0]
    if empty:
        raise ValueError(
            f"train split: must hold every class to derive label_counts, got no example of {empty} "
            f"(counts {dict(zip(names, counts))}); give loss.params.label_counts or use another split"
        )
    return counts


def loss_from_spec(spec: LossSpec | Mapping[str, Any], train_split: Any = None) -> nn.Module:
    """``build_loss(spec.name, **spec.params)``; the counted losses and global-count pcl get ``label_counts``
    from ``train_split`` unless the params give them.

    Args:
        spec: a :class:`LossSpec` or its mapping (``{"name": "pcl", "params": {"epsilon": 0.1}}``).
        train_split: any dataset with a ClassLabel ``label`` column; needed only when
            :func:`needs_label_counts`.

    Returns:
        The loss module. Raises ValueError for an unknown name or parameter, a bad value (checked
        once, by the loss), or missing label counts.
    """
    spec = LossSpec.from_mapping(spec)
    params = dict(spec.params)
    if needs_label_counts(spec):
        if train_split is None:
            raise ValueError(
                f"train_split: loss {spec.name!r} needs label counts; pass the training split or give label_counts"
            )
        params["label_counts"] = split_label_counts(train_split)
    return build_loss(spec.name, **params)


FROM_THE_DATA = ("label_counts", "reduction")
"""Arguments of a loss that are no hyperparameter: the training split's counts, the reduction."""


def loss_hyperparameters(spec: LossSpec | Mapping[str, Any], train_split: Any = None) -> dict[str, Any]:
    """The hyperparameters a loss of ``spec`` trains with: each keyword argument of its class (``build_loss``'s) as
    the built loss holds it (a preset resolved: DSC's ``preset="paper"`` gives its alpha), else the spec's value, else
    the default; without :data:`FROM_THE_DATA` and tensors (weights from the data). What a study names as fixed."""
    spec = LossSpec.from_mapping(spec)
    loss = loss_from_spec(spec, train_split)
    values = {}
    for name, parameter in inspect.signature(type(loss).__init__).parameters.items():
        if (
            name == "self"
            or name in FROM_THE_DATA
            or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
        ):
            continue
        given = spec.params.get(name, None if parameter.default is inspect.Parameter.empty else parameter.default)
        held = getattr(loss, name, given)
        values[name] = held if isinstance(held, (bool, int, float, str, type(None))) else given
    return values


def fixed_hyperparameters(
    specs: Mapping[str, LossSpec], training: Mapping[str, Any], train_split: Any = None, **chosen: str
) -> dict[str, Any]:
    """A study's record of its hyperparameters for the results page: ``fixed``, the training section's optimiser
    settings (learning rate, epochs, batch size, weight decay: the same for every side, not tuned) and each setting's
    loss hyperparameters (:func:`loss_hyperparameters`); ``chosen_on_validation``, what the study chose on the
    validation split, the same way for every side (``chosen``: name -> how)."""
    keys = ("learning_rate", "num_train_epochs", "per_device_train_batch_size", "weight_decay")
    return {
        "fixed": {
            **{key: training[key] for key in keys if key in training},
            "losses": {setting: loss_hyperparameters(spec, train_split) for setting, spec in specs.items()},
        },
        "chosen_on_validation": dict(chosen),
    }
