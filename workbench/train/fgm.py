"""Fast Gradient Method (FGM) adversarial training on the word embeddings.

Miyato, Dai, Goodfellow, "Adversarial Training Methods for Semi-Supervised Text
Classification" (ICLR 2017), eq. 2-3: the adversarial perturbation of the
embeddings is r_adv = epsilon * g / ||g||_2 with g = grad_emb L(x, y), and the
adversarial loss L(x + r_adv, y) is added to the clean loss. As in the common
implementation for BERT, the perturbation is applied to the word-embedding
matrix (its gradient is non-zero only on the rows of the tokens in the batch),
one matrix per encoder, each normalised by its own gradient norm.

The auxiliary-label paper's "F" variant (MRE-BERT-F, "MRE-BERT with adversarial
perturbation") names no method: it introduces "adversarial training In the
pre-training stage", "adding adversarial perturbations to the embedding layer
only". FGM in stage 1 is the workbench's reading of it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from workbench.train.trainer import LossTrainer

WORD_EMBEDDINGS = "word_embeddings"


class FGM:
    """Perturb every ``word_embeddings`` weight of ``model`` along its gradient, then restore it.

    ``attack()`` adds epsilon * g / ||g||_2 to each such weight (skipped when
    ||g|| is 0 or not finite); ``restore()`` puts the saved weights back.
    ``epsilon`` must be > 0.
    """

    def __init__(self, model: nn.Module, epsilon: float) -> None:
        if not epsilon > 0:
            raise ValueError(f"epsilon: must be > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        self.parameters = [
            parameter for name, parameter in model.named_parameters() if WORD_EMBEDDINGS in name and parameter.requires_grad
        ]
        if not self.parameters:
            raise ValueError(f"model: has no trainable parameter named *{WORD_EMBEDDINGS}* to perturb")
        self._backup: list[torch.Tensor] = []

    @torch.no_grad()
    def attack(self) -> None:
        self._backup = [parameter.detach().clone() for parameter in self.parameters]
        for parameter in self.parameters:
            if parameter.grad is None:
                continue
            norm = torch.linalg.vector_norm(parameter.grad)
            if norm > 0 and torch.isfinite(norm):
                parameter.add_(parameter.grad, alpha=self.epsilon / norm.item())

    @torch.no_grad()
    def restore(self) -> None:
        for parameter, saved in zip(self.parameters, self._backup):
            parameter.copy_(saved)
        self._backup = []


class FGMTrainer(LossTrainer):
    """``LossTrainer`` whose every micro-batch adds the FGM adversarial loss's gradient.

    Per micro-batch: backward the clean loss, perturb the word embeddings
    (:class:`FGM`), backward the adversarial loss (same scaling), restore the
    embeddings. The returned (logged) loss is the clean one. Under gradient
    accumulation the direction g also holds the earlier micro-batches' gradients.
    """

    def __init__(self, *args: Any, fgm_epsilon: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fgm = FGM(self.model, fgm_epsilon)

    def training_step(
        self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: torch.Tensor | int | None = None
    ) -> torch.Tensor:
        loss = super().training_step(model, dict(inputs), num_items_in_batch)
        self.fgm.attack()
        super().training_step(model, dict(inputs), num_items_in_batch)
        self.fgm.restore()
        return loss
