"""Propensity-Corrected Loss (PCL) on top of label smoothing, for ordinal labels (CLUE QBQTC).

LS_i is label-smoothed cross-entropy (see ``classification.label_smoothing_loss``).
With class counts n_k (n = sum_k n_k) the propensity constants are

    PCL- = (n - n_1) / n_1                                   (paper and code agree)
    PCL+ = (n - n_0) / n_0      (``pcl_plus_form="code"``:  3.08 for QBQTC)
    PCL+ = n_0 / (n - n_0)      (``pcl_plus_form="paper"``, eq. 2: 0.32, the reciprocal)

Label distance. The 3-class rule (gold 0: predicting 2 is worse than 1; gold 1: 0 is
worse than 2; gold 2: 0 is worse than 1) is reproduced for K ordinal classes by the
severity matrix S[y, k] = |y - k| + pi_k [y != k], pi_k = n_k / n: the integer distance
orders mistakes, and since 0 < pi_k < 1 the propensity of the predicted class only
breaks ties (gold 1: predicting the more frequent class 0 costs more than 2). An
explicit ``cost_matrix`` (K x K, zero diagonal, non-negative) replaces S. For each gold
y the cheapest wrong predictions are "near" mistakes (encouraged), the others "far"
(punished).

Variants (``variant``):

* ``reference``: the value of the authors' LabelSmoothingCorrectionCrossEntropy
  (Fengshenbang-LM fengshen/examples/clue_sim/loss.py), quirks kept: the correction is a
  float built from argmax predictions (no gradient, so training equals LS); only the
  first C (non-ignored) positions of the batch are inspected and the sum is divided by
  C; it adds eps * PCL+ whenever gold + prediction >= 2 (correct 1s and 2s included);
  its "encourage" branch (gold + prediction = 1 with |gold - prediction| != 1) can never
  fire for integer labels. The LS part masks -100 positions (the released code's
  smoothing term does not).
* ``paper``: eq. 4 as written: LS_i + PCL+ for a far mistake, LS_i - PCL- for a near
  one, LS_i when correct (eq. 2-3 give the constants). Constants per case, so the
  gradient is LS's too.
* ``weighted``: w_i LS_i with w = 1 + eps PCL+ (far), 1 / (1 + eps PCL-) (near), 1
  (correct), chosen from the detached argmax: gradient-bearing.
* ``expected_cost``: LS_i + eps sum_k S[y_i, k] p_ik: smooth and gradient-bearing; mass
  on far labels costs more than on near ones.

``counts="batch"`` recomputes the counts inside each batch (add-one smoothed so absent
classes stay finite): the paper's future work, batch-level by construction.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from workbench.losses._base import (
    FlatInputs,
    ImbalanceLoss,
    check_choice,
    check_class_vector,
    check_range,
    flatten_inputs,
    log_softmax_rows,
    mask_ignored,
    reduce_terms,
    valid_count,
)
from workbench.losses.classification import label_smoothing_loss

QBQTC_LABEL_COUNTS = (48997, 125429, 25574)
PCL_VARIANTS = ("reference", "paper", "weighted", "expected_cost")
COUNT_MODES = ("global", "batch")
PCL_PLUS_FORMS = ("paper", "code")
DEFAULT_PCL_PLUS_FORM = {"reference": "code", "paper": "paper", "weighted": "code", "expected_cost": "code"}


def pcl_constants(label_counts: Sequence[float] | torch.Tensor, pcl_plus_form: str = "code") -> tuple[float, float]:
    """Return (PCL+, PCL-) from class counts (classes 0 and 1 as in the paper, eq. 2-3)."""
    check_choice("pcl_plus_form", pcl_plus_form, PCL_PLUS_FORMS)
    counts = check_class_vector("label_counts", label_counts, positive=True)
    return constants_from_counts(counts.tolist(), pcl_plus_form)


def constants_from_counts(counts: list[float], pcl_plus_form: str) -> tuple[float, float]:
    """(PCL+, PCL-) from already validated counts, in float64 Python arithmetic."""
    total = sum(counts)
    pcl_plus = (total - counts[0]) / counts[0]
    pcl_minus = (total - counts[1]) / counts[1]
    return (pcl_plus if pcl_plus_form == "code" else 1.0 / pcl_plus), pcl_minus


def check_cost_matrix(cost_matrix: Sequence[Sequence[float]] | torch.Tensor) -> torch.Tensor:
    """Validate a K x K cost matrix: zero diagonal, non-negative, finite."""
    matrix = torch.as_tensor(cost_matrix, dtype=torch.float64)
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"cost_matrix must be a square K x K matrix with K >= 2, got shape {tuple(matrix.shape)}")
    if (matrix < 0).any() or not torch.isfinite(matrix).all() or (matrix.diagonal() != 0).any():
        raise ValueError("cost_matrix must be finite and non-negative with a zero diagonal")
    return matrix


@functools.lru_cache(maxsize=32)
def class_grid(num_classes: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Cached K x K constants: label distance |y - k| (float64), y != k, and y + k >= 2."""
    classes = torch.arange(num_classes)
    difference = classes.unsqueeze(1) - classes.unsqueeze(0)
    return difference.abs().to(torch.float64), difference != 0, (classes.unsqueeze(1) + classes.unsqueeze(0)) >= 2


