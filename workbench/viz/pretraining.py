"""Figures of MLM pre-training tables (notebook 03): the paper's Table 2 per checkpoint, the held-out
eval loss per epoch and Table 6's comparisons.

Every function takes a table from ``workbench.studies.true_negatives`` (``epoch_table``,
``synonym_source_table``, ``sr_level_table``) and returns a plotly figure; none computes results.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative
from plotly.subplots import make_subplots

RATE_LEVELS = (
    ("prediction", "prediction level (corrected / wrong)"),
    ("iteration", "iteration level (sequences with a correction)"),
)
SPLITS = (("eval", "held-out", "solid"), ("train", "training", "dash"))


def _check_columns(table: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise ValueError(f"{name}: must have the columns {list(columns)}, got missing {missing} (columns {list(table.columns)})")


def _encoders(table: pd.DataFrame, encoders: Sequence[str] | None) -> list[str]:
    present = list(dict.fromkeys(table["encoder"]))
    if encoders is None:
        return present
    unknown = [encoder for encoder in encoders if encoder not in present]
    if unknown or not encoders:
        raise ValueError(f"encoders: must be a non-empty list from {present}, got {list(encoders)!r}")
    return list(encoders)


def checkpoint_rates_figure(epochs: pd.DataFrame, encoders: Sequence[str] | None = None) -> go.Figure:
    """The paper's Table 2 per checkpoint: prediction- and iteration-level correction rates (%) against
    the share of training done (%), one colour per encoder, held-out blocks solid and the epoch's
    training batches dashed (HC runs only; a run without training-time rates has no dashed line)."""
    _check_columns(
        epochs,
        ["encoder", "checkpoint", "eval_prediction_rate", "eval_iteration_rate", "train_prediction_rate", "train_iteration_rate"],
        "epochs",
    )
    fig = make_subplots(rows=1, cols=2, subplot_titles=[title for _, title in RATE_LEVELS], shared_xaxes=True)
    palette = qualitative.Plotly
    for number, encoder in enumerate(_encoders(epochs, encoders)):
        rows = epochs[epochs["encoder"] == encoder]
        colour = palette[number % len(palette)]
        for column, (level, _) in enumerate(RATE_LEVELS, start=1):
            for split, label, dash in SPLITS:
                values = rows[f"{split}_{level}_rate"].to_numpy(dtype=float)
                if np.isnan(values).all():
                    continue
                fig.add_trace(
                    go.Scatter(
                        x=rows["checkpoint"],
                        y=100 * values,
                        mode="lines+markers",
                        name=f"{encoder} ({label})",
                        legendgroup=encoder,
                        showlegend=column == 1,
                        line={"color": colour, "dash": dash},
                    ),
                    row=1,
                    col=column,
                )
    fig.update_xaxes(title_text="checkpoint (% of training steps)")
    fig.update_yaxes(title_text="corrected (%)", rangemode="tozero")
    fig.update_layout(title="Hard-correction statistics per checkpoint (the paper's Table 2)", height=420)
    return fig


def eval_loss_figure(epochs: pd.DataFrame, metric: str = "perplexity", encoders: Sequence[str] | None = None) -> go.Figure:
    """Held-out ``metric`` (``perplexity`` or ``eval_loss``) after every epoch, one line per encoder."""
    if metric not in ("perplexity", "eval_loss"):
        raise ValueError(f"metric: must be one of perplexity, eval_loss, got {metric!r}")
    _check_columns(epochs, ["encoder", "epoch", metric], "epochs")
    fig = go.Figure()
    for encoder in _encoders(epochs, encoders):
        rows = epochs[epochs["encoder"] == encoder]
        fig.add_trace(go.Scatter(x=rows["epoch"], y=rows[metric], mode="lines+markers", name=encoder))
    fig.update_layout(
        title=f"Held-out {metric.replace('_', ' ')} per epoch (fixed whole-word masks)",
        xaxis_title="epoch",
        yaxis_title=metric.replace("_", " "),
        height=400,
    )
    return fig


def comparison_figure(table: pd.DataFrame, title: str, metric: str = "macro_f1") -> go.Figure:
    """A Table 6 block: bars of downstream ``metric`` (mean ± std over seeds) per variant next to the
    held-out perplexity of each pre-trained encoder."""
    _check_columns(table, ["variant", f"{metric}_mean", f"{metric}_std", "perplexity"], "table")
    fig = make_subplots(rows=1, cols=2, subplot_titles=[f"downstream test {metric} (mean ± std)", "held-out perplexity"])
    fig.add_trace(
        go.Bar(
            x=table["variant"],
            y=table[f"{metric}_mean"],
            name=metric,
            error_y={"type": "data", "array": table[f"{metric}_std"].fillna(0.0)},
        ),
        row=1,
        col=1,
    )
    fig.add_trace(go.Bar(x=table["variant"], y=table["perplexity"], name="perplexity"), row=1, col=2)
    fig.update_layout(title=title, showlegend=False, height=380)
    return fig


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
    fig.update_layout(
        title=f"Held-out correction rate by HC level ({label})", barmode="group", yaxis_title="corrected (%)", height=380
    )
    return fig
