"""Loss and gradient curves against p, the predicted probability of the gold class, by autograd through ``build_loss``.

One position, C classes: the gold logit is z, the others 0, so p = e^z / (e^z + C - 1) and
dL/dp = (dL/dz) / (p (1 - p)). DSC (Dice paper eq. 12) for a positive: dL/dp = -3 (1 - 2p) / ((1 - p) p + 2)^2 is
positive beyond p = 0.5 (+0.55 at 0.9, +0.75 as p -> 1): confident positives are pushed back towards 0.5, not faded
out (the paper's "approaches zero right after p exceeds 0.5" does not hold for eq. 12 as printed). CE's dL/dp = -1/p
tends to -1; per logit CE's dL/dz = p - 1 fades.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.subplots import make_subplots

from workbench.checks import check_choice, check_int
from workbench.losses import QBQTC_LABEL_COUNTS, build_loss

EXAMPLES = {"positive": 1, "negative": 0}  # the gold class of each example
DERIVATIVES = {"dloss_dp": "dL/dp", "dloss_dlogit": "dL/dz (gold logit)"}
CurveSpec = tuple[str, str, dict]
CURVE_COLOURS = tuple(pio.templates["plotly"].layout.colorway)  # one per loss, shared by its traces
AUTO_RANGE_FROM_P = 0.2  # "auto" dL/dp axes span the curves from this p on
DEFAULT_P = tuple(np.linspace(0.01, 0.99, 99))  # the p grid of the curves when none is given
X_TITLE = "p of the gold class"  # short: three panels' x titles side by side fit a notebook cell


def loss_curves(
    name: str,
    p: Sequence[float] | np.ndarray | None = None,
    num_classes: int = 2,
    examples: Sequence[str] = tuple(EXAMPLES),
    **params: object,
) -> pd.DataFrame:
    """Columns ``loss_name, example, p, loss, dloss_dp, dloss_dlogit`` against the gold-class probability p.

    Args: the loss ``name`` and ``params`` (``build_loss``); ``p`` in (0, 1) (default 0.01 ... 0.99);
    ``num_classes`` >= 2; ``examples``: "positive" (gold 1) and/or "negative" (gold 0).
    """
    p = np.asarray(DEFAULT_P if p is None else p, dtype=np.float64).ravel()
    if p.size == 0 or not np.all((p > 0) & (p < 1)):
        raise ValueError(f"p: must be a non-empty sequence of probabilities in (0, 1), got {p.tolist()}")
    check_int("num_classes", num_classes, 2)
    loss = build_loss(name, **params)
    per_row = None
    if loss.rows_are_independent:  # every p at once, one row each; otherwise a batch of one per p
        per_row = build_loss(name, **{**params, "reduction": "none"})
    frames = []
    for example in examples:
        labels = torch.tensor([EXAMPLES[check_choice("examples", example, list(EXAMPLES))]])
        gold_logits = torch.tensor(np.log(p * (num_classes - 1) / (1 - p)), requires_grad=True)
        logits = torch.nn.functional.one_hot(labels, num_classes).double() * gold_logits[:, None]  # (len(p), C)
        if per_row is not None:
            values = per_row(logits, labels.expand(len(p)))
        else:  # a batch of one per p: batch-level losses, and PCL reference (its correction reads the batch)
            values = torch.stack([loss(row[None], labels) for row in logits])
        dloss_dz = torch.autograd.grad(values.sum(), gold_logits)[0].numpy()
        columns = {
            "p": p,
            "loss": values.detach().numpy(),
            "dloss_dp": dloss_dz / (p * (1 - p)),
            "dloss_dlogit": dloss_dz,
        }
        frames.append(pd.DataFrame({"loss_name": name, "example": example, **columns}))
    return pd.concat(frames, ignore_index=True)


def _choices(name: str, value: str | Sequence[str], allowed: dict) -> list[str]:
    """``value`` (one choice or several, at least one) as a list; ValueError naming ``name`` otherwise."""
    values = [value] if isinstance(value, str) else list(value)
    for item in values or [None]:
        check_choice(name, item, list(allowed))
    return values


def _span(values: np.ndarray) -> tuple[float, float] | None:
    """The span of the finite ``values``, padded by 5 %; None when there is none."""
    values = values[np.isfinite(values)]
    pad = 0.05 * max(np.ptp(values), 1e-6) if values.size else None
    return None if pad is None else (float(values.min() - pad), float(values.max() + pad))


def figure_loss_curves(
    specs: Sequence[CurveSpec],
    example: str | Sequence[str] = "positive",
    derivative: str | Sequence[str] = "dloss_dp",
    p: Sequence[float] | np.ndarray | None = None,
    num_classes: int = 2,
    title: str | None = None,
    derivative_range: tuple[float, float] | str | None = "auto",
) -> go.Figure:
    """Panels against p: the loss, then each derivative (titled once, above the top row); one row per example (named
    on its first y axis); one colour and legend entry per spec.

    Args: ``example``: "positive", "negative" or both; ``derivative``: "dloss_dp", "dloss_dlogit" or both (dL/dz
    beside dL/dp); ``derivative_range``: (low, high), None (autorange) or "auto": dL/dp axes span the curves for
    p >= AUTO_RANGE_FROM_P (CE's -1/p reaches -100 at p = 0.01 and would squash the others), dL/dz autoranges.
    """
    examples = _choices("example", example, EXAMPLES)
    derivatives = _choices("derivative", derivative, DERIVATIVES)
    if isinstance(derivative_range, str) and derivative_range != "auto":
        raise ValueError(f"derivative_range: must be 'auto', None or a (low, high) pair, got {derivative_range!r}")
    quantities = ["loss", *derivatives]
    titles = [DERIVATIVES.get(quantity, quantity) for quantity in quantities]  # one column header each (top row)
    figure = make_subplots(rows=len(examples), cols=len(quantities), subplot_titles=titles)
    if len(examples) > 1:  # each row says its example once, on its first axis (short titles: no overlap in a cell)
        for row, example in enumerate(examples, start=1):
            figure.update_yaxes(title_text=f"{example} example (gold {EXAMPLES[example]})", row=row, col=1)
    frames = [loss_curves(name, p, num_classes, examples, **params) for _, name, params in specs]
    for (label, _, _), frame, colour in zip(specs, frames, itertools.cycle(CURVE_COLOURS)):
        for row, example in enumerate(examples, start=1):
            rows = frame[frame["example"] == example]
            for column, quantity in enumerate(quantities, start=1):
                trace = go.Scatter(x=rows["p"], y=rows[quantity], name=label, legendgroup=label, mode="lines")
                figure.add_trace(trace.update(line_color=colour, showlegend=row == column == 1), row=row, col=column)
    for (row, example), (column, quantity) in itertools.product(enumerate(examples, 1), enumerate(derivatives, 2)):
        axis_range = derivative_range
        if derivative_range == "auto":
            shown = [
                frame.loc[(frame["example"] == example) & (frame["p"] >= AUTO_RANGE_FROM_P), quantity]
                for frame in frames
            ]
            axis_range = _span(np.concatenate([[], *shown])) if quantity == "dloss_dp" else None
        figure.update_yaxes(range=axis_range, row=row, col=column)  # None: autorange
    figure.update_xaxes(title_text=X_TITLE, row=len(examples))  # under the last row only
    return figure.update_layout(title=title, height=100 + 350 * len(examples))


def dice_paper_figure1(
    p: Sequence[float] | np.ndarray | None = None, derivative: str | Sequence[str] = "dloss_dp"
) -> go.Figure:
    """The Dice paper's Figure 1: CE, FL (gamma 1), DL (gamma 1), TL (beta 0.5) and DSC against p for a positive
    example; ``derivative=("dloss_dp", "dloss_dlogit")`` draws dL/dz beside dL/dp. The dL/dp axis is [-3, 1]."""
    specs = [
        ("CE", "ce", {}),
        ("FL (gamma=1)", "focal", {"gamma": 1.0}),
        ("DL (gamma=1)", "dice", {"gamma": 1.0}),
        ("TL (beta=0.5)", "tversky", {"alpha": 0.5, "beta": 0.5}),
        ("DSC", "dsc", {"preset": "paper"}),
    ]
    derivatives = _choices("derivative", derivative, DERIVATIVES)
    figure = figure_loss_curves(
        specs, p=p, derivative=derivatives, title="Dice paper Figure 1: loss and derivatives against p"
    )
    if "dloss_dp" in derivatives:
        figure.update_yaxes(range=[-3.0, 1.0], row=1, col=2 + derivatives.index("dloss_dp"))
    return figure


def pcl_vs_ls_figure(
    epsilon: float = 0.1,
    label_counts: Sequence[float] = QBQTC_LABEL_COUNTS,
    p: Sequence[float] | np.ndarray | None = None,
) -> go.Figure:
    """3-class curves for gold 1: PCL ``reference`` and ``paper`` share LS's gradient (their loss curves are LS's
    shifted by constants: ``reference`` steps up by eps (n_1 + n_2) / (n_0 C), 0.103 at eps = 0.1 on QBQTC's counts,
    where the prediction turns correct, beyond p = 1/3); ``weighted`` and ``expected_cost`` differ."""
    specs: list[CurveSpec] = [("LS", "ls", {"epsilon": epsilon})]
    for variant in ("reference", "paper", "weighted", "expected_cost"):
        specs.append((f"PCL {variant}", "pcl", {"epsilon": epsilon, "label_counts": label_counts, "variant": variant}))
    title = f"PCL vs label smoothing (epsilon={epsilon}, gold class 1)"
    return figure_loss_curves(specs, derivative="dloss_dlogit", p=p, num_classes=3, title=title)
