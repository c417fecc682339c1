"""Slider panels: ipywidgets sliders redraw a plotly figure in JupyterLab (``interactive=True``); headless,
``display()`` shows ``page_figure()``, plotly's own sliders over precomputed steps, so a run's pages stay interactive
offline."""

from __future__ import annotations

import base64
import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ipywidgets as widgets
import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from IPython.display import clear_output, display

from workbench.checks import Bounds, check_int, check_names, check_number
from workbench.label_entropy import paper_entropy
from workbench.losses import (
    DEFAULT_PCL_PLUS_FORM,
    PCL_VARIANTS,
    QBQTC_LABEL_COUNTS,
    check_label_counts,
    own_losses,
    parameter_range,
    pcl_weight_matrix_of_checked,
)
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
    "gamma_entropy": {"value": 0.1, "min": 0.01, "max": 0.5, "step": 0.01},  # the aux-label paper's eq. 2-3 gamma
}
# (loss, parameter) pairs that change a negative example's curves only: Tversky eq. 10's FP = p (1 - y) is 0
# for a positive
NEGATIVE_ONLY = {("tversky", "alpha")}
PAGE_STEPS = 11  # a page slider's steps: every position up to this many, else its ends and round values between
TRACE_ATTRIBUTES = ("x", "y", "z", "text")  # what a page slider's step may change in a trace


def make_slider(
    name: str, continuous_update: bool = True, within: Sequence[Bounds] = (), **overrides: Any
) -> widgets.widget.Widget:
    """A preconfigured slider for ``name`` (one of SLIDERS); ``overrides`` change value, min, max, step. A parameter
    not in SLIDERS (one of a loss of yours) gets a slider when ``overrides`` give all four. Its ends are kept to the
    positions every range of ``within`` holds (the declared ranges of the loss parameters it sets,
    ``workbench.losses.parameter_range``: dice's gamma starts above 0, epsilon stays below 1). The range is widened to
    hold the value (ipywidgets would clamp it silently)."""
    unknown = sorted(set(overrides) - {"value", "min", "max", "step"})
    if unknown:
        raise ValueError(f"overrides: must be among value, min, max, step, got {unknown}")
    if name not in SLIDERS and set(overrides) != {"value", "min", "max", "step"}:
        raise ValueError(
            f"name: must be one of {', '.join(sorted(SLIDERS))}, or come with value, min, max and step, got {name!r} "
            f"with {sorted(overrides)}"
        )
    settings = {**SLIDERS.get(name, {}), **overrides}
    for key in ("value", "min", "max", "step"):
        check_number(f"{name}.{key}", settings[key])
    if settings["step"] <= 0:
        raise ValueError(f"{name}.step: must be a number > 0, got {settings['step']!r}")
    given = SLIDERS[name] if name in SLIDERS else settings
    integral = all(isinstance(given[key], int) and not isinstance(given[key], bool) for key in given)
    if within:
        count = round((settings["max"] - settings["min"]) / settings["step"]) + 1
        kind = int if integral else float
        grid = [kind(round(settings["min"] + i * settings["step"], 10)) for i in range(count)]
        allowed = [value for value in grid if all(bounds.contains(value) for bounds in within)]
        if not allowed:
            raise ValueError(f"{name}: no slider position in [{settings['min']}, {settings['max']}] is allowed")
        settings.update(min=allowed[0], max=allowed[-1])
    settings.update(min=min(settings["min"], settings["value"]), max=max(settings["max"], settings["value"]))
    slider_class = widgets.IntSlider if integral else widgets.FloatSlider
    return slider_class(
        description=name, continuous_update=continuous_update, style={"description_width": "initial"}, **settings
    )


def _round_spacing(slider: widgets.widget.Widget) -> float:
    """The smallest round spacing (1, 2 or 5 times a power of ten, a whole number of ``slider``'s steps) that puts at
    most PAGE_STEPS positions of the slider on its multiples."""
    low, high, step = slider.min, slider.max, slider.step
    for exponent in range(math.floor(math.log10(step)), math.ceil(math.log10(max(high - low, step))) + 2):
        for mantissa in (1, 2, 5):
            spacing = mantissa * 10.0**exponent
            steps = spacing / step
            if steps >= 1 - 1e-9 and abs(steps - round(steps)) < 1e-9:
                if math.floor(high / spacing + 1e-9) - math.ceil(low / spacing - 1e-9) + 1 <= PAGE_STEPS:
                    return spacing
    return high - low