def severity_from_counts(counts: torch.Tensor) -> torch.Tensor:
    """S[y, k] = |y - k| + (n_k / n) [y != k] from validated float64 ``counts``."""
    distance, off_diagonal, _ = class_grid(counts.numel())
    return distance + off_diagonal * (counts / counts.sum())


def pcl_severity(
    label_counts: Sequence[float] | torch.Tensor, cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None
) -> torch.Tensor:
    """S[y, k] = |y - k| + (n_k / n) [y != k], or the given ``cost_matrix``."""
    if cost_matrix is not None:
        return check_cost_matrix(cost_matrix)
    return severity_from_counts(check_class_vector("label_counts", label_counts, positive=True))


def pcl_mistake_kinds(severity: torch.Tensor) -> torch.Tensor:
    """Per (gold, predicted): 0 correct, -1 near mistake (cheapest wrong), +1 far mistake."""
    _, off_diagonal, _ = class_grid(severity.shape[0])
    cheapest = severity.masked_fill(~off_diagonal, float("inf")).amin(dim=1, keepdim=True)
    near = off_diagonal & (severity <= cheapest)
    return torch.where(near, -1, torch.where(off_diagonal, 1, 0))


def pcl_weight_matrix(
    variant: str,
    epsilon: float = 0.1,
    label_counts: Sequence[float] | torch.Tensor = QBQTC_LABEL_COUNTS,
    pcl_plus_form: str | None = None,
    cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None,
) -> torch.Tensor:
    """The K x K matrix M[gold, predicted] each variant applies (float64):

    * ``reference``: additive correction per inspected position, eps PCL+ / K when
      gold + predicted >= 2, else 0 (the encourage branch never fires);
    * ``paper``: additive offsets +PCL+ (far), -PCL- (near), 0 (correct);
    * ``weighted``: multiplicative weights 1 + eps PCL+ (far), 1 / (1 + eps PCL-) (near), 1;
    * ``expected_cost``: eps S, the coefficients of sum_k S[y, k] p_k.
    """
    check_choice("variant", variant, PCL_VARIANTS)
    epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)
    form = DEFAULT_PCL_PLUS_FORM[variant] if pcl_plus_form is None else pcl_plus_form
    check_choice("pcl_plus_form", form, PCL_PLUS_FORMS)
    counts = check_class_vector("label_counts", label_counts, positive=True)
    matrix = None if cost_matrix is None else check_cost_matrix(cost_matrix)
    if matrix is not None and counts.numel() != matrix.shape[0]:
        raise ValueError(f"label_counts has {counts.numel()} entries but cost_matrix is {matrix.shape[0]} x {matrix.shape[0]}")
    return weight_matrix_from_counts(variant, epsilon, counts, form, matrix)


def weight_matrix_from_counts(
    variant: str, epsilon: float, counts: torch.Tensor, pcl_plus_form: str, cost_matrix: torch.Tensor | None
) -> torch.Tensor:
    """``pcl_weight_matrix`` for validated arguments (float64 ``counts``, checked ``cost_matrix``)."""
    pcl_plus, pcl_minus = constants_from_counts(counts.tolist(), pcl_plus_form)
    num_classes = counts.numel()
    if variant == "reference":
        _, _, punished = class_grid(num_classes)
        return punished.to(torch.float64) * epsilon * pcl_plus / num_classes
    severity = severity_from_counts(counts) if cost_matrix is None else cost_matrix
    if variant == "expected_cost":
        return epsilon * severity
    kinds = pcl_mistake_kinds(severity)
    if variant == "paper":
        far, near, correct = pcl_plus, -pcl_minus, 0.0
    else:
        far, near, correct = 1.0 + epsilon * pcl_plus, 1.0 / (1.0 + epsilon * pcl_minus), 1.0
    # Index a float64 value table by kind (-1, 0, +1): no float32 rounding of the constants.
    return torch.tensor([near, correct, far], dtype=torch.float64)[kinds + 1]


