"""ce, wce, ls, focal: values against float64 hand formulas and torch equivalences."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from workbench.losses import build_loss
from workbench.losses.classification import dice_paper_class_weights

QBQTC_COUNTS = [48997, 125429, 25574]


def _inputs(seed: int = 0, n: int = 7, c: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, c, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, c, (n,), generator=generator)
    labels[1] = -100
    return logits, labels


def test_ce_equals_torch_cross_entropy_with_and_without_weight():
    logits, labels = _inputs()
    weight = torch.tensor([0.5, 2.0, 1.0], dtype=torch.float64)
    torch.testing.assert_close(build_loss("ce")(logits, labels), F.cross_entropy(logits, labels))
    torch.testing.assert_close(
        build_loss("ce", weight=weight)(logits, labels), F.cross_entropy(logits, labels, weight=weight)
    )
    torch.testing.assert_close(
        build_loss("ce", reduction="none")(logits, labels), F.cross_entropy(logits, labels, reduction="none")
    )


def test_ce_token_level_matches_torch():
    generator = torch.Generator().manual_seed(1)
    logits = torch.randn(2, 5, 4, generator=generator)
    labels = torch.randint(0, 4, (2, 5), generator=generator)
    labels[0, 3:] = -100
    expected = F.cross_entropy(logits.transpose(1, 2), labels)
    torch.testing.assert_close(build_loss("ce")(logits, labels), expected)
    assert build_loss("ce", reduction="none")(logits, labels).shape == (2, 5)


def test_wce_weights_match_paper_formula_by_hand():
    n = sum(QBQTC_COUNTS)
    expected = [math.log10((n - c) / c + 1.0) for c in QBQTC_COUNTS]
    torch.testing.assert_close(dice_paper_class_weights(QBQTC_COUNTS), torch.tensor(expected, dtype=torch.float64))
    expected_k3 = [math.log10((n - c) / c + 3.0) for c in QBQTC_COUNTS]
    torch.testing.assert_close(
        dice_paper_class_weights(QBQTC_COUNTS, K=3.0), torch.tensor(expected_k3, dtype=torch.float64)
    )


def test_wce_value_is_weighted_sum_over_n():
    logits, labels = _inputs()
    alpha = dice_paper_class_weights(QBQTC_COUNTS)
    valid = labels != -100
    log_p = torch.log_softmax(logits, -1)[valid, labels[valid]]
    expected = -(alpha[labels[valid]] * log_p).sum() / valid.sum()
    loss = build_loss("wce", label_counts=QBQTC_COUNTS)
    torch.testing.assert_close(loss(logits, labels), expected)
    assert loss.is_batch_level is False
    assert build_loss("ce", weight=[1.0, 2.0, 3.0]).is_batch_level is True


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.6])
def test_ls_equals_torch_label_smoothing(epsilon):
    logits, labels = _inputs(2)
    torch.testing.assert_close(
        build_loss("ls", epsilon=epsilon)(logits, labels), F.cross_entropy(logits, labels, label_smoothing=epsilon)
    )


def test_focal_gamma_zero_equals_ce_and_value_matches_formula():
    logits, labels = _inputs(3)
    torch.testing.assert_close(build_loss("focal", gamma=0.0)(logits, labels), F.cross_entropy(logits, labels))
    alpha = torch.tensor([0.25, 0.5, 0.75], dtype=torch.float64)
    valid = labels != -100
    p_t = torch.softmax(logits, -1)[valid, labels[valid]]
    expected = (-alpha[labels[valid]] * (1 - p_t) ** 2.0 * torch.log(p_t)).mean()
    torch.testing.assert_close(build_loss("focal", gamma=2.0, alpha=alpha)(logits, labels), expected)


@pytest.mark.parametrize("gamma", [0.2, 0.5, 2.0])
def test_focal_finite_gradient_when_p_rounds_to_one(gamma):
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, 3.0], [0.0, 0.0, 0.0]], requires_grad=True)
    labels = torch.tensor([0, 1, 2])
    loss = build_loss("focal", gamma=gamma)(logits, labels)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logits.grad).all()
    # Naive (1 - softmax)**gamma gives NaN gradients here for gamma < 1.
    naive_logits = logits.detach().clone().requires_grad_(True)
    p = torch.softmax(naive_logits, -1)[torch.arange(3), labels]
    (-((1 - p) ** gamma) * torch.log(p)).mean().backward()
    if gamma < 1:
        assert not torch.isfinite(naive_logits.grad).all()


def test_focal_gradient_matches_float64_closed_form():
    # dL/dz = dL/dp_t * dp_t/dz with dL/dp_t = g (1-p_t)^(g-1) log p_t - (1-p_t)^g / p_t, dp_t/dz = p_t (e_t - p).
    logits = torch.tensor([[2.0, 0.5, -1.0]], dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([0])
    build_loss("focal", gamma=0.5)(logits, labels).backward()
    p = torch.softmax(logits.detach(), -1)[0]
    pt, g = p[0], 0.5
    dl_dpt = g * (1 - pt) ** (g - 1) * torch.log(pt) - (1 - pt) ** g / pt
    expected = dl_dpt * pt * (torch.eye(3, dtype=torch.float64)[0] - p)
    torch.testing.assert_close(logits.grad[0], expected)


@pytest.mark.parametrize(
    ("name", "params", "parameter"),
    [
        ("ls", {"epsilon": 1.0}, "epsilon"),
        ("ls", {"epsilon": -0.1}, "epsilon"),
        ("focal", {"gamma": -1.0}, "gamma"),
        ("focal", {"alpha": [0.5, -1.0]}, "alpha"),
        ("wce", {}, "label_counts"),
        ("wce", {"label_counts": [10, 0, 5]}, "label_counts"),
        ("wce", {"label_counts": [10, 5], "K": 0.0}, "K"),
        ("wce", {"label_counts": [10, 5], "K": 0.1}, "K"),  # lg(0.5 + 0.1) < 0
        ("ce", {"weight": [1.0, -2.0]}, "weight"),
        ("ce", {"reduction": "avg"}, "reduction"),
        ("ce", {"gamma": 2.0}, "parameters of 'ce'"),
    ],
)
def test_bad_parameters_raise(name, params, parameter):
    with pytest.raises(ValueError, match=rf"^{parameter}:"):
        build_loss(name, **params)


@pytest.mark.parametrize(
    ("name", "params"),
    [("wce", {"label_counts": [10, 5]}), ("ce", {"weight": [1.0, 2.0]}), ("focal", {"alpha": [1.0, 2.0]})],
)
def test_per_class_vector_of_wrong_length_raises(name, params):
    logits, labels = _inputs()
    with pytest.raises(ValueError, match=rf"^{next(iter(params))}:"):
        build_loss(name, **params)(logits, labels)


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_focal_per_row_terms_pass_float64_gradcheck(gamma):
    generator = torch.Generator().manual_seed(12)
    logits = (torch.randn(7, 4, generator=generator, dtype=torch.float64) * 2).requires_grad_(True)
    labels = torch.randint(0, 4, (7,), generator=generator)
    loss = build_loss("focal", gamma=gamma, reduction="none")
    assert torch.autograd.gradcheck(lambda z: loss(z, labels), (logits,))


def test_focal_with_alpha_and_gamma_zero_is_alpha_weighted_ce_over_the_count():
    logits, labels = _inputs(4)
    alpha = torch.tensor([0.25, 0.5, 2.0], dtype=torch.float64)
    valid = labels != -100
    expected = (alpha[labels[valid]] * F.cross_entropy(logits[valid], labels[valid], reduction="none")).mean()
    torch.testing.assert_close(build_loss("focal", gamma=0.0, alpha=alpha)(logits, labels), expected)


def test_weighted_ce_mean_with_zero_weight_denominator_is_zero_not_nan():
    logits, labels = torch.randn(3, 3, requires_grad=True), torch.tensor([0, 0, 1])
    value = build_loss("ce", weight=[0.0, 0.0, 1.0])(logits, labels)
    value.backward()
    assert value.item() == 0.0 and torch.all(logits.grad == 0)  # F.cross_entropy gives NaN (0 / 0) here