def _page_grid(slider: widgets.widget.Widget) -> list[float]:
    """A page slider's values: every position of ``slider`` when there are PAGE_STEPS or fewer, else its ends and
    the positions on a round spacing (:func:`_round_spacing`: 0, 0.1, ..., 0.9, never 0, 0.09, 0.18), and its value."""
    count = round((slider.max - slider.min) / slider.step) + 1
    positions = [round(slider.min + index * slider.step, 10) for index in range(count)]
    if count > PAGE_STEPS:
        spacing = _round_spacing(slider)
        ends = {positions[0], positions[-1]}
        positions = [
            value for value in positions if value in ends or abs(value / spacing - round(value / spacing)) < 1e-9
        ]
    return sorted({type(slider.value)(value) for value in positions} | {slider.value})


def _typed(values: Any) -> Any:
    """Numbers as plotly's float32 typed-array spec (a fifth of their JSON text); text as it is."""
    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        return values
    data = base64.b64encode(array.astype("<f4").tobytes()).decode()
    return {"dtype": "f4", "bdata": data, "shape": ",".join(map(str, array.shape))}


def _parts(figure: go.Figure) -> dict[tuple[Any, str | None], str]:
    """JSON text per (trace index, attribute in TRACE_ATTRIBUTES) and per (layout entry, None)."""
    dump = json.loads(figure.to_json())
    traces = {
        (index, name): json.dumps(trace.get(name))
        for index, trace in enumerate(dump["data"])
        for name in TRACE_ATTRIBUTES
    }
    return traces | {(key, None): json.dumps(value, sort_keys=True) for key, value in dump["layout"].items()}


def _hold_axis_ranges(figures: Sequence[go.Figure]) -> None:
    """Give each axis with a range in one of ``figures`` the range spanning them all."""
    for key in {
        key for figure in figures for key in figure.layout.to_plotly_json() if key.startswith(("xaxis", "yaxis"))
    }:
        ranges = [figure.layout[key].range for figure in figures if figure.layout[key].range is not None]
        for figure in figures:
            figure.layout[key].range = (
                [min(low for low, _ in ranges), max(high for _, high in ranges)] if ranges else None
            )


def _update_args(step: go.Figure, parts: set[tuple[Any, str | None]], back: dict[str, int]) -> list[Any]:
    """``Plotly.update`` arguments: ``step``'s values of ``parts`` and the sliders set ``back``
    (``sliders[i].active``)."""
    traces = sorted({index for index, name in parts if name})
    layout = step.layout.to_plotly_json()
    data = {
        name: [_typed(step.data[index][name]) for index in traces]
        for name in sorted({name for _, name in parts if name})
    }
    return [data, {key: layout.get(key) for key, name in parts if not name} | back, traces]


