"""Propensity-Corrected Loss (PCL) on top of label smoothing, for ordinal labels (CLUE QBQTC).

Paper: "Towards No.1 in CLUE Semantic Matching Challenge: Pre-trained Language Model
Erlangshen with Propensity-Corrected Loss" (arXiv 2208.02959, section 3.2). LS_i is
label-smoothed cross-entropy (``classification.smoothed_log_probs``). With class
counts n_k (n = sum_k n_k) the paper defines, with eps the scaling ratio (the LS epsilon
in the released code):

    PCL+ = eps n_0 / (n_1 + n_2)                       (eq. 2)
    PCL- = eps (n_0 + n_2) / n_1 = eps (n - n_1) / n_1   (eq. 3)
    L_i  = LS_i - PCL- (condition 1: encouraged mistake), LS_i + PCL+ (condition 2:
           punished mistake), LS_i (condition 3: no correction)          (eq. 4)

Below PCL+- = eps r+-, with the count ratios r- = (n - n_1) / n_1 and r+ = n_0 / (n - n_0)
(``pcl_plus_form="paper"``, eq. 2: 0.32 for QBQTC) or its reciprocal (n - n_0) / n_0
(``"code"``: 3.08, what the released code, Fengshenbang-LM
fengshen/examples/clue_sim/loss.py, uses). ``pcl_constants`` returns (r+, r-).

Which mistakes are which. The paper's text (section 3.2): for gold 0, predicting 2 is
penalised more than predicting 1, and predicting 1 gets the "loss bonus"; for gold 1,
predicting 0 is penalised more than predicting 2; its examples are 1 -> 2 for condition
1 (encourage) and 2 -> 0 for condition 2 (punish). That fixes five of the six 3-class
mistakes (0->1, 1->2 encouraged; 0->2, 1->0, 2->0 punished); the sixth, 2 -> 1, is left
implicit and follows from the paper's "distance" argument (1 is closer to 2 than 0 is):
encouraged. The workbench's severity rule gives exactly these six cases and extends them
to K ordinal classes: S[y, k] = |y - k| + pi_k [y != k], pi_k = n_k / n; the integer
distance orders mistakes and the propensity share (< 1) of the predicted class only
breaks ties (gold 1: predicting the more frequent class 0 costs more than 2). For each
gold y the cheapest wrong predictions are "near" mistakes (condition 1, encouraged), the
others "far" (condition 2, punished). An explicit ``cost_matrix`` (K x K, zero diagonal,
non-negative) replaces S.

Variants (``variant``):

* ``reference``: the value of the authors' LabelSmoothingCorrectionCrossEntropy, quirks
  kept: the correction is a float built from argmax predictions (no gradient, so
  training equals LS); only the first C (non-ignored) positions of the batch are
  inspected and the sum is divided by C; it adds eps r+(code) whenever gold +
  prediction >= 2 (correct 1s and 2s included); its "encourage" branch (gold +
  prediction = 1 with |gold - prediction| != 1) can never fire for integer labels. The
  LS part masks -100 positions (the released code's smoothing term does not).
* ``paper``: eq. 4 with eq. 2-3 as printed: LS_i + eps r+ for a far mistake, LS_i - eps r-
  for a near one, LS_i when correct (the offsets carry eps: 0.0324 and 0.0595 for QBQTC at
  eps = 0.1). Constants per case, so the gradient is LS's too.
* ``weighted``: w_i LS_i with w = 1 + eps r+ (far), 1 / (1 + eps r-) (near), 1 (correct),
  chosen from the detached argmax: gradient-bearing (the workbench's).
* ``expected_cost``: LS_i + eps sum_k S[y_i, k] p_ik: smooth and gradient-bearing; mass
  on far labels costs more than on near ones (the workbench's).

``counts="batch"`` recomputes the counts inside each batch (add-one smoothed so absent
classes stay finite): the paper's future work (section 3.3), batch-level by construction.

Computation: one ``nll_loss`` (which masks the -100 rows) reads at the gold class a
matrix whose entry [i, y] is minus row i's term if y were its gold class: the smoothed
log-probabilities log p @ Q (``smoothed_log_probs``), times M[y, argmax_i] (weighted) or
minus p @ M^T (expected cost); the paper's offsets and the reference correction are
read by a second ``nll_loss`` from the rows of M^T picked by the argmax. The matrices
live on the logits' device (batch counts included), so nothing synchronises.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from workbench.losses._base import (
    IGNORE_INDEX,
    NLL_REDUCTION,
    FlatInputs,
    ImbalanceLoss,
    check_choice,
    check_class_vector,
    check_range,
    class_indices,
    log_softmax_rows,
    nll_loss_forward,
    nll_reduce,
)
from workbench.losses.classification import smoothed_log_probs

QBQTC_LABEL_COUNTS = (48997, 125429, 25574)
PCL_VARIANTS = ("reference", "paper", "weighted", "expected_cost")
COUNT_MODES = ("global", "batch")
PCL_PLUS_FORMS = ("paper", "code")
DEFAULT_PCL_PLUS_FORM = {"reference": "code", "paper": "paper", "weighted": "code", "expected_cost": "code"}


def pcl_constants(label_counts: Sequence[float] | torch.Tensor, pcl_plus_form: str = "code") -> tuple[float, float]:
    """(r+, r-) = (PCL+ / eps, PCL- / eps): the count ratios of eq. 2-3 without the scaling
    ratio eps (classes 0 and 1 as in the paper): r- = (n - n_1) / n_1; r+ = n_0 / (n - n_0)
    (``"paper"``, eq. 2) or (n - n_0) / n_0 (``"code"``, the released code)."""
    check_choice("pcl_plus_form", pcl_plus_form, PCL_PLUS_FORMS)
    counts = check_class_vector("label_counts", label_counts, positive=True)
    plus, minus = count_ratios(counts, pcl_plus_form)
    return plus.item(), minus.item()


def count_ratios(counts: torch.Tensor, pcl_plus_form: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(r+, r-) as 0-d tensors on ``counts``' device and dtype (no host sync)."""
    total = counts.sum()
    plus = (total - counts[0]) / counts[0]
    minus = (total - counts[1]) / counts[1]
    return (plus if pcl_plus_form == "code" else plus.reciprocal()), minus


