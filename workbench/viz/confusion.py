"""Confusion matrices (and other K x K matrices) as annotated plotly heatmaps.

Rows are gold labels, columns predicted labels (the sklearn convention used
by ``workbench.metrics.classification_report``). Row-normalised ("true")
entries are P(predicted = j | gold = i) = C[i, j] / sum_j C[i, j]; a row with
no examples normalises to zeros.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

NORMALIZE_CHOICES = (None, "true")


def check_matrix(matrix: Sequence[Sequence[float]] | np.ndarray, label_names: Sequence[str], name: str = "matrix") -> np.ndarray:
    """A finite K x K float64 array whose K matches ``label_names``; ValueError otherwise."""
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 1:
        raise ValueError(f"{name} must be a square K x K matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} must be finite")
    if len(label_names) != array.shape[0]:
        raise ValueError(f"label_names must have K = {array.shape[0]} entries, got {len(label_names)}")
    return array


def check_confusion(
    matrix: Sequence[Sequence[float]] | np.ndarray, label_names: Sequence[str], name: str = "matrix"
) -> np.ndarray:
    """A K x K matrix of non-negative counts; ValueError otherwise."""
    array = check_matrix(matrix, label_names, name)
    if (array < 0).any():
        raise ValueError(f"{name} must hold non-negative counts")
    return array


def row_normalize(matrix: np.ndarray) -> np.ndarray:
    """C[i, j] / sum_j C[i, j]; rows with no examples become zeros."""
    totals = matrix.sum(axis=1, keepdims=True)
    return np.divide(matrix, totals, out=np.zeros_like(matrix, dtype=np.float64), where=totals > 0)


def confusion_text(matrix: np.ndarray) -> list[list[str]]:
    """Cell annotations: the count and its share of the gold row, e.g. ``"12<br>40.0%"``."""
    shares = row_normalize(matrix)
    return [
        [f"{count:g}<br>{100 * share:.1f}%" for count, share in zip(row, share_row)] for row, share_row in zip(matrix, shares)
    ]


def _check_normalize(normalize: str | None) -> None:
    if normalize not in NORMALIZE_CHOICES:
        raise ValueError(f"normalize must be one of {NORMALIZE_CHOICES}, got {normalize!r}")


def _heatmap(z: np.ndarray, text: list[list[str]], label_names: Sequence[str], coloraxis: str | None = None) -> go.Heatmap:
    names = [str(label) for label in label_names]
    return go.Heatmap(
        z=z,
        x=names,
        y=names,
        text=text,
        texttemplate="%{text}",
        coloraxis=coloraxis,
        colorscale=None if coloraxis else "Blues",
        hovertemplate="gold %{y}<br>predicted %{x}<br>%{text}<extra></extra>",
    )


def _style_axes(fig: go.Figure, columns: int) -> None:
    for column in range(1, columns + 1):
        fig.update_xaxes(title_text="predicted", type="category", row=1, col=column)
        fig.update_yaxes(autorange="reversed", type="category", row=1, col=column)
    fig.update_yaxes(title_text="gold", row=1, col=1)


def confusion_figure(
    matrix: Sequence[Sequence[float]] | np.ndarray,
    label_names: Sequence[str],
    title: str | None = None,
    normalize: str | None = None,
) -> go.Figure:
    """Heatmap of a confusion matrix; colour = counts, or row shares with ``normalize="true"``.

    Every cell is annotated with its count and its share of the gold row.
    """
    _check_normalize(normalize)
    counts = check_confusion(matrix, label_names)
    z = row_normalize(counts) if normalize == "true" else counts
    fig = make_subplots(rows=1, cols=1)
    fig.add_trace(_heatmap(z, confusion_text(counts), label_names), row=1, col=1)
    _style_axes(fig, 1)
    fig.update_layout(title=title)
    return fig


def matrix_grid(
    matrices: Mapping[str, Sequence[Sequence[float]] | np.ndarray],
    label_names: Sequence[str],
    texts: Mapping[str, list[list[str]]] | None = None,
    title: str | None = None,
    value_format: str = ".3g",
    shared_scale: bool = True,
) -> go.Figure:
    """Side-by-side heatmaps, one per entry, e.g. PCL weight matrices.

    Cells show ``texts[name]`` when given, else the value formatted with
    ``value_format``. ``shared_scale`` puts all panels on one colour scale
    (comparable colours); otherwise each panel is scaled on its own.
    """
    if not matrices:
        raise ValueError("matrices must hold at least one name -> matrix entry")
    arrays = {name: check_matrix(matrix, label_names, f"matrix {name!r}") for name, matrix in matrices.items()}
    fig = make_subplots(rows=1, cols=len(arrays), subplot_titles=list(arrays), shared_yaxes=True)
    coloraxes = set()
    for column, (name, array) in enumerate(arrays.items(), start=1):
        text = texts[name] if texts else [[format(value, value_format) for value in row] for row in array]
        coloraxis = "coloraxis" if shared_scale or column == 1 else f"coloraxis{column}"
        coloraxes.add(coloraxis)
        fig.add_trace(_heatmap(array, text, label_names, coloraxis=coloraxis), row=1, col=column)
    _style_axes(fig, len(arrays))
    fig.update_layout(title=title, **{axis: {"colorscale": "Blues", "showscale": shared_scale} for axis in coloraxes})
    return fig


def confusion_grid(
    matrices: Mapping[str, Sequence[Sequence[float]] | np.ndarray],
    label_names: Sequence[str],
    title: str | None = None,
    normalize: str | None = "true",
) -> go.Figure:
    """Side-by-side confusion matrices (e.g. one per PCL variant) on one colour scale.

    With ``normalize="true"`` (default) colours are row shares, comparable
    across models evaluated on different numbers of examples.
    """
    _check_normalize(normalize)
    counts = {name: check_confusion(matrix, label_names, f"matrix {name!r}") for name, matrix in matrices.items()}
    values = {name: row_normalize(array) if normalize == "true" else array for name, array in counts.items()}
    texts = {name: confusion_text(array) for name, array in counts.items()}
    return matrix_grid(values, label_names, texts=texts, title=title)
