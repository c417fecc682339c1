"""The auxiliary-label paper's H_k (eq. 2) vs H_{k+n} (eq. 3) over the auxiliary-label count n
(``workbench.label_entropy``)."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from workbench.label_entropy import entropy_table

CURVES = {
    "H_k": "H_k, eq. 2 (k labels, false labels gamma each)",
    "H_k_plus_n": "H_{k+n}, eq. 3 (k + n labels, same gamma)",
    "uniform_H_k": "uniform (aside, not the paper's eq. 2): log k",
    "uniform_H_k_plus_n": "uniform (aside, not the paper's eq. 3): log(k+n)",
    "model_H_k": "model, K outputs",
    "model_H_k_plus_n": "model, K+n outputs",
}


def entropy_figure(
    k: int,
    n_max: int,
    logits: Sequence[float] | None = None,
    auxiliary_logit: float = 0.0,
    highlight_n: int | None = None,
    gamma: float = 0.1,
    uniform: bool = False,
) -> go.Figure:
    """Entropy (nats) against n = 0..n_max: H_k (eq. 2) and H_{k+n} (eq. 3), every false label at probability ``gamma``.

    ``logits`` add the model's entropies (``entropy_table``), ``uniform`` log k and log(k+n); ``highlight_n`` marks an
    n. Where eq. 3 or eq. 2 is undefined ((k+n-1) or (k-1) gamma >= 1) the curves stop and the title says so.
    """
    if highlight_n is not None and not 0 <= highlight_n <= n_max:
        raise ValueError(f"highlight_n: must be in [0, n_max = {n_max}], got {highlight_n!r}")
    title = f"Output entropy with n auxiliary labels (k = {k}, gamma = {gamma:g})"
    defined = (k - 1) * gamma < 1.0
    table = entropy_table(k, n_max, logits, auxiliary_logit, gamma=gamma if defined else 0.5 / k, uniform=uniform)
    undefined = table.loc[table["H_k_plus_n"].isna(), "n"]
    if not defined:  # the same curves, empty
        table = table.iloc[:0]
        title = f"H_k (eq. 2) undefined for k = {k}, gamma = {gamma:g}: (k-1)*gamma = {(k - 1) * gamma:g} >= 1; "
        title += f"lower gamma below 1/(k-1) = {1 / (k - 1):g}"
    elif len(undefined):
        title += f"<br>eq. 3 undefined for n >= {int(undefined.iloc[0])}: (k+n-1)*gamma >= 1"
    curves = [column for column in CURVES if column in table]
    fig = go.Figure(
        [go.Scatter(x=table["n"], y=table[column], mode="lines+markers", name=CURVES[column]) for column in curves]
    )
    if highlight_n is not None:
        fig.add_vline(x=highlight_n, line_dash="dot", annotation_text=f"n = {highlight_n}")
    return fig.update_layout(title=title, xaxis_title="auxiliary labels n", yaxis_title="entropy (nats)")
