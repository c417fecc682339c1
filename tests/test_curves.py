"""Gradient curves: autograd columns agree with finite differences and with the loss facts."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.losses import QBQTC_LABEL_COUNTS
from workbench.viz.curves import (
    DEFAULT_P,
    dice_paper_figure1,
    figure_loss_curves,
    loss_curves,
    pcl_vs_ls_figure,
)

FINE_GRID = np.linspace(0.05, 0.95, 181)


@pytest.mark.parametrize(
    ("name", "params", "num_classes"),
    [
        ("ce", {}, 2),
        ("focal", {"gamma": 2.0}, 2),
        ("dice", {}, 2),
        ("dsc", {"preset": "paper"}, 2),
        ("ls", {}, 3),
        ("pcl", {"variant": "expected_cost", "label_counts": QBQTC_LABEL_COUNTS}, 3),
    ],
)
def test_derivative_column_matches_finite_differences_of_loss(name, params, num_classes):
    frame = loss_curves(name, p=FINE_GRID, num_classes=num_classes, **params)
    assert list(frame.columns) == ["loss_name", "example", "p", "loss", "dloss_dp", "dloss_dlogit"]
    for example in ("positive", "negative"):
        part = frame[frame["example"] == example]
        numeric = np.gradient(part["loss"].to_numpy(), part["p"].to_numpy())
        np.testing.assert_allclose(part["dloss_dp"].to_numpy()[1:-1], numeric[1:-1], rtol=1e-2, atol=5e-3)


def test_ce_curve_is_minus_log_p():
    frame = loss_curves("ce", p=[0.2, 0.5, 0.9])
    positive = frame[frame["example"] == "positive"]
    np.testing.assert_allclose(positive["loss"], -np.log([0.2, 0.5, 0.9]))
    np.testing.assert_allclose(positive["dloss_dp"], -1 / np.array([0.2, 0.5, 0.9]))


def test_dsc_pushes_confident_positives_back_towards_one_half():
    # Eq. 12 for a positive: L = 1 - (2u + 1) / (u + 2), u = (1 - p) p, so dL/dp = -3 (1 - 2p) / (u + 2)^2:
    # zero at p = 0.5 and positive beyond (+0.12 at 0.6, +0.55 at 0.9, +0.75 as p -> 1); dL/dz = dL/dp p (1 - p).
    grid = np.array([0.3, 0.5, 0.6, 0.9, 0.99])
    dsc = loss_curves("dsc", p=grid, preset="paper")
    positive = dsc[dsc["example"] == "positive"]
    u = (1 - grid) * grid
    hand = -3 * (1 - 2 * grid) / (u + 2) ** 2
    np.testing.assert_allclose(positive["dloss_dp"], hand, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        positive["dloss_dp"].to_numpy()[2:], [0.6 / 2.24**2, 2.4 / 2.09**2, 2.94 / 2.0099**2], rtol=1e-12
    )
    np.testing.assert_allclose(positive["dloss_dlogit"], hand * u, rtol=1e-12, atol=1e-15)
    ce = loss_curves("ce", p=grid)
    ce_positive = ce[ce["example"] == "positive"]
    np.testing.assert_allclose(ce_positive["dloss_dlogit"], grid - 1, rtol=1e-12)  # CE per logit: p - 1 (-0.01 at 0.99)
    assert ce_positive["dloss_dlogit"].iloc[-1] < 0 < positive["dloss_dlogit"].iloc[-1]


def test_dice_figure1_draws_dl_dz_beside_dl_dp():
    grid = [0.6, 0.9, 0.99]
    figure = dice_paper_figure1(p=grid, derivative=("dloss_dp", "dloss_dlogit"))
    assert [annotation.text for annotation in figure.layout.annotations] == ["loss", "dL/dp", "dL/dz (gold logit)"]
    dsc = {trace.xaxis: np.asarray(trace.y) for trace in figure.data if trace.name == "DSC"}
    ce = {trace.xaxis: np.asarray(trace.y) for trace in figure.data if trace.name == "CE"}
    p = np.array(grid)
    dsc_dp = 3 * (2 * p - 1) / ((1 - p) * p + 2) ** 2
    np.testing.assert_allclose(dsc["x2"], dsc_dp, rtol=1e-12)
    np.testing.assert_allclose(dsc["x3"], dsc_dp * p * (1 - p), rtol=1e-12)
    np.testing.assert_allclose(ce["x2"], -1 / p, rtol=1e-12)
    np.testing.assert_allclose(ce["x3"], p - 1, rtol=1e-12)
    low, high = figure.layout.yaxis2.range
    assert low <= -3 and dsc_dp.max() < high  # DSC's positive gradient is not cut off
    assert figure.layout.yaxis3.range is None  # dL/dz stays bounded: autorange


def test_both_examples_draw_one_row_each_with_its_own_axes():
    # Tversky eq. 10, gamma 1. Positive (gold 1): TP = p, FN = 1 - p, FP = 0; negative (gold 0): FP = 1 - p, TP = FN = 0
    p = np.array([0.3, 0.6, 0.9])
    figure = figure_loss_curves([("TL", "tversky", {"alpha": 0.7, "beta": 0.3})], example=("positive", "negative"), p=p)
    loss = {trace.xaxis: np.asarray(trace.y) for trace in figure.data}
    np.testing.assert_allclose(loss["x"], 1 - (p + 1) / (p + 0.3 * (1 - p) + 1), rtol=1e-12)
    np.testing.assert_allclose(loss["x3"], 1 - 1 / (0.7 * (1 - p) + 1), rtol=1e-12)
    assert [annotation.text for annotation in figure.layout.annotations] == ["loss", "dL/dp"]  # column headers
    assert [figure.layout[axis].title.text for axis in ("yaxis", "yaxis3")] == [
        "positive example (gold 1)",
        "negative example (gold 0)",
    ]  # each row named once
    assert [figure.layout[axis].title.text for axis in ("xaxis", "xaxis3")] == [None, "p of the gold class"]
    assert figure.layout.yaxis2.range != figure.layout.yaxis4.range  # each row's dL/dp axis spans its own curves
    assert [trace.showlegend is not False for trace in figure.data] == [True, False, False, False]


@pytest.mark.parametrize("variant", ["reference", "paper"])
def test_faithful_pcl_logit_derivative_equals_label_smoothing(variant):
    ls = loss_curves("ls", p=FINE_GRID, num_classes=3, epsilon=0.1)
    pcl = loss_curves("pcl", p=FINE_GRID, num_classes=3, epsilon=0.1, label_counts=QBQTC_LABEL_COUNTS, variant=variant)
    np.testing.assert_array_equal(pcl["dloss_dlogit"].to_numpy(), ls["dloss_dlogit"].to_numpy())


def test_pcl_reference_curve_steps_up_where_the_prediction_turns_correct():
    # issue 29: drawn as one batch of 99 rows, the released code's correction read the first 3 (p < 1/3, no
    # correction) and the curve was LS's; a batch of one per p draws the step the notebooks describe
    p = np.array([0.1, 0.3, 0.33, 0.34, 0.5, 0.9])
    n0, n1, n2 = QBQTC_LABEL_COUNTS
    ls = loss_curves("ls", p=p, num_classes=3, epsilon=0.1, examples=["positive"])
    pcl = loss_curves(
        "pcl",
        p=p,
        num_classes=3,
        epsilon=0.1,
        label_counts=QBQTC_LABEL_COUNTS,
        variant="reference",
        examples=["positive"],
    )
    step = 0.1 * (n1 + n2) / (n0 * 3)  # eps r+(code) / C on a correct prediction of gold 1 (1 + 1 >= 2)
    assert step == pytest.approx(0.1027, abs=1e-4)
    expected = np.where(p > 1 / 3, step, 0.0)
    np.testing.assert_allclose(pcl["loss"].to_numpy() - ls["loss"].to_numpy(), expected, atol=1e-12)


def test_weighted_pcl_logit_derivative_differs_from_label_smoothing():
    ls = loss_curves("ls", p=FINE_GRID, num_classes=3)
    pcl = loss_curves("pcl", p=FINE_GRID, num_classes=3, label_counts=QBQTC_LABEL_COUNTS, variant="weighted")
    assert np.abs(pcl["dloss_dlogit"].to_numpy() - ls["dloss_dlogit"].to_numpy()).max() > 1e-3


def test_figures_have_one_loss_and_one_derivative_trace_per_spec():
    figure = dice_paper_figure1(p=np.linspace(0.1, 0.9, 5))
    assert [trace.name for trace in figure.data[::2]] == ["CE", "FL (gamma=1)", "DL (gamma=1)", "TL (beta=0.5)", "DSC"]
    assert len(figure.data) == 10
    pcl = pcl_vs_ls_figure(p=np.linspace(0.1, 0.9, 5))
    assert len(pcl.data) == 10
    np.testing.assert_array_equal(pcl.data[1].y, pcl.data[3].y)  # LS vs PCL reference derivative
    assert list(figure.layout.yaxis2.range) == [-3.0, 1.0]  # CE's -1/p must not squash the others
    assert pcl.layout.yaxis2.range is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: loss_curves("ce", p=[0.0, 0.5]), r"^p:"),
        (lambda: loss_curves("ce", num_classes=1), r"^num_classes:"),
        (lambda: loss_curves("nope"), "nope"),
        (lambda: figure_loss_curves([("CE", "ce", {})], example="both"), r"^example:"),
        (lambda: figure_loss_curves([("CE", "ce", {})], example=()), r"^example:"),
        (lambda: figure_loss_curves([("CE", "ce", {})], derivative="d2"), r"^derivative:"),
        (lambda: figure_loss_curves([("CE", "ce", {})], derivative=()), r"^derivative:"),
        (lambda: figure_loss_curves([("CE", "ce", {})], derivative_range="log"), r"^derivative_range:"),
    ],
)
def test_bad_arguments_raise(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    "figure",
    [
        dice_paper_figure1(p=np.linspace(0.1, 0.9, 5)),
        pcl_vs_ls_figure(p=np.linspace(0.1, 0.9, 5)),
        figure_loss_curves([("DSC paper", "dsc", {"preset": "paper"}), ("CE", "ce", {})]),
        figure_loss_curves([("FL", "focal", {}), ("CE", "ce", {})], derivative=("dloss_dp", "dloss_dlogit")),
    ],
    ids=["figure1", "pcl_vs_ls", "dsc_presets", "both_derivatives"],
)
def test_each_loss_has_one_colour_and_one_legend_entry_across_its_panels(figure):
    panels = len(figure.layout.annotations)  # one subplot title per panel: loss, then each derivative
    by_group: dict[str, list] = {}
    for trace in figure.data:
        by_group.setdefault(trace.legendgroup, []).append(trace)
    assert len(by_group) == len(figure.data) // panels
    colours = []
    for group, traces in by_group.items():
        assert [trace.xaxis for trace in traces] == ["x", *(f"x{panel}" for panel in range(2, panels + 1))]
        assert {trace.name for trace in traces} == {group}
        assert len({trace.line.color for trace in traces}) == 1 and traces[0].line.color is not None
        assert [trace.showlegend is not False for trace in traces] == [True] + [False] * (
            panels - 1
        )  # one legend entry
        colours.append(traces[0].line.color)
    assert len(set(colours)) == len(colours)  # different losses, different colours
    ce = by_group.get("CE")
    if ce:  # the example: CE's derivative was drawn red while the legend said blue
        assert ce[1].line.color == ce[0].line.color


def test_auto_derivative_range_keeps_the_dlogit_autorange_and_clips_dldp():
    p = np.array(DEFAULT_P)
    figure = figure_loss_curves([("CE", "ce", {}), ("FL", "focal", {"gamma": 2.0})], p=p)
    low, high = figure.layout.yaxis2.range
    assert min(figure.data[1].y) == pytest.approx(-1 / 0.01)  # CE's data still reach -100 at p = 0.01 ...
    shown = np.concatenate([trace.y[p >= 0.2] for trace in figure.data[1::2]])
    assert low < shown.min() and shown.max() < high  # ... the axis holds every curve from p = 0.2 on
    assert low > -10  # ... and not CE's -1/p at p = 0.1
    assert figure_loss_curves([("CE", "ce", {})], derivative_range=None, p=p).layout.yaxis2.range is None
    assert figure_loss_curves([("CE", "ce", {})], derivative="dloss_dlogit", p=p).layout.yaxis2.range is None
