"""Widget panels: moving a slider redraws the figure exactly as the plain figure_for predicts."""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from workbench.label_entropy import paper_entropy
from workbench.losses import parameter_range, pcl_weight_matrix
from workbench.viz import figures
from workbench.viz.entropy import entropy_figure
from workbench.viz.widgets import (
    SLIDERS,
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
PLOTLY_MIME = "application/vnd.plotly.v1+json"  # what JupyterLab's plotly renderer draws


@pytest.fixture
def drawn(monkeypatch) -> list[dict]:
    """The MIME bundles a live panel draws into its output (what JupyterLab's plotly renderer gets)."""
    bundles: list[dict] = []
    monkeypatch.setattr(
        "workbench.viz.widgets.display", lambda bundle, raw=False: bundles.append(bundle) if raw else None
    )
    monkeypatch.setattr("workbench.viz.widgets.clear_output", lambda wait=False: None)
    return bundles


@pytest.fixture
def loss_panel(drawn):
    curves = [LinkedCurve("focal", ("gamma",)), LinkedCurve("tversky", ("alpha",), {"beta": 0.5}, label="TL")]
    panel = LossCurvePanel(curves, slider_names=("gamma", "alpha"))
    return panel


def test_loss_panel_redraws_its_live_output_on_slider_change(loss_panel, drawn):
    assert loss_panel.widget.children[1] is loss_panel.output  # sliders, then the output JupyterLab draws into
    assert len(drawn) == 1
    before = list(loss_panel.figure.data[0].y)
    loss_panel.sliders["gamma"].value = 0.5
    _assert_same_data(loss_panel.figure, loss_panel.figure_for(gamma=0.5))
    assert list(loss_panel.figure.data[0].y) != before
    focal_loss = [trace for trace in loss_panel.figure.data if trace.name == "focal"][0]
    p = np.asarray(focal_loss.x)
    np.testing.assert_allclose(focal_loss.y, -((1 - p) ** 0.5) * np.log(p), rtol=1e-12)  # FL = -(1-p)^gamma log p
    assert len(drawn) == 2  # the new figure replaces the old one in the output
    shown = drawn[-1][PLOTLY_MIME]
    assert shown == pio.renderers["plotly_mimetype"].to_mimebundle(loss_panel.figure.to_dict())[PLOTLY_MIME]
    assert shown["layout"]["autosize"] and "width" not in shown["layout"]  # the cell's width, not plotly's 700 px


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
        assert {trace.line.color for trace in panel.figure.data if trace.name == "FL"} == {
            panel.figure.data[2].line.color
        }
    fixed = LossCurvePanel(curves, slider_names=("gamma",), interactive=False, derivative_range=(-3.0, 1.0))
    fixed.sliders["gamma"].value = 2.0
    assert list(fixed.figure.layout.yaxis2.range) == [-3.0, 1.0]


# the panels the notebooks ship, at their starting values: 01 (and 05 as first written), 05, 02 and 05, 04
SHIPPED = {
    "01_ce_fl_tl": lambda: LossCurvePanel(
        [
            LinkedCurve("ce", label="CE"),
            LinkedCurve("focal", ("gamma",), label="FL"),
            LinkedCurve("tversky", ("alpha", "beta"), label="TL"),
        ],
        slider_names=("gamma", "alpha", "beta"),
        interactive=False,
    ),
    "05_ce_fl_dsc": lambda: LossCurvePanel(
        [
            LinkedCurve("ce", label="CE"),
            LinkedCurve("focal", ("gamma",)),
            LinkedCurve("dsc", ("alpha",), {"gamma": 1.0}),
        ],
        slider_names=("gamma", "alpha"),
        interactive=False,
    ),
    "02_pcl": lambda: PclWeightsPanel(
        variants=("reference", "paper", "weighted", "expected_cost"), epsilon=0.1, interactive=False
    ),
    "04_entropy": lambda: EntropyPanel(n_max=20, gamma=0.1, interactive=False),
}


def _shown(figure: go.Figure) -> list[np.ndarray]:
    """What a figure shows, as float arrays: each trace's numeric x, y, z and each shape's position."""
    traces = [trace.to_plotly_json() for trace in figure.data]
    values = [np.asarray(trace[name]) for trace in traces for name in ("x", "y", "z") if name in trace]
    shapes = [np.array([shape.x0, shape.x1, shape.y0, shape.y1], dtype=float) for shape in figure.layout.shapes]
    return [value.astype(float) for value in values if value.dtype.kind in "fiu"] + shapes


def test_tversky_alpha_moves_the_negative_example_by_eq_10():
    # gold 0, p = P(gold): TP = FN = 0, FP = 1 - p, so TL = 1 - gamma / (alpha (1 - p) + gamma) with gamma = 1
    panel = SHIPPED["01_ce_fl_tl"]()
    assert [annotation.text for annotation in panel.figure.layout.annotations] == ["loss", "dL/dp"]
    rows = [panel.figure.layout[axis].title.text for axis in ("yaxis", "yaxis3")]
    assert rows == ["positive example (gold 1)", "negative example (gold 0)"]
    for alpha in (0.1, 0.9):
        figure = panel.figure_for(alpha=alpha)
        loss, slope = [trace for trace in figure.data if trace.name == "TL"][2:]  # the negative row: loss, dL/dp
        p = np.asarray(loss.x)
        np.testing.assert_allclose(loss.y, 1 - 1 / (alpha * (1 - p) + 1), rtol=1e-12)
        np.testing.assert_allclose(slope.y, -alpha / (alpha * (1 - p) + 1) ** 2, rtol=1e-9)
    beta_only = [trace for trace in panel.figure_for(beta=0.9).data if trace.name == "TL"]
    np.testing.assert_array_equal(
        beta_only[2].y, [t for t in panel.figure.data if t.name == "TL"][2].y
    )  # beta: positives only
    single = LossCurvePanel([LinkedCurve("tversky", ("beta",))], slider_names=("beta",), interactive=False)
    assert len(single.figure.data) == 2  # no slider acts on negatives only: the positive example alone
    fixed = LossCurvePanel(
        [LinkedCurve("tversky", ("alpha",))], slider_names=("alpha",), interactive=False, example="negative"
    )
    assert len(fixed.figure.data) == 2


def test_pcl_panel_matches_weight_matrix():
    panel = PclWeightsPanel(variants=("weighted", "expected_cost"))
    panel.sliders["epsilon"].value = 0.3
    _assert_same_data(panel.figure, panel.figure_for(epsilon=0.3))
    for trace, variant in zip(panel.figure.data, ("weighted", "expected_cost")):
        np.testing.assert_allclose(np.asarray(trace.z), pcl_weight_matrix(variant, 0.3).numpy())


def test_sliders_keep_to_the_declared_ranges_of_the_loss_parameters_they_set():
    # issue 39: the slider's ends come from the loss's declared range (dice's gamma is > 0, epsilon < 1)
    panel = LossCurvePanel([LinkedCurve("dice", linked=("gamma",))], slider_names=("gamma",), interactive=False)
    gamma = panel.sliders["gamma"]
    assert parameter_range("dice", "gamma").contains(gamma.min) and gamma.min == pytest.approx(0.1)
    panel.figure_for(gamma=gamma.min)  # the lowest position draws
    focal = LossCurvePanel([LinkedCurve("focal", linked=("gamma",))], slider_names=("gamma",), interactive=False)
    assert focal.sliders["gamma"].min == 0.0  # focal's gamma may be 0 (cross-entropy)
    epsilon = make_slider("epsilon", within=[parameter_range("pcl", "epsilon")], max=1.0)
    assert epsilon.max == pytest.approx(0.99) and epsilon.min == 0.0


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
    names = [trace.name for trace in panel.figure.data]
    panel.sliders["k"].value = 7  # (7 - 1) * 0.2 >= 1: eq. 2 itself is undefined; no exception in the callback
    assert [trace.name for trace in panel.figure.data] == names  # the same curves, empty
    assert all(len(trace.y) == 0 for trace in panel.figure.data)
    assert "H_k (eq. 2) undefined for k = 7, gamma = 0.2" in panel.figure.layout.title.text


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: make_slider("delta"), r"^name:.*'delta'"),
        (lambda: make_slider("gamma", width=3), r"^overrides:.*'width'"),
        (lambda: LossCurvePanel([]), r"^curves:"),
        (lambda: LossCurvePanel([LinkedCurve("focal", ("epsilon",))]), r"^curves:.*'epsilon'"),
        (lambda: EntropyPanel(n_max=3).figure_for(gamma=1.0), r"^values:.*'gamma'"),
        (lambda: EntropyPanel(n_max=-3), r"^n_max:"),
        (lambda: EntropyPanel(n_max=2.5), r"^n_max:"),
        (lambda: EntropyPanel(gamma=1.0), r"^gamma:"),
        (lambda: EntropyPanel(logits=[0.0, 0.0, 0.0], gamma=0.5), r"^gamma:.* k = 3"),
        (lambda: EntropyPanel(gamma=-0.1), r"^gamma:"),
        (lambda: PclWeightsPanel(label_counts=[1, 2], label_names=("a", "b", "c")), r"^label_counts:"),
        (lambda: PclWeightsPanel(label_counts="123"), r"^label_counts:"),
        (lambda: PclWeightsPanel(label_counts=[5]), r"^label_counts:"),
        (lambda: PclWeightsPanel(label_counts=[5, 0, 2]), r"^label_counts:"),
        (lambda: PclWeightsPanel(label_counts=[[1, 2], [3, 4]]), r"^label_counts:"),
        (lambda: PclWeightsPanel(epsilon=1.0), r"^epsilon:"),
        (lambda: PclWeightsPanel(epsilon=-0.1), r"^epsilon:"),
        (lambda: PclWeightsPanel(epsilon="0.1"), r"^epsilon:"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ----------------------------------------------------------------------------- pages: plotly's own sliders


def _decode(value):
    """A step's value as plotly.js reads it: typed-array specs (float32, base64) decoded."""
    if isinstance(value, dict) and "bdata" in value:
        shape = [int(size) for size in value["shape"].split(",")]
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype="<f4").reshape(shape)
    return value


