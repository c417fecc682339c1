"""Slider panels: ipywidgets sliders redraw a plotly figure in JupyterLab; a page keeps plotly's own sliders.

Every panel has ``sliders`` (name -> ipywidgets slider), ``figure_for(**values)`` (the figure at
these values, the others at the sliders' current ones: the plain function the tests check, as
ipywidgets swallows errors in callbacks), ``figure`` (the current figure: a ``go.FigureWidget``
redrawn in place when ``interactive``, else a ``go.Figure``), ``widget`` (the sliders above the
figure, the cell's full width) and ``display()``. With ``interactive=False`` (headless runs)
``display()`` shows ``page_figure()``: the figure with plotly sliders over precomputed steps, so the
run's pages stay interactive offline, with no kernel.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go

from workbench.checks import check_choice, check_int, check_number
from workbench.information import paper_entropy
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
    # the auxiliary-label paper's gamma (eq. 2-3): each false label's probability; not focal's "gamma"
    "gamma_entropy": {"value": 0.1, "min": 0.01, "max": 0.5, "step": 0.01},
}
PAGE_STEPS = 11  # a page slider's steps: every position up to this many, else this many spread evenly
TRACE_ATTRIBUTES = ("x", "y", "z", "text")  # what a page slider's step may change in a trace
_AXIS = re.compile(r"^[xy]axis\d*$")


def make_slider(name: str, continuous_update: bool = True, **overrides: Any) -> widgets.widget.Widget:
    """A preconfigured slider for ``name`` (one of SLIDERS); ``overrides`` change value, min, max, step.
    The range is widened to hold the value (ipywidgets would clamp it silently)."""
    check_choice("name", name, sorted(SLIDERS))
    unknown = sorted(set(overrides) - {"value", "min", "max", "step"})
    if unknown:
        raise ValueError(f"overrides: must be among value, min, max, step, got {unknown}")
    settings = {**SLIDERS[name], **overrides}
    settings.update(min=min(settings["min"], settings["value"]), max=max(settings["max"], settings["value"]))
    slider_class = widgets.IntSlider if isinstance(SLIDERS[name]["value"], int) else widgets.FloatSlider
    return slider_class(description=name, continuous_update=continuous_update, style={"description_width": "initial"}, **settings)


def _page_grid(slider: widgets.widget.Widget) -> list[float]:
    """A page slider's values: ``slider``'s positions (PAGE_STEPS of them at most, spread evenly) and its value."""
    count = round((slider.max - slider.min) / slider.step) + 1
    positions = np.linspace(0, count - 1, min(count, PAGE_STEPS)).round()
    cast = type(slider.value)
    return sorted({cast(round(slider.min + position * slider.step, 10)) for position in positions} | {slider.value})


def _typed(values: Any) -> Any:
    """Numbers as plotly's typed-array spec in float32 (a fifth of their JSON text); text as it is."""
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        return values
    array = array.astype("<f4")
    return {"dtype": "f4", "bdata": base64.b64encode(array.tobytes()).decode(), "shape": ",".join(map(str, array.shape))}


def _parts(figure: go.Figure) -> dict[Any, str]:
    """``figure`` as JSON text per (trace index, attribute in TRACE_ATTRIBUTES) and per top-level layout entry."""
    dump = json.loads(figure.to_json())
    traces = {(index, name): json.dumps(trace.get(name)) for index, trace in enumerate(dump["data"]) for name in TRACE_ATTRIBUTES}
    return traces | {key: json.dumps(value, sort_keys=True) for key, value in dump["layout"].items()}


def _hold_axis_ranges(figures: Sequence[go.Figure]) -> None:
    """Give each axis whose range differs among ``figures`` the range spanning them all."""
    for key in {key for figure in figures for key in figure.layout.to_plotly_json() if _AXIS.match(key)}:
        ranges = [figure.layout[key].range for figure in figures if figure.layout[key].range is not None]
        if len({tuple(axis_range) for axis_range in ranges}) > 1:
            for figure in figures:
                figure.layout[key].range = [min(low for low, _ in ranges), max(high for _, high in ranges)]


def _touched(parts: set[Any]) -> set[Any]:
    """The traces (indices) and layout entries that ``parts`` belong to."""
    return {part[0] if isinstance(part, tuple) else part for part in parts}


