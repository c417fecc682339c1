"""Each loss parameter's range is declared once, beside its loss (issue 39): the constructor, ``check_loss_params``
(the runner's check before any kernel starts) and the widgets' sliders read the same declaration, so they agree on
every end of every range."""

from __future__ import annotations

import pytest

from workbench.checks import Bounds
from workbench.losses import (
    EPSILON,
    QBQTC_LABEL_COUNTS,
    available_losses,
    build_loss,
    check_loss_params,
    parameter_range,
)
from workbench.losses.registry import LOSSES
from workbench.synonyms import synonym_matcher
from workbench.vocab import load_tokenizer

COUNTED = {"wce", "class_balanced", "logit_adjusted", "pcl"}  # built with label counts


def _required(name: str) -> dict:
    """What the loss needs besides the parameter under test."""
    if name in COUNTED:
        return {"label_counts": QBQTC_LABEL_COUNTS}
    return {"matcher": synonym_matcher(load_tokenizer())} if name == "mlm_hc" else {}


def _outside(bounds: Bounds) -> list[float]:
    """A number just below the lower end and one just above the upper end (the open end itself)."""
    values = []
    if bounds.low is not None:
        values.append(bounds.gt if bounds.gt is not None else bounds.ge - max(abs(bounds.ge) / 2, 1e-9))
    if bounds.high is not None:
        values.append(bounds.lt if bounds.lt is not None else bounds.le + max(abs(bounds.le) / 2, 1e-9))
    return values


def _inside(bounds: Bounds) -> list[float]:
    """The closed ends (an open end is not in the range)."""
    return [end for end in (bounds.ge, bounds.le) if end is not None]


RANGES = [(name, parameter) for name in available_losses() for parameter in LOSSES[name].ranges]


def test_the_numbers_of_the_losses_declare_their_ranges():
    assert len(RANGES) >= 12
    assert parameter_range("ls", "epsilon") is parameter_range("pcl", "epsilon") is EPSILON
    with pytest.raises(ValueError, match=r"^parameter:.*'delta'"):
        parameter_range("focal", "delta")


@pytest.mark.parametrize(("name", "parameter"), RANGES, ids=[f"{name}-{parameter}" for name, parameter in RANGES])
def test_constructor_and_check_loss_params_agree_on_each_end_of_a_declared_range(name, parameter):
    bounds = parameter_range(name, parameter)
    for value in _outside(bounds):
        with pytest.raises(ValueError, match=f"^{parameter}:"):
            check_loss_params(name, {parameter: value})
        with pytest.raises(ValueError, match=f"^{parameter}:"):
            build_loss(name, **_required(name), **{parameter: value})
    for value in _inside(bounds):
        assert check_loss_params(name, {parameter: value}) == {parameter: value}
        build_loss(name, **_required(name), **{parameter: value})


@pytest.mark.parametrize(
    ("name", "params", "named"),
    [
        ("pcl", {"variant": "exact"}, "variant"),
        ("pcl", {"counts": "epoch"}, "counts"),
        ("dice", {"set_level": "auto"}, "set_level"),  # dsc's alone
        ("ls", {"reduction": "max"}, "reduction"),
        ("corn", {"reduction": "sum"}, "reduction"),
        ("mlm_sr", {"level": "word"}, "level"),
        ("ls", {"eps": 0.1}, "parameters of 'ls'"),
        ("lovasz", {}, "name"),
    ],
)
def test_check_loss_params_refuses_what_the_constructor_refuses(name, params, named):
    with pytest.raises(ValueError, match=f"^{named}"):
        check_loss_params(name, params)
    with pytest.raises(ValueError, match=f"^{named}"):
        build_loss(name, **_required(name) if name in LOSSES else {}, **params)


def test_check_loss_params_takes_partial_params_without_data():
    # no label counts, no model: what a runner can check before a kernel starts
    assert check_loss_params("pcl", {"epsilon": 0.3, "variant": "weighted"}) == {"epsilon": 0.3, "variant": "weighted"}
    assert check_loss_params("dsc", {"alpha": None, "set_level": "auto"})  # None: the preset's value
    assert check_loss_params("mlm_hc", {"level": "word"}) == {"level": "word"}