class _Page:
    """What plotly.js does with a page figure when a slider is moved to a step: ``Plotly.update(*step.args)``."""

    def __init__(self, figure: go.Figure) -> None:
        self.figure = go.Figure(figure)
        self.active = [slider.active for slider in figure.layout.sliders]

    def move(self, slider: int, step: int) -> None:
        self.active[slider] = step
        data, layout, traces = self.figure.layout.sliders[slider].steps[step].args
        for name, values in data.items():
            for index, value in zip(traces, values):
                self.figure.data[index][name] = _decode(value)
        for key, value in layout.items():
            if key.startswith("sliders["):
                self.active[int(key[8 : key.index("]")])] = value
            else:
                self.figure.layout[key] = value

    def shown(self) -> dict:
        """The slider values the page shows."""
        return {
            s.currentvalue.prefix[:-3]: float(s.steps[a].label) for s, a in zip(self.figure.layout.sliders, self.active)
        }


def _assert_close_data(actual: go.Figure, expected: go.Figure) -> None:
    assert len(actual.data) == len(expected.data)
    for got, want in zip(actual.data, expected.data):
        got, want = got.to_plotly_json(), want.to_plotly_json()
        for name in ("x", "y", "z"):
            if name in want and np.asarray(want[name]).dtype.kind in "fiu":
                np.testing.assert_allclose(
                    np.asarray(got[name], dtype=float), np.asarray(want[name], dtype=float), rtol=2e-6
                )
            elif name in want:
                assert list(np.ravel(got[name])) == list(np.ravel(want[name])), name
        assert np.array_equal(np.asarray(got.get("text")), np.asarray(want.get("text")))
    for key in ("title", "shapes", "annotations"):
        assert actual.layout[key] == expected.layout[key], key


