"""ipywidgets panels: sliders that redraw plotly figures live in JupyterLab.

Every panel has

* ``sliders``: name -> ipywidgets slider;
* ``figure_for(**values) -> go.Figure``: the plain, testable drawing function
  (names not given take the sliders' current values);
* ``figure``: the current figure (a ``go.FigureWidget`` updated in place by
  slider observers when ``interactive``, else a ``go.Figure`` replaced on change);
* ``widget``: the VBox to display; ``display()`` shows it, or in a headless run
  (``interactive=False``, e.g. from a notebook parameter) shows the figure as a
  static output through ``workbench.viz.figures.show``.

Callbacks only call ``figure_for``: exceptions inside widget callbacks are
swallowed by ipywidgets, so the plain functions are what the tests check.
Sliders whose figure is costly (loss curves need autograd over a grid) use
``continuous_update=False``: they redraw on release.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import ipywidgets as widgets
import plotly.graph_objects as go

from workbench.viz import figures
from workbench.viz.confusion import matrix_grid
from workbench.viz.curves import figure_loss_curves
from workbench.viz.entropy import entropy_figure

SLIDERS: dict[str, dict[str, Any]] = {
    "epsilon": {"value": 0.1, "min": 0.0, "max": 0.9, "step": 0.01},
    "gamma": {"value": 1.0, "min": 0.0, "max": 5.0, "step": 0.1},
    "alpha": {"value": 0.5, "min": 0.0, "max": 1.0, "step": 0.05},
    "beta": {"value": 0.5, "min": 0.0, "max": 1.0, "step": 0.05},
    "n_auxiliary": {"value": 3, "min": 0, "max": 20, "step": 1},
    "k": {"value": 2, "min": 1, "max": 10, "step": 1},
}
INTEGER_SLIDERS = ("n_auxiliary", "k")


def make_slider(name: str, continuous_update: bool = True, **overrides: Any) -> widgets.widget.Widget:
    """A preconfigured slider for ``name`` (one of SLIDERS); ``overrides`` change value/min/max/step."""
    if name not in SLIDERS:
        raise ValueError(f"name must be one of {sorted(SLIDERS)}, got {name!r}")
    unknown = sorted(set(overrides) - {"value", "min", "max", "step"})
    if unknown:
        raise ValueError(f"slider overrides must be among value, min, max, step; got {unknown}")
    settings = {**SLIDERS[name], **overrides}
    slider_class = widgets.IntSlider if name in INTEGER_SLIDERS else widgets.FloatSlider
    return slider_class(description=name, continuous_update=continuous_update, **settings)


class Panel:
    """Sliders + one figure redrawn from ``figure_for`` (subclasses implement ``draw``)."""

    def __init__(self, sliders: Mapping[str, widgets.widget.Widget], name: str, interactive: bool = True) -> None:
        self.sliders = dict(sliders)
        self.name = name
        self.interactive = interactive
        initial = self.figure_for()
        self.figure: go.Figure = go.FigureWidget(initial) if interactive else initial
        for slider in self.sliders.values():
            slider.observe(self._redraw, names="value")
        controls = widgets.HBox(list(self.sliders.values()))
        self.widget = widgets.VBox([controls, self.figure] if interactive else [controls])

    def draw(self, **values: Any) -> go.Figure:
        raise NotImplementedError

    def values(self) -> dict[str, Any]:
        """The sliders' current values."""
        return {name: slider.value for name, slider in self.sliders.items()}

    def figure_for(self, **values: Any) -> go.Figure:
        """The figure for these slider values (others: current values); ValueError for unknown names."""
        unknown = sorted(set(values) - set(self.sliders))
        if unknown:
            raise ValueError(f"{type(self).__name__}: unknown slider(s) {unknown}; allowed: {sorted(self.sliders)}")
        return self.draw(**{**self.values(), **values})

    def _redraw(self, change: Any = None) -> None:
        new = self.figure_for()
        if isinstance(self.figure, go.FigureWidget):
            with self.figure.batch_update():
                self.figure.data = ()
                self.figure.add_traces(list(new.data))
                self.figure.layout = new.layout
        else:
            self.figure = new

    def display(self) -> None:
        """Show the live widget, or (headless) the current figure as a static, saved output."""
        if self.interactive:
            from IPython.display import display

            display(self.widget)
        else:
            figures.show(self.figure, self.name)


