"""Widget panels: moving a slider redraws the figure exactly as the plain figure_for predicts."""

from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest

from workbench.information import paper_entropy
from workbench.losses.pcl import pcl_weight_matrix
from workbench.viz import figures
from workbench.viz.entropy import entropy_figure
from workbench.viz.widgets import (
    EntropyPanel,
    LinkedCurve,
    LossCurvePanel,
    PclWeightsPanel,
    make_slider,
)


def _trace_data(fig: go.Figure) -> list[dict]:
    return [{key: value for key, value in trace.to_plotly_json().items() if key != "uid"} for trace in fig.data]


def _assert_same_data(actual: go.Figure, expected: go.Figure) -> None:
    actual_data, expected_data = _trace_data(actual), _trace_data(expected)
    assert len(actual_data) == len(expected_data)
    for got, want in zip(actual_data, expected_data):
        assert got.keys() == want.keys()
        for key in want:
            if isinstance(want[key], (list, tuple, np.ndarray)):
                np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]))
            else:
                assert got[key] == want[key], key


P = [0.2, 0.5, 0.7]


@pytest.fixture
def loss_panel():
    curves = [LinkedCurve("focal", ("gamma",)), LinkedCurve("tversky", ("alpha",), {"beta": 0.5}, label="TL")]
    panel = LossCurvePanel(curves, slider_names=("gamma", "alpha"))
    return panel


def test_loss_panel_redraws_in_place_on_slider_change(loss_panel):
    figure_widget = loss_panel.figure
    assert isinstance(figure_widget, go.FigureWidget)
    before = list(figure_widget.data[0].y)
    loss_panel.sliders["gamma"].value = 0.5
    assert loss_panel.figure is figure_widget  # updated in place, not replaced
    _assert_same_data(loss_panel.figure, loss_panel.figure_for(gamma=0.5))
    assert list(loss_panel.figure.data[0].y) != before
    focal_loss = [trace for trace in loss_panel.figure.data if trace.name == "focal"][0]
    p = np.asarray(focal_loss.x)
    np.testing.assert_allclose(focal_loss.y, -((1 - p) ** 0.5) * np.log(p), rtol=1e-12)  # FL = -(1-p)^gamma log p
    assert loss_panel.figure.layout.title.text == "gamma = 0.5, alpha = 0.5"


def test_loss_panel_sliders_redraw_on_release(loss_panel):
    assert set(loss_panel.sliders) == {"gamma", "alpha"}
    assert all(not slider.continuous_update for slider in loss_panel.sliders.values())


def test_loss_panel_headless_replaces_a_static_figure():
    panel = LossCurvePanel([LinkedCurve("focal", ("gamma",))], slider_names=("gamma",), interactive=False)
    assert type(panel.figure) is go.Figure
    panel.sliders["gamma"].value = 2.0
    _assert_same_data(panel.figure, panel.figure_for(gamma=2.0))
    assert panel.widget.children[0].children == (panel.sliders["gamma"],)


def test_loss_panel_derivative_axis_is_clipped_so_a_slider_change_shows():
    curves = [LinkedCurve("ce", label="CE"), LinkedCurve("focal", ("gamma",), label="FL")]
    panel = LossCurvePanel(curves, slider_names=("gamma",), interactive=False)
    for gamma in (0.5, 4.0):
        panel.sliders["gamma"].value = gamma
        low, high = panel.figure.layout.yaxis2.range
        assert min(panel.figure.data[1].y) < -90  # CE's -1/p at p = 0.01 ...
        assert low > -10  # ... is off the axis, which spans the curves from p = 0.2 on
        focal = [trace for trace in panel.figure.data if trace.name == "FL" and trace.xaxis == "x2"][0]
        shown = np.asarray(focal.y)[np.asarray(focal.x) >= 0.2]
        assert low < shown.min() and shown.max() < high
        assert {trace.line.color for trace in panel.figure.data if trace.name == "FL"} == {panel.figure.data[2].line.color}
    fixed = LossCurvePanel(curves, slider_names=("gamma",), interactive=False, derivative_range=(-3.0, 1.0))
    fixed.sliders["gamma"].value = 2.0
    assert list(fixed.figure.layout.yaxis2.range) == [-3.0, 1.0]


def test_pcl_panel_matches_weight_matrix():
    panel = PclWeightsPanel(variants=("weighted", "expected_cost"))
    panel.sliders["epsilon"].value = 0.3
    _assert_same_data(panel.figure, panel.figure_for(epsilon=0.3))
    for trace, variant in zip(panel.figure.data, ("weighted", "expected_cost")):
        np.testing.assert_allclose(np.asarray(trace.z), pcl_weight_matrix(variant, 0.3).numpy())


def test_pcl_panel_starts_at_the_given_epsilon():
    # a notebook sweep over epsilon passes epsilon=...: the figure is drawn at that value
    for epsilon in (0.0, 0.25, 0.95):
        panel = PclWeightsPanel(variants=("weighted",), interactive=False, epsilon=epsilon)
        assert panel.sliders["epsilon"].value == epsilon
        assert panel.sliders["epsilon"].max >= epsilon  # 0.95 is above the default slider range: widened, not clamped
        np.testing.assert_allclose(np.asarray(panel.figure.data[0].z), pcl_weight_matrix("weighted", epsilon).numpy())
    low, high = (PclWeightsPanel(variants=("weighted",), interactive=False, epsilon=e).figure for e in (0.05, 0.6))
    assert not np.array_equal(np.asarray(low.data[0].z), np.asarray(high.data[0].z))


