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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from workbench.information import paper_entropy
from workbench.viz import figures
from workbench.viz.confusion import matrix_grid
from workbench.viz.curves import figure_loss_curves
from workbench.viz.entropy import entropy_figure, undefined_entropy_figure

SLIDERS: dict[str, dict[str, Any]] = {
    "epsilon": {"value": 0.1, "min": 0.0, "max": 0.9, "step": 0.01},
    "gamma": {"value": 1.0, "min": 0.0, "max": 5.0, "step": 0.1},
    "alpha": {"value": 0.5, "min": 0.0, "max": 1.0, "step": 0.05},
    "beta": {"value": 0.5, "min": 0.0, "max": 1.0, "step": 0.05},
    "n_auxiliary": {"value": 3, "min": 0, "max": 20, "step": 1},
    "k": {"value": 2, "min": 1, "max": 10, "step": 1},
    # the auxiliary-label paper's gamma (eq. 2-3): each false label's probability; not focal's "gamma"
    "gamma_entropy": {"value": 0.1, "min": 0.01, "max": 0.5, "step": 0.01},
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
    """Loss and gradient curves (``workbench.viz.curves.figure_loss_curves``) redrawn from sliders.

    ``derivative_range`` goes to ``figure_loss_curves``: the default ``"auto"`` clips a
    dL/dp panel to the curves' span from p = 0.2 on, so a slider's effect stays visible
    next to CE's -1/p; a ``(low, high)`` pair fixes the axis across redraws.
    """

    def __init__(
        self,
        curves: Sequence[LinkedCurve],
        slider_names: Sequence[str] = ("gamma", "alpha"),
        num_classes: int = 2,
        example: str = "positive",
        derivative: str = "dloss_dp",
        interactive: bool = True,
        name: str = "loss_curves",
        derivative_range: tuple[float, float] | str | None = "auto",
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
        self.derivative_range = derivative_range
        sliders = {slider: make_slider(slider, continuous_update=False) for slider in slider_names}
        super().__init__(sliders, name, interactive)

    def draw(self, **values: Any) -> go.Figure:
        specs = [(curve.name, curve.loss, curve.parameters(values)) for curve in self.curves]
        settings = ", ".join(f"{name} = {value:g}" for name, value in values.items())
        return figure_loss_curves(
            specs,
            example=self.example,
            derivative=self.derivative,
            num_classes=self.num_classes,
            title=settings,
            derivative_range=self.derivative_range,
        )


# ----------------------------------------------------------------------------- PCL weights


def _check_epsilon(epsilon: float) -> float:
    """The PCL epsilon as a float in [0, 1) (the domain of ``pcl_weight_matrix``)."""
    numeric = isinstance(epsilon, (int, float, np.integer, np.floating)) and not isinstance(epsilon, bool)
    if not (numeric and 0.0 <= epsilon < 1.0):
        raise ValueError(f"epsilon: must be a number in [0, 1), got {epsilon!r}")
    return float(epsilon)


def _slider_with_start(name: str, value: float) -> widgets.widget.Widget:
    """``make_slider(name)`` starting at ``value``; its range is widened to hold ``value``
    (an ipywidgets slider would clamp it silently)."""
    settings = SLIDERS[name]
    return make_slider(name, value=value, min=min(settings["min"], value), max=max(settings["max"], value))


def _check_label_counts(label_counts: Sequence[float]) -> tuple[float, ...]:
    """Per-class counts: a 1-d, non-string sequence of at least 2 finite positive numbers."""
    message = f"label_counts: must be a sequence of at least 2 finite positive counts, one per class, got {label_counts!r}"
    if isinstance(label_counts, (str, bytes, Mapping)):
        raise ValueError(message)
    try:
        counts = np.asarray(label_counts, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(message) from None
    if counts.ndim != 1 or counts.size < 2 or not (np.isfinite(counts).all() and (counts > 0).all()):
        raise ValueError(message)
    return tuple(counts.tolist())


class PclWeightsPanel(Panel):
    """The PCL per-(gold, predicted) matrices of several variants against epsilon.

    ``epsilon`` (in [0, 1), the domain of ``pcl_weight_matrix``) is the
    slider's starting value, so a notebook parameter sweep changes the figure.
    ``label_counts`` (default QBQTC's) sets K; ``label_names`` defaults to
    "0".."K-1" and must have one name per count.
    """

    def __init__(
        self,
        variants: Sequence[str] = ("weighted", "expected_cost"),
        label_counts: Sequence[float] | None = None,
        label_names: Sequence[str] | None = None,
        interactive: bool = True,
        name: str = "pcl_weights",
        epsilon: float = 0.1,
    ) -> None:
        from workbench.losses.pcl import QBQTC_LABEL_COUNTS

        self.label_counts = QBQTC_LABEL_COUNTS if label_counts is None else _check_label_counts(label_counts)
        num_labels = len(self.label_counts)
        if label_names is None:
            label_names = [str(index) for index in range(num_labels)]
        elif len(label_names) != num_labels:
            raise ValueError(
                f"label_counts: must have one count per entry of label_names ({len(label_names)}: "
                f"{list(label_names)}), got {num_labels} counts {list(self.label_counts)}"
            )
        self.variants = list(variants)
        self.label_names = list(label_names)
        super().__init__({"epsilon": _slider_with_start("epsilon", _check_epsilon(epsilon))}, name, interactive)

    def draw(self, epsilon: float) -> go.Figure:
        from workbench.losses.pcl import pcl_weight_matrix

        matrices = {
            variant: pcl_weight_matrix(variant, epsilon, label_counts=self.label_counts).numpy() for variant in self.variants
        }
        return matrix_grid(
            matrices, self.label_names, title=f"PCL matrices M[gold, predicted], epsilon = {epsilon:g}", shared_scale=False
        )


# ----------------------------------------------------------------------------- entropy


class EntropyPanel(Panel):
    """The auxiliary-label paper's H_k (eq. 2) vs H_{k+n} (eq. 3) over the auxiliary-label count.

    Sliders: ``n_auxiliary`` (the marked n, 0..``n_max``), ``k`` (unless
    ``logits`` fix it) and ``gamma_entropy``, the paper's gamma: every false
    label's probability (starting at ``gamma``). ``uniform=True`` adds the aside
    curves log k and log(k+n) (not the paper's quantity); ``logits`` add the
    model's entropies. Where (k-1) gamma >= 1 eq. 2 is undefined and the figure
    is empty with a title saying so (widget callbacks must not raise).
    """

    def __init__(
        self,
        n_max: int = 20,
        logits: Sequence[float] | None = None,
        auxiliary_logit: float = 0.0,
        interactive: bool = True,
        name: str = "entropy",
        gamma: float = 0.1,
        uniform: bool = False,
    ) -> None:
        if isinstance(n_max, bool) or not isinstance(n_max, int) or n_max < 0:
            raise ValueError(f"n_max: must be an integer >= 0, got {n_max!r}")
        self.n_max = n_max
        self.logits = None if logits is None else list(logits)
        self.auxiliary_logit = auxiliary_logit
        self.uniform = uniform
        initial_k = len(self.logits) if self.logits is not None else SLIDERS["k"]["value"]
        paper_entropy(initial_k, gamma)  # ValueError naming gamma unless gamma > 0 and (k-1)*gamma < 1
        sliders = {"n_auxiliary": make_slider("n_auxiliary", max=n_max, value=min(3, n_max))}
        if logits is None:
            sliders["k"] = make_slider("k")
        sliders["gamma_entropy"] = _slider_with_start("gamma_entropy", float(gamma))
        super().__init__(sliders, name, interactive)

    def draw(self, n_auxiliary: int, gamma_entropy: float, k: int | None = None) -> go.Figure:
        k = len(self.logits) if self.logits is not None else k
        if (k - 1) * gamma_entropy >= 1.0:
            return undefined_entropy_figure(k, gamma_entropy)
        return entropy_figure(
            k, self.n_max, self.logits, self.auxiliary_logit, highlight_n=n_auxiliary, gamma=gamma_entropy, uniform=self.uniform
        )
