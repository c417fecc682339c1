"""Losses for imbalanced classification and MLM: ``build_loss(name, **params)``, ``available_losses()``,
``resolve(LossSpec, train_split)``; every loss class (the MLM objectives too) is importable from here (as in MONAI).

Every loss is an ``nn.Module`` with ``forward(logits, labels)``; see docs/losses.md.
"""

from __future__ import annotations

from workbench.config import LossSpec
from workbench.losses._base import IGNORE_INDEX, class_probabilities, num_outputs, predicted_labels
from workbench.losses.classification import (
    ClassBalancedLoss,
    CrossEntropyLoss,
    FocalLoss,
    LabelSmoothingLoss,
    LogitAdjustedLoss,
    WeightedCrossEntropyLoss,
    class_balanced_weights,
)
from workbench.losses.dice import DiceLoss, SelfAdjustingDiceLoss, TverskyLoss
from workbench.losses.mlm import CorrectionStats, HardCorrectionLoss, MaskedLMLoss, SoftRegularizationLoss
from workbench.losses.ordinal import CornLoss
from workbench.losses.pcl import (
    QBQTC_LABEL_COUNTS,
    PropensityCorrectedLoss,
    pcl_constants,
    pcl_severity,
    pcl_weight_matrix,
)
from workbench.losses.registry import available_losses, build_loss
from workbench.losses.spec import needs_label_counts, resolve

__all__ = [
    "IGNORE_INDEX",
    "QBQTC_LABEL_COUNTS",
    "ClassBalancedLoss",
    "CornLoss",
    "CorrectionStats",
    "CrossEntropyLoss",
    "DiceLoss",
    "FocalLoss",
    "HardCorrectionLoss",
    "LabelSmoothingLoss",
    "LogitAdjustedLoss",
    "LossSpec",
    "MaskedLMLoss",
    "PropensityCorrectedLoss",
    "SelfAdjustingDiceLoss",
    "SoftRegularizationLoss",
    "TverskyLoss",
    "WeightedCrossEntropyLoss",
    "available_losses",
    "build_loss",
    "class_balanced_weights",
    "class_probabilities",
    "needs_label_counts",
    "num_outputs",
    "pcl_constants",
    "pcl_severity",
    "pcl_weight_matrix",
    "predicted_labels",
    "resolve",
]
