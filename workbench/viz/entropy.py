"""Entropy curves H_k vs H_{k+n} over the auxiliary-label count n (see ``workbench.information``)."""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from workbench.information import entropy_table

CURVES = {
    "H_k": "H_k = log k (K real labels)",
    "H_k_plus_n": "H_{k+n} = log(k+n)",
    "model_H_k": "model, K outputs",
    "model_H_k_plus_n": "model, K+n outputs",
}


def entropy_figure(
    k: int,
    n_max: int,
    logits: Sequence[float] | None = None,
    auxiliary_logit: float = 0.0,
    highlight_n: int | None = None,
) -> go.Figure:
    """Entropy (nats) against n = 0..n_max; ``highlight_n`` marks one auxiliary-label count."""
    table = entropy_table(k, n_max, logits, auxiliary_logit)
    if highlight_n is not None and not 0 <= highlight_n <= n_max:
        raise ValueError(f"highlight_n must be in [0, n_max = {n_max}], got {highlight_n!r}")
    fig = go.Figure()
    for column, label in CURVES.items():
        if column in table:
            fig.add_trace(go.Scatter(x=table["n"], y=table[column], mode="lines+markers", name=label))
    if highlight_n is not None:
        fig.add_vline(x=highlight_n, line_dash="dot", annotation_text=f"n = {highlight_n}")
    fig.update_layout(
        title=f"Output entropy with n auxiliary labels (k = {k})",
        xaxis_title="auxiliary labels n",
        yaxis_title="entropy (nats)",
    )
    return fig
