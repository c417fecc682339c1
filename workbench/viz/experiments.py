"""Figures of the studies' tables (``workbench.studies``, ``stats.summarize``); error bars ± one std over seeds."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

from workbench.checks import check_choice

RATE_LEVELS = {
    "prediction": "prediction level (corrected / wrong)",
    "iteration": "iteration level (sequences with a correction)",
}
SPLITS = (("eval", "held-out", "solid"), ("train", "training", "dash"))


def _check_columns(table: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(
            f"{name}: must have the columns {list(columns)}, got missing {missing} (columns {list(table.columns)})"
        )


def label_count_bars(labels: pd.DataFrame, splits: Sequence[str] = ("train", "validation", "test")) -> go.Figure:
    """Grouped bars of the examples per label and split (a table with one row per label, one count column per split)."""
    _check_columns(labels, splits, "labels")
    names = {"value": "examples", "variable": "split"}
    x = labels.index.name or "index"
    return px.bar(
        labels.reset_index(), x=x, y=list(splits), barmode="group", labels=names, title="Label counts per split"
    )


def grouped_bars(
    summary: pd.DataFrame, x: str, metric: str, color: str, title: str, metric_label: str | None = None
) -> go.Figure:
    """Bars of ``<metric>_mean`` per ``x`` and ``color`` group, ± std (a ``stats.summarize`` table)."""
    _check_columns(summary, [x, color, f"{metric}_mean", f"{metric}_std"], "summary")
    names = {f"{metric}_mean": metric_label or metric}
    error = summary[f"{metric}_std"].fillna(0.0)
    return px.bar(
        summary, x=x, y=f"{metric}_mean", error_y=error, color=color, barmode="group", labels=names, title=title
    )


def metric_lines(summary: pd.DataFrame, x: str, metrics: Sequence[str], title: str, value_label: str) -> go.Figure:
    """One line per metric (``<metric>_mean``) against ``x`` (e.g. the Tversky alpha), with markers."""
    columns = [f"{metric}_mean" for metric in metrics]
    _check_columns(summary, [x, *columns], "summary")
    return px.line(
        summary, x=x, y=columns, markers=True, labels={"value": value_label, "variable": "metric"}, title=title
    )


def masking_heatmap(table: pd.DataFrame, strategies: Sequence[str]) -> go.Figure:
    """Strategies x tokens (columns token, pos, word, one per strategy): the share of draws that mask each token."""
    _check_columns(table, ["token", "pos", "word", *strategies], "table")
    positions = list(range(len(table)))
    heatmap = go.Heatmap(z=table[list(strategies)].to_numpy().T, x=positions, y=list(strategies), zmin=0, zmax=1)
    heatmap.update(
        colorscale="Blues", colorbar_title="share masked", customdata=[table["word"].tolist()] * len(strategies)
    )
    fig = go.Figure(heatmap.update(hovertemplate="word %{customdata}: %{z:.2f}<extra>%{y}</extra>"))
    fig.update_xaxes(
        tickvals=positions, ticktext=[f"{token}<br>{pos}" for token, pos in zip(table["token"], table["pos"])]
    )
    return fig.update_layout(title="Share of draws in which each token is masked", height=320)


def pretraining_loss_figure(history: pd.DataFrame) -> go.Figure:
    """Loss against step per masking strategy and objective (HC averages kept positions, SR adds its regulariser)."""
    _check_columns(history, ["step", "loss", "objective", "masking"], "history")
    fig = px.line(history, x="step", y="loss", color="objective", facet_col="masking", markers=True)
    return fig.update_layout(title="MLM pre-training loss", height=360)


def downstream_figure(summary: pd.DataFrame, metric: str = "macro_f1") -> go.Figure:
    """Bars of ``metric`` mean per encoder, ± std."""
    _check_columns(summary, ["encoder", f"{metric}_mean", f"{metric}_std"], "summary")
    fig = px.bar(summary, x="encoder", y=f"{metric}_mean", error_y=summary[f"{metric}_std"].fillna(0.0))
    return fig.update_layout(title=f"Downstream test {metric} (mean ± std over seeds)", yaxis_title=metric, height=380)


def _points(summary: pd.DataFrame, method: str, metric: str, **style: object) -> go.Scatter:
    """``method``'s ``metric`` mean ± std against the number of auxiliary labels."""
    rows = summary[summary["method"] == method]
    error = {"type": "data", "array": rows[f"{metric}_std"].fillna(0.0)}
    return go.Scatter(x=rows["num_aux"], y=rows[f"{metric}_mean"], error_y=error, **style)


