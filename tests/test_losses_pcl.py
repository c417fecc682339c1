"""PCL: constants, the released code's value, gradient identities with label smoothing, variants, errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from workbench.losses import QBQTC_LABEL_COUNTS, build_loss, pcl_constants, pcl_severity, pcl_weight_matrix
from workbench.losses._base import check_class_vector

COUNTS = QBQTC_LABEL_COUNTS


def _released_code_value(output: torch.Tensor, target: torch.Tensor, eps: float) -> float:
    """A float64 port of LabelSmoothingCorrectionCrossEntropy.forward (reduction='mean')."""
    c = output.size()[-1]
    log_preds = F.log_softmax(output, dim=-1)
    loss = (-log_preds.sum(dim=-1)).mean()
    labels_hat = torch.argmax(output, dim=1)
    lt_sum = labels_hat + target
    abs_lt_sub = abs(labels_hat - target)
    correction_loss = 0.0
    for i in range(c):
        if lt_sum[i] == 0:
            pass
        elif lt_sum[i] == 1:
            if abs_lt_sub[i] != 1:
                correction_loss -= eps * 0.5945275813408382
        else:
            correction_loss += eps * (1 / 0.32447699714575207)
    correction_loss /= c
    return (loss * eps / c + (1 - eps) * F.nll_loss(log_preds, target) + correction_loss).item()


def _inputs(seed: int, n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, 3, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, 3, (n,), generator=generator)
    return logits, labels


def test_constants_match_the_released_code_and_paper_is_the_reciprocal():
    plus_code, minus = pcl_constants(COUNTS, "code")
    plus_paper, minus_paper = pcl_constants(COUNTS, "paper")
    assert plus_code == pytest.approx(1 / 0.32447699714575207, rel=1e-12)
    assert plus_paper == pytest.approx(0.32447699714575207, rel=1e-12)
    assert minus == minus_paper == pytest.approx(0.5945275813408382, rel=1e-12)
    loss = build_loss("pcl", variant="paper", label_counts=COUNTS)
    assert loss.pcl_plus == pytest.approx(plus_paper) and loss.pcl_plus_form == "paper"
    assert build_loss("pcl", variant="reference", label_counts=COUNTS).pcl_plus == pytest.approx(plus_code)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_reference_value_equals_the_released_code(seed):
    logits, labels = _inputs(seed)
    loss = build_loss("pcl", variant="reference", epsilon=0.1, label_counts=COUNTS)
    assert loss(logits, labels).item() == pytest.approx(_released_code_value(logits, labels, 0.1), rel=1e-12)


def test_reference_inspects_only_the_first_c_positions():
    logits, labels = _inputs(4)
    loss = build_loss("pcl", variant="reference", label_counts=COUNTS)
    changed = labels.clone()
    changed[3:] = (labels[3:] + 1) % 3
    ls = build_loss("ls")
    difference = loss(logits, labels) - ls(logits, labels)
    changed_difference = loss(logits, changed) - ls(logits, changed)
    torch.testing.assert_close(difference, changed_difference)


@pytest.mark.parametrize("variant", ["reference", "paper"])
def test_faithful_variants_have_exactly_the_label_smoothing_gradient(variant):
    logits, labels = _inputs(5)
    labels[2] = -100
    pcl_logits = logits.clone().requires_grad_(True)
    ls_logits = logits.clone().requires_grad_(True)
    build_loss("pcl", variant=variant, label_counts=COUNTS)(pcl_logits, labels).backward()
    build_loss("ls", epsilon=0.1)(ls_logits, labels).backward()
    assert torch.equal(pcl_logits.grad, ls_logits.grad)


@pytest.mark.parametrize("variant", ["weighted", "expected_cost"])
def test_gradient_bearing_variants_differ_from_label_smoothing(variant):
    logits, labels = _inputs(6)
    pcl_logits = logits.clone().requires_grad_(True)
    ls_logits = logits.clone().requires_grad_(True)
    build_loss("pcl", variant=variant, label_counts=COUNTS)(pcl_logits, labels).backward()
    build_loss("ls", epsilon=0.1)(ls_logits, labels).backward()
    assert (pcl_logits.grad - ls_logits.grad).abs().max() > 1e-3


def test_severity_reproduces_the_three_class_distance_rule():
    severity = pcl_severity(COUNTS)
    assert severity[0, 2] > severity[0, 1]
    assert severity[1, 0] > severity[1, 2]
    assert severity[2, 0] > severity[2, 1]
    assert torch.all(severity.diagonal() == 0)
    distance = torch.tensor([[0, 1, 2, 3], [1, 0, 1, 2], [2, 1, 0, 1], [3, 2, 1, 0]], dtype=torch.float64)
    ordinal = pcl_severity([10, 20, 30, 40])
    assert torch.all((ordinal - distance).abs() < 1)  # the propensity term only breaks ties


def test_paper_and_weighted_matrices():
    plus, minus = pcl_constants(COUNTS, "paper")
    paper = pcl_weight_matrix("paper", 0.1, COUNTS)
    # eq. 2-3 carry the scaling ratio eps: PCL+ = eps * plus, PCL- = eps * minus.
    expected = 0.1 * torch.tensor([[0, -minus, plus], [plus, 0, -minus], [plus, -minus, 0]], dtype=torch.float64)
    torch.testing.assert_close(paper, expected)
    plus_code, _ = pcl_constants(COUNTS, "code")
    weighted = pcl_weight_matrix("weighted", 0.2, COUNTS)
    assert weighted[0, 2] == pytest.approx(1 + 0.2 * plus_code)
    assert weighted[0, 1] == pytest.approx(1 / (1 + 0.2 * minus))
    assert torch.all(weighted.diagonal() == 1)
    assert torch.all(pcl_weight_matrix("weighted", 0.0, COUNTS) == 1)


def test_weight_matrices_keep_float64_constants():
    # QBQTC counts n = (48997, 125429, 25574), n = 200000, by hand in float64:
    # PCL- = eps 74571 / 125429, PCL+(paper) = eps 48997 / 151003, PCL+(code) = eps 151003 / 48997.
    paper = pcl_weight_matrix("paper", 0.1)
    assert paper.dtype == torch.float64
    assert paper[0, 1].item() == pytest.approx(-0.1 * 74571 / 125429, rel=1e-12)
    assert paper[0, 2].item() == pytest.approx(0.1 * 48997 / 151003, rel=1e-12)
    weighted = pcl_weight_matrix("weighted", 0.1)
    assert weighted[0, 2].item() == pytest.approx(1 + 0.1 * 151003 / 48997, rel=1e-12)
    assert weighted[0, 1].item() == pytest.approx(1 / (1 + 0.1 * 74571 / 125429), rel=1e-12)


def test_weighted_and_expected_cost_values_by_hand():
    logits, labels = _inputs(7)
    ls_terms = F.cross_entropy(logits, labels, label_smoothing=0.1, reduction="none")
    weights = pcl_weight_matrix("weighted", 0.1, COUNTS)[labels, logits.argmax(-1)]
    torch.testing.assert_close(
        build_loss("pcl", variant="weighted", label_counts=COUNTS)(logits, labels), (weights * ls_terms).mean()
    )
    cost = (0.1 * pcl_severity(COUNTS)[labels] * torch.softmax(logits, -1)).sum(-1)
    torch.testing.assert_close(
        build_loss("pcl", variant="expected_cost", label_counts=COUNTS)(logits, labels), (ls_terms + cost).mean()
    )


def test_batch_counts_use_add_one_smoothed_counts_of_the_batch():
    logits, labels = _inputs(8)
    batch_counts = (torch.bincount(labels, minlength=3) + 1).tolist()
    batch = build_loss("pcl", variant="weighted", counts="batch")
    assert batch.is_batch_level
    torch.testing.assert_close(
        batch(logits, labels), build_loss("pcl", variant="weighted", label_counts=batch_counts)(logits, labels)
    )


def test_explicit_cost_matrix_is_used():
    logits, labels = _inputs(9)
    cost = [[0.0, 5.0, 1.0], [1.0, 0.0, 1.0], [1.0, 5.0, 0.0]]
    loss = build_loss("pcl", variant="expected_cost", label_counts=COUNTS, cost_matrix=cost)
    ls_terms = F.cross_entropy(logits, labels, label_smoothing=0.1, reduction="none")
    expected = (
        ls_terms + (0.1 * torch.tensor(cost, dtype=torch.float64)[labels] * torch.softmax(logits, -1)).sum(-1)
    ).mean()
    torch.testing.assert_close(loss(logits, labels), expected)


@pytest.mark.parametrize(
    ("params", "parameter"),
    [
        ({}, "label_counts"),
        ({"label_counts": COUNTS, "epsilon": 1.0}, "epsilon"),
        ({"label_counts": COUNTS, "counts": "dataset"}, "counts"),
        ({"label_counts": COUNTS, "variant": "soft"}, "variant"),
        ({"label_counts": COUNTS, "pcl_plus_form": "inverse"}, "pcl_plus_form"),
        ({"label_counts": [10, 0, 4]}, "label_counts"),
        ({"label_counts": [10]}, "label_counts"),
        ({"label_counts": [[10, 20], [30, 40]]}, "label_counts"),
        ({"counts": "batch", "label_counts": COUNTS}, "label_counts"),
        ({"label_counts": COUNTS, "cost_matrix": [[1, 1, 1], [1, 0, 1], [1, 1, 0]]}, "cost_matrix"),
        ({"label_counts": COUNTS, "cost_matrix": [[0, -1, 1], [1, 0, 1], [1, 1, 0]]}, "cost_matrix"),
        ({"label_counts": COUNTS, "cost_matrix": [[0, 1], [1, 0], [1, 1]]}, "cost_matrix"),
        ({"label_counts": [5, 5], "cost_matrix": [[0, 1, 1], [1, 0, 1], [1, 1, 0]]}, "label_counts"),
        (
            {"label_counts": COUNTS, "variant": "reference", "cost_matrix": [[0, 1, 1], [1, 0, 1], [1, 1, 0]]},
            "cost_matrix",
        ),
        ({"counts": "batch", "variant": "reference", "cost_matrix": [[0, 1, 1], [1, 0, 1], [1, 1, 0]]}, "cost_matrix"),
    ],
)
def test_bad_parameters_raise(params, parameter):
    with pytest.raises(ValueError, match=rf"^{parameter}:"):
        build_loss("pcl", **params)


def test_label_counts_of_wrong_length_raise_at_forward():
    logits, labels = _inputs(10)
    with pytest.raises(ValueError, match=r"^label_counts:"):
        build_loss("pcl", label_counts=[5, 6, 7, 8])(logits, labels)
    with pytest.raises(ValueError, match=r"^cost_matrix:"):
        build_loss("pcl", counts="batch", cost_matrix=[[0, 1], [1, 0]])(logits, labels)


# Nominal labels (issue 22): an explicit cost matrix alone decides near and far.
NOMINAL_COST = [[0.0, 5.0, 1.0], [1.0, 0.0, 1.0], [2.0, 3.0, 0.0]]  # gold 0: 2 is near, 1 far (the reverse of |y - k|)


@pytest.mark.parametrize("counts", ["global", "batch"])
def test_a_cost_matrix_decides_near_and_far_for_nominal_labels(counts):
    params = {"label_counts": COUNTS} if counts == "global" else {"counts": "batch"}
    predicted, labels = [1, 2, 0, 1], torch.tensor([0, 0, 2, 2])
    logits = torch.cat([_row_predicting(k) for k in predicted])
    plus, minus = pcl_constants(COUNTS if counts == "global" else [3, 1, 3], "paper")  # batch: add-one counts
    ls = build_loss("ls", reduction="none")(logits, labels)
    pcl = build_loss("pcl", variant="paper", cost_matrix=NOMINAL_COST, reduction="none", **params)(logits, labels)
    # gold 0: predicting 1 (cost 5) is far, 2 (cost 1) near; gold 2: predicting 0 (cost 2) near, 1 (cost 3) far
    expected = torch.tensor([0.1 * plus, -0.1 * minus, -0.1 * minus, 0.1 * plus], dtype=torch.float64)
    torch.testing.assert_close(pcl - ls, expected)


def test_the_default_severity_is_ordinal_and_a_cost_matrix_replaces_it():
    near = pcl_weight_matrix("weighted", 0.1, COUNTS) < 1
    assert near.tolist() == [[False, True, False], [False, False, True], [False, True, False]]  # 0->1, 1->2, 2->1
    nominal = pcl_weight_matrix("weighted", 0.1, COUNTS, cost_matrix=NOMINAL_COST) < 1
    assert nominal.tolist() == [[False, False, True], [True, False, True], [True, False, False]]
    torch.testing.assert_close(
        pcl_weight_matrix("expected_cost", 0.2, COUNTS, cost_matrix=NOMINAL_COST),
        0.2 * torch.tensor(NOMINAL_COST, dtype=torch.float64),
    )


# Paper eq. 2-3: PCL+ = eps n0 / (n1 + n2), PCL- = eps (n0 + n2) / n1 (QBQTC counts below).
N0, N1, N2 = COUNTS
EPSILON = 0.1
PAPER_PCL_PLUS = EPSILON * N0 / (N1 + N2)
PAPER_PCL_MINUS = EPSILON * (N0 + N2) / N1
# Section 3.2's cases: condition 1 (encourage, LS - PCL-) for the near mistakes 0->1, 1->2
# (its example) and 2->1; condition 2 (punish, LS + PCL+) for 0->2, 1->0 and 2->0 (its example).
PAPER_CASES = [
    (0, 1, -PAPER_PCL_MINUS), (0, 2, PAPER_PCL_PLUS),
    (1, 0, PAPER_PCL_PLUS), (1, 2, -PAPER_PCL_MINUS),
    (2, 0, PAPER_PCL_PLUS), (2, 1, -PAPER_PCL_MINUS),
    (0, 0, 0.0), (1, 1, 0.0), (2, 2, 0.0),
]  # fmt: skip


def _row_predicting(predicted: int) -> torch.Tensor:
    logits = torch.tensor([[0.3, -0.2, 0.1]], dtype=torch.float64)
    logits[0, predicted] = 2.5
    return logits


def test_paper_adds_eps_pcl_plus_when_2_is_predicted_as_0_by_hand():
    logits, labels = _row_predicting(0), torch.tensor([2])
    offset = build_loss("pcl", variant="paper", label_counts=COUNTS)(logits, labels) - build_loss("ls")(logits, labels)
    assert offset.item() == pytest.approx(0.1 * 48997 / (125429 + 25574), rel=1e-12)  # 0.0324, not 0.324


def test_paper_subtracts_eps_pcl_minus_when_1_is_predicted_as_2_by_hand():
    logits, labels = _row_predicting(2), torch.tensor([1])
    offset = build_loss("pcl", variant="paper", label_counts=COUNTS)(logits, labels) - build_loss("ls")(logits, labels)
    assert offset.item() == pytest.approx(-0.1 * (48997 + 25574) / 125429, rel=1e-12)  # -0.0595, not -0.5945


@pytest.mark.parametrize(("gold", "predicted", "offset"), PAPER_CASES)
def test_paper_offsets_follow_the_papers_cases(gold, predicted, offset):
    logits, labels = _row_predicting(predicted), torch.tensor([gold])
    loss = build_loss("pcl", variant="paper", epsilon=EPSILON, label_counts=COUNTS)
    difference = loss(logits, labels) - build_loss("ls", epsilon=EPSILON)(logits, labels)
    assert difference.item() == pytest.approx(offset, rel=1e-12, abs=1e-15)
    # the severity rule's near/far reading gives the same cases
    kind = 0 if gold == predicted else (-1 if offset < 0 else 1)
    severity = pcl_severity(COUNTS)[gold]
    wrong = [k for k in range(3) if k != gold]
    if kind:
        assert (severity[predicted] == min(severity[k] for k in wrong)) == (kind == -1)


def test_paper_matrix_is_eps_times_the_count_ratios():
    plus, minus = pcl_constants(COUNTS, "paper")
    for epsilon in (0.0, 0.1, 0.5):
        matrix = pcl_weight_matrix("paper", epsilon, COUNTS)
        assert matrix[2, 0].item() == pytest.approx(epsilon * plus, rel=1e-12, abs=0.0)
        assert matrix[1, 2].item() == pytest.approx(-epsilon * minus, rel=1e-12, abs=0.0)
    torch.testing.assert_close(pcl_weight_matrix("paper", 0.0, COUNTS), torch.zeros(3, 3, dtype=torch.float64))


def test_the_default_variant_is_the_papers_eq_4():
    """Issue 10: the paper's reading is the default; the released code and the gradient-bearing forms are options."""
    counts = [48997, 125429, 25574]
    default = build_loss("pcl", label_counts=counts)
    assert (default.variant, default.pcl_plus_form) == ("paper", "paper")
    logits = torch.tensor([[3.0, 0.0, 0.0], [0.0, 0.0, 3.0], [0.0, 3.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([2, 1, 1])  # far mistake 2 -> 0, near mistake 1 -> 2, correct
    explicit = build_loss("pcl", label_counts=counts, variant="paper")
    torch.testing.assert_close(default(logits, labels), explicit(logits, labels), rtol=0, atol=0)


def test_label_counts_are_checked_once_by_the_constructor(monkeypatch):
    import workbench.losses._base as base_module  # check_label_counts, the one rule for counts, calls it

    checked = []

    def counting(name, values, *args, **kwargs):
        checked.append(name)
        return check_class_vector(name, values, *args, **kwargs)

    monkeypatch.setattr(base_module, "check_class_vector", counting)
    for variant in ("paper", "reference", "weighted", "expected_cost"):
        checked.clear()
        build_loss("pcl", variant=variant, label_counts=COUNTS)
        assert checked == ["label_counts"], variant
