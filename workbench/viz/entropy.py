"""Entropy curves H_k vs H_{k+n} over the auxiliary-label count n: the paper's eq. 2-3 at a
false-label probability gamma (see ``workbench.information``), with the uniform entropy
log k only as a labelled aside."""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from workbench.information import entropy_table

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
    """Entropy (nats) against n = 0..n_max: the paper's H_k (eq. 2) and H_{k+n} (eq. 3) at ``gamma``.

    ``uniform=True`` adds the aside curves log k and log(k+n); ``logits`` adds
    the model's entropies (``workbench.information.entropy_table``);
    ``highlight_n`` marks one auxiliary-label count. Where (k+n-1) gamma >= 1
    eq. 3 is undefined: the curve stops and the title says from which n.
    Raises ValueError when (k-1) gamma >= 1 (eq. 2 itself is undefined).
    """
    table = entropy_table(k, n_max, logits, auxiliary_logit, gamma=gamma, uniform=uniform)
    if highlight_n is not None and not 0 <= highlight_n <= n_max:
        raise ValueError(f"highlight_n: must be in [0, n_max = {n_max}], got {highlight_n!r}")
    fig = go.Figure()
    for column, label in CURVES.items():
        if column in table:
            fig.add_trace(go.Scatter(x=table["n"], y=table[column], mode="lines+markers", name=label))
    if highlight_n is not None:
        fig.add_vline(x=highlight_n, line_dash="dot", annotation_text=f"n = {highlight_n}")
    title = f"Output entropy with n auxiliary labels (k = {k}, gamma = {gamma:g})"
    undefined = table.loc[table["H_k_plus_n"].isna(), "n"]
    if len(undefined):
        title += f"<br>eq. 3 undefined for n >= {int(undefined.iloc[0])}: (k+n-1)*gamma >= 1"
    fig.update_layout(title=title, xaxis_title="auxiliary labels n", yaxis_title="entropy (nats)")
    return fig


def undefined_entropy_figure(k: int, gamma: float) -> go.Figure:
    """An empty entropy figure whose title says why: (k-1) gamma >= 1 leaves eq. 2 undefined."""
    fig = go.Figure()
    fig.update_layout(
        title=f"H_k (eq. 2) undefined for k = {k}, gamma = {gamma:g}: (k-1)*gamma = {(k - 1) * gamma:g} >= 1; "
        f"lower gamma below 1/(k-1) = {1 / (k - 1):g}",
        xaxis_title="auxiliary labels n",
        yaxis_title="entropy (nats)",
    )
    return fig