class Panel:
    """Sliders + one figure redrawn from ``figure_for``; subclasses implement ``draw``.

    Live (``interactive=True``), the figure is drawn in an ``ipywidgets.Output`` by JupyterLab's plotly renderer,
    which sizes it to the cell's width (a plotly ``FigureWidget`` is drawn before it is attached to the page and
    keeps plotly's default 700 px, where three panels' axis titles overlap)."""

    def __init__(self, sliders: Mapping[str, widgets.widget.Widget], name: str, interactive: bool = True) -> None:
        self.sliders = dict(sliders)
        self.name = name
        self.interactive = interactive
        self.figure: go.Figure = self.figure_for()
        for slider in self.sliders.values():
            slider.observe(self._redraw, names="value")
        controls = widgets.HBox(list(self.sliders.values()), layout=widgets.Layout(flex_flow="row wrap"))
        self.output = widgets.Output(layout=widgets.Layout(width="100%"))
        self.widget = widgets.VBox(
            [controls, self.output] if interactive else [controls], layout=widgets.Layout(width="100%")
        )
        if interactive:
            self._draw_live()

    def draw(self, **values: Any) -> go.Figure:
        raise NotImplementedError

    def values(self) -> dict[str, Any]:
        """The sliders' current values."""
        return {name: slider.value for name, slider in self.sliders.items()}

    def figure_for(self, **values: Any) -> go.Figure:
        """The figure for these slider values (the others at their current values), the cell's width; ValueError for
        unknown names."""
        unknown = sorted(set(values) - set(self.sliders))
        if unknown:
            raise ValueError(
                f"values: {unknown} are not sliders of {type(self).__name__}; allowed: {sorted(self.sliders)}"
            )
        return self.draw(**{**self.values(), **values}).update_layout(autosize=True, width=None)

    def _draw_live(self) -> None:
        """Replace the live output's figure by ``self.figure`` (plotly's MIME bundle, which JupyterLab draws)."""
        with self.output:
            clear_output(wait=True)  # the new figure replaces the old one without a blank in between
            display(pio.renderers["plotly_mimetype"].to_mimebundle(self.figure.to_dict()), raw=True)

    def _redraw(self, change: Any = None) -> None:
        self.figure = self.figure_for()
        if self.interactive:
            self._draw_live()

    def page_figure(self) -> go.Figure:
        """The figure with one plotly slider per panel slider, its steps ``figure_for`` at ``_page_grid`` values.

        Sliders that change the same traces or layout entries form a group: a step puts the others of its group
        back to their values, so the figure shows what the sliders say. Axis ranges hold the span of every step."""
        start = self.values()
        grids = {name: _page_grid(slider) for name, slider in self.sliders.items()}
        figure = self.figure_for()
        steps = {name: [self.figure_for(**{name: value}) for value in grid] for name, grid in grids.items()}
        _hold_axis_ranges([figure, *itertools.chain(*steps.values())])
        base = _parts(figure)
        changed = {
            name: {part for step in drawn for part, text in _parts(step).items() if base.get(part) != text}
            for name, drawn in steps.items()
        }
        groups = {name: {name} for name in grids}
        for one, other in itertools.combinations(grids, 2):
            if {part[0] for part in changed[one]} & {part[0] for part in changed[other]}:
                merged = groups[one] | groups[other]
                groups.update(dict.fromkeys(merged, merged))
        sliders = []
        for index, (name, grid) in enumerate(grids.items()):
            parts = set().union(*(changed[member] for member in groups[name]))
            back = {
                f"sliders[{i}].active": grids[n].index(start[n])
                for i, n in enumerate(grids)
                if n in groups[name] - {name}
            }
            args = [_update_args(step, parts, back) for step in steps[name]]
            moves = [
                {"label": f"{value:g}", "method": "update", "args": arguments} for value, arguments in zip(grid, args)
            ]
            slider = {
                "active": grid.index(start[name]),
                "currentvalue": {"prefix": f"{name} = "},
                "pad": {"t": 60 + 90 * index},
            }
            sliders.append(slider | {"steps": moves})
        height = (figure.layout.height or 450) + 90 * len(sliders)
        return figure.update_layout(sliders=sliders, height=height, margin={"b": 60 + 90 * len(sliders)})

    def display(self, caption: str | None = None) -> None:
        """Show the live widget, or (headless) ``page_figure()`` through ``figures.show`` (saved in a run, with
        ``caption``). The live widget's output carries ``page_figure()`` too: ``python -m workbench export`` pages
        show it."""
        if self.interactive:
            page = figures.PageLoadsPlotlyRenderer().to_mimebundle(self.page_figure().to_dict())
            display({**self.widget._repr_mimebundle_(), **page}, raw=True)
        else:
            figures.show(self.page_figure(), self.name, caption)


