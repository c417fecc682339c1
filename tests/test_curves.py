"""Gradient curves: autograd columns agree with finite differences and with the loss facts."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.losses import QBQTC_LABEL_COUNTS
from workbench.viz.curves import (
    default_probabilities,
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


def test_dsc_derivative_is_much_smaller_than_ce_past_one_half():
    # Eq. 12 for a positive: L = 1 - (2u + 1) / (u + 2), u = (1 - p) p, so dL/dp = -3 (1 - 2p) / (u + 2)^2:
    # zero at p = 0.5, then positive (an easy positive is no longer pushed towards 1).
    grid = np.linspace(0.6, 0.99, 40)
    dsc = loss_curves("dsc", p=grid, preset="paper")
    ce = loss_curves("ce", p=grid)
    dsc_slope = dsc.loc[dsc["example"] == "positive", "dloss_dp"].to_numpy()
    ce_slope = ce.loc[ce["example"] == "positive", "dloss_dp"].to_numpy()
    u = (1 - grid) * grid
    np.testing.assert_allclose(dsc_slope, -3 * (1 - 2 * grid) / (u + 2) ** 2)
    assert np.all(np.abs(dsc_slope) < 0.75 * np.abs(ce_slope))
    assert np.abs(dsc_slope).mean() < 0.35 * np.abs(ce_slope).mean()
    below = loss_curves("dsc", p=[0.3, 0.45], preset="paper")
    assert np.all(below.loc[below["example"] == "positive", "dloss_dp"] < 0)


@pytest.mark.parametrize("variant", ["reference", "paper"])
def test_faithful_pcl_logit_derivative_equals_label_smoothing(variant):
    ls = loss_curves("ls", p=FINE_GRID, num_classes=3, epsilon=0.1)
    pcl = loss_curves("pcl", p=FINE_GRID, num_classes=3, epsilon=0.1, label_counts=QBQTC_LABEL_COUNTS, variant=variant)
    np.testing.assert_array_equal(pcl["dloss_dlogit"].to_numpy(), ls["dloss_dlogit"].to_numpy())


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
    assert list(figure.layout.yaxis2.range) == [-3.0, 0.5]  # CE's -1/p must not squash the others
    assert pcl.layout.yaxis2.range is None


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: loss_curves("ce", p=[0.0, 0.5]), "p must"),
        (lambda: loss_curves("ce", num_classes=1), "num_classes"),
        (lambda: loss_curves("nope"), "name must be one of"),
        (lambda: figure_loss_curves([("CE", "ce", {})], example="both"), "example"),
        (lambda: figure_loss_curves([("CE", "ce", {})], derivative="d2"), "derivative"),
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
    ],
    ids=["figure1", "pcl_vs_ls", "dsc_presets"],
)
def test_each_loss_has_one_colour_and_one_legend_entry_across_both_panels(figure):
    by_group: dict[str, list] = {}
    for trace in figure.data:
        by_group.setdefault(trace.legendgroup, []).append(trace)
    assert len(by_group) == len(figure.data) // 2
    colours = []
    for group, traces in by_group.items():
        assert [trace.xaxis for trace in traces] == ["x", "x2"]  # loss panel, derivative panel
        assert {trace.name for trace in traces} == {group}
        assert len({trace.line.color for trace in traces}) == 1 and traces[0].line.color is not None
        assert [trace.showlegend is not False for trace in traces] == [True, False]  # one legend entry per loss
        colours.append(traces[0].line.color)
    assert len(set(colours)) == len(colours)  # different losses, different colours
    ce = by_group.get("CE")
    if ce:  # the example: CE's derivative was drawn red while the legend said blue
        assert ce[1].line.color == ce[0].line.color


def test_auto_derivative_range_keeps_the_dlogit_autorange_and_clips_dldp():
    p = default_probabilities()
    figure = figure_loss_curves([("CE", "ce", {}), ("FL", "focal", {"gamma": 2.0})], p=p)
    low, high = figure.layout.yaxis2.range
    assert min(figure.data[1].y) == pytest.approx(-1 / 0.01)  # CE's data still reach -100 at p = 0.01 ...
    shown = np.concatenate([trace.y[p >= 0.2] for trace in figure.data[1::2]])
    assert low < shown.min() and shown.max() < high  # ... the axis holds every curve from p = 0.2 on
    assert low > -10  # ... and not CE's -1/p at p = 0.1
    assert figure_loss_curves([("CE", "ce", {})], derivative_range=None, p=p).layout.yaxis2.range is None
    assert figure_loss_curves([("CE", "ce", {})], derivative="dloss_dlogit", p=p).layout.yaxis2.range is None
    with pytest.raises(ValueError, match="derivative_range"):
        figure_loss_curves([("CE", "ce", {})], derivative_range="log")
