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

from workbench.config import LossSpec, TrainingConfig
from workbench.data import label_counts, label_names
from workbench.losses import OwnLoss, available_losses, build_loss, check_loss_parameters, loss_parameters
from workbench.redaction import redact

COUNTED_LOSSES = ("wce", "class_balanced", "logit_adjusted")
"""Losses built from the training split's label counts (besides global-count pcl)."""


def needs_label_counts(spec: LossSpec) -> bool:
    """True for wce, class_balanced, logit_adjusted, for pcl with global counts (``counts="batch"`` takes none) and for
    a loss of yours whose class requires ``label_counts`` (no default), unless the params already give them."""
    params = spec.params
    if "label_counts" in params or spec.name not in available_losses():
        return False
    if spec.name in COUNTED_LOSSES or spec.name == "pcl":
        return spec.name != "pcl" or params.get("counts", "global") == "global"
    return loss_parameters(spec.name).get("label_counts", False)


def check_specs(specs: Mapping[str, LossSpec], parameter: str) -> dict[str, LossSpec]:
    """``specs`` (label -> spec, a notebook's ``parameter``) when each names a registered loss and gives parameters its
    class takes, every required one but the label counts :func:`loss_from_spec` adds; ValueError naming
    ``parameter[label].loss`` or ``.params``, the loss and its parameters otherwise (before anything is trained)."""
    for label, spec in specs.items():
        where = f"{parameter}[{label!r}]"
        check_loss_parameters(spec.name, spec.params, f"{where}.loss", f"{where}.params", needs_label_counts(spec))
    return dict(specs)


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


def check_loss_spec(spec: LossSpec | Mapping[str, Any]) -> LossSpec:
    """``spec`` once its loss takes its parameters, before any data is read: the loss is built, so each value is checked
    where it enters (by the loss: ``epsilon: must be a number in [0, 1), got 1.5``); where the training split's label
    counts go, one per class stands in (per row of the cost matrix, else two classes; the counts are checked when the
    split is read). ValueError naming the parameter."""
    spec = LossSpec.from_mapping(spec)
    params = dict(spec.params)
    if needs_label_counts(spec):
        costs = params.get("cost_matrix")
        params["label_counts"] = [1] * (len(costs) if isinstance(costs, list | tuple) and costs else 2)
    build_loss(spec.name, **params)
    return spec


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
OPTIMISER_KEYS = ("learning_rate", "num_train_epochs", "per_device_train_batch_size", "weight_decay")
"""The training section's settings a study fixes for every side (each fit keeps its epoch of best validation score)."""


def loss_hyperparameters(spec: LossSpec | Mapping[str, Any], train_split: Any = None) -> dict[str, Any]:
    """The hyperparameters a loss of ``spec`` trains with: each keyword argument of its class (``build_loss``'s; a loss
    of yours: its own class) as the built loss holds it (a preset resolved: DSC's ``preset="paper"`` gives its alpha),
    else the spec's value, else the default; without :data:`FROM_THE_DATA` and tensors (weights from the data)."""
    spec = LossSpec.from_mapping(spec)
    loss = loss_from_spec(spec, train_split)
    held_by = loss.loss if isinstance(loss, OwnLoss) else loss
    values = {}
    for name, parameter in inspect.signature(type(held_by).__init__).parameters.items():
        if (
            name == "self"
            or name in FROM_THE_DATA
            or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL)
        ):
            continue
        given = spec.params.get(name, None if parameter.default is inspect.Parameter.empty else parameter.default)
        held = getattr(held_by, name, given)
        values[name] = held if isinstance(held, (bool, int, float, str, type(None))) else given
    return values


def fixed_hyperparameters(
    training: TrainingConfig | Mapping[str, Any],
    losses: Mapping[str, LossSpec] = (),
    train_split: Any = None,
    **others: Any,
) -> dict[str, Any]:
    """What a notebook fixes instead of choosing on validation, the same for every side, as the results page prints it
    (``workbench.evidence.record``'s ``fixed``): the ``training`` section's :data:`OPTIMISER_KEYS` ("learning rate",
    ...; a validated section gives its defaults too, a mapping what it holds), each loss's numeric hyperparameters as
    it trains (``{setting: LossSpec}``, :func:`loss_hyperparameters` with ``train_split``'s counts: "FL gamma", "DSC
    alpha", ...; a variant's name is the setting's) and ``others`` (name -> value). A secret among them (a hub token)
    shows its mark."""
    if not isinstance(training, Mapping):
        training = {key: getattr(training, key) for key in OPTIMISER_KEYS}
    fixed = {key.replace("_", " "): training[key] for key in OPTIMISER_KEYS if key in training}
    for setting, spec in dict(losses).items():
        for key, value in loss_hyperparameters(spec, train_split).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                fixed[f"{setting} {key}"] = value
    return redact({**fixed, **others})
