"""Fast Gradient Method (FGM) adversarial training on the word embeddings.

Miyato, Dai, Goodfellow (ICLR 2017), eq. 2-3: r_adv = epsilon * g / ||g||_2 with g = grad_emb L(x, y), and
L(x + r_adv, y) is added to the clean loss. As in the common BERT implementation the perturbation goes on each
word-embedding matrix (one per encoder), normalised by its own gradient. The auxiliary-label paper's "F"
variant adds "adversarial perturbations to the embedding layer only" in stage 1 without naming a method:
FGM is the workbench's reading of it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from workbench.train.trainer import LossTrainer


class FGM:
    """``attack()`` adds epsilon * g / ||g||_2 to every trainable ``word_embeddings`` weight of ``model`` (skipped
    when ||g|| is 0 or not finite); ``restore()`` puts the weights back. ``epsilon`` must be > 0."""

    def __init__(self, model: nn.Module, epsilon: float) -> None:
        if not epsilon > 0:
            raise ValueError(f"epsilon: must be > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.parameters = [
            weight for name, weight in model.named_parameters() if "word_embeddings" in name and weight.requires_grad
        ]
        if not self.parameters:
            raise ValueError("model: has no trainable parameter named *word_embeddings* to perturb")
        self._backup: list[torch.Tensor] = []

    @torch.no_grad()
    def attack(self) -> None:
        self._backup = [parameter.detach().clone() for parameter in self.parameters]
        for parameter in (parameter for parameter in self.parameters if parameter.grad is not None):
            norm = torch.linalg.vector_norm(parameter.grad)
            if norm > 0 and torch.isfinite(norm):
                parameter.add_(parameter.grad, alpha=self.epsilon / norm.item())

    @torch.no_grad()
    def restore(self) -> None:
        for parameter, saved in zip(self.parameters, self._backup):
            parameter.copy_(saved)
        self._backup = []


class FGMTrainer(LossTrainer):
    """``LossTrainer`` whose every micro-batch also backwards the FGM adversarial loss (same scaling): clean
    backward, perturb (:class:`FGM`), adversarial backward, restore. The logged loss is the clean one; under
    gradient accumulation g also holds the earlier micro-batches' gradients."""

    def __init__(self, *args: Any, fgm_epsilon: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fgm = FGM(self.model, fgm_epsilon)

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, dict(inputs), num_items_in_batch)
        self.fgm.attack()
        super().training_step(model, dict(inputs), num_items_in_batch)
        self.fgm.restore()
        return loss
