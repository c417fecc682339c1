"""Propensity-Corrected Loss (PCL paper, arXiv 2208.02959, sec. 3.2) on top of label smoothing (LS).

With class counts n_k and eps the scaling ratio (the LS epsilon in the released code):

    PCL+ = eps n_0 / (n_1 + n_2)                                                    (eq. 2)
    PCL- = eps (n_0 + n_2) / n_1                                                    (eq. 3)
    L_i  = LS_i - PCL- (condition 1), LS_i + PCL+ (condition 2), LS_i (condition 3)  (eq. 4)

For K classes the count ratios are r- = (n_0 + n_2 + ... ) / n_1 and r+ = n_0 / (n_1 + n_2 + ...) (eq. 2,
``pcl_plus_form="paper"``) or its reciprocal (``"code"``: what the released code, Fengshenbang-LM
fengshen/examples/clue_sim/loss.py, uses); PCL+- = eps r+-.

Near and far mistakes. Condition 1 (encouraged) is a near mistake, condition 2 (punished) a far one: for
each gold y the cheapest wrong predictions k by a severity S[y, k] are near, the others far. The default
S[y, k] = |y - k| + (n_k / n) [y != k] assumes ORDINAL labels (QBQTC: 0 < 1 < 2): the distance orders the
mistakes, the predicted class's share only breaks ties, and for 3 classes it gives the paper's cases
(0->1, 1->2, 2->1 near; 0->2, 1->0, 2->0 far). For nominal labels give ``cost_matrix`` (K x K, zero
diagonal): it replaces S, so near and far (and ``expected_cost``) come from it alone; PCL+- stay the
count ratios of eq. 2-3 (classes 0 and 1), and ``reference`` (which reads label values) refuses it.

Variants: ``paper`` (default) is eq. 4 as printed, constants per case, so its gradient is LS's;
``reference`` is the released code's value: LS plus a Python-float correction (no gradient) of
eps r+(code) / C for each of the first C positions whose gold + prediction >= 2 (its "encourage" branch
never fires for integer labels); ``weighted`` (w_i LS_i, w = 1 + eps r+ far, 1 / (1 + eps r-) near, 1
correct, from the detached argmax) and ``expected_cost`` (LS_i + eps sum_k S[y_i, k] p_ik) are the
workbench's gradient-bearing forms. ``counts="batch"`` takes add-one smoothed counts from each batch (the
paper's future work, sec. 3.3).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from workbench.losses._base import IGNORE_INDEX, LARGEST, ImbalanceLoss, check_choice, check_label_counts
from workbench.losses.classification import EPSILON  # PCL's eps is label smoothing's (eq. 2-3: its scaling ratio)

QBQTC_LABEL_COUNTS = (48997, 125429, 25574)
PCL_VARIANTS = ("reference", "paper", "weighted", "expected_cost")
GRADIENT_FREE_VARIANTS = ("reference", "paper")
"""The variants whose correction is a constant per loss cell (from the label counts and the detached argmax, not the
logits): their gradient is label smoothing's at the same epsilon, so they train and predict as LS."""
PCL_PLUS_FORMS = ("paper", "code")
PCL_COUNTS = ("global", "batch")
DEFAULT_PCL_PLUS_FORM = {"reference": "code", "paper": "paper", "weighted": "code", "expected_cost": "code"}


def count_ratios(n: list[float], pcl_plus_form: str) -> tuple[float, float]:
    """(r+, r-) = (PCL+ / eps, PCL- / eps) from counts n, as eq. 2-3 print them (sums of the other counts)."""
    r_plus = n[0] / sum(n[1:])  # eq. 2: PCL+ = eps n_0 / (n_1 + n_2)
    r_minus = (n[0] + sum(n[2:])) / n[1]  # eq. 3: PCL- = eps (n_0 + n_2) / n_1
    if pcl_plus_form == "code":
        r_plus = sum(n[1:]) / n[0]  # the released code's PCL+: the reciprocal of eq. 2's ratio
    return r_plus, r_minus


