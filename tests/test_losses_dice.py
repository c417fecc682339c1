"""dice, tversky, dsc: hand formulas in float64, equivalences, asymmetry, OHEM, presets, errors."""

from __future__ import annotations

import math

import pytest
import torch

from workbench.losses import build_loss
from workbench.losses.dice import ohem_keep_mask


def _binary(seed: int = 0, n: int = 9) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(n, 2, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, 2, (n,), generator=generator)
    labels[0] = -100
    return logits, labels


def _positive_prob_and_target(logits, labels):
    valid = labels != -100
    return torch.softmax(logits, -1)[valid, 1], (labels[valid] == 1).double()


def test_dice_per_sample_eq7_by_hand():
    logits, labels = _binary()
    p, y = _positive_prob_and_target(logits, labels)
    expected = (1 - (2 * p * y + 1.0) / (p**2 + y**2 + 1.0)).mean()
    torch.testing.assert_close(build_loss("dice")(logits, labels), expected)


def test_dice_set_level_eq8_by_hand():
    logits, labels = _binary(1)
    p, y = _positive_prob_and_target(logits, labels)
    expected = 1 - (2 * (p * y).sum() + 0.5) / ((p**2).sum() + (y**2).sum() + 0.5)
    torch.testing.assert_close(build_loss("dice", gamma=0.5, set_level=True)(logits, labels), expected)


@pytest.mark.parametrize("set_level", [False, True])
def test_tversky_half_half_equals_non_squared_dice_with_double_smoothing(set_level):
    # TI = (py + g) / (py + 0.5 p(1-y) + 0.5 (1-p) y + g) = (2py + 2g) / (p + y + 2g).
    logits, labels = _binary(2)
    tversky = build_loss("tversky", alpha=0.5, beta=0.5, gamma=0.3, set_level=set_level)
    dice = build_loss("dice", gamma=0.6, square=False, set_level=set_level)
    torch.testing.assert_close(tversky(logits, labels), dice(logits, labels))


def test_tversky_alpha_weighs_false_positives():
    # A confident false positive (gold 0, p1 ~ 1: FP mass 1) against a confident false
    # negative (gold 1, p1 ~ 0: FN mass 1); both have TP = 0, so TL = 1 - g / (weight + g).
    false_positive = (torch.tensor([[-30.0, 30.0]], dtype=torch.float64), torch.tensor([0]))
    false_negative = (torch.tensor([[30.0, -30.0]], dtype=torch.float64), torch.tensor([1]))
    gamma = 0.1
    fp_heavy = build_loss("tversky", alpha=0.9, beta=0.1, gamma=gamma)
    fn_heavy = build_loss("tversky", alpha=0.1, beta=0.9, gamma=gamma)
    fp_cost = torch.tensor(1 - gamma / (0.9 + gamma), dtype=torch.float64)
    fn_cost = torch.tensor(1 - gamma / (0.1 + gamma), dtype=torch.float64)
    torch.testing.assert_close(fp_heavy(*false_positive), fp_cost)
    torch.testing.assert_close(fp_heavy(*false_negative), fn_cost)
    assert fp_heavy(*false_positive) > fp_heavy(*false_negative)
    assert fn_heavy(*false_negative) > fn_heavy(*false_positive)


def test_multiclass_is_one_vs_rest_mean_or_sum():
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 4, (8,), generator=generator)
    p = torch.softmax(logits, -1)
    y = torch.nn.functional.one_hot(labels, 4).double()
    per_class = (1 - (2 * p * y + 1) / (p**2 + y**2 + 1)).mean(0)
    torch.testing.assert_close(build_loss("dice")(logits, labels), per_class.mean())
    torch.testing.assert_close(build_loss("dice", class_reduction="sum")(logits, labels), per_class.sum())


def test_dsc_paper_eq12_by_hand():
    logits, labels = _binary(4)
    p, y = _positive_prob_and_target(logits, labels)
    expected = (1 - (2 * (1 - p) * p * y + 1) / ((1 - p) * p + y + 1)).mean()
    torch.testing.assert_close(build_loss("dsc", preset="paper")(logits, labels), expected)
    torch.testing.assert_close(build_loss("dsc")(logits, labels), expected)


def test_dsc_reference_preset_binary_and_multiclass_by_hand():
    logits, labels = _binary(5)
    p, y = _positive_prob_and_target(logits, labels)
    f = (1 - p) ** 0.01 * p
    expected = 1 - (2 * (f * y).sum() + 1) / ((f**2).sum() + (y**2).sum() + 1)
    reference = build_loss("dsc", preset="reference")
    torch.testing.assert_close(reference(logits, labels), expected)
    assert reference.is_batch_level
    generator = torch.Generator().manual_seed(6)
    logits3 = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    labels3 = torch.randint(0, 3, (6,), generator=generator)
    p3 = torch.softmax(logits3, -1)
    y3 = torch.nn.functional.one_hot(labels3, 3).double()
    f3 = (1 - p3) ** 0.01 * p3
    expected3 = (1 - (2 * f3 * y3 + 1) / (f3**2 + y3**2 + 1)).sum(1).mean()
    torch.testing.assert_close(reference(logits3, labels3), expected3)