class PropensityCorrectedLoss(ImbalanceLoss):
    """PCL on label smoothing; see the module docstring for the formulas and variants.

    ``epsilon`` in [0, 1); ``label_counts`` (one positive count per class) is required
    when ``counts="global"``; ``counts`` in {"global", "batch"}; ``variant`` in
    {"reference", "paper", "weighted", "expected_cost"}; ``pcl_plus_form`` in
    {"paper", "code"} (default: "code" except for ``variant="paper"``); optional
    ``cost_matrix``. With global counts the attributes ``pcl_plus``, ``pcl_minus`` and
    ``weight_matrix`` hold the constants in use.
    """

    def __init__(
        self,
        epsilon: float = 0.1,
        label_counts: Sequence[float] | torch.Tensor | None = None,
        counts: str = "global",
        variant: str = "reference",
        pcl_plus_form: str | None = None,
        cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        check_choice("counts", counts, COUNT_MODES)
        check_choice("variant", variant, PCL_VARIANTS)
        check_choice("pcl_plus_form", pcl_plus_form, (None, *PCL_PLUS_FORMS))
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)
        self.counts = counts
        self.variant = variant
        self.pcl_plus_form = DEFAULT_PCL_PLUS_FORM[variant] if pcl_plus_form is None else pcl_plus_form
        self.cost_matrix = None if cost_matrix is None else check_cost_matrix(cost_matrix)
        self.pcl_plus: float | None = None
        self.pcl_minus: float | None = None
        self.register_buffer("weight_matrix", None)
        if counts == "global":
            if label_counts is None:
                raise ValueError("label_counts is required when counts='global' (one positive count per class)")
            self.label_counts = check_class_vector("label_counts", label_counts, positive=True)
            self.pcl_plus, self.pcl_minus = pcl_constants(self.label_counts, self.pcl_plus_form)
            self.weight_matrix = pcl_weight_matrix(
                variant, self.epsilon, self.label_counts, self.pcl_plus_form, self.cost_matrix
            )
        elif label_counts is not None:
            raise ValueError("label_counts must be None when counts='batch' (counts come from each batch)")

    @property
    def is_batch_level(self) -> bool:
        """Batch counts make the value batch-level. The reference correction is a
        gradient-free constant, so its training signal decomposes like LS's."""
        return self.counts == "batch"

    def matrix_for(self, label_counts: torch.Tensor) -> torch.Tensor:
        return weight_matrix_from_counts(self.variant, self.epsilon, label_counts, self.pcl_plus_form, self.cost_matrix)

    def current_matrix(self, flat: FlatInputs) -> torch.Tensor:
        num_classes = flat.logits.shape[-1]
        if self.counts == "global":
            matrix = self.weight_matrix
        else:
            # Ignored positions are counted in an extra bin num_classes, then dropped.
            labels = torch.where(flat.valid, flat.labels, num_classes) if flat.has_ignored else flat.labels
            batch_counts = torch.bincount(labels, minlength=num_classes + 1)[:num_classes] + 1
            matrix = self.matrix_for(batch_counts.to(device="cpu", dtype=torch.float64))
        if matrix.shape[0] != num_classes:
            raise ValueError(
                f"label_counts / cost_matrix define {matrix.shape[0]} classes but the logits have C={num_classes}"
            )
        return matrix.to(device=flat.logits.device, dtype=flat.logits.dtype)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        flat = flatten_inputs(logits, labels)
        matrix = self.current_matrix(flat)
        log_probs = log_softmax_rows(flat.logits)
        terms = label_smoothing_loss(log_probs, flat.labels, self.epsilon)
        correction = None
        if self.variant == "expected_cost":
            # sum_k S[y, k] p_k for every gold y at once, then pick the row's gold.
            expected = torch.exp(log_probs) @ matrix.T
            terms = terms + expected.gather(-1, flat.labels.unsqueeze(-1)).squeeze(-1)
        else:
            predicted = flat.logits.detach().argmax(dim=-1)
            picked = matrix.flatten()
            if self.variant == "reference":
                inspected = flat.valid.nonzero().squeeze(-1)[: flat.logits.shape[-1]] if flat.has_ignored else slice(0, flat.logits.shape[-1])
                correction = picked[flat.labels[inspected] * matrix.shape[1] + predicted[inspected]].sum()
            elif self.variant == "paper":
                terms = terms + picked[flat.labels * matrix.shape[1] + predicted]
            else:
                terms = picked[flat.labels * matrix.shape[1] + predicted] * terms
        terms = mask_ignored(terms, flat)
        if correction is not None and self.reduction == "none":
            terms = mask_ignored(terms + correction, flat)
        loss = reduce_terms(terms, flat, self.reduction, valid_count(flat, terms.dtype))
        if correction is not None and self.reduction != "none":
            loss = loss + correction
        return loss

    def extra_repr(self) -> str:
        return (
            f"epsilon={self.epsilon}, variant={self.variant!r}, counts={self.counts!r}, "
            f"pcl_plus_form={self.pcl_plus_form!r}, {super().extra_repr()}"
        )