def pcl_constants(label_counts: Sequence[float] | torch.Tensor, pcl_plus_form: str = "code") -> tuple[float, float]:
    """(r+, r-) = (PCL+ / eps, PCL- / eps) of eq. 2-3: r- = (n_0 + n_2 + ...) / n_1; r+ = n_0 / (n_1 + n_2 + ...)
    ("paper") or its reciprocal ("code")."""
    check_choice("pcl_plus_form", pcl_plus_form, PCL_PLUS_FORMS)
    return count_ratios(check_label_counts(label_counts).tolist(), pcl_plus_form)


def check_cost_matrix(
    cost_matrix: Sequence[Sequence[float]] | torch.Tensor, variant: str | None = None
) -> torch.Tensor:
    """The cost matrix as a K x K float64 CPU matrix: K >= 2, a zero diagonal, entries in [0, 1e12], and not for
    ``reference``; ValueError naming ``cost_matrix`` otherwise."""
    if variant == "reference":
        raise ValueError(
            "cost_matrix: must be None for variant='reference' (the released code reads label values), got a matrix"
        )
    try:
        matrix = torch.as_tensor(cost_matrix, dtype=torch.float64, device="cpu").clone()
    except (TypeError, ValueError, RuntimeError):
        raise ValueError(f"cost_matrix: must be a K x K matrix of numbers, got {cost_matrix!r}") from None
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"cost_matrix: must be a square K x K matrix with K >= 2, got shape {tuple(matrix.shape)}")
    if not ((matrix >= 0) & (matrix <= LARGEST)).all() or (matrix.diagonal() != 0).any():
        raise ValueError(
            f"cost_matrix: must hold numbers in [0, {LARGEST:g}] with a zero diagonal, got {matrix.tolist()}"
        )
    return matrix


def check_one_count_per_row(counts: torch.Tensor, cost_matrix: torch.Tensor | None) -> None:
    """ValueError naming ``label_counts`` unless the checked ``counts`` define the classes of the checked
    ``cost_matrix`` (one count per row); nothing to check without a matrix."""
    if cost_matrix is not None and len(cost_matrix) != len(counts):
        raise ValueError(
            f"label_counts: must have one count per row of cost_matrix ({len(cost_matrix)}), got {len(counts)}"
        )


def ordinal_severity(counts: torch.Tensor) -> torch.Tensor:
    """S[y, k] = |y - k| + (n_k / n) [y != k] from float64 ``counts``."""
    classes = torch.arange(len(counts), dtype=torch.float64)
    distance = (classes.unsqueeze(1) - classes.unsqueeze(0)).abs()
    return distance + (distance > 0) * (counts / counts.sum())


def pcl_severity(
    label_counts: Sequence[float] | torch.Tensor, cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None
) -> torch.Tensor:
    """S[y, k] = |y - k| + (n_k / n) [y != k] (ordinal labels), or the given ``cost_matrix``."""
    return ordinal_severity(check_label_counts(label_counts)) if cost_matrix is None else check_cost_matrix(cost_matrix)


def near_mistakes(severity: torch.Tensor) -> torch.Tensor:
    """Bool K x K: (gold, predicted) is a cheapest wrong prediction for that gold (condition 1 of eq. 4)."""
    wrong = ~torch.eye(len(severity), dtype=torch.bool)
    cheapest = severity.masked_fill(~wrong, float("inf")).amin(dim=1, keepdim=True)
    return wrong & (severity <= cheapest)


def pcl_weight_matrix(
    variant: str,
    epsilon: float = 0.1,
    label_counts: Sequence[float] | torch.Tensor = QBQTC_LABEL_COUNTS,
    pcl_plus_form: str | None = None,
    cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None,
) -> torch.Tensor:
    """M[gold, predicted] (float64 K x K) of a variant: ``paper`` offsets +eps r+ (far), -eps r- (near), 0;
    ``weighted`` weights 1 + eps r+ (far), 1 / (1 + eps r-) (near), 1; ``expected_cost`` eps S;
    ``reference`` eps r+(code) / K where gold + predicted >= 2, else 0."""
    check_choice("variant", variant, PCL_VARIANTS)
    epsilon = EPSILON.check_number("epsilon", epsilon)
    form = DEFAULT_PCL_PLUS_FORM[variant] if pcl_plus_form is None else pcl_plus_form
    check_choice("pcl_plus_form", form, PCL_PLUS_FORMS)
    counts = check_label_counts(label_counts)
    cost_matrix = None if cost_matrix is None else check_cost_matrix(cost_matrix, variant)
    check_one_count_per_row(counts, cost_matrix)
    return pcl_weight_matrix_of_checked(variant, epsilon, counts, form, cost_matrix)


