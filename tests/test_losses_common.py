"""Properties every registered loss must have: gradcheck, -100 masking, finiteness, input errors."""

from __future__ import annotations

import pytest
import torch

from workbench.losses import QBQTC_LABEL_COUNTS, available_losses, build_loss

CASES = [
    ("ce", {}),
    ("ce", {"weight": [1.0, 2.0, 0.5]}),
    ("wce", {"label_counts": QBQTC_LABEL_COUNTS}),
    ("ls", {"epsilon": 0.2}),
    ("focal", {"gamma": 2.0, "alpha": [0.2, 0.3, 0.5]}),
    ("focal", {"gamma": 0.5}),
    ("dice", {}),
    ("dice", {"set_level": True, "square": False}),
    ("tversky", {"alpha": 0.7, "beta": 0.3}),
    ("tversky", {"set_level": True, "class_reduction": "sum"}),
    ("dsc", {"preset": "paper"}),
    ("dsc", {"preset": "reference"}),
    ("dsc", {"alpha": 0.5, "ohem_ratio": 1.0}),
    ("pcl", {"variant": "reference", "label_counts": QBQTC_LABEL_COUNTS}),
    ("pcl", {"variant": "paper", "label_counts": QBQTC_LABEL_COUNTS}),
    ("pcl", {"variant": "weighted", "label_counts": QBQTC_LABEL_COUNTS}),
    ("pcl", {"variant": "expected_cost", "label_counts": QBQTC_LABEL_COUNTS}),
    ("pcl", {"variant": "expected_cost", "counts": "batch"}),
]
CASE_IDS = [f"{name}-{'-'.join(f'{k}={v}' for k, v in params.items() if k != 'label_counts')}" for name, params in CASES]


def _token_inputs(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 4, 3, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, 3, (3, 4), generator=generator)
    labels[0, 2:] = -100
    labels[2, 0] = -100
    return logits.requires_grad_(True), labels


def test_every_registered_loss_is_covered():
    assert available_losses() == sorted(available_losses())
    assert {name for name, _ in CASES} == set(available_losses())


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
def test_gradcheck_token_level_with_ignored_positions(name, params):
    logits, labels = _token_inputs()
    loss = build_loss(name, **params)
    assert torch.autograd.gradcheck(lambda x: loss(x, labels), (logits,))


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
def test_ignored_positions_get_zero_gradient_and_do_not_change_value(name, params):
    logits, labels = _token_inputs(1)
    loss = build_loss(name, **params)
    value = loss(logits, labels)
    value.backward()
    ignored = labels == -100
    assert torch.all(logits.grad[ignored] == 0)
    assert torch.any(logits.grad[~ignored] != 0)
    changed = logits.detach().clone()
    changed[ignored] = 50.0
    torch.testing.assert_close(loss(changed, labels), value.detach())
    assert isinstance(loss.is_batch_level, bool)


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
def test_finite_value_and_gradient_at_extreme_logits(name, params):
    logits = torch.tensor(
        [[1e4, -1e4, 0.0], [-1e4, 1e4, -1e4], [-1e4, -1e4, 1e4], [1e4, -1e4, -1e4]], requires_grad=True
    )
    labels = torch.tensor([0, 1, 2, 2])
    value = build_loss(name, **params)(logits, labels)
    value.backward()
    assert torch.isfinite(value)
    assert torch.isfinite(logits.grad).all()


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
def test_bad_inputs_raise(name, params):
    loss = build_loss(name, **params)
    logits = torch.randn(4, 3)
    with pytest.raises(ValueError, match=r"labels: must lie in \[0, 3\)"):
        loss(logits, torch.tensor([0, 1, 3, -100]))
    with pytest.raises(ValueError, match=r"labels: must lie in \[0, 3\)"):
        loss(logits, torch.tensor([0, -1, 2, 1]))
    with pytest.raises(ValueError, match="labels: must have the logits. shape"):
        loss(logits, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="integer"):
        loss(logits, torch.tensor([0.0, 1.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match=r"\(N, C\) or \(N, T, C\)"):
        loss(torch.randn(4), torch.tensor([0, 1, 2, 1]))


def test_unknown_name_lists_available_losses():
    with pytest.raises(ValueError, match="name must be one of") as error:
        build_loss("dicee")
    for name in available_losses():
        assert repr(name) in str(error.value)


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
def test_all_ignored_batch_gives_zero_loss_with_zero_gradient(name, params):
    logits = torch.randn(2, 3, requires_grad=True)
    labels = torch.tensor([-100, -100])
    value = build_loss(name, **params)(logits, labels)
    value.backward()
    assert value.item() == 0.0
    assert torch.all(logits.grad == 0)
