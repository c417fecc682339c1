"""Loss and gradient curves against the predicted probability p of the gold class.

Every value comes from autograd through the registered loss modules (``build_loss``), so the
curves hold no second copy of a formula. For a one-position batch with C classes the gold logit
is z and the others are 0, so p = e^z / (e^z + C - 1); z is the autograd leaf and
dL/dp = (dL/dz) / (dp/dz) with dp/dz = p (1 - p).

Read both derivatives. The Dice paper's DSC (eq. 12) for a positive has dL/dp = -3 (1 - 2p) /
((1 - p) p + 2)^2: zero at p = 0.5, then positive (+0.12 at p = 0.6, +0.55 at 0.9, +0.75 as
p -> 1), so a confident positive is pushed back towards 0.5; it does not fade out (the paper's
"approaches zero right after p exceeds 0.5" does not hold for eq. 12 as printed). CE's dL/dp = -1/p
stays large, but per logit CE's dL/dz = p - 1 is -0.01 at p = 0.99 (DSC's +0.007).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import torch
from plotly.subplots import make_subplots

from workbench.checks import check_choice, check_int
from workbench.losses import QBQTC_LABEL_COUNTS, build_loss

EXAMPLES = {"positive": 1, "negative": 0}
DERIVATIVES = {"dloss_dp": "dL/dp", "dloss_dlogit": "dL/dz (gold logit)"}
CurveSpec = tuple[str, str, dict]
# one colour per loss, shared by its loss and derivative traces (plotly's default colourway)
CURVE_COLOURS = tuple(pio.templates["plotly"].layout.colorway)
# "auto" derivative ranges span the dL/dp curves from this p on (see figure_loss_curves)
AUTO_RANGE_FROM_P = 0.2


def default_probabilities() -> np.ndarray:
    return np.linspace(0.01, 0.99, 99)


def loss_curves(
    name: str,
    p: Sequence[float] | np.ndarray | None = None,
    num_classes: int = 2,
    examples: Sequence[str] = tuple(EXAMPLES),
    **params: object,
) -> pd.DataFrame:
    """Loss, dL/dp and dL/dz (gold logit) against the gold-class probability p.

    Rows for each of ``examples``: a positive example (gold = 1), a negative example (gold = 0);
    columns ``loss_name, example, p, loss, dloss_dp, dloss_dlogit``. ``p`` values must lie in
    (0, 1) (default 0.01 ... 0.99); ``num_classes`` >= 2; ``params`` go to ``build_loss``.
    """
    p = default_probabilities() if p is None else np.asarray(p, dtype=np.float64).ravel()
    if p.size == 0 or not np.all((p > 0) & (p < 1)):
        raise ValueError(f"p: must be a non-empty sequence of probabilities in (0, 1), got {p.tolist()}")
    check_int("num_classes", num_classes, 2)
    loss = build_loss(name, **params)
    frames = []
    for example in examples:
        labels = torch.tensor([EXAMPLES[check_choice("examples", example, list(EXAMPLES))]])
        one_hot = torch.nn.functional.one_hot(labels, num_classes).to(torch.float64)
        gold_logits = torch.tensor(np.log(p * (num_classes - 1) / (1 - p)), requires_grad=True)
        values = torch.stack([loss(one_hot * gold_logit, labels) for gold_logit in gold_logits])  # a batch of one per p
        (dloss_dlogit,) = torch.autograd.grad(values.sum(), gold_logits)  # each value depends on its own logit only
        dloss_dlogit = dloss_dlogit.numpy()
        columns = {
            "p": p,
            "loss": values.detach().numpy(),
            "dloss_dp": dloss_dlogit / (p * (1 - p)),
            "dloss_dlogit": dloss_dlogit,
        }
        frames.append(pd.DataFrame({"loss_name": name, "example": example, **columns}))
    return pd.concat(frames, ignore_index=True)


def figure_loss_curves(
    specs: Sequence[CurveSpec],
    example: str = "positive",
    derivative: str | Sequence[str] = "dloss_dp",
    p: Sequence[float] | np.ndarray | None = None,
    num_classes: int = 2,
    title: str | None = None,
    derivative_range: tuple[float, float] | str | None = "auto",
) -> go.Figure:
    """Side-by-side panels against p: the loss, then each ``derivative`` (``"dloss_dp"``, ``"dloss_dlogit"``
    or both, e.g. ``("dloss_dp", "dloss_dlogit")``: dL/dp beside dL/dz), one trace per ``(label, name, params)``.

    Each spec keeps one colour (plotly's default colourway, in order) and one legend entry for all
    its panels (clicking it hides them all). ``derivative_range`` fixes the derivative axes: a
    ``(low, high)`` pair, None for plotly's autorange, or ``"auto"``: a dL/dp axis spans the curves
    for p >= ``AUTO_RANGE_FROM_P`` (CE's -1/p reaches -100 at p = 0.01 and would squash the others),
    a dL/dz axis (bounded) autoranges."""
    check_choice("example", example, list(EXAMPLES))
    derivatives = [derivative] if isinstance(derivative, str) else list(derivative)
    for name in derivatives or [None]:
        check_choice("derivative", name, list(DERIVATIVES))
    if isinstance(derivative_range, str) and derivative_range != "auto":
        raise ValueError(f"derivative_range: must be 'auto', None or a (low, high) pair, got {derivative_range!r}")
    quantities = ["loss", *derivatives]
    figure = make_subplots(rows=1, cols=len(quantities), subplot_titles=["loss", *(DERIVATIVES[name] for name in derivatives)])
    frames = []
    for index, (label, name, params) in enumerate(specs):
        frames.append(loss_curves(name, p=p, num_classes=num_classes, examples=[example], **params))
        line = {"color": CURVE_COLOURS[index % len(CURVE_COLOURS)]}
        for column, quantity in enumerate(quantities, start=1):
            trace = go.Scatter(x=frames[-1]["p"], y=frames[-1][quantity], name=label, legendgroup=label, mode="lines", line=line)
            figure.add_trace(trace.update(showlegend=column == 1), row=1, col=column)
    for column, quantity in enumerate(derivatives, start=2):
        axis_range = derivative_range
        if derivative_range == "auto":
            axis_range = _auto_range(frames, quantity) if quantity == "dloss_dp" else None
        if axis_range is not None:
            figure.update_yaxes(range=list(axis_range), row=1, col=column)
    figure.update_xaxes(title_text="p (probability of the gold class)")
    return figure.update_layout(title=title)


def _auto_range(frames: Sequence[pd.DataFrame], column: str) -> tuple[float, float] | None:
    """The span of ``column`` over the rows with p >= AUTO_RANGE_FROM_P, padded by 5 %; None when no row qualifies."""
    values = np.concatenate([[], *(frame.loc[frame["p"] >= AUTO_RANGE_FROM_P, column] for frame in frames)])
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    pad = 0.05 * max(values.max() - values.min(), 1e-6)
    return (float(values.min() - pad), float(values.max() + pad))


def dice_paper_figure1(p: Sequence[float] | np.ndarray | None = None, derivative: str | Sequence[str] = "dloss_dp") -> go.Figure:
    """The Dice paper's Figure 1: CE, FL (gamma 1), DL (gamma 1), TL (beta 0.5) and DSC against p for a
    positive example; ``derivative=("dloss_dp", "dloss_dlogit")`` draws dL/dz beside dL/dp. The dL/dp axis
    is fixed to [-3, 1]: DSC's eq. 12 gradient is positive beyond p = 0.5 (+0.75 as p -> 1)."""
    specs = [
        ("CE", "ce", {}),
        ("FL (gamma=1)", "focal", {"gamma": 1.0}),
        ("DL (gamma=1)", "dice", {"gamma": 1.0}),
        ("TL (beta=0.5)", "tversky", {"alpha": 0.5, "beta": 0.5}),
        ("DSC", "dsc", {"preset": "paper"}),
    ]
    derivatives = [derivative] if isinstance(derivative, str) else list(derivative)
    figure = figure_loss_curves(specs, p=p, derivative=derivatives, title="Dice paper Figure 1: loss and derivatives against p")
    if "dloss_dp" in derivatives:
        figure.update_yaxes(range=[-3.0, 1.0], row=1, col=2 + derivatives.index("dloss_dp"))
    return figure


def pcl_vs_ls_figure(
    epsilon: float = 0.1, label_counts: Sequence[float] = QBQTC_LABEL_COUNTS, p: Sequence[float] | np.ndarray | None = None
) -> go.Figure:
    """3-class curves for gold 1: PCL ``reference`` and ``paper`` share LS's gradient
    (their loss curves are shifted by constants); ``weighted`` and ``expected_cost`` differ."""
    specs: list[CurveSpec] = [("LS", "ls", {"epsilon": epsilon})]
    for variant in ("reference", "paper", "weighted", "expected_cost"):
        specs.append((f"PCL {variant}", "pcl", {"epsilon": epsilon, "label_counts": label_counts, "variant": variant}))
    title = f"PCL vs label smoothing (epsilon={epsilon}, gold class 1)"
    return figure_loss_curves(specs, derivative="dloss_dlogit", p=p, num_classes=3, title=title)