@pytest.fixture(scope="module")
def pages():
    """name -> a shipped panel and its page figure, each computed once."""
    cache = {}

    def page(name):
        if name not in cache:
            panel = SHIPPED[name]()
            cache[name] = panel, panel.page_figure()
        return cache[name]

    return page


@pytest.fixture(scope="module")
def loss_page(pages):
    """Notebook 01's panel (CE, FL linked to gamma, TL to alpha and beta) and its page figure."""
    return pages("01_ce_fl_tl")


@pytest.mark.parametrize("name", SHIPPED)
def test_every_slider_of_a_shipped_panel_changes_what_it_shows(name, pages):
    # on the page (and so in figure_for, which the page reproduces): every step but the starting one changes a curve,
    # a matrix or the marked n
    _, figure = pages(name)
    start = _shown(figure)
    for index, slider in enumerate(figure.layout.sliders):
        page = _Page(figure)
        for step in range(len(slider.steps)):  # a step sets every trace its slider changes
            page.move(index, step)
            moved = _shown(page.figure)
            differs = [a.shape != b.shape or not np.allclose(a, b, equal_nan=True) for a, b in zip(moved, start)]
            assert (len(moved) != len(start) or any(differs)) == (step != slider.active), (
                slider.currentvalue.prefix,
                step,
            )


@pytest.mark.parametrize(
    "moves",
    [
        [("gamma", 3)],
        [("gamma", 3), ("alpha", 1)],
        [("alpha", 1), ("beta", 9)],
        [("beta", 9), ("gamma", 0), ("alpha", 10)],
    ],
)
def test_page_sliders_always_draw_what_they_show(moves, loss_page):
    panel, figure = loss_page
    page = _Page(figure)
    assert [slider.currentvalue.prefix for slider in page.figure.layout.sliders] == ["gamma = ", "alpha = ", "beta = "]
    assert page.shown() == {"gamma": 1.0, "alpha": 0.5, "beta": 0.5}  # the sliders' starting values
    names = list(panel.sliders)
    for name, step in moves:
        page.move(names.index(name), step)
        _assert_close_data(page.figure, panel.figure_for(**page.shown()))
        assert page.shown()[name] == float(page.figure.layout.sliders[names.index(name)].steps[step].label)
    # FL follows gamma, TL's negative example alpha (FP), its positive example beta (FN): each slider changes its own
    # traces, so the three move independently
    if moves == [("gamma", 3), ("alpha", 1)]:
        assert page.shown() == {"gamma": 1.5, "alpha": 0.1, "beta": 0.5}
    if moves == [("alpha", 1), ("beta", 9)]:
        assert page.shown() == {"gamma": 1.0, "alpha": 0.1, "beta": 0.9}