# ----------------------------------------------------------------------------- loss curves


@dataclass(frozen=True)
class LinkedCurve:
    """One curve: loss ``loss`` (registry name) with ``fixed`` parameters, plus the slider
    values named in ``linked`` passed under the same parameter names."""

    loss: str
    linked: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None

    @property
    def name(self) -> str:
        return self.label or self.loss

    def parameters(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {**self.fixed, **{name: values[name] for name in self.linked}}


class LossCurvePanel(Panel):
    """Loss and gradient curves (``workbench.viz.curves.figure_loss_curves``) redrawn from sliders."""

    def __init__(
        self,
        curves: Sequence[LinkedCurve],
        slider_names: Sequence[str] = ("gamma", "alpha"),
        num_classes: int = 2,
        example: str = "positive",
        derivative: str = "dloss_dp",
        interactive: bool = True,
        name: str = "loss_curves",
    ) -> None:
        if not curves:
            raise ValueError("curves must hold at least one LinkedCurve")
        for curve in curves:
            missing = sorted(set(curve.linked) - set(slider_names))
            if missing:
                raise ValueError(f"curve {curve.name!r} links slider(s) {missing} not in slider_names {list(slider_names)}")
        self.curves = list(curves)
        self.num_classes = num_classes
        self.example = example
        self.derivative = derivative
        sliders = {slider: make_slider(slider, continuous_update=False) for slider in slider_names}
        super().__init__(sliders, name, interactive)

    def draw(self, **values: Any) -> go.Figure:
        specs = [(curve.name, curve.loss, curve.parameters(values)) for curve in self.curves]
        settings = ", ".join(f"{name} = {value:g}" for name, value in values.items())
        return figure_loss_curves(
            specs, example=self.example, derivative=self.derivative, num_classes=self.num_classes, title=settings
        )


# ----------------------------------------------------------------------------- PCL weights


class PclWeightsPanel(Panel):
    """The PCL per-(gold, predicted) matrices of several variants against epsilon."""

    def __init__(
        self,
        variants: Sequence[str] = ("weighted", "expected_cost"),
        label_counts: Sequence[float] | None = None,
        label_names: Sequence[str] = ("0", "1", "2"),
        interactive: bool = True,
        name: str = "pcl_weights",
    ) -> None:
        from workbench.losses.pcl import QBQTC_LABEL_COUNTS

        self.variants = list(variants)
        self.label_counts = QBQTC_LABEL_COUNTS if label_counts is None else tuple(label_counts)
        self.label_names = list(label_names)
        super().__init__({"epsilon": make_slider("epsilon")}, name, interactive)

    def draw(self, epsilon: float) -> go.Figure:
        from workbench.losses.pcl import pcl_weight_matrix

        matrices = {
            variant: pcl_weight_matrix(variant, epsilon, label_counts=self.label_counts).numpy()
            for variant in self.variants
        }
        return matrix_grid(matrices, self.label_names, title=f"PCL matrices M[gold, predicted], epsilon = {epsilon:g}",
                           shared_scale=False)


# ----------------------------------------------------------------------------- entropy


class EntropyPanel(Panel):
    """H_k vs H_{k+n} over the auxiliary-label count; with ``logits`` also the model's entropies."""

    def __init__(
        self,
        n_max: int = 20,
        logits: Sequence[float] | None = None,
        auxiliary_logit: float = 0.0,
        interactive: bool = True,
        name: str = "entropy",
    ) -> None:
        self.n_max = n_max
        self.logits = None if logits is None else list(logits)
        self.auxiliary_logit = auxiliary_logit
        sliders = {"n_auxiliary": make_slider("n_auxiliary", max=n_max, value=min(3, n_max))}
        if logits is None:
            sliders["k"] = make_slider("k")
        super().__init__(sliders, name, interactive)

    def draw(self, n_auxiliary: int, k: int | None = None) -> go.Figure:
        k = len(self.logits) if self.logits is not None else k
        return entropy_figure(k, self.n_max, self.logits, self.auxiliary_logit, highlight_n=n_auxiliary)