def _update_args(step: go.Figure, changed: set[Any], back: dict[str, int]) -> list[Any]:
    """``Plotly.update`` arguments that turn a page figure's ``changed`` parts into ``step``'s and set the
    sliders ``back`` (``sliders[i].active``)."""
    traces = sorted({part[0] for part in changed if isinstance(part, tuple)})
    names = sorted({part[1] for part in changed if isinstance(part, tuple)})
    layout = json.loads(step.to_json())["layout"]
    data = {name: [_typed(step.data[index][name]) for index in traces] for name in names}
    return [data, {**{key: layout.get(key) for key in changed if isinstance(key, str)}, **back}, traces]


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
        controls = widgets.HBox(list(self.sliders.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([controls, self.figure] if interactive else [controls], layout=widgets.Layout(width="100%"))

    def draw(self, **values: Any) -> go.Figure:
        raise NotImplementedError

    def values(self) -> dict[str, Any]:
        """The sliders' current values."""
        return {name: slider.value for name, slider in self.sliders.items()}

    def figure_for(self, **values: Any) -> go.Figure:
        """The figure for these slider values (others: current values); ValueError for unknown names."""
        unknown = sorted(set(values) - set(self.sliders))
        if unknown:
            raise ValueError(f"values: {unknown} are not sliders of {type(self).__name__}; allowed: {sorted(self.sliders)}")
        figure = self.draw(**{**self.values(), **values})
        figure.update_layout(autosize=True, width=None)  # the cell's width
        return figure

    def _redraw(self, change: Any = None) -> None:
        new = self.figure_for()
        if isinstance(self.figure, go.FigureWidget):
            with self.figure.batch_update():
                self.figure.data = ()
                self.figure.add_traces(list(new.data))
                self.figure.layout = new.layout
        else:
            self.figure = new

    def page_figure(self) -> go.Figure:
        """The current figure with one plotly slider per panel slider, its steps precomputed (``_page_grid``).

        A step draws ``figure_for`` at its value, the other sliders at their current values. Sliders that
        change the same traces or layout entries (e.g. TL's alpha and beta) form a group: a step puts the
        other sliders of its group back to their values, so the figure always shows what the sliders say.
        An axis range that moves with a slider is held at the span of every step."""
        start, grids = self.values(), {name: _page_grid(slider) for name, slider in self.sliders.items()}
        figure = self.figure_for()
        steps = {name: [self.figure_for(**{name: value}) for value in grid] for name, grid in grids.items()}
        _hold_axis_ranges([figure, *(step for drawn in steps.values() for step in drawn)])
        base = _parts(figure)
        groups: list[tuple[set[str], set[Any]]] = []  # slider names, the parts they change
        for name, drawn in steps.items():
            changed = {part for step in drawn for part, text in _parts(step).items() if base.get(part) != text}
            joined = [group for group in groups if _touched(group[1]) & _touched(changed)]
            groups = [group for group in groups if group not in joined]
            groups.append(({name}.union(*(g[0] for g in joined)), changed.union(*(g[1] for g in joined))))
        sliders = []
        for index, (name, grid) in enumerate(grids.items()):
            names, changed = next(group for group in groups if name in group[0])
            back = {f"sliders[{other}].active": grids[n].index(start[n]) for other, n in enumerate(grids) if n in names - {name}}
            sliders.append(
                {
                    "active": grid.index(start[name]),
                    "currentvalue": {"prefix": f"{name} = "},
                    "pad": {"t": 60 + 90 * index},
                    "steps": [
                        {"label": f"{value:g}", "method": "update", "args": _update_args(step, changed, back)}
                        for value, step in zip(grid, steps[name])
                    ],
                }
            )
        height = (figure.layout.height or 450) + 90 * len(sliders)
        return figure.update_layout(sliders=sliders, height=height, margin={"b": 60 + 90 * len(sliders)})

    def display(self) -> None:
        """Show the live widget, or (headless) ``page_figure()`` through ``figures.show`` (saved in a run)."""
        if self.interactive:
            from IPython.display import display

            display(self.widget)
        else:
            figures.show(self.page_figure(), self.name)


# ----------------------------------------------------------------------------- loss curves


@dataclass(frozen=True)
class LinkedCurve:
    """One curve: loss ``loss`` (registry name) with ``fixed`` parameters and the slider values named in ``linked``."""

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

    ``options`` go to ``figure_loss_curves``: ``example``, ``num_classes``, ``derivative`` (e.g.
    ``("dloss_dp", "dloss_dlogit")``: dL/dz beside dL/dp) and ``derivative_range`` (default ``"auto"``:
    a dL/dp axis spans the curves from p = 0.2 on, so a slider's effect stays visible next to CE's -1/p).
    """

    def __init__(
        self,
        curves: Sequence[LinkedCurve],
        slider_names: Sequence[str] = ("gamma", "alpha"),
        interactive: bool = True,
        name: str = "loss_curves",
        **options: Any,
    ) -> None:
        if not curves:
            raise ValueError("curves: must hold at least one LinkedCurve, got none")
        for curve in curves:
            missing = sorted(set(curve.linked) - set(slider_names))
            if missing:
                raise ValueError(f"curves: {curve.name!r} links slider(s) {missing} not in slider_names {list(slider_names)}")
        self.curves, self.options = list(curves), options
        super().__init__({slider: make_slider(slider, continuous_update=False) for slider in slider_names}, name, interactive)

    def draw(self, **values: Any) -> go.Figure:
        return figure_loss_curves([(curve.name, curve.loss, curve.parameters(values)) for curve in self.curves], **self.options)


# ----------------------------------------------------------------------------- PCL weights


class PclWeightsPanel(Panel):
    """The PCL per-(gold, predicted) matrices of several variants against epsilon.

    ``epsilon`` (in [0, 1), the domain of ``pcl_weight_matrix``) is the slider's starting value, so a
    notebook parameter sweep changes the figure. ``label_counts`` (default QBQTC's) sets K;
    ``label_names`` defaults to "0".."K-1" and must have one name per count.
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
        from workbench.losses.pcl import QBQTC_LABEL_COUNTS, pcl_constants

        if label_counts is not None and (
            isinstance(label_counts, (str, bytes, Mapping)) or np.ndim(np.asarray(label_counts, dtype=object)) != 1
        ):
            raise ValueError(f"label_counts: must be a flat sequence of counts, one per class, got {label_counts!r}")
        self.label_counts = QBQTC_LABEL_COUNTS if label_counts is None else tuple(label_counts)
        pcl_constants(self.label_counts)  # ValueError naming label_counts: fewer than 2, not finite, not positive
        self.label_names = [str(index) for index in range(len(self.label_counts))] if label_names is None else list(label_names)
        if len(self.label_names) != len(self.label_counts):
            raise ValueError(
                f"label_counts: must have one count per entry of label_names ({len(self.label_names)}: "
                f"{self.label_names}), got {len(self.label_counts)} counts {list(self.label_counts)}"
            )
        self.variants = list(variants)
        epsilon = check_number("epsilon", epsilon, 0.0, 1.0, high_inclusive=False)
        super().__init__({"epsilon": make_slider("epsilon", value=epsilon)}, name, interactive)

    def draw(self, epsilon: float) -> go.Figure:
        from workbench.losses.pcl import pcl_weight_matrix

        matrices = {
            variant: pcl_weight_matrix(variant, epsilon, label_counts=self.label_counts).numpy() for variant in self.variants
        }
        title = f"PCL matrices M[gold, predicted], epsilon = {epsilon:g}"
        return matrix_grid(matrices, self.label_names, title=title, shared_scale=False)


# ----------------------------------------------------------------------------- entropy


class EntropyPanel(Panel):
    """The auxiliary-label paper's H_k (eq. 2) vs H_{k+n} (eq. 3) over the auxiliary-label count.

    Sliders: ``n_auxiliary`` (the marked n, 0..``n_max``), ``k`` (unless ``logits`` fix it) and
    ``gamma_entropy``, the paper's gamma: every false label's probability (starting at ``gamma``).
    ``uniform=True`` adds the aside curves log k and log(k+n); ``logits`` add the model's entropies.
    Where (k-1) gamma >= 1 eq. 2 is undefined: empty curves, the title says so (callbacks must not raise).
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
        check_int("n_max", n_max, 0)
        self.logits = None if logits is None else list(logits)
        self.options = {"n_max": n_max, "logits": self.logits, "auxiliary_logit": auxiliary_logit, "uniform": uniform}
        paper_entropy(SLIDERS["k"]["value"] if logits is None else len(logits), gamma)  # ValueError naming gamma
        sliders = {"n_auxiliary": make_slider("n_auxiliary", max=n_max, value=min(3, n_max))}
        if logits is None:
            sliders["k"] = make_slider("k")
        sliders["gamma_entropy"] = make_slider("gamma_entropy", value=float(gamma))
        super().__init__(sliders, name, interactive)

    def draw(self, n_auxiliary: int, gamma_entropy: float, k: int | None = None) -> go.Figure:
        k = len(self.logits) if self.logits is not None else k
        return entropy_figure(k, highlight_n=n_auxiliary, gamma=gamma_entropy, **self.options)
