"""CORN, an ordinal model for ordered labels such as QBQTC's relevance 0 < 1 < 2 (``corn``).

Shi, Cao and Raschka, "Deep Neural Networks for Rank-Consistent Ordinal Regression Based On Conditional
Probabilities" (arXiv 2111.08851; CORN). A head with K - 1 outputs f_1 .. f_{K-1} (not K): f_k scores the
conditional probability P(y > k - 1 | y > k - 2) = sigmoid(f_k), trained as K - 1 binary tasks, task k on the
examples with y > k - 2 only. Then P(y > k - 1) = prod_{j <= k} sigmoid(f_j), and the predicted rank is the number of
k with P(y > k - 1) > 0.5 (``coral_pytorch.dataset.corn_label_from_logits``). The loss is coral-pytorch's
``corn_loss`` (the authors' package).
"""

from __future__ import annotations

import torch
from coral_pytorch.dataset import corn_label_from_logits
from coral_pytorch.losses import corn_loss

from workbench.losses._base import IGNORE_INDEX, ImbalanceLoss, flatten


class CornLoss(ImbalanceLoss):
    """CORN loss (Shi et al., sec. 3) on (N, K - 1) or (N, T, K - 1) logits, labels in [0, K) (-100 ignored):

        L = -(1 / sum_k |S_k|) sum_k sum_{i in S_k} [ [y_i > k - 1] log sigmoid(f_k(x_i))
                                                    + [y_i <= k - 1] log(1 - sigmoid(f_k(x_i))) ],

    S_k = {i : y_i > k - 2}, k = 1 .. K - 1 (S_1 is every example). The normaliser counts the pairs in the batch, so
    the loss is batch-level. ``num_outputs(K)`` is K - 1; ``probabilities`` gives P(y = k) = P(y > k - 1) - P(y > k)
    and ``predict`` the rank rule (module docstring).

    Args:
        reduction: "mean" only (the normaliser is the batch's).
    """

    choices = {"reduction": ("mean",)}

    def __init__(self, reduction: str = "mean") -> None:
        super().__init__(reduction)

    @property
    def is_batch_level(self) -> bool:
        return True

    def num_outputs(self, num_classes: int) -> int:
        return num_classes - 1

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        rows, targets = flatten(logits, labels, num_classes=logits.shape[-1] + 1)
        if not (targets != IGNORE_INDEX).any():  # no pair to average over: 0, with a gradient path
            return (rows * 0.0).sum().to(logits.dtype)
        with torch.autocast(rows.device.type, enabled=False):
            value = corn_loss(rows if rows.dtype == torch.float64 else rows.float(), targets, rows.shape[-1] + 1)
        return value.to(logits.dtype)

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        above = torch.cumprod(torch.sigmoid(logits), dim=-1)  # P(y > k), k = 0 .. K - 2
        ones, zeros = torch.ones_like(above[..., :1]), torch.zeros_like(above[..., :1])
        return torch.cat([ones, above], dim=-1) - torch.cat([above, zeros], dim=-1)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        return corn_label_from_logits(logits)
