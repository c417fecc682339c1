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
    ("class_balanced", {"label_counts": QBQTC_LABEL_COUNTS, "beta": 0.9999}),
    ("logit_adjusted", {"label_counts": QBQTC_LABEL_COUNTS, "tau": 1.0}),
    ("corn", {}),  # the (..., 3) logits are a K - 1 = 3 output head of a 4-class ordinal task
]
CASE_IDS = [
    f"{name}-{'-'.join(f'{k}={v}' for k, v in params.items() if k != 'label_counts')}" for name, params in CASES
]


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
    past_the_last_class = 4 if name == "corn" else 3  # corn's 3 outputs score 4 ordered classes
    for labels in (
        torch.tensor([0, 1, past_the_last_class, -100]),
        torch.tensor([0, -1, 2, 1]),
        torch.tensor([0, 1, 2]),
        torch.tensor([0.0, 1, 2, 1]),
    ):
        with pytest.raises(ValueError, match=r"^labels:"):
            loss(logits, labels)
    with pytest.raises(ValueError, match=r"^logits:"):
        loss(torch.randn(4), torch.tensor([0, 1, 2, 1]))
    if name != "corn":  # one corn output is a binary ordinal task
        with pytest.raises(ValueError, match=r"^logits:"):
            loss(torch.randn(4, 1), torch.tensor([0, 0, 0, 0]))


def test_unknown_name_lists_available_losses():
    with pytest.raises(ValueError, match=r"^name:") as error:
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
    with pytest.raises(ValueError, match=rf"^{parameter}:"):
        build_loss(name, **params)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: build_loss("ls", epsilon=1.5), "epsilon"),
        (lambda: build_loss("focal", gamma=-1), "gamma"),
        (lambda: build_loss("focal", gamma="two"), "gamma"),
        (lambda: build_loss("wce", label_counts=[3, 4], K=0), "K"),
        (lambda: build_loss("ce", reduction="avg"), "reduction"),
        (lambda: build_loss("ce", gamma=2.0), "parameters of 'ce'"),
        (lambda: build_loss("ce")(torch.randn(2, 3), torch.tensor([0, 3])), "labels"),
        (lambda: build_loss("ce")(torch.randn(2, 3), torch.tensor([0, 1, 2])), "labels"),
        (lambda: build_loss("ce", weight=[1, 2])(torch.randn(2, 3), torch.tensor([0, 1])), "weight"),
    ],
)
def test_argument_errors_share_one_format(call, name):
    with pytest.raises(ValueError, match=rf"^{name}: must .*, got "):
        call()


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


def test_per_class_weights_follow_in_place_changes_and_the_module_device_and_dtype():
    loss = build_loss("ce", weight=[1.0, 2.0, 3.0])
    logits, labels = torch.randn(5, 3), torch.tensor([0, 1, 2, 2, 1])
    before = loss(logits, labels)
    with torch.no_grad():
        loss.weight[0] = 10.0
    torch.testing.assert_close(
        loss(logits, labels), torch.nn.functional.cross_entropy(logits, labels, weight=loss.weight.float())
    )
    assert not torch.equal(loss(logits, labels), before)
    assert loss.float().weight.dtype == torch.float32  # a buffer: it follows .to() / .float()


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


# Issue 19 item 6: parameters at the edge of what the constructors accept never give NaN.
COST = [[0.0, 1e12, 0.0], [1e12, 0.0, 1e12], [1.0, 1e12, 0.0]]
EDGE_CASES = [
    ("ce", {"weight": [0.0, 0.0, 0.0]}),
    ("ce", {"weight": [1e12, 1e-300, 0.0]}),
    ("wce", {"label_counts": [1e12, 1e-12, 1e-12], "K": 1e300}),
    ("wce", {"label_counts": [1e-12, 1e12, 1e12]}),
    ("focal", {"gamma": 1e12, "alpha": [1e12, 0.0, 1e12]}),
    ("focal", {"gamma": 0.0, "alpha": [0.0, 0.0, 0.0]}),
    ("focal", {"gamma": 1e-300}),
    ("dice", {"gamma": 1e-12}),
    ("dice", {"gamma": 1e-12, "set_level": True, "ohem_ratio": 1e12}),
    ("dice", {"gamma": 1e12, "square": False}),
    ("tversky", {"alpha": 0.0, "beta": 0.0, "gamma": 1e-12}),
    ("tversky", {"alpha": 1e12, "beta": 1e-300, "gamma": 1e-12, "set_level": True}),
    ("dsc", {"alpha": 1e12, "gamma": 1e-12}),
    ("dsc", {"alpha": 0.0, "gamma": 1e-12, "preset": "reference", "ohem_ratio": 1e-300}),
    *[
        ("pcl", {"variant": variant, "label_counts": [1e-12, 1e12, 1e-12]})
        for variant in ("reference", "paper", "weighted")
    ],
    ("pcl", {"variant": "expected_cost", "label_counts": [1e12, 1e-12, 1e12], "cost_matrix": COST, "epsilon": 0.0}),
    ("pcl", {"variant": "weighted", "counts": "batch", "cost_matrix": COST, "pcl_plus_form": "paper"}),
]
EDGE_IDS = [
    f"{name}-{'-'.join(f'{k}={v}' for k, v in params.items() if k != 'cost_matrix')}" for name, params in EDGE_CASES
]


