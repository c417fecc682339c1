"""Losses for imbalanced classification: ``build_loss(name, **params)``, ``available_losses()``.

Every loss is an ``nn.Module`` with ``forward(logits, labels)``; see docs/losses.md.
"""

from __future__ import annotations

from workbench.losses.registry import available_losses, build_loss

__all__ = ["available_losses", "build_loss"]
