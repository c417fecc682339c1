"""Widget panels: moving a slider redraws the figure exactly as the plain figure_for predicts."""

from __future__ import annotations

import json
import math

import numpy as np
import plotly.graph_objects as go
import pytest

from workbench.losses.pcl import pcl_weight_matrix
from workbench.viz import figures
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


def test_pcl_panel_matches_weight_matrix():
    panel = PclWeightsPanel(variants=("weighted", "expected_cost"))
    panel.sliders["epsilon"].value = 0.3
    _assert_same_data(panel.figure, panel.figure_for(epsilon=0.3))
    for trace, variant in zip(panel.figure.data, ("weighted", "expected_cost")):
        np.testing.assert_allclose(np.asarray(trace.z), pcl_weight_matrix(variant, 0.3).numpy())


def test_entropy_panel():
    panel = EntropyPanel(n_max=6)
    panel.sliders["k"].value = 3
    panel.sliders["n_auxiliary"].value = 5
    _assert_same_data(panel.figure, panel.figure_for(k=3, n_auxiliary=5))
    assert list(panel.figure.data[1].y) == pytest.approx([math.log(3 + n) for n in range(7)])
    assert panel.figure.layout.shapes[0].x0 == 5
    with_logits = EntropyPanel(n_max=2, logits=[1.0, 0.0, 0.0])
    assert set(with_logits.sliders) == {"n_auxiliary"}  # k is fixed by the logits
    assert len(with_logits.figure.data) == 4


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
        (lambda: EntropyPanel(n_max=3).figure_for(gamma=1.0), r"unknown slider\(s\) \['gamma'\]; allowed: \['k', 'n_auxiliary'\]"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