def aux_sweep_figure(
    summary: pd.DataFrame,
    metric: str = "accuracy",
    sweep_method: str = "two_stage",
    baseline_method: str = "baseline",
    method_labels: Mapping[str, str] | None = None,
) -> go.Figure:
    """``metric`` of two-stage training against the auxiliary-label count n, the baseline a band, other methods
    (``method_labels`` names them) markers: the auxiliary-label paper's Figure 3, whose metric the paper does not
    state."""
    if f"{metric}_mean" not in summary.columns:
        metrics = sorted(column[:-5] for column in summary.columns if column.endswith("_mean"))
        raise ValueError(f"metric: must be one of {metrics}, got {metric!r}")
    fig = go.Figure(
        _points(summary, sweep_method, metric, mode="lines+markers", name="two-stage (stage 2, frozen encoder)")
    )
    for method in summary["method"].unique():
        if method not in (sweep_method, baseline_method):
            marker = {"size": 11, "symbol": "diamond"}
            fig.add_trace(
                _points(
                    summary,
                    method,
                    metric,
                    mode="markers",
                    marker=marker,
                    name=(method_labels or {}).get(method, method),
                )
            )
    baseline = summary[summary["method"] == baseline_method]
    if not baseline.empty:
        mean = float(baseline[f"{metric}_mean"].iloc[0])
        std = float(np.nan_to_num(baseline[f"{metric}_std"].iloc[0]))
        fig.add_hrect(y0=mean - std, y1=mean + std, fillcolor="grey", opacity=0.2, line_width=0)
        fig.add_hline(y=mean, line_dash="dash", annotation_text="baseline fine-tuning (mean ± std)")
    title = f"Test {metric} vs number of auxiliary labels n (mean ± std over seeds)"
    return fig.update_layout(title=title, xaxis_title="auxiliary labels n", yaxis_title=metric)


def _encoders(table: pd.DataFrame, encoders: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(table["encoder"]))
    if encoders is not None and (not encoders or set(encoders) - set(present)):
        raise ValueError(f"encoders: must be a non-empty list from {present}, got {list(encoders)!r}")
    return present if encoders is None else list(encoders)


def checkpoint_rates_figure(epochs: pd.DataFrame, encoders: Sequence[str] | None = None) -> go.Figure:
    """Table 2 per checkpoint: correction rates (%) per level against the share of training done, one colour per
    encoder; held-out blocks solid, the epoch's training batches dashed (HC runs only)."""
    rates = [f"{split}_{level}_rate" for level in RATE_LEVELS for split, _, _ in SPLITS]
    _check_columns(epochs, ["encoder", "checkpoint", *rates], "epochs")
    fig = make_subplots(rows=1, cols=2, subplot_titles=list(RATE_LEVELS.values()), shared_xaxes=True)
    for number, encoder in enumerate(_encoders(epochs, encoders)):
        rows = epochs[epochs["encoder"] == encoder]
        for (column, level), (split, label, dash) in itertools.product(enumerate(RATE_LEVELS, 1), SPLITS):
            values = 100 * rows[f"{split}_{level}_rate"].to_numpy(dtype=float)
            if not np.isnan(values).all():
                line = {"color": qualitative.Plotly[number % len(qualitative.Plotly)], "dash": dash}
                trace = go.Scatter(
                    x=rows["checkpoint"], y=values, mode="lines+markers", name=f"{encoder} ({label})", line=line
                )
                fig.add_trace(trace.update(legendgroup=encoder, showlegend=column == 1), row=1, col=column)
    fig.update_xaxes(title_text="checkpoint (% of training steps)")
    fig.update_yaxes(title_text="corrected (%)", rangemode="tozero")
    return fig.update_layout(title="Hard-correction statistics per checkpoint (the paper's Table 2)", height=420)


def eval_loss_figure(
    epochs: pd.DataFrame, metric: str = "perplexity", encoders: Sequence[str] | None = None
) -> go.Figure:
    """Held-out ``metric`` (``perplexity`` or ``eval_loss``) after every epoch, one line per encoder."""
    check_choice("metric", metric, ("perplexity", "eval_loss"))
    _check_columns(epochs, ["encoder", "epoch", metric], "epochs")
    rows = {encoder: epochs[epochs["encoder"] == encoder] for encoder in _encoders(epochs, encoders)}
    fig = go.Figure(
        [go.Scatter(x=part["epoch"], y=part[metric], mode="lines+markers", name=name) for name, part in rows.items()]
    )
    name = metric.replace("_", " ")
    title = f"Held-out {name} per epoch (fixed whole-word masks)"
    return fig.update_layout(title=title, xaxis_title="epoch", yaxis_title=name, height=400)


def comparison_figure(table: pd.DataFrame, title: str, metric: str = "macro_f1") -> go.Figure:
    """A Table 6 block: downstream ``metric`` (mean ± std) per variant beside each pre-trained encoder's perplexity."""
    _check_columns(table, ["variant", f"{metric}_mean", f"{metric}_std", "perplexity"], "table")
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=[f"downstream test {metric} (mean ± std)", "held-out perplexity"]
    )
    error = {"type": "data", "array": table[f"{metric}_std"].fillna(0.0)}
    fig.add_trace(go.Bar(x=table["variant"], y=table[f"{metric}_mean"], name=metric, error_y=error), row=1, col=1)
    fig.add_trace(go.Bar(x=table["variant"], y=table["perplexity"], name="perplexity"), row=1, col=2)
    return fig.update_layout(title=title, showlegend=False, height=380)


def level_rates_figure(corrections: pd.DataFrame, rate: str = "prediction_rate") -> go.Figure:
    """Held-out correction rate (%) per encoder and HC level (``token``: the paper's rule, ``word``: whole words)."""
    check_choice("rate", rate, ("prediction_rate", "iteration_rate"))
    _check_columns(corrections, ["encoder", "level", rate], "corrections")
    bars = [
        go.Bar(x=rows["encoder"], y=100 * rows[rate], name=f"{level} level")
        for level, rows in corrections.groupby("level", sort=False)
    ]
    label = (
        "prediction level: corrected / wrong"
        if rate == "prediction_rate"
        else "iteration level: sequences with a correction"
    )
    title = f"Held-out correction rate by HC level ({label})"
    return go.Figure(bars).update_layout(title=title, barmode="group", yaxis_title="corrected (%)", height=380)