def pcl_weight_matrix_of_checked(
    variant: str, epsilon: float, counts: torch.Tensor, pcl_plus_form: str, cost_matrix: torch.Tensor | None
) -> torch.Tensor:
    """``pcl_weight_matrix`` for arguments already checked (epsilon in :data:`EPSILON`, float64 CPU counts and cost
    matrix): nothing is checked again (a batch's counts, a widget's redraw at each slider step)."""
    plus, minus = count_ratios(counts.tolist(), pcl_plus_form)
    num_classes = len(counts)
    if variant == "reference":
        classes = torch.arange(num_classes)
        punished = (classes.unsqueeze(1) + classes.unsqueeze(0) >= 2).to(torch.float64)
        return punished * (epsilon * plus / num_classes)
    severity = ordinal_severity(counts) if cost_matrix is None else cost_matrix
    if variant == "expected_cost":
        return epsilon * severity
    if variant == "paper":
        far, near, correct = epsilon * plus, -epsilon * minus, 0.0
    else:
        far, near, correct = 1 + epsilon * plus, 1 / (1 + epsilon * minus), 1.0
    matrix = torch.full((num_classes, num_classes), far, dtype=torch.float64)
    matrix[near_mistakes(severity)] = near
    return matrix.fill_diagonal_(correct)