def check_cost_matrix(cost_matrix: Sequence[Sequence[float]] | torch.Tensor) -> torch.Tensor:
    """Validate a K x K cost matrix: zero diagonal, non-negative, finite; returns float64 on the CPU."""
    try:
        matrix = torch.as_tensor(cost_matrix, dtype=torch.float64, device="cpu").clone()
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"cost_matrix: must be a K x K matrix of numbers, got {cost_matrix!r}") from None
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"cost_matrix: must be a square K x K matrix with K >= 2, got shape {tuple(matrix.shape)}")
    if (matrix < 0).any() or not torch.isfinite(matrix).all() or (matrix.diagonal() != 0).any():
        raise ValueError(f"cost_matrix: must be finite and non-negative with a zero diagonal, got {matrix.tolist()}")
    return matrix


@functools.lru_cache(maxsize=32)
def class_grid(num_classes: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Cached K x K constants on ``device``: label distance |y - k| (float64), y != k, y == k
    and y + k >= 2 (the released code's "punish" condition)."""
    classes = torch.arange(num_classes, device=device)
    difference = classes.unsqueeze(1) - classes.unsqueeze(0)
    total = classes.unsqueeze(1) + classes.unsqueeze(0)
    return difference.abs().to(torch.float64), difference != 0, difference == 0, total >= 2


def severity_from_counts(counts: torch.Tensor) -> torch.Tensor:
    """S[y, k] = |y - k| + (n_k / n) [y != k] from validated float64 ``counts`` (any device)."""
    distance, off_diagonal, _, _ = class_grid(counts.numel(), counts.device)
    return distance + off_diagonal * (counts / counts.sum())


def pcl_severity(
    label_counts: Sequence[float] | torch.Tensor, cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None
) -> torch.Tensor:
    """S[y, k] = |y - k| + (n_k / n) [y != k], or the given ``cost_matrix``."""
    if cost_matrix is not None:
        return check_cost_matrix(cost_matrix)
    return severity_from_counts(check_class_vector("label_counts", label_counts, positive=True))


def near_mistakes(severity: torch.Tensor) -> torch.Tensor:
    """Bool K x K: (gold, predicted) is a near mistake, a cheapest wrong prediction for that gold
    (condition 1 of eq. 4); the other off-diagonal entries are far mistakes (condition 2)."""
    _, off_diagonal, diagonal, _ = class_grid(severity.shape[0], severity.device)
    cheapest = severity.masked_fill(diagonal, float("inf")).amin(dim=1, keepdim=True)
    return off_diagonal & (severity <= cheapest)


def pcl_weight_matrix(
    variant: str,
    epsilon: float = 0.1,
    label_counts: Sequence[float] | torch.Tensor = QBQTC_LABEL_COUNTS,
    pcl_plus_form: str | None = None,
    cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None,
) -> torch.Tensor:
    """The K x K matrix M[gold, predicted] each variant applies (float64), with the
    constants PCL+ = eps r+ and PCL- = eps r- of eq. 2-3 (r = ``pcl_constants``):

    * ``reference``: additive correction per inspected position, eps r+(code) / K when
      gold + predicted >= 2, else 0 (the encourage branch never fires);
    * ``paper``: additive offsets of eq. 4, +PCL+ = +eps r+ (far), -PCL- = -eps r- (near),
      0 (correct);
    * ``weighted``: multiplicative weights 1 + eps r+ (far), 1 / (1 + eps r-) (near), 1;
    * ``expected_cost``: eps S, the coefficients of sum_k S[y, k] p_k.
    """
    check_choice("variant", variant, PCL_VARIANTS)
    epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)
    form = DEFAULT_PCL_PLUS_FORM[variant] if pcl_plus_form is None else pcl_plus_form
    check_choice("pcl_plus_form", form, PCL_PLUS_FORMS)
    counts = check_class_vector("label_counts", label_counts, positive=True)
    matrix = None if cost_matrix is None else check_cost_matrix(cost_matrix)
    if matrix is not None and counts.numel() != matrix.shape[0]:
        raise ValueError(f"label_counts: must have one count per row of cost_matrix ({matrix.shape[0]}), got {counts.numel()}")
    return weight_matrix_from_counts(variant, epsilon, counts, form, matrix)


def weight_matrix_from_counts(
    variant: str, epsilon: float, counts: torch.Tensor, pcl_plus_form: str, cost_matrix: torch.Tensor | None
) -> torch.Tensor:
    """``pcl_weight_matrix`` for validated arguments: float64 ``counts`` and ``cost_matrix``
    (checked) on one device; tensor arithmetic only, so batch counts on a GPU stay there."""
    num_classes = counts.numel()
    _, off_diagonal, _, punished = class_grid(num_classes, counts.device)
    plus, minus = count_ratios(counts, pcl_plus_form)
    if variant == "reference":
        return punished * (plus * (epsilon / num_classes))
    severity = severity_from_counts(counts) if cost_matrix is None else cost_matrix
    if variant == "expected_cost":
        return epsilon * severity
    if variant == "paper":
        far, near, correct = epsilon * plus, -epsilon * minus, 0.0
    else:
        far, near, correct = 1.0 + epsilon * plus, (1.0 + epsilon * minus).reciprocal(), 1.0
    return torch.where(near_mistakes(severity), near, torch.where(off_diagonal, far, correct))


class PropensityCorrectedLoss(ImbalanceLoss):
    """PCL on label smoothing; see the module docstring for the formulas and variants.

    ``epsilon`` in [0, 1) (the LS epsilon and the eps of eq. 2-3); ``label_counts`` (one
    positive count per class) is required when ``counts="global"``; ``counts`` in
    {"global", "batch"}; ``variant`` in {"reference", "paper", "weighted",
    "expected_cost"} (default ``"paper"``, eq. 4 as printed; ``"reference"`` is the authors'
    released code, ``"weighted"`` and ``"expected_cost"`` the workbench's gradient-bearing forms); ``pcl_plus_form`` in {"paper", "code"} (default: "code" except for
    ``variant="paper"``); optional ``cost_matrix``. With global counts the attributes
    ``pcl_plus`` and ``pcl_minus`` hold the count ratios (PCL+ / eps and PCL- / eps) and
    ``weight_matrix`` the matrix in use (``pcl_weight_matrix``).
    """

    def __init__(
        self,
        epsilon: float = 0.1,
        label_counts: Sequence[float] | torch.Tensor | None = None,
        counts: str = "global",
        variant: str = "paper",
        pcl_plus_form: str | None = None,
        cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None,
        reduction: str = "mean",
        validate: bool = False,
    ) -> None:
        super().__init__(reduction, validate)
        check_choice("counts", counts, COUNT_MODES)
        check_choice("variant", variant, PCL_VARIANTS)
        check_choice("pcl_plus_form", pcl_plus_form, (None, *PCL_PLUS_FORMS))
        self.epsilon = check_range("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)
        self.counts = counts
        self.variant = variant
        self.pcl_plus_form = DEFAULT_PCL_PLUS_FORM[variant] if pcl_plus_form is None else pcl_plus_form
        self.register_buffer("cost_matrix", None if cost_matrix is None else check_cost_matrix(cost_matrix))
        self.pcl_plus: float | None = None
        self.pcl_minus: float | None = None
        self.register_buffer("weight_matrix", None)
        if counts == "global":
            if label_counts is None:
                raise ValueError("label_counts: must be given when counts='global' (one positive count per class), got None")
            self.label_counts = check_class_vector("label_counts", label_counts, positive=True)
            self.pcl_plus, self.pcl_minus = pcl_constants(self.label_counts, self.pcl_plus_form)
            self.weight_matrix = pcl_weight_matrix(variant, self.epsilon, self.label_counts, self.pcl_plus_form, self.cost_matrix)
        elif label_counts is not None:
            raise ValueError(
                f"label_counts: must be None when counts='batch' (counts come from each batch), got {label_counts!r}"
            )

    @property
    def is_batch_level(self) -> bool:
        """Batch counts make the value batch-level. The reference correction is a
        gradient-free constant, so its training signal decomposes like LS's."""
        return self.counts == "batch"

    def current_matrix(self, flat: FlatInputs) -> torch.Tensor:
        """M[gold, predicted] on the logits' device and dtype: the cached global matrix, or
        one from this batch's add-one smoothed counts (ignored positions match no class)."""
        num_classes, device, dtype = flat.num_classes, flat.logits.device, flat.logits.dtype
        defined = self.weight_matrix if self.counts == "global" else self.cost_matrix
        if defined is not None and defined.shape[0] != num_classes:
            source = "cost_matrix" if self.cost_matrix is not None else "label_counts"
            raise ValueError(f"{source}: must define C={num_classes} classes (those of the logits), got {defined.shape[0]}")
        if self.counts == "global":
            return self.constant("weight_matrix", device, dtype)
        batch_counts = (flat.targets == class_indices(num_classes, device)).sum(1).add_(1).to(torch.float64)
        cost_matrix = None if self.cost_matrix is None else self.constant("cost_matrix", device, torch.float64)
        matrix = weight_matrix_from_counts(self.variant, self.epsilon, batch_counts, self.pcl_plus_form, cost_matrix)
        return matrix.to(dtype)

    def compute(self, flat: FlatInputs) -> torch.Tensor:
        matrix = self.current_matrix(flat)
        log_probs = log_softmax_rows(flat.logits)
        smoothed = smoothed_log_probs(log_probs, self.epsilon)  # LS_i = -smoothed[i, y_i]
        if self.variant == "expected_cost":
            # (smoothed - p @ M^T)[i, y] = -LS_i - sum_k M[y, k] p_ik, M = eps S; one addmm.
            return nll_reduce(torch.addmm(smoothed, torch.exp(log_probs), matrix.t(), alpha=-1), flat, self.reduction)
        # picked[i, y] = M[y, argmax_i]: rows of a contiguous M^T (index_select from a transposed
        # view is ~20x slower on CPU; max(-1).indices, the first maximum as argmax, is 1.4x faster).
        predicted = flat.logits.detach().max(dim=-1).indices
        picked = matrix.t().contiguous().index_select(0, predicted)
        if self.variant == "weighted":
            return nll_reduce(smoothed * picked, flat, self.reduction)
        loss = nll_reduce(smoothed, flat, self.reduction)
        if self.variant == "paper":  # + M[y_i, argmax_i], reduced alike (an nll_loss of -picked)
            return loss + nll_reduce(picked.neg_(), flat, self.reduction)
        # reference: the correction summed over the first C valid positions only, added after the mean.
        first = torch.where(flat.valid.cumsum(0) <= flat.num_classes, flat.targets, IGNORE_INDEX)
        correction, _ = nll_loss_forward(picked.neg_(), first, None, NLL_REDUCTION["sum"], IGNORE_INDEX)
        if self.reduction == "none":
            return torch.where(flat.valid.reshape(flat.label_shape), loss + correction, 0.0)
        return loss + correction

    def extra_repr(self) -> str:
        return (
            f"epsilon={self.epsilon}, variant={self.variant!r}, counts={self.counts!r}, "
            f"pcl_plus_form={self.pcl_plus_form!r}, {super().extra_repr()}"
        )
