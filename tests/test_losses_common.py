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


# MLM objectives take (batch, length, vocab) logits plus context; tests/test_mlm_objectives.py covers them.
MLM_LOSSES = {"mlm", "mlm_hc", "mlm_sr"}


def test_every_registered_loss_is_covered():
    assert available_losses() == sorted(available_losses())
    assert {name for name, _ in CASES} == set(available_losses()) - MLM_LOSSES


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
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, -1e4], [-1e4, -1e4, 1e4], [1e4, -1e4, -1e4]], requires_grad=True)
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


INF, NAN = float("inf"), float("nan")


@pytest.mark.parametrize(
    ("name", "params", "parameter"),
    [
        ("focal", {"gamma": INF}, "gamma"),
        ("focal", {"alpha": [0.5, NAN, 1.0]}, "alpha"),
        ("dice", {"gamma": INF}, "gamma"),
        ("dice", {"ohem_ratio": INF}, "ohem_ratio"),
        ("tversky", {"alpha": INF}, "alpha"),
        ("tversky", {"beta": NAN}, "beta"),
        ("dsc", {"alpha": INF}, "alpha"),
        ("dsc", {"gamma": NAN}, "gamma"),
        ("dsc", {"ohem_ratio": INF}, "ohem_ratio"),
        ("ls", {"epsilon": NAN}, "epsilon"),
        ("pcl", {"epsilon": NAN, "label_counts": QBQTC_LABEL_COUNTS}, "epsilon"),
        ("pcl", {"label_counts": [10, INF, 5]}, "label_counts"),
        ("pcl", {"counts": "batch", "cost_matrix": [[0, INF, 1], [1, 0, 1], [1, 1, 0]]}, "cost_matrix"),
        ("wce", {"label_counts": QBQTC_LABEL_COUNTS, "K": INF}, "K"),
        ("ce", {"weight": [1.0, INF, 1.0]}, "weight"),
    ],
)
def test_non_finite_parameters_raise_naming_the_parameter(name, params, parameter):
    with pytest.raises(ValueError, match=rf"^{parameter}: must .*got .*(inf|nan)"):
        build_loss(name, **params)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: build_loss("ls", epsilon=1.5), r"epsilon: must lie in [0, 1), got 1.5"),
        (lambda: build_loss("focal", gamma=-1), r"gamma: must lie in [0, inf), got -1.0"),
        (lambda: build_loss("focal", gamma="two"), r"gamma: must be a number in [0, inf), got 'two'"),
        (lambda: build_loss("wce", label_counts=[3, 4], K=0), r"K: must lie in (0, inf), got 0.0"),
        (lambda: build_loss("ce", reduction="avg"), r"reduction: must be one of ['mean', 'sum', 'none'], got 'avg'"),
        (
            lambda: build_loss("ce", gamma=2.0),
            r"parameters of 'ce': must be among ['weight', 'reduction', 'validate'], got ['gamma']",
        ),
        (
            lambda: build_loss("ce")(torch.randn(2, 3), torch.tensor([0, 3])),
            r"labels: must lie in [0, 3) or equal -100 (ignored), got [3]",
        ),
        (
            lambda: build_loss("ce")(torch.randn(2, 3), torch.tensor([0, 1, 2])),
            r"labels: must have the logits' shape without the class axis (2,), got (3,)",
        ),
        (
            lambda: build_loss("ce", weight=[1, 2])(torch.randn(2, 3), torch.tensor([0, 1])),
            r"weight: must have C=3 entries (one per class of the logits), got 2",
        ),
    ],
)
def test_argument_errors_share_one_format(call, message):
    with pytest.raises(ValueError) as error:
        call()
    assert str(error.value) == message


@pytest.mark.parametrize(
    ("name", "params"),
    [case for case in CASES if case[0] not in ("dice", "tversky", "dsc")],
    ids=[case_id for case, case_id in zip(CASES, CASE_IDS) if case[0] not in ("dice", "tversky", "dsc")],
)
def test_fp16_mean_accumulates_in_float32(name, params):
    # 64 rows with a margin of 1e4: every term is about 1e4 (fits fp16, max 65504), their
    # sum 6.4e5 does not; the mean must still come out near 1e4, in fp16.
    logits = torch.zeros(64, 3, dtype=torch.float64)
    logits[:, 1] = 1e4
    labels = torch.zeros(64, dtype=torch.long)
    expected = build_loss(name, **params)(logits, labels)
    value = build_loss(name, **params)(logits.half(), labels)
    assert value.dtype == torch.float16
    assert torch.isfinite(value)
    torch.testing.assert_close(value.double(), expected, rtol=1e-3, atol=0.0)


def test_per_class_constants_are_converted_once_and_follow_in_place_changes():
    loss = build_loss("ce", weight=[1.0, 2.0, 3.0])
    logits, labels = torch.randn(5, 3), torch.tensor([0, 1, 2, 2, 1])
    first = loss.constant("weight", logits.device, logits.dtype)
    assert loss.constant("weight", logits.device, logits.dtype) is first
    before = loss(logits, labels)
    with torch.no_grad():
        loss.weight[0] = 10.0
    assert loss.constant("weight", logits.device, logits.dtype) is not first
    torch.testing.assert_close(
        loss(logits, labels), torch.nn.functional.cross_entropy(logits, labels, weight=loss.weight.float())
    )
    assert not torch.equal(loss(logits, labels), before)


@pytest.mark.parametrize(("name", "params"), CASES, ids=CASE_IDS)
def test_autocast_does_not_lower_the_losses_precision(name, params):
    # Under autocast the matrix products (label smoothing, masked sums) would run in bf16.
    logits, labels = _token_inputs(2)
    logits = logits.detach().float()
    loss = build_loss(name, **params)
    expected = loss(logits, labels)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        value = loss(logits, labels)
    assert value.dtype == torch.float32
    torch.testing.assert_close(value, expected)
