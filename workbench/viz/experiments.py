"""Figures of experiment tables: the studies return tables, these draw them (none computes results).

Each function takes a table from a study (``workbench.studies.*``) or ``workbench.stats.summarize`` and
returns a plotly figure. Error bars are ± one sample standard deviation over seeds (none for one seed).
Notebook 03's MLM pre-training figures take ``workbench.studies.true_negatives`` tables (``epoch_table``,
``correction_table``, ``synonym_source_table``, ``sr_level_table``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

RATE_LEVELS = {"prediction": "prediction level (corrected / wrong)", "iteration": "iteration level (sequences with a correction)"}
SPLITS = (("eval", "held-out", "solid"), ("train", "training", "dash"))


def _check_columns(table: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{name}: must have the columns {list(columns)}, got missing {missing} (columns {list(table.columns)})")


def _error(summary: pd.DataFrame, metric: str) -> pd.Series:
    return summary[f"{metric}_std"].fillna(0.0)


def label_count_bars(labels: pd.DataFrame, splits: Sequence[str] = ("train", "validation", "test")) -> go.Figure:
    """Grouped bars of the examples per label and split (a label table: one row per label, one count column per split)."""
    _check_columns(labels, splits, "labels")
    names = {"value": "examples", "variable": "split"}
    x = labels.index.name or "index"
    return px.bar(labels.reset_index(), x=x, y=list(splits), barmode="group", labels=names, title="Label counts per split")


def grouped_bars(
    summary: pd.DataFrame, x: str, metric: str, color: str, title: str, metric_label: str | None = None
) -> go.Figure:
    """Bars of ``<metric>_mean`` per ``x`` and ``color`` group, with ± std error bars (a ``stats.summarize`` table)."""
    _check_columns(summary, [x, color, f"{metric}_mean", f"{metric}_std"], "summary")
    names = {f"{metric}_mean": metric_label or metric}
    return px.bar(
        summary, x=x, y=f"{metric}_mean", error_y=_error(summary, metric), color=color, barmode="group", labels=names, title=title
    )


def metric_lines(summary: pd.DataFrame, x: str, metrics: Sequence[str], title: str, value_label: str) -> go.Figure:
    """One line per metric (``<metric>_mean``) against ``x`` (e.g. the Tversky alpha), with markers."""
    columns = [f"{metric}_mean" for metric in metrics]
    _check_columns(summary, [x, *columns], "summary")
    return px.line(summary, x=x, y=columns, markers=True, labels={"value": value_label, "variable": "metric"}, title=title)


def masking_heatmap(table: pd.DataFrame, strategies: Sequence[str]) -> go.Figure:
    """Strategies x tokens heatmap of a masking illustration (columns token, pos, word and one share
    column per strategy): colour = share of draws in which the token was masked."""
    _check_columns(table, ["token", "pos", "word", *strategies], "table")
    heatmap = go.Heatmap(
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
    fig = go.Figure(heatmap)
    fig.update_xaxes(
        tickvals=list(range(len(table))), ticktext=[f"{token}<br>{pos}" for token, pos in zip(table["token"], table["pos"])]
    )
    return fig.update_layout(title="Share of draws in which each token is masked", height=320)


def pretraining_loss_figure(history: pd.DataFrame) -> go.Figure:
    """Training loss against step, one panel per masking strategy, one line per objective.

    The HC curve averages over the kept positions only and the SR curve adds the regulariser,
    so the three are different quantities: compare shapes, not levels."""
    _check_columns(history, ["step", "loss", "objective", "masking"], "history")
    fig = px.line(history, x="step", y="loss", color="objective", facet_col="masking", markers=True)
    return fig.update_layout(title="MLM pre-training loss", height=360)


def downstream_figure(summary: pd.DataFrame, metric: str = "macro_f1") -> go.Figure:
    """Bars of ``metric`` mean per encoder with ± std error bars."""
    _check_columns(summary, ["encoder", f"{metric}_mean", f"{metric}_std"], "summary")
    fig = px.bar(summary, x="encoder", y=f"{metric}_mean", error_y=_error(summary, metric))
    return fig.update_layout(title=f"Downstream test {metric} (mean ± std over seeds)", yaxis_title=metric, height=380)


def _points(rows: pd.DataFrame, metric: str, **style: object) -> go.Scatter:
    """``metric`` mean ± std against the number of auxiliary labels."""
    error = {"type": "data", "array": _error(rows, metric)}
    return go.Scatter(x=rows["num_aux"], y=rows[f"{metric}_mean"], error_y=error, **style)


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
        metrics = sorted(column[:-5] for column in summary.columns if column.endswith("_mean"))
        raise ValueError(f"metric: must be one of {metrics}, got {metric!r}")
    rows = summary[summary["method"] == sweep_method]
    fig = go.Figure(_points(rows, metric, mode="lines+markers", name="two-stage (stage 2, frozen encoder)"))
    for method in summary["method"].unique():
        if method not in (sweep_method, baseline_method):
            style = {"mode": "markers", "marker": {"size": 11, "symbol": "diamond"}}
            fig.add_trace(
                _points(summary[summary["method"] == method], metric, name=(method_labels or {}).get(method, method), **style)
            )
    baseline = summary[summary["method"] == baseline_method]
    if not baseline.empty:
        mean, std = float(baseline[f"{metric}_mean"].iloc[0]), float(np.nan_to_num(baseline[f"{metric}_std"].iloc[0]))
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
    """The paper's Table 2 per checkpoint: prediction- and iteration-level correction rates (%) against
    the share of training done (%), one colour per encoder, held-out blocks solid and the epoch's
    training batches dashed (HC runs only; a run without training-time rates has no dashed line)."""
    rates = [f"{split}_{level}_rate" for level in RATE_LEVELS for split, _, _ in SPLITS]
    _check_columns(epochs, ["encoder", "checkpoint", *rates], "epochs")
    fig = make_subplots(rows=1, cols=2, subplot_titles=list(RATE_LEVELS.values()), shared_xaxes=True)
    for number, encoder in enumerate(_encoders(epochs, encoders)):
        rows = epochs[epochs["encoder"] == encoder]
        colour = qualitative.Plotly[number % len(qualitative.Plotly)]
        for column, level in enumerate(RATE_LEVELS, start=1):
            for split, label, dash in SPLITS:
                values = rows[f"{split}_{level}_rate"].to_numpy(dtype=float)
                if not np.isnan(values).all():
                    line = {"color": colour, "dash": dash}
                    trace = go.Scatter(x=rows["checkpoint"], y=100 * values, mode="lines+markers", name=f"{encoder} ({label})")
                    fig.add_trace(trace.update(legendgroup=encoder, showlegend=column == 1, line=line), row=1, col=column)
    fig.update_xaxes(title_text="checkpoint (% of training steps)")
    fig.update_yaxes(title_text="corrected (%)", rangemode="tozero")
    return fig.update_layout(title="Hard-correction statistics per checkpoint (the paper's Table 2)", height=420)


def eval_loss_figure(epochs: pd.DataFrame, metric: str = "perplexity", encoders: Sequence[str] | None = None) -> go.Figure:
    """Held-out ``metric`` (``perplexity`` or ``eval_loss``) after every epoch, one line per encoder."""
    if metric not in ("perplexity", "eval_loss"):
        raise ValueError(f"metric: must be one of perplexity, eval_loss, got {metric!r}")
    _check_columns(epochs, ["encoder", "epoch", metric], "epochs")
    fig = go.Figure()
    for encoder in _encoders(epochs, encoders):
        rows = epochs[epochs["encoder"] == encoder]
        fig.add_trace(go.Scatter(x=rows["epoch"], y=rows[metric], mode="lines+markers", name=encoder))
    name = metric.replace("_", " ")
    title = f"Held-out {name} per epoch (fixed whole-word masks)"
    return fig.update_layout(title=title, xaxis_title="epoch", yaxis_title=name, height=400)


def comparison_figure(table: pd.DataFrame, title: str, metric: str = "macro_f1") -> go.Figure:
    """A Table 6 block: bars of downstream ``metric`` (mean ± std over seeds) per variant next to the
    held-out perplexity of each pre-trained encoder."""
    _check_columns(table, ["variant", f"{metric}_mean", f"{metric}_std", "perplexity"], "table")
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"downstream test {metric} (mean ± std)", "held-out perplexity"])
    error = {"type": "data", "array": _error(table, metric)}
    fig.add_trace(go.Bar(x=table["variant"], y=table[f"{metric}_mean"], name=metric, error_y=error), row=1, col=1)
    fig.add_trace(go.Bar(x=table["variant"], y=table["perplexity"], name="perplexity"), row=1, col=2)
    return fig.update_layout(title=title, showlegend=False, height=380)


def level_rates_figure(corrections: pd.DataFrame, rate: str = "prediction_rate") -> go.Figure:
    """Held-out correction rate (%) per encoder, one bar per HC level (``token``: the paper's rule,
    ``word``: whole words), from ``correction_table``."""
    if rate not in ("prediction_rate", "iteration_rate"):
        raise ValueError(f"rate: must be one of prediction_rate, iteration_rate, got {rate!r}")
    _check_columns(corrections, ["encoder", "level", rate], "corrections")
    fig = go.Figure()
    for level in dict.fromkeys(corrections["level"]):
        rows = corrections[corrections["level"] == level]
        fig.add_trace(go.Bar(x=rows["encoder"], y=100 * rows[rate], name=f"{level} level"))
    label = "prediction level: corrected / wrong" if rate == "prediction_rate" else "iteration level: sequences with a correction"
    title = f"Held-out correction rate by HC level ({label})"
    return fig.update_layout(title=title, barmode="group", yaxis_title="corrected (%)", height=380)
