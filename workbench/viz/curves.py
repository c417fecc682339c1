"""Loss and gradient curves against the predicted probability of the gold class.

Every value comes from autograd through the registered loss modules (``build_loss``),
so the curves never hold a second copy of a formula. For a one-position batch with C
classes the gold logit is z and the others are 0, so p = e^z / (e^z + C - 1); z is the
autograd leaf and dL/dp = (dL/dz) / (dp/dz) with dp/dz = p (1 - p).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.subplots import make_subplots

from workbench.losses import QBQTC_LABEL_COUNTS, build_loss

EXAMPLES = {"positive": 1, "negative": 0}
DERIVATIVES = ("dloss_dp", "dloss_dlogit")
CurveSpec = tuple[str, str, dict]
# one colour per loss, shared by its loss and derivative traces (plotly's default colourway)
CURVE_COLOURS = tuple(pio.templates["plotly"].layout.colorway)
# "auto" derivative ranges span the dL/dp curves from this p on (see figure_loss_curves)
AUTO_RANGE_FROM_P = 0.2


def default_probabilities() -> np.ndarray:
    return np.linspace(0.01, 0.99, 99)


def loss_curves(name: str, p: Sequence[float] | np.ndarray | None = None, num_classes: int = 2, **params: object) -> pd.DataFrame:
    """Loss, dL/dp and dL/dz (gold logit) against the gold-class probability p.

    Rows for a positive example (gold = 1) and a negative example (gold = 0); columns
    ``loss_name, example, p, loss, dloss_dp, dloss_dlogit``. ``p`` values must lie in
    (0, 1) (default 0.01 ... 0.99); ``num_classes`` >= 2; ``params`` go to ``build_loss``.
    """
    probabilities = default_probabilities() if p is None else np.asarray(p, dtype=np.float64).ravel()
    if probabilities.size == 0 or not np.all((probabilities > 0) & (probabilities < 1)):
        raise ValueError("p must be a non-empty sequence of probabilities in (0, 1)")
    if int(num_classes) != num_classes or num_classes < 2:
        raise ValueError(f"num_classes must be an integer >= 2, got {num_classes}")
    loss = build_loss(name, **params)
    rows = []
    for example, gold in EXAMPLES.items():
        for probability in probabilities:
            odds = probability * (num_classes - 1) / (1 - probability)
            gold_logit = torch.tensor(np.log(odds), dtype=torch.float64, requires_grad=True)
            labels = torch.tensor([gold])
            logits = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64) * gold_logit
            value = loss(logits, labels)
            (gradient,) = torch.autograd.grad(value, gold_logit)
            dloss_dlogit = gradient.item()
            rows.append(
                (name, example, probability, value.item(), dloss_dlogit / (probability * (1 - probability)), dloss_dlogit)
            )
    return pd.DataFrame(rows, columns=["loss_name", "example", "p", "loss", "dloss_dp", "dloss_dlogit"])


def figure_loss_curves(
    specs: Sequence[CurveSpec],
    example: str = "positive",
    derivative: str = "dloss_dp",
    p: Sequence[float] | np.ndarray | None = None,
    num_classes: int = 2,
    title: str | None = None,
    derivative_range: tuple[float, float] | str | None = "auto",
) -> go.Figure:
    """Two panels, loss and ``derivative`` against p, one trace per ``(label, name, params)`` spec.

    Each spec keeps one colour (plotly's default colourway, in order) in both panels and
    one legend group with one legend entry, so the single legend names the derivative
    curves too (clicking it hides both traces of a loss).

    ``derivative_range`` fixes the derivative panel's y axis: a ``(low, high)`` pair, None
    for plotly's autorange, or ``"auto"`` (default): for dL/dp, the span the curves take
    for p >= ``AUTO_RANGE_FROM_P`` (CE's -1/p reaches -100 at p = 0.01 and would
    otherwise squash every other curve, so a slider's change would be invisible); for
    dL/dz, which stays bounded, autorange."""
    if example not in EXAMPLES:
        raise ValueError(f"example must be one of {list(EXAMPLES)}, got {example!r}")
    if derivative not in DERIVATIVES:
        raise ValueError(f"derivative must be one of {list(DERIVATIVES)}, got {derivative!r}")
    if isinstance(derivative_range, str) and derivative_range != "auto":
        raise ValueError(f"derivative_range must be 'auto', None or a (low, high) pair, got {derivative_range!r}")
    derivative_title = "dL/dp" if derivative == "dloss_dp" else "dL/dz (gold logit)"
    figure = make_subplots(rows=1, cols=2, subplot_titles=("loss", derivative_title))
    frames = []
    for index, (label, name, params) in enumerate(specs):
        frame = loss_curves(name, p=p, num_classes=num_classes, **params)
        frame = frame[frame["example"] == example]
        frames.append(frame)
        line = {"color": CURVE_COLOURS[index % len(CURVE_COLOURS)]}
        figure.add_trace(
            go.Scatter(x=frame["p"], y=frame["loss"], name=label, legendgroup=label, mode="lines", line=line),
            row=1,
            col=1,
        )
        figure.add_trace(
            go.Scatter(
                x=frame["p"], y=frame[derivative], name=label, legendgroup=label, mode="lines", line=line, showlegend=False
            ),
            row=1,
            col=2,
        )
    if derivative_range == "auto":
        derivative_range = _auto_range(frames, derivative) if derivative == "dloss_dp" else None
    figure.update_xaxes(title_text="p (probability of the gold class)")
    if derivative_range is not None:
        figure.update_yaxes(range=list(derivative_range), row=1, col=2)
    figure.update_layout(title=title)
    return figure


def _auto_range(frames: Sequence[pd.DataFrame], column: str) -> tuple[float, float] | None:
    """The span of ``column`` over every frame's rows with p >= AUTO_RANGE_FROM_P, padded by 5 %;
    None (autorange) when no row qualifies."""
    if not frames:
        return None
    values = np.concatenate([frame.loc[frame["p"] >= AUTO_RANGE_FROM_P, column].to_numpy() for frame in frames])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    low, high = float(values.min()), float(values.max())
    pad = 0.05 * max(high - low, 1e-6)
    return (low - pad, high + pad)


def dice_paper_figure1(p: Sequence[float] | np.ndarray | None = None) -> go.Figure:
    """The Dice paper's Figure 1: CE, FL (gamma 1), DL (gamma 1), TL (beta 0.5) and DSC against p
    for a positive example. DSC's derivative nearly vanishes once p passes 0.5."""
    specs = [
        ("CE", "ce", {}),
        ("FL (gamma=1)", "focal", {"gamma": 1.0}),
        ("DL (gamma=1)", "dice", {"gamma": 1.0}),
        ("TL (beta=0.5)", "tversky", {"alpha": 0.5, "beta": 0.5}),
        ("DSC", "dsc", {"preset": "paper"}),
    ]
    return figure_loss_curves(
        specs, p=p, title="Dice paper Figure 1: loss and derivative against p", derivative_range=(-3.0, 0.5)
    )


def pcl_vs_ls_figure(
    epsilon: float = 0.1,
    label_counts: Sequence[float] = QBQTC_LABEL_COUNTS,
    p: Sequence[float] | np.ndarray | None = None,
) -> go.Figure:
    """3-class curves for gold 1: PCL ``reference`` and ``paper`` share LS's gradient
    (their loss curves are shifted by constants); ``weighted`` and ``expected_cost`` differ."""
    specs: list[CurveSpec] = [("LS", "ls", {"epsilon": epsilon})]
    for variant in ("reference", "paper", "weighted", "expected_cost"):
        specs.append((f"PCL {variant}", "pcl", {"epsilon": epsilon, "label_counts": label_counts, "variant": variant}))
    return figure_loss_curves(
        specs,
        derivative="dloss_dlogit",
        p=p,
        num_classes=3,
        title=f"PCL vs label smoothing (epsilon={epsilon}, gold class 1)",
    )