def test_dsc_explicit_argument_overrides_preset():
    loss = build_loss("dsc", preset="reference", alpha=0.5)
    assert loss.alpha == 0.5 and loss.square is True


def test_dsc_finite_gradient_when_p_rounds_to_one():
    logits = torch.tensor([[-1e4, 1e4], [-30.0, 30.0], [0.0, 1.0]], requires_grad=True)
    labels = torch.tensor([1, 1, 0])
    for preset in ("paper", "reference"):
        logits.grad = None
        value = build_loss("dsc", preset=preset)(logits, labels)
        value.backward()
        assert torch.isfinite(value) and torch.isfinite(logits.grad).all()
    naive = logits.detach().clone().requires_grad_(True)
    p = torch.softmax(naive, -1)[:, 1]
    ((1 - p) ** 0.01 * p).sum().backward()
    assert not torch.isfinite(naive.grad).all()  # what the released code does


def ohem_keep_mask_by_position(scores, targets, valid, ratio):
    """``ohem_keep_mask`` with an (M,) valid mask."""
    return ohem_keep_mask(scores, targets, valid.unsqueeze(-1), ratio)


def test_ohem_keeps_exactly_ratio_times_positives_of_the_hardest_negatives():
    generator = torch.Generator().manual_seed(7)
    scores = torch.rand(20, 1, generator=generator, dtype=torch.float64)
    targets = torch.zeros(20, 1, dtype=torch.float64)
    targets[:3] = 1
    valid = torch.ones(20, dtype=torch.bool)
    valid[19] = False
    keep = ohem_keep_mask_by_position(scores, targets, valid, ratio=2.0)[:, 0]
    assert keep[:3].all()
    kept_negatives = keep[3:].nonzero().squeeze(-1) + 3
    assert kept_negatives.numel() == 6
    candidates = scores[3:19, 0]
    assert set(kept_negatives.tolist()) == set((candidates.topk(6).indices + 3).tolist())
    assert ohem_keep_mask_by_position(scores, targets, valid, ratio=1.5)[3:, 0].sum() == 4  # floor(1.5 * 3)
    assert ohem_keep_mask_by_position(scores, targets, valid, ratio=100.0)[:, 0].sum() == 19  # capped at all negatives


def stable_sort_selection(scores, targets, valid, ratio):
    """Oracle: per column, all valid positives and the first k valid negatives of a stable
    descending sort by score (ties in position order), k = min(floor(ratio * #pos), #neg)."""
    keep = torch.zeros(scores.shape, dtype=torch.bool)
    for column in range(scores.shape[1]):
        positives = [i for i in range(scores.shape[0]) if valid[i] and targets[i, column] > 0.5]
        negatives = [i for i in range(scores.shape[0]) if valid[i] and targets[i, column] <= 0.5]
        count = min(math.floor(len(positives) * ratio), len(negatives))
        hardest = sorted(negatives, key=lambda i: -scores[i, column].item())[:count]
        keep[positives + hardest, column] = True
    return keep


@pytest.mark.parametrize("seed", range(12))
def test_ohem_selection_equals_a_stable_sort_with_many_ties(seed):
    generator = torch.Generator().manual_seed(seed)
    rows, columns = (
        int(torch.randint(1, 60, (1,), generator=generator)),
        int(torch.randint(1, 5, (1,), generator=generator)),
    )
    levels = int(torch.randint(1, 5, (1,), generator=generator))  # few distinct scores: many ties
    scores = torch.randint(0, levels, (rows, columns), generator=generator).double() / levels
    targets = (torch.rand(rows, columns, generator=generator) < 0.3).double()
    valid = torch.rand(rows, generator=generator) < 0.85
    ratio = [0.5, 1.0, 1.5, 3.0, 100.0][seed % 5]
    expected = stable_sort_selection(scores, targets, valid, ratio)
    assert torch.equal(ohem_keep_mask_by_position(scores, targets, valid, ratio), expected)


