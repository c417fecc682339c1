"""K x K matrices as annotated plotly heatmaps: rows are gold labels, columns predicted labels (sklearn's convention).

Row shares ("true") are P(predicted = j | gold = i) = C[i, j] / sum_j C[i, j]; a row with no examples gets zeros.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from workbench.checks import check_choice

Matrix = Sequence[Sequence[float]] | np.ndarray
NORMALIZE_CHOICES = (None, "true")
GRID_COLUMNS = 3  # panels per row: a title of TITLE_WIDTH characters fits its column on a projector
TITLE_WIDTH = 18  # longer panel titles wrap onto more lines
ROW_HEIGHT = 300  # pixels per row of panels
ROW_GAP = 110  # pixels between rows (tick labels, axis title, next titles)


def check_matrix(matrix: Matrix, label_names: Sequence[str], name: str = "matrix", counts: bool = False) -> np.ndarray:
    """A finite K x K float64 array (non-negative with ``counts``), K = len(label_names); ValueError otherwise."""
    array = np.asarray(matrix, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 1:
        raise ValueError(f"{name}: must be a square K x K matrix, got shape {array.shape}")
    if not np.isfinite(array).all() or (counts and (array < 0).any()):
        raise ValueError(
            f"{name}: must hold finite {'non-negative counts' if counts else 'numbers'}, got {array.tolist()}"
        )
    if len(label_names) != array.shape[0]:
        raise ValueError(f"label_names: must have K = {array.shape[0]} entries, got {len(label_names)}")
    return array


def row_normalize(matrix: np.ndarray) -> np.ndarray:
    """C[i, j] / sum_j C[i, j]; rows with no examples become zeros."""
    totals = matrix.sum(axis=1, keepdims=True)
    return np.divide(matrix, totals, out=np.zeros_like(matrix, dtype=np.float64), where=totals > 0)


def matrix_grid(
    matrices: Mapping[str, Matrix],
    label_names: Sequence[str],
    texts: Mapping[str, list[list[str]]] | None = None,
    title: str | None = None,
    value_format: str = ".3g",
    shared_scale: bool = True,
    columns: int = GRID_COLUMNS,
) -> go.Figure:
    """Heatmaps, one per entry (e.g. PCL weight matrices), ``columns`` per row, titles wrapped at TITLE_WIDTH; cells
    show ``texts[name]`` or the values in ``value_format``; ``shared_scale``: one colour scale, else one per panel."""
    if not matrices:
        raise ValueError("matrices: must hold at least one name -> matrix entry, got none")
    arrays = {name: check_matrix(matrix, label_names, f"matrix {name!r}") for name, matrix in matrices.items()}
    rows = math.ceil(len(arrays) / columns)
    columns = min(len(arrays), columns)
    titles = ["<br>".join(textwrap.wrap(name, TITLE_WIDTH)) for name in arrays]
    spacing = ROW_GAP / (rows * ROW_HEIGHT + (rows - 1) * ROW_GAP) if rows > 1 else 0.0
    fig = make_subplots(
        rows=rows, cols=columns, subplot_titles=titles, vertical_spacing=spacing, horizontal_spacing=0.08
    )
    names = [str(label) for label in label_names]
    for index, (name, array) in enumerate(arrays.items()):
        coloraxis = "coloraxis" if shared_scale or index == 0 else f"coloraxis{index + 1}"
        text = texts[name] if texts else [[format(value, value_format) for value in row] for row in array]
        heatmap = go.Heatmap(z=array, x=names, y=names, text=text, texttemplate="%{text}", coloraxis=coloraxis)
        heatmap.hovertemplate = "gold %{y}<br>predicted %{x}<br>%{text}<extra></extra>"
        fig.add_trace(heatmap, index // columns + 1, index % columns + 1)
        fig.update_layout({coloraxis: {"colorscale": "Blues", "showscale": shared_scale}})
    fig.update_xaxes(title_text="predicted", type="category")
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=False)  # gold labels once per row: column 1
    fig.update_yaxes(title_text="gold", showticklabels=True, col=1)
    return fig.update_layout(title=title, height=rows * ROW_HEIGHT + (rows - 1) * ROW_GAP + 180)


def confusion_figure(
    matrix: Matrix, label_names: Sequence[str], title: str | None = None, normalize: str | None = None
) -> go.Figure:
    """A confusion matrix's heatmap: colour = counts, or row shares with ``normalize="true"``; cells show both."""
    return confusion_grid({"": matrix}, label_names, title=title, normalize=normalize)


def confusion_grid(
    matrices: Mapping[str, Matrix], label_names: Sequence[str], title: str | None = None, normalize: str | None = "true"
) -> go.Figure:
    """Confusion matrices side by side (e.g. one per PCL variant) on one colour scale: row shares (``"true"``,
    comparable across test sets of any size) or counts (None); each cell shows its count and its row share."""
    check_choice("normalize", normalize, NORMALIZE_CHOICES)
    counts = {
        name: check_matrix(matrix, label_names, f"matrix {name!r}", counts=True) for name, matrix in matrices.items()
    }
    shares = {name: row_normalize(array) for name, array in counts.items()}
    texts = {
        name: [
            [f"{count:g}<br>{100 * share:.1f}%" for count, share in zip(*row)]
            for row in zip(counts[name], shares[name])
        ]
        for name in counts
    }
    return matrix_grid(shares if normalize == "true" else counts, label_names, texts=texts, title=title)
