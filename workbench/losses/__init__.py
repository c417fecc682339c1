"""Losses for imbalanced classification and MLM: ``build_loss(name, **params)``, ``available_losses()``; every loss
class (the MLM objectives too) is importable from here (as in MONAI). A loss of yours joins them through
``register_loss(name, loss_class)`` (or a module of ``import_loss_modules``; docs/your_own_loss.md).

Every loss is an ``nn.Module`` with ``forward(logits, labels)``; see docs/losses.md. A loss spec of a config
(``LossSpec``) with the training split's label counts becomes a loss through ``workbench.train.loss_from_spec``.

Each number a loss takes has one declared range beside its loss (``EPSILON``, ``FOCAL_GAMMA``, ``DICE_GAMMA``, ...,
:class:`workbench.checks.Bounds`), which its constructor, :func:`check_loss_params` (checking parameters without
building the loss) and the widgets' sliders (:func:`parameter_range`) read. The losses import nothing of the
workbench but ``workbench.checks``: hard correction takes a synonym matcher that the trainer builds. Only
:mod:`workbench.losses.modules`, which imports your files (no loss), reads ``workbench.data_root`` (a path written
``$WORKBENCH_DATA/...``).

Names are imported on first use (PEP 562), so that the config reads the objectives' options
(:mod:`workbench.losses.choices`) without loading torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "_base": (
        "IGNORE_INDEX",
        "LARGEST",
        "NON_NEGATIVE",
        "check_label_counts",
        "class_probabilities",
        "num_outputs",
        "predicted_labels",
    ),
    "choices": ("HC_LEVELS", "KL_DIRECTIONS", "SR_LEVELS", "SR_PREDICTIONS", "SR_WEIGHT"),
    "classification": (
        "CB_BETA",
        "EPSILON",
        "FOCAL_GAMMA",
        "TAU",
        "WCE_K",
        "ClassBalancedLoss",
        "CrossEntropyLoss",
        "FocalLoss",
        "LabelSmoothingLoss",
        "LogitAdjustedLoss",
        "WeightedCrossEntropyLoss",
        "class_balanced_weights",
    ),
    "dice": (
        "DICE_GAMMA",
        "DSC_ALPHA",
        "OHEM_RATIO",
        "TVERSKY_ALPHA",
        "TVERSKY_BETA",
        "DiceLoss",
        "SelfAdjustingDiceLoss",
        "TverskyLoss",
    ),
    "mlm": (
        "Correction",
        "CorrectionCounts",
        "HardCorrectionLoss",
        "MaskedLMLoss",
        "SoftRegularizationLoss",
        "SynonymMatcher",
        "labelled_rows",
    ),
    "ordinal": ("CornLoss",),
    "modules": ("import_loss_modules",),
    "own": ("OwnLoss",),
    "pcl": (
        "DEFAULT_PCL_PLUS_FORM",
        "GRADIENT_FREE_VARIANTS",
        "PCL_VARIANTS",
        "QBQTC_LABEL_COUNTS",
        "PropensityCorrectedLoss",
        "pcl_constants",
        "pcl_severity",
        "pcl_weight_matrix",
        "pcl_weight_matrix_of_checked",
    ),
    "registry": (
        "available_losses",
        "build_loss",
        "check_loss_parameters",
        "check_loss_params",
        "loss_defaults",
        "loss_parameters",
        "own_losses",
        "parameter_range",
        "register_loss",
        "registry_restored",
    ),
}
_EXPORTS = {name: f"workbench.losses.{module}" for module, names in _MODULES.items() for name in names}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workbench.losses' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