class PropensityCorrectedLoss(ImbalanceLoss):
    """PCL (eq. 2-4) on per-row label smoothing; the variants and near/far cases are in the module docstring.

    With global counts ``pcl_plus`` and ``pcl_minus`` hold r+ and r- (PCL+- / eps) and ``weight_matrix``
    the matrix of the variant (:func:`pcl_weight_matrix`); the ``paper`` variant computes eq. 4 case by case.

    Args:
        epsilon: eps in [0, 1), the LS epsilon and the scaling ratio of eq. 2-3.
        label_counts: class counts n_k in [1e-12, 1e12]; required for ``counts="global"``, refused for "batch".
        counts: "global" (``label_counts``) or "batch" (each batch's add-one smoothed counts).
        variant: "paper", "reference", "weighted" or "expected_cost".
        pcl_plus_form: "paper" or "code" (default: "paper" for ``variant="paper"``, else "code").
        cost_matrix: optional K x K severity for nominal labels (not with "reference").
        reduction: "mean", "sum" or "none".
    """

    ranges = {"epsilon": EPSILON}
    choices = {
        **ImbalanceLoss.choices,
        "counts": PCL_COUNTS,
        "variant": PCL_VARIANTS,
        "pcl_plus_form": (None, *PCL_PLUS_FORMS),
    }

    def __init__(
        self,
        epsilon: float = 0.1,
        label_counts: Sequence[float] | torch.Tensor | None = None,
        counts: str = "global",
        variant: str = "paper",
        pcl_plus_form: str | None = None,
        cost_matrix: Sequence[Sequence[float]] | torch.Tensor | None = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction)
        self.counts = check_choice("counts", counts, PCL_COUNTS)
        self.variant = check_choice("variant", variant, PCL_VARIANTS)
        check_choice("pcl_plus_form", pcl_plus_form, self.choices["pcl_plus_form"])
        self.epsilon = EPSILON.check_number("epsilon", epsilon)
        self.pcl_plus_form = DEFAULT_PCL_PLUS_FORM[variant] if pcl_plus_form is None else pcl_plus_form
        self.register_buffer("cost_matrix", None if cost_matrix is None else check_cost_matrix(cost_matrix, variant))
        self.pcl_plus = None
        self.pcl_minus = None
        self.register_buffer("weight_matrix", None)
        if counts == "batch" and label_counts is not None:
            raise ValueError(
                f"label_counts: must be None when counts='batch' (counts come from each batch), got {label_counts!r}"
            )
        if counts == "global":
            if label_counts is None:
                raise ValueError(
                    "label_counts: must be given when counts='global' (one positive count per class), got None"
                )
            self.label_counts = check_label_counts(label_counts)
            check_one_count_per_row(self.label_counts, self.cost_matrix)
            self.pcl_plus, self.pcl_minus = count_ratios(self.label_counts.tolist(), self.pcl_plus_form)
            self.weight_matrix = pcl_weight_matrix_of_checked(
                variant, self.epsilon, self.label_counts, self.pcl_plus_form, self.cost_matrix
            )

    @property
    def is_batch_level(self) -> bool:
        return self.counts == "batch"

    @property
    def rows_are_independent(self) -> bool:
        """False for ``reference`` too: its correction, read from the first C positions, is added to every row."""
        return not self.is_batch_level and self.variant != "reference"

    def class_counts(self, targets: torch.Tensor, num_classes: int) -> torch.Tensor:
        """The counts n_k of eq. 2-3 for C classes: ``label_counts``, or this batch's add-one smoothed counts."""
        defined = self.label_counts if self.counts == "global" else self.cost_matrix
        if defined is not None and len(defined) != num_classes:
            name = "cost_matrix" if self.cost_matrix is not None else "label_counts"
            raise ValueError(f"{name}: must define C={num_classes} classes (those of the logits), got {len(defined)}")
        if self.counts == "global":
            return self.label_counts
        return torch.bincount(targets[targets != IGNORE_INDEX], minlength=num_classes).cpu().double() + 1

    def matrix(self, targets: torch.Tensor, num_classes: int) -> torch.Tensor:
        """M[gold, predicted] for C classes: the global matrix, or one from this batch's add-one smoothed counts."""
        counts = self.class_counts(targets, num_classes)
        if self.counts == "global":
            return self.weight_matrix
        cost_matrix = None if self.cost_matrix is None else self.cost_matrix.cpu()
        return pcl_weight_matrix_of_checked(self.variant, self.epsilon, counts, self.pcl_plus_form, cost_matrix)

    def paper_loss(self, logits: torch.Tensor, targets: torch.Tensor, ls: torch.Tensor) -> torch.Tensor:
        """Eq. 4 as printed, per position: LS - PCL- (condition 1: a near mistake), LS + PCL+ (condition 2: a far
        mistake), LS (condition 3: a correct prediction); 0 at ignored positions. Constants: LS's gradient."""
        counts = self.class_counts(targets, logits.shape[-1])
        r_plus, r_minus = count_ratios(counts.tolist(), self.pcl_plus_form)
        pcl_plus = self.epsilon * r_plus  # eq. 2
        pcl_minus = self.epsilon * r_minus  # eq. 3
        severity = ordinal_severity(counts) if self.cost_matrix is None else self.cost_matrix.cpu()
        gold = targets.clamp_min(0)
        predicted = logits.detach().argmax(-1)
        near = near_mistakes(severity).to(logits.device)[gold, predicted]
        correct = predicted == gold
        loss = torch.where(correct, ls, torch.where(near, ls - pcl_minus, ls + pcl_plus))
        return torch.where(targets != IGNORE_INDEX, loss, 0.0)

    def compute(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        ls = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, label_smoothing=self.epsilon, reduction="none")
        if self.variant == "paper":
            return self.reduce(self.paper_loss(logits, targets, ls), targets)
        valid = targets != IGNORE_INDEX
        gold = targets.clamp_min(0)
        predicted = logits.detach().argmax(-1)
        matrix = self.matrix(targets, logits.shape[-1]).to(logits)
        if self.variant == "weighted":
            return self.reduce(matrix[gold, predicted] * ls, targets)
        if self.variant == "expected_cost":
            return self.reduce(ls + valid * (matrix[gold] * torch.softmax(logits, dim=-1)).sum(-1), targets)
        first = valid & (valid.cumsum(0) <= logits.shape[-1])  # reference: the first C positions, the only ones read
        correction = (matrix[gold, predicted] * first).sum()  # built from argmax predictions: no gradient
        if self.reduction == "none":
            return torch.where(valid, ls + correction, 0.0)
        return self.reduce(ls, targets) + correction

    def extra_repr(self) -> str:
        return f"epsilon={self.epsilon}, variant={self.variant!r}, counts={self.counts!r}, {super().extra_repr()}"
