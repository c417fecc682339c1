"""Losses for imbalanced classification and MLM: ``build_loss(name, **params)``, ``available_losses()``; every loss
class (the MLM objectives too) is importable from here (as in MONAI). A loss of yours joins them through
``register_loss(name, loss_class)`` (or a module of ``import_loss_modules``; docs/your_own_loss.md).

Every loss is an ``nn.Module`` with ``forward(logits, labels)``; see docs/losses.md. A loss spec of a config
(``LossSpec``) with the training split's label counts becomes a loss through ``workbench.train.loss_from_spec``.

Names are imported on first use (PEP 562), so that the config reads the objectives' options
(:mod:`workbench.losses.choices`) without loading torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "_base": ("IGNORE_INDEX", "class_probabilities", "num_outputs", "predicted_labels"),
    "choices": ("HC_LEVELS", "KL_DIRECTIONS", "SR_LEVELS", "SR_PREDICTIONS"),
    "classification": (
        "ClassBalancedLoss",
        "CrossEntropyLoss",
        "FocalLoss",
        "LabelSmoothingLoss",
        "LogitAdjustedLoss",
        "WeightedCrossEntropyLoss",
        "class_balanced_weights",
    ),
    "dice": ("DiceLoss", "SelfAdjustingDiceLoss", "TverskyLoss"),
    "mlm": ("CorrectionStats", "HardCorrectionLoss", "MaskedLMLoss", "SoftRegularizationLoss"),
    "ordinal": ("CornLoss",),
    "pcl": ("QBQTC_LABEL_COUNTS", "PropensityCorrectedLoss", "pcl_constants", "pcl_severity", "pcl_weight_matrix"),
    "own": ("OwnLoss",),
    "registry": (
        "available_losses",
        "build_loss",
        "check_loss_parameters",
        "import_loss_modules",
        "loss_parameters",
        "own_losses",
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
