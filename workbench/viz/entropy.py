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

    ``uniform=True`` adds the aside curves log k and log(k+n); ``logits`` the model's entropies
    (``workbench.information.entropy_table``); ``highlight_n`` marks one auxiliary-label count.
    Where (k+n-1) gamma >= 1 eq. 3 is undefined: the curve stops and the title says from which n.
    Where (k-1) gamma >= 1 eq. 2 itself is undefined: the curves are empty and the title says why.
    """
    if highlight_n is not None and not 0 <= highlight_n <= n_max:
        raise ValueError(f"highlight_n: must be in [0, n_max = {n_max}], got {highlight_n!r}")
    title = f"Output entropy with n auxiliary labels (k = {k}, gamma = {gamma:g})"
    if (k - 1) * gamma < 1.0:
        table = entropy_table(k, n_max, logits, auxiliary_logit, gamma=gamma, uniform=uniform)
        undefined = table.loc[table["H_k_plus_n"].isna(), "n"]
        if len(undefined):
            title += f"<br>eq. 3 undefined for n >= {int(undefined.iloc[0])}: (k+n-1)*gamma >= 1"
    else:  # the same curves, empty (any gamma that eq. 2 allows gives the columns)
        table = entropy_table(k, n_max, logits, auxiliary_logit, gamma=0.5 / k, uniform=uniform).iloc[:0]
        title = (
            f"H_k (eq. 2) undefined for k = {k}, gamma = {gamma:g}: (k-1)*gamma = {(k - 1) * gamma:g} >= 1; "
            f"lower gamma below 1/(k-1) = {1 / (k - 1):g}"
        )
    curves = [column for column in CURVES if column in table]
    fig = go.Figure([go.Scatter(x=table["n"], y=table[column], mode="lines+markers", name=CURVES[column]) for column in curves])
    if highlight_n is not None:
        fig.add_vline(x=highlight_n, line_dash="dot", annotation_text=f"n = {highlight_n}")
    fig.update_layout(title=title, xaxis_title="auxiliary labels n", yaxis_title="entropy (nats)")
    return fig