def test_ohem_multiclass_works_and_changes_the_value():
    generator = torch.Generator().manual_seed(8)
    logits = torch.randn(30, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.randint(0, 4, (30,), generator=generator)
    plain = build_loss("dsc", preset="reference")(logits, labels)
    mined = build_loss("dsc", preset="reference", ohem_ratio=1.0)
    value = mined(logits, labels)
    assert torch.isfinite(value) and not torch.isclose(value, plain)
    assert mined.is_batch_level
    p = torch.softmax(logits.detach(), -1)
    keep = ohem_keep_mask_by_position(
        p, torch.nn.functional.one_hot(labels, 4).double(), torch.ones(30, dtype=torch.bool), 1.0
    )
    counts = torch.bincount(labels, minlength=4)
    assert torch.equal(keep.sum(0), torch.minimum(2 * counts, torch.full_like(counts, 30)))


@pytest.mark.parametrize(
    ("name", "params", "parameter"),
    [
        ("dice", {"gamma": -1.0}, "gamma"),
        ("dice", {"gamma": 0.0}, "gamma"),  # no smoothing: 0 / 0 once a class has no positive and its p underflows
        ("dice", {"set_level": True, "reduction": "none"}, "reduction"),
        ("dice", {"set_level": "auto"}, "set_level"),
        ("dice", {"class_reduction": "max"}, "class_reduction"),
        ("dice", {"ohem_ratio": -0.5}, "ohem_ratio"),
        ("tversky", {"alpha": -0.1}, "alpha"),
        ("tversky", {"beta": -0.1}, "beta"),
        ("dsc", {"alpha": -1.0}, "alpha"),
        ("dsc", {"preset": "released"}, "preset"),
        ("dsc", {"preset": "reference", "reduction": "none"}, "reduction"),
    ],
)
def test_bad_parameters_raise(name, params, parameter):
    with pytest.raises(ValueError, match=rf"^{parameter}:"):
        build_loss(name, **params)


def test_per_sample_reduction_none_and_sum():
    logits, labels = _binary(9)
    none = build_loss("dice", reduction="none")(logits, labels)
    assert none.shape == labels.shape and none[0] == 0
    torch.testing.assert_close(none.sum(), build_loss("dice", reduction="sum")(logits, labels))
    torch.testing.assert_close(none.sum() / 8, build_loss("dice")(logits, labels))


def test_dsc_score_is_one_minus_p_to_the_alpha_times_p_and_stays_finite():
    generator = torch.Generator().manual_seed(10)
    logits = torch.randn(50, 5, generator=generator, dtype=torch.float64) * 3
    p = torch.softmax(logits, -1)
    torch.testing.assert_close(build_loss("dsc", alpha=0.3).score(logits), (1 - p) ** 0.3 * p)
    extreme = torch.tensor([[0.0, 40.0, -3.0], [-1e4, 1e4, 0.0]], requires_grad=True)
    f = build_loss("dsc", alpha=0.01).score(extreme)
    f.sum().backward()
    assert torch.isfinite(f).all() and torch.isfinite(extreme.grad).all()
    # 1 - p_1 = (e^-40 + e^-43) / (1 + e^-40 + e^-43) rounds to 0 in float32, where (1 - p)^0.01 p would be 0
    expected = math.exp(0.01 * math.log(math.exp(-40) + math.exp(-43)))
    assert f[0, 1].item() == pytest.approx(expected, rel=1e-5)


def test_tversky_eq10_by_hand_with_tp_fp_fn():
    logits, labels = _binary(11)
    p, y = _positive_prob_and_target(logits, labels)
    tp, fp, fn = p * y, p * (1 - y), (1 - p) * y
    per_sample = (1 - (tp + 0.2) / (tp + 0.7 * fp + 0.3 * fn + 0.2)).mean()
    set_level = 1 - (tp.sum() + 0.2) / (tp.sum() + 0.7 * fp.sum() + 0.3 * fn.sum() + 0.2)
    torch.testing.assert_close(build_loss("tversky", alpha=0.7, beta=0.3, gamma=0.2)(logits, labels), per_sample)
    torch.testing.assert_close(
        build_loss("tversky", alpha=0.7, beta=0.3, gamma=0.2, set_level=True)(logits, labels), set_level
    )


def test_ohem_dice_value_by_hand():
    # 2 positives, ratio 1: the 2 negatives with the highest p_1 are kept, the rest left out of eq. 8.
    logits = torch.tensor(
        [[0.0, 2.0], [0.0, -1.0], [0.0, 1.0], [0.0, -3.0], [0.0, 0.5], [0.0, -2.0]], dtype=torch.float64
    )
    labels = torch.tensor([1, 1, 0, 0, 0, 0])
    p = torch.softmax(logits, -1)[:, 1]
    kept = torch.tensor([0, 1, 2, 4])
    pk, yk = p[kept], (labels[kept] == 1).double()
    expected = 1 - (2 * (pk * yk).sum() + 1) / ((pk**2).sum() + (yk**2).sum() + 1)
    torch.testing.assert_close(build_loss("dice", set_level=True, ohem_ratio=1.0)(logits, labels), expected)
