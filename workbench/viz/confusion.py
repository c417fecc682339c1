"""Confusion matrices (and other K x K matrices) as annotated plotly heatmaps.

Rows are gold labels, columns predicted labels (the sklearn convention used by
``workbench.metrics.classification_report``). Row-normalised ("true") entries are
P(predicted = j | gold = i) = C[i, j] / sum_j C[i, j]; a row with no examples normalises to zeros.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.checks import check_choice

NORMALIZE_CHOICES = (None, "true")
GRID_COLUMNS = 3  # panels per row: a title of TITLE_WIDTH characters fits its column on a projector
TITLE_WIDTH = 18  # longer panel titles wrap onto more lines
ROW_HEIGHT, ROW_GAP = 300, 110  # pixels per row of panels and between rows (tick labels, axis title, next titles)


def check_matrix(matrix: Sequence[Sequence[float]] | np.ndarray, label_names: Sequence[str], name: str = "matrix") -> np.ndarray:
    """A finite K x K float64 array whose K matches ``label_names``; ValueError otherwise."""
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 1:
        raise ValueError(f"{name}: must be a square K x K matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: must be finite")
    if len(label_names) != array.shape[0]:
        raise ValueError(f"label_names: must have K = {array.shape[0]} entries, got {len(label_names)}")
    return array


def check_confusion(
    matrix: Sequence[Sequence[float]] | np.ndarray, label_names: Sequence[str], name: str = "matrix"
) -> np.ndarray:
    """A K x K matrix of non-negative counts; ValueError otherwise."""
    array = check_matrix(matrix, label_names, name)
    if (array < 0).any():
        raise ValueError(f"{name}: must hold non-negative counts")
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


def matrix_grid(
    matrices: Mapping[str, Sequence[Sequence[float]] | np.ndarray],
    label_names: Sequence[str],
    texts: Mapping[str, list[list[str]]] | None = None,
    title: str | None = None,
    value_format: str = ".3g",
    shared_scale: bool = True,
    columns: int = GRID_COLUMNS,
) -> go.Figure:
    """Heatmaps, one per entry (e.g. PCL weight matrices), ``columns`` per row, titles wrapped at TITLE_WIDTH.

    Cells show ``texts[name]`` when given, else the value formatted with ``value_format``.
    ``shared_scale`` puts all panels on one colour scale; otherwise each panel is scaled on its own.
    """
    if not matrices:
        raise ValueError("matrices: must hold at least one name -> matrix entry, got none")
    arrays = {name: check_matrix(matrix, label_names, f"matrix {name!r}") for name, matrix in matrices.items()}
    rows, columns = math.ceil(len(arrays) / columns), min(len(arrays), columns)
    titles = ["<br>".join(textwrap.wrap(name, TITLE_WIDTH)) for name in arrays]
    spacing = ROW_GAP / (rows * ROW_HEIGHT + (rows - 1) * ROW_GAP) if rows > 1 else 0.0
    fig = make_subplots(rows=rows, cols=columns, subplot_titles=titles, vertical_spacing=spacing, horizontal_spacing=0.08)
    names = [str(label) for label in label_names]
    for index, (name, array) in enumerate(arrays.items()):
        coloraxis = "coloraxis" if shared_scale or index == 0 else f"coloraxis{index + 1}"
        text = texts[name] if texts else [[format(value, value_format) for value in row] for row in array]
        heatmap = go.Heatmap(z=array, x=names, y=names, text=text, texttemplate="%{text}", coloraxis=coloraxis)
        fig.add_trace(
            heatmap.update(hovertemplate="gold %{y}<br>predicted %{x}<br>%{text}<extra></extra>"),
            index // columns + 1,
            index % columns + 1,
        )
        fig.update_layout({coloraxis: {"colorscale": "Blues", "showscale": shared_scale}})
    fig.update_xaxes(title_text="predicted", type="category")
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_yaxes(title_text="gold", col=1)
    return fig.update_layout(title=title, height=rows * ROW_HEIGHT + (rows - 1) * ROW_GAP + 180)


def confusion_figure(
    matrix: Sequence[Sequence[float]] | np.ndarray,
    label_names: Sequence[str],
    title: str | None = None,
    normalize: str | None = None,
) -> go.Figure:
    """Heatmap of a confusion matrix; colour = counts, or row shares with ``normalize="true"``.

    Every cell is annotated with its count and its share of the gold row.
    """
    return confusion_grid({"": matrix}, label_names, title=title, normalize=normalize)


def confusion_grid(
    matrices: Mapping[str, Sequence[Sequence[float]] | np.ndarray],
    label_names: Sequence[str],
    title: str | None = None,
    normalize: str | None = "true",
) -> go.Figure:
    """Confusion matrices side by side (e.g. one per PCL variant) on one colour scale.

    With ``normalize="true"`` (default) colours are row shares, comparable across models evaluated
    on different numbers of examples; every cell shows its count and its share of the gold row.
    """
    check_choice("normalize", normalize, NORMALIZE_CHOICES)
    counts = {name: check_confusion(matrix, label_names, f"matrix {name!r}") for name, matrix in matrices.items()}
    values = {name: row_normalize(array) if normalize == "true" else array for name, array in counts.items()}
    return matrix_grid(values, label_names, texts={name: confusion_text(array) for name, array in counts.items()}, title=title)