def test_pcl_panel_names_follow_label_counts():
    panel = PclWeightsPanel(variants=("weighted",), label_counts=[1, 2], interactive=False)
    assert panel.label_names == ["0", "1"]
    np.testing.assert_allclose(
        np.asarray(panel.figure.data[0].z), pcl_weight_matrix("weighted", 0.1, label_counts=[1, 2]).numpy()
    )
    assert PclWeightsPanel(interactive=False).label_names == ["0", "1", "2"]  # QBQTC's default counts


def test_entropy_panel():
    panel = EntropyPanel(n_max=6, uniform=True)
    panel.sliders["k"].value = 3
    panel.sliders["n_auxiliary"].value = 5
    _assert_same_data(panel.figure, panel.figure_for(k=3, n_auxiliary=5))
    uniform = [trace for trace in panel.figure.data if trace.name.startswith("uniform (aside, not the paper's eq. 3)")]
    assert list(uniform[0].y) == pytest.approx([math.log(3 + n) for n in range(7)])
    assert panel.figure.layout.shapes[0].x0 == 5
    with_logits = EntropyPanel(n_max=2, logits=[1.0, 0.0, 0.0])
    assert set(with_logits.sliders) == {"n_auxiliary", "gamma_entropy"}  # k is fixed by the logits
    assert len(with_logits.figure.data) == 4


def test_entropy_panel_gamma_slider_matches_the_plain_function():
    panel = EntropyPanel(n_max=6)
    assert panel.sliders["gamma_entropy"].value == 0.1
    panel.sliders["k"].value = 3
    panel.sliders["gamma_entropy"].value = 0.12
    _assert_same_data(panel.figure, entropy_figure(3, 6, highlight_n=3, gamma=0.12))
    _assert_same_data(panel.figure, panel.figure_for(k=3, gamma_entropy=0.12, n_auxiliary=3))
    # the paper's eq. 3 per n; (3 + n - 1) * 0.12 >= 1 from n = 7 on, so all 7 points are defined here
    expected = [paper_entropy(3 + n, 0.12) for n in range(7)]
    assert list(panel.figure.data[1].y) == expected
    assert list(panel.figure.data[0].y) == [paper_entropy(3, 0.12)] * 7


def test_entropy_panel_shows_where_the_papers_entropy_is_undefined():
    panel = EntropyPanel(n_max=20, interactive=False, gamma=0.2)
    ys = np.asarray(panel.figure.data[1].y, dtype=float)  # k = 2: (1 + n) * 0.2 < 1 for n <= 3
    assert np.isfinite(ys[:4]).all() and np.isnan(ys[4:]).all()
    assert "eq. 3 undefined for n >= 4" in panel.figure.layout.title.text
    panel.sliders["k"].value = 7  # (7 - 1) * 0.2 >= 1: eq. 2 itself is undefined; no exception in the callback
    assert len(panel.figure.data) == 0
    assert "H_k (eq. 2) undefined for k = 7, gamma = 0.2" in panel.figure.layout.title.text


def test_headless_display_saves_the_current_figure(tmp_path):
    panel = EntropyPanel(n_max=3, interactive=False)
    figures.set_output_dir(tmp_path, renderer=None)
    try:
        panel.display()
    finally:
        figures.set_output_dir(None)
    saved = (tmp_path / "figures" / "entropy.json").read_text()
    assert json.loads(saved)["data"] == json.loads(panel.figure.to_json())["data"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: make_slider("delta"), "name must be one of"),
        (lambda: make_slider("gamma", width=3), "slider overrides must be among value, min, max, step"),
        (lambda: LossCurvePanel([]), "at least one LinkedCurve"),
        (lambda: LossCurvePanel([LinkedCurve("focal", ("epsilon",))]), r"links slider\(s\) \['epsilon'\]"),
        (
            lambda: EntropyPanel(n_max=3).figure_for(gamma=1.0),
            r"unknown slider\(s\) \['gamma'\]; allowed: \['gamma_entropy', 'k', 'n_auxiliary'\]",
        ),
        (lambda: EntropyPanel(n_max=-3), "n_max: must be an integer >= 0, got -3"),
        (lambda: EntropyPanel(n_max=2.5), "n_max: must be an integer >= 0, got 2.5"),
        (lambda: EntropyPanel(gamma=1.0), r"gamma: must satisfy \(k-1\)\*gamma < 1"),
        (lambda: EntropyPanel(logits=[0.0, 0.0, 0.0], gamma=0.5), r"gamma: must satisfy \(k-1\)\*gamma < 1 .* k = 3"),
        (lambda: EntropyPanel(gamma=-0.1), "gamma: must be a finite number > 0"),
        (
            lambda: PclWeightsPanel(label_counts=[1, 2], label_names=("a", "b", "c")),
            r"label_counts: must have one count per entry of label_names \(3",
        ),
        (lambda: PclWeightsPanel(label_counts="123"), "label_counts: must be a sequence of at least 2 finite positive counts"),
        (lambda: PclWeightsPanel(label_counts=[5]), "label_counts: must be a sequence of at least 2"),
        (lambda: PclWeightsPanel(label_counts=[5, 0, 2]), r"label_counts: .*got \[5, 0, 2\]"),
        (lambda: PclWeightsPanel(label_counts=[[1, 2], [3, 4]]), "label_counts: must be a sequence"),
        (lambda: PclWeightsPanel(epsilon=1.0), r"epsilon: must be a number in \[0, 1\), got 1.0"),
        (lambda: PclWeightsPanel(epsilon=-0.1), r"epsilon: must be a number in \[0, 1\), got -0.1"),
        (lambda: PclWeightsPanel(epsilon="0.1"), r"epsilon: must be a number in \[0, 1\), got '0.1'"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
