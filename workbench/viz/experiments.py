"""Figures of experiment tables: the studies return tables, these draw them.

Every function takes a table from a study (``workbench.studies.*``) or ``workbench.stats.summarize``
and returns a plotly figure; none computes results. Error bars are ± one sample standard
deviation over seeds (none for a single seed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go


def _check_columns(table: pd.DataFrame, columns: Sequence[str], name: str = "table") -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{name}: must have the columns {list(columns)}, got missing {missing} (columns {list(table.columns)})")


def _error(summary: pd.DataFrame, metric: str) -> pd.Series:
    return summary[f"{metric}_std"].fillna(0.0)


def label_count_bars(labels: pd.DataFrame, splits: Sequence[str] = ("train", "validation", "test")) -> go.Figure:
    """Grouped bars of the examples per label and split (a label table: one row per label, one count column per split)."""
    _check_columns(labels, splits, "labels")
    fig = px.bar(
        labels.reset_index(),
        x=labels.index.name or "index",
        y=list(splits),
        barmode="group",
        labels={"value": "examples", "variable": "split"},
        title="Label counts per split",
    )
    return fig


def grouped_bars(
    summary: pd.DataFrame, x: str, metric: str, color: str, title: str, metric_label: str | None = None
) -> go.Figure:
    """Bars of ``<metric>_mean`` per ``x`` and ``color`` group, with ± std error bars (a ``stats.summarize`` table)."""
    _check_columns(summary, [x, color, f"{metric}_mean", f"{metric}_std"], "summary")
    return px.bar(
        summary,
        x=x,
        y=f"{metric}_mean",
        error_y=_error(summary, metric),
        color=color,
        barmode="group",
        labels={f"{metric}_mean": metric_label or metric},
        title=title,
    )


def metric_lines(summary: pd.DataFrame, x: str, metrics: Sequence[str], title: str, value_label: str) -> go.Figure:
    """One line per metric (``<metric>_mean``) against ``x`` (e.g. the Tversky alpha), with markers."""
    _check_columns(summary, [x, *(f"{metric}_mean" for metric in metrics)], "summary")
    fig = px.line(
        summary,
        x=x,
        y=[f"{metric}_mean" for metric in metrics],
        markers=True,
        labels={"value": value_label, "variable": "metric"},
        title=title,
    )
    return fig


def masking_heatmap(table: pd.DataFrame, strategies: Sequence[str]) -> go.Figure:
    """Strategies x tokens heatmap of a masking illustration (columns token, pos, word and one share
    column per strategy): colour = share of draws in which the token was masked."""
    _check_columns(table, ["token", "pos", "word", *strategies], "table")
    labels = [f"{token}<br>{pos}" for token, pos in zip(table["token"], table["pos"])]
    fig = go.Figure(
        go.Heatmap(
            z=table[list(strategies)].to_numpy().T,
            x=list(range(len(table))),
            y=list(strategies),
            zmin=0,
            zmax=1,
            colorscale="Blues",
            colorbar={"title": "share masked"},
            customdata=np.array([table["word"].tolist()] * len(strategies)),
            hovertemplate="word %{customdata}: %{z:.2f}<extra>%{y}</extra>",
        )
    )
    fig.update_xaxes(tickvals=list(range(len(table))), ticktext=labels)
    fig.update_layout(title="Share of draws in which each token is masked", height=320)
    return fig


def pretraining_loss_figure(history: pd.DataFrame) -> go.Figure:
    """Training loss against step, one panel per masking strategy, one line per objective.

    The HC curve averages over the kept positions only and the SR curve adds the
    regulariser, so the three are different quantities: compare shapes, not levels."""
    _check_columns(history, ["step", "loss", "objective", "masking"], "history")
    fig = px.line(history, x="step", y="loss", color="objective", facet_col="masking", markers=True)
    fig.update_layout(title="MLM pre-training loss", height=360)
    return fig


def downstream_figure(summary: pd.DataFrame, metric: str = "macro_f1") -> go.Figure:
    """Bars of ``metric`` mean per encoder with ± std error bars."""
    _check_columns(summary, ["encoder", f"{metric}_mean", f"{metric}_std"], "summary")
    fig = px.bar(summary, x="encoder", y=f"{metric}_mean", error_y=_error(summary, metric))
    fig.update_layout(title=f"Downstream test {metric} (mean ± std over seeds)", yaxis_title=metric, height=380)
    return fig


def aux_sweep_figure(
    summary: pd.DataFrame,
    metric: str = "accuracy",
    sweep_method: str = "two_stage",
    baseline_method: str = "baseline",
    method_labels: Mapping[str, str] | None = None,
) -> go.Figure:
    """``metric`` (mean ± std over seeds) of two-stage training against the number of auxiliary
    labels n, with the baseline as a band; other methods (FGM, fusion) as single markers at their n,
    named by ``method_labels`` (method -> legend name; default the method names). In the spirit of
    the auxiliary-label paper's Figure 3 (models with and without auxiliary labels on KBQA), whose
    metric the paper does not state: the metric here is the workbench's choice."""
    if f"{metric}_mean" not in summary.columns:
        raise ValueError(
            f"metric: must be one of {sorted(c[:-5] for c in summary.columns if c.endswith('_mean'))}, got {metric!r}"
        )
    sweep = summary[summary["method"] == sweep_method]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=sweep["num_aux"],
            y=sweep[f"{metric}_mean"],
            error_y={"type": "data", "array": _error(sweep, metric)},
            mode="lines+markers",
            name="two-stage (stage 2, frozen encoder)",
        )
    )
    for method in summary["method"].unique():
        if method in (sweep_method, baseline_method):
            continue
        rows = summary[summary["method"] == method]
        fig.add_trace(
            go.Scatter(
                x=rows["num_aux"],
                y=rows[f"{metric}_mean"],
                error_y={"type": "data", "array": _error(rows, metric)},
                mode="markers",
                marker={"size": 11, "symbol": "diamond"},
                name=(method_labels or {}).get(method, method),
            )
        )
    baseline = summary[summary["method"] == baseline_method]
    if not baseline.empty:
        mean, std = float(baseline[f"{metric}_mean"].iloc[0]), float(np.nan_to_num(baseline[f"{metric}_std"].iloc[0]))
        fig.add_hrect(y0=mean - std, y1=mean + std, fillcolor="grey", opacity=0.2, line_width=0)
        fig.add_hline(y=mean, line_dash="dash", annotation_text="baseline fine-tuning (mean ± std)")
    fig.update_layout(
        title=f"Test {metric} vs number of auxiliary labels n (mean ± std over seeds)",
        xaxis_title="auxiliary labels n",
        yaxis_title=metric,
    )
    return fig
