"""Losses for imbalanced classification: ``build_loss(name, **params)``, ``available_losses()``.

Every loss is an ``nn.Module`` with ``forward(logits, labels)``; see docs/losses.md.
"""

from __future__ import annotations

from workbench.losses.pcl import QBQTC_LABEL_COUNTS, pcl_constants, pcl_severity, pcl_weight_matrix
from workbench.losses.registry import available_losses, build_loss

__all__ = [
    "QBQTC_LABEL_COUNTS",
    "available_losses",
    "build_loss",
    "pcl_constants",
    "pcl_severity",
    "pcl_weight_matrix",
]