@dataclass(frozen=True)
class LinkedCurve:
    """One curve: loss ``loss`` with ``fixed`` parameters and the sliders named in ``linked``; legend ``label`` (or
    ``loss``)."""

    loss: str
    linked: tuple[str, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    label: str | None = None


class LossCurvePanel(Panel):
    """Loss and gradient curves redrawn from sliders, for any registered loss (yours too: ``LinkedCurve("poly1",
    linked=("epsilon",))``); ``slider_ranges`` sets a slider's value, min, max and step (all four for a parameter
    not in SLIDERS); ``options`` go to ``figure_loss_curves`` (``example``: default "positive", and "negative" too
    when a slider is in NEGATIVE_ONLY; ``derivative``, ``derivative_range``, ...)."""

    def __init__(
        self,
        curves: Sequence[LinkedCurve],
        slider_names: Sequence[str] = ("gamma", "alpha"),
        interactive: bool = True,
        name: str = "loss_curves",
        slider_ranges: Mapping[str, Mapping[str, float]] | None = None,
        **options: Any,
    ) -> None:
        if not curves:
            raise ValueError("curves: must hold at least one LinkedCurve, got none")
        unknown = sorted({slider for curve in curves for slider in curve.linked} - set(slider_names))
        if unknown:
            raise ValueError(f"curves: link slider(s) {unknown} that are not in slider_names {list(slider_names)}")
        if any((curve.loss, slider) in NEGATIVE_ONLY for curve in curves for slider in curve.linked):
            options.setdefault("example", ("positive", "negative"))
        ranges = dict(slider_ranges or {})
        unranged = sorted(set(ranges) - set(slider_names))
        if unranged:
            raise ValueError(
                f"slider_ranges: name slider(s) {unranged} that are not in slider_names {list(slider_names)}"
            )
        self.curves = list(curves)
        self.options = options
        declared = {  # each slider within the declared range of every workbench loss parameter it sets
            slider: [
                parameter_range(curve.loss, slider)
                for curve in curves
                if slider in curve.linked and curve.loss not in own_losses()
            ]
            for slider in slider_names
        }
        sliders = {
            slider: make_slider(slider, False, declared[slider], **ranges.get(slider, {})) for slider in slider_names
        }
        super().__init__(sliders, name, interactive)

    def draw(self, **values: Any) -> go.Figure:
        linked = [{**curve.fixed, **{name: values[name] for name in curve.linked}} for curve in self.curves]
        specs = [(curve.label or curve.loss, curve.loss, parameters) for curve, parameters in zip(self.curves, linked)]
        return figure_loss_curves(specs, **self.options)


class PclWeightsPanel(Panel):
    """The PCL per-(gold, predicted) matrices (``pcl_weight_matrix``) of ``variants`` against epsilon, which starts at
    ``epsilon`` in [0, 1) (a notebook sweep changes the figure); ``label_counts`` (default QBQTC's) set K and
    ``label_names`` (default "0".."K-1"). Each argument is checked here, once; a redraw takes the slider's epsilon,
    kept to its declared range."""

    def __init__(
        self,
        variants: Sequence[str] = ("weighted", "expected_cost"),
        label_counts: Sequence[float] | None = None,
        label_names: Sequence[str] | None = None,
        interactive: bool = True,
        name: str = "pcl_weights",
        epsilon: float = 0.1,
    ) -> None:
        self.counts = check_label_counts(QBQTC_LABEL_COUNTS if label_counts is None else label_counts)
        self.label_counts = tuple(self.counts.tolist())
        self.label_names = (
            [str(index) for index in range(len(self.label_counts))] if label_names is None else list(label_names)
        )
        if len(self.label_names) != len(self.label_counts):
            raise ValueError(
                f"label_counts: must have one count per label name {self.label_names}, got {self.label_counts}"
            )
        self.variants = check_names("variants", variants, PCL_VARIANTS, distinct=False)
        epsilon_range = parameter_range("pcl", "epsilon")
        epsilon = epsilon_range.check_number("epsilon", epsilon)
        super().__init__({"epsilon": make_slider("epsilon", within=[epsilon_range], value=epsilon)}, name, interactive)

    def draw(self, epsilon: float) -> go.Figure:
        matrices = {}
        for variant in self.variants:
            form = DEFAULT_PCL_PLUS_FORM[variant]
            matrices[variant] = pcl_weight_matrix_of_checked(variant, epsilon, self.counts, form, None).numpy()
        title = f"PCL matrices M[gold, predicted], epsilon = {epsilon:g}"
        return matrix_grid(matrices, self.label_names, title=title, shared_scale=False)


class EntropyPanel(Panel):
    """H_k (eq. 2) vs H_{k+n} (eq. 3) over n (``entropy_figure``, with ``options``: logits, auxiliary_logit, uniform).

    Sliders: ``n_auxiliary`` (the marked n, 0..``n_max``), ``k`` (unless ``logits`` fix it) and ``gamma_entropy``, the
    auxiliary-label paper's gamma (starting at ``gamma``). Where (k-1) gamma >= 1 the curves are empty (no exception).
    """

    def __init__(
        self, n_max: int = 20, gamma: float = 0.1, interactive: bool = True, name: str = "entropy", **options: Any
    ) -> None:
        check_int("n_max", n_max, 0)
        self.logits = options.get("logits")
        self.options = {"n_max": n_max, **options}
        k = SLIDERS["k"]["value"] if self.logits is None else len(self.logits)
        paper_entropy(k, gamma)  # a ValueError naming gamma where the entropy is undefined
        sliders = {"n_auxiliary": make_slider("n_auxiliary", max=n_max, value=min(3, n_max))}
        if self.logits is None:
            sliders["k"] = make_slider("k")
        sliders["gamma_entropy"] = make_slider("gamma_entropy", value=float(gamma))
        super().__init__(sliders, name, interactive)

    def draw(self, n_auxiliary: int, gamma_entropy: float, k: int | None = None) -> go.Figure:
        return entropy_figure(k or len(self.logits), highlight_n=n_auxiliary, gamma=gamma_entropy, **self.options)