def test_page_sliders_of_the_entropy_and_pcl_panels():
    entropy = EntropyPanel(n_max=20, interactive=False, gamma=0.2)
    page = _Page(entropy.page_figure())
    for slider, step in [(1, 6), (0, 11), (2, 9)]:  # k = 7 (eq. 2 undefined at gamma 0.2), n = 20, gamma = 0.45
        page.move(slider, step)
        shown = page.shown()
        expected = entropy.figure_for(
            n_auxiliary=int(shown["n_auxiliary"]), k=int(shown["k"]), gamma_entropy=shown["gamma_entropy"]
        )
        _assert_close_data(page.figure, expected)
        if step == 6:
            assert "H_k (eq. 2) undefined for k = 7" in page.figure.layout.title.text
            assert all(len(trace.y) == 0 for trace in page.figure.data)
    assert page.shown() == {
        "n_auxiliary": 20,
        "k": 2,
        "gamma_entropy": 0.45,
    }  # k and gamma move together: k is back at 2
    pcl = PclWeightsPanel(variants=("weighted", "expected_cost"), interactive=False, epsilon=0.25)
    slider = pcl.page_figure().layout.sliders[0]
    # round ticks (they read 0, 0.09, 0.18, 0.25, 0.27, ...) and the starting value
    assert [float(step.label) for step in slider.steps] == pytest.approx(
        [0, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    )
    assert slider.steps[slider.active].label == "0.25"  # the starting value is a step
    page = _Page(pcl.page_figure())
    page.move(0, 4)
    np.testing.assert_allclose(
        np.asarray(page.figure.data[1].z, dtype=float), pcl_weight_matrix("expected_cost", 0.3).numpy(), rtol=1e-6
    )


@pytest.mark.parametrize("name", sorted(SLIDERS))
def test_page_slider_ticks_are_round_numbers_and_the_start(name):
    from workbench.viz.widgets import PAGE_STEPS, _page_grid

    for start in (SLIDERS[name]["value"], SLIDERS[name]["max"] * 0.37):
        slider = make_slider(name, value=type(SLIDERS[name]["value"])(round(start, 2)))
        grid = _page_grid(slider)
        inner = [value for value in grid if value not in (slider.min, slider.max, slider.value)]
        spacing = min(round(b - a, 10) for a, b in zip(inner, inner[1:]))
        mantissa = spacing / 10 ** math.floor(math.log10(spacing))
        assert round(mantissa, 6) in (1, 2, 5), grid  # 0.1, 0.2, 0.5, 1, 2, 5, ...: never 0.09
        assert all(abs(value / spacing - round(value / spacing)) < 1e-9 for value in inner), grid
        assert slider.value in grid and len(grid) <= PAGE_STEPS + 1


def test_page_figures_stay_small_and_fill_the_width(loss_page):
    _, page = loss_page
    assert len(page.to_json()) < 120_000  # 33 steps of 2-4 curves, float32 (JSON floats: about 5 times this)
    assert page.layout.width is None and page.layout.autosize is not False
    for steps in (slider.steps for slider in page.layout.sliders):
        assert all("x" not in step.args[0] for step in steps)  # only what changes travels


@pytest.mark.parametrize(
    "make",
    [
        lambda: LossCurvePanel([LinkedCurve("focal", ("gamma",))], slider_names=("gamma",)),
        lambda: PclWeightsPanel(),
        lambda: EntropyPanel(n_max=4),
    ],
    ids=["loss", "pcl", "entropy"],
)
def test_widget_panels_fill_the_cell_width(make):
    panel = make()
    assert panel.widget.layout.width == "100%"
    assert panel.figure.layout.width is None and panel.figure.layout.autosize is not False


def test_headless_display_shows_and_saves_the_page_figure(tmp_path):
    panel = EntropyPanel(n_max=3, interactive=False)
    figures.set_output_dir(tmp_path, renderer=None)
    try:
        panel.display()
    finally:
        figures.set_output_dir(None)
    saved = json.loads((tmp_path / "figures" / "entropy.json").read_text())
    assert [slider["currentvalue"]["prefix"] for slider in saved["layout"]["sliders"]] == [
        "n_auxiliary = ",
        "k = ",
        "gamma_entropy = ",
    ]