def _extreme_batch(dtype: torch.dtype, ignored: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of +-1e4 (every probability 0 or 1) and a few moderate rows; labels with -100 as asked."""
    logits = torch.tensor([[1e4, -1e4, 0.0], [-1e4, 1e4, -1e4], [-1e4, -1e4, 1e4], [1e4, -1e4, -1e4], [0.5, 0.0, -0.5]])
    labels = torch.tensor([0, 1, 2, 2, 1])
    if ignored == "some":
        labels[1] = -100
    elif ignored == "all":
        labels.fill_(-100)
    elif ignored == "empty":
        logits, labels = logits[:0], labels[:0]
    return logits.to(dtype).requires_grad_(True), labels


@pytest.mark.parametrize(("name", "params"), EDGE_CASES + CASES, ids=EDGE_IDS + CASE_IDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("ignored", ["none", "some", "all", "empty"])
def test_accepted_parameters_at_the_edge_never_give_nan(name, params, dtype, ignored):
    logits, labels = _extreme_batch(dtype, ignored)
    value = build_loss(name, **params)(logits, labels)
    value.backward()
    assert not torch.isnan(value) and not torch.isnan(logits.grad).any()
    if dtype == torch.float32:  # half precision may overflow to inf when cast back (a weight of 1e12), never to NaN
        assert torch.isfinite(value) and torch.isfinite(logits.grad).all()
    if ignored in ("all", "empty"):
        assert value.item() == 0.0 and torch.all(logits.grad == 0)


@pytest.mark.parametrize(
    ("name", "params", "parameter"),
    [
        ("focal", {"alpha": [1e308] * 3}, "alpha"),
        ("focal", {"gamma": 1e13}, "gamma"),
        ("ce", {"weight": [1.0, 1e13, 1.0]}, "weight"),
        ("ce", {"weight": [[1.0, 2.0], [3.0, 4.0]]}, "weight"),
        ("wce", {"label_counts": [1e308, 1e308, 1e308]}, "label_counts"),
        ("wce", {"label_counts": [1e-300, 1.0, 1.0]}, "label_counts"),
        ("dice", {"gamma": 0.0}, "gamma"),
        ("dice", {"gamma": 1e-300}, "gamma"),
        ("tversky", {"gamma": 0.0}, "gamma"),
        ("tversky", {"beta": 1e300}, "beta"),
        ("dsc", {"gamma": 0.0}, "gamma"),
        ("dsc", {"alpha": 1e300}, "alpha"),
        ("dsc", {"ohem_ratio": 1e300}, "ohem_ratio"),
        ("pcl", {"label_counts": [1e308, 1.0, 1.0]}, "label_counts"),
        ("pcl", {"label_counts": [[10, 20], [30, 40]]}, "label_counts"),
        ("pcl", {"label_counts": [10, 20, 30], "cost_matrix": [[0, 1e300, 1], [1, 0, 1], [1, 1, 0]]}, "cost_matrix"),
        ("mlm_sr", {"weight": 1e39}, "weight"),  # x an SR term of 0 in float32: inf x 0 = NaN
        # a bool or a string is no number (True read as 1.0, "2" as 2.0)
        ("focal", {"gamma": True}, "gamma"),
        ("ls", {"epsilon": False}, "epsilon"),
        ("dice", {"ohem_ratio": "2"}, "ohem_ratio"),
        ("tversky", {"alpha": True}, "alpha"),
        ("wce", {"label_counts": [1, 2, 3], "K": True}, "K"),
        ("pcl", {"label_counts": [1, 2, 3], "epsilon": "0.1"}, "epsilon"),
    ],
)
def test_parameters_that_would_overflow_or_divide_by_zero_are_refused(name, params, parameter):
    with pytest.raises(ValueError, match=rf"^{parameter}:"):
        build_loss(name, **params)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("focal", {"gamma": 2.0}),
        ("dice", {"gamma": 0.5}),
        ("tversky", {"alpha": 0.3, "beta": 0.7}),
        ("ls", {"epsilon": 0.1}),
    ],
)
def test_numpy_and_python_numbers_give_the_same_loss(name, params):
    """A parameter read from an array (a slider grid, a sweep) is a number like any other."""
    import numpy as np

    logits, labels = torch.randn(6, 3, dtype=torch.float64), torch.tensor([0, 1, 2, 0, 1, 2])
    as_numpy = {key: np.float32(value) for key, value in params.items()}
    torch.testing.assert_close(build_loss(name, **as_numpy)(logits, labels), build_loss(name, **params)(logits, labels))
