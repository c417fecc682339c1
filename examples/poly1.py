"""Poly-1, the worked example of docs/your_own_loss.md: a loss written as for plain torch, registered by name.

Leng et al., "PolyLoss: A Polynomial Expansion Perspective of Classification Loss Functions", ICLR 2022
(arXiv 2204.12511): cross-entropy is the series sum_j (1/j) (1 - p_t)^j; Poly-1 adds epsilon to the coefficient of its
first term,

    L_Poly-1 = -log p_t + epsilon (1 - p_t),

p_t the predicted probability of the gold class. epsilon = 0 is cross-entropy; epsilon = -1 removes the first term;
the paper tunes epsilon per task (this class's default, 1, is a starting point, not the paper's choice for text).

Importing this file registers the loss as "poly1": ``loss_modules: [../examples/poly1.py]`` in a notebook's params
file (paths relative to notebooks/), or ``loss_modules: [examples/poly1.py]`` in a trainer config (run from the
repository root).
"""

from __future__ import annotations

import torch
from torch import nn

from workbench.checks import check_number
from workbench.losses import register_loss


class Poly1Loss(nn.Module):
    """L = -log p_t + epsilon (1 - p_t), the mean over the rows (Leng et al., ICLR 2022, Poly-1).

    Args:
        epsilon: the added weight of the first polynomial term (1 - p_t); >= -1, so that its coefficient
            1 + epsilon stays >= 0.
    """

    def __init__(self, epsilon: float = 1.0) -> None:
        super().__init__()
        self.epsilon = check_number("epsilon", epsilon, -1.0, 1e12)

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        log_pt = logits.log_softmax(-1).gather(-1, target[:, None]).squeeze(-1)  # log p_t, one per row
        return (-log_pt + self.epsilon * (1 - log_pt.exp())).mean()


register_loss("poly1", Poly1Loss)
