"""Confusion-matrix heatmaps and the entropy figure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.viz.confusion import confusion_figure, confusion_grid, matrix_grid, row_normalize
from workbench.viz.entropy import entropy_figure

MATRIX = [[8, 2, 0], [1, 6, 3], [0, 0, 0]]
NAMES = ["neg", "mid", "pos"]


def test_row_normalize_and_empty_rows():
    shares = row_normalize(np.array(MATRIX, dtype=float))
    assert shares.tolist() == [[0.8, 0.2, 0.0], [0.1, 0.6, 0.3], [0.0, 0.0, 0.0]]


def test_confusion_figure_counts_and_annotations():
    fig = confusion_figure(MATRIX, NAMES, title="t")
    heatmap = fig.data[0]
    assert np.asarray(heatmap.z).tolist() == MATRIX
    assert list(heatmap.x) == NAMES and list(heatmap.y) == NAMES
    assert heatmap.text[0][0] == "8<br>80.0%" and heatmap.text[1][2] == "3<br>30.0%"
    assert heatmap.text[2][1] == "0<br>0.0%"
    assert fig.layout.title.text == "t"
    assert fig.layout.yaxis.autorange == "reversed"  # gold label 0 on top


def test_confusion_figure_normalized():
    fig = confusion_figure(MATRIX, NAMES, normalize="true")
    np.testing.assert_allclose(np.asarray(fig.data[0].z), [[0.8, 0.2, 0.0], [0.1, 0.6, 0.3], [0, 0, 0]])
    assert fig.data[0].text[0][1] == "2<br>20.0%"


def test_confusion_grid_shares_one_scale():
    fig = confusion_grid({"ls": MATRIX, "pcl": np.eye(3) * 5}, NAMES)
    assert [annotation.text for annotation in fig.layout.annotations] == ["ls", "pcl"]
    assert [trace.coloraxis for trace in fig.data] == ["coloraxis", "coloraxis"]
    assert np.asarray(fig.data[1].z).tolist() == np.eye(3).tolist()
    assert fig.data[1].text[0][0] == "5<br>100.0%"


def test_matrix_grid_values_and_separate_scales():
    fig = matrix_grid({"a": [[0, 1.23456], [2, 0]], "b": [[1, 1], [1, 1]]}, ["x", "y"], shared_scale=False)
    assert fig.data[0].text[0][1] == "1.23"
    assert [trace.coloraxis for trace in fig.data] == ["coloraxis", "coloraxis2"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: confusion_figure([[1, 2, 3]], ["a"]), r"^matrix '':"),
        (lambda: confusion_figure([[1, 2], [3, 4]], ["a"]), r"^label_names:"),
        (lambda: confusion_figure([[1, -2], [3, 4]], ["a", "b"]), r"^matrix '':"),
        (lambda: confusion_figure([[1, math.nan], [3, 4]], ["a", "b"]), r"^matrix '':"),
        (lambda: confusion_figure([[1, 2], [3, 4]], ["a", "b"], normalize="pred"), r"^normalize:"),
        (lambda: matrix_grid({}, ["a"]), r"^matrices:"),
        (lambda: confusion_grid({"ls": [[1, 2], [3, 4]], "pcl": [[1, 2]]}, ["a", "b"]), r"^matrix 'pcl':"),
    ],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_entropy_figure_traces():
    fig = entropy_figure(2, 4, logits=[1.0, 0.0], highlight_n=3)
    names = [trace.name for trace in fig.data]
    assert len(names) == 4
    # the paper's eq. 3 at the default gamma = 0.1: H_{2+n} = -(1+n) 0.1 ln 0.1 - (1 - (1+n) 0.1) ln(1 - (1+n) 0.1)
    assert list(fig.data[1].y) == pytest.approx(
        [-(1 + n) * 0.1 * math.log(0.1) - (1 - (1 + n) * 0.1) * math.log(1 - (1 + n) * 0.1) for n in range(5)],
        rel=1e-14,
    )
    aside = entropy_figure(2, 4, uniform=True)
    assert aside.data[3].name == "uniform (aside, not the paper's eq. 3): log(k+n)"
    assert list(aside.data[3].y) == pytest.approx([math.log(2 + n) for n in range(5)])
    assert fig.layout.shapes[0].x0 == 3
    assert len(entropy_figure(3, 2).data) == 2
    with pytest.raises(ValueError, match=r"^highlight_n:"):
        entropy_figure(3, 2, highlight_n=5)


# notebook 02's settings: seven panels in one grid
SETTINGS_02 = [
    "LS",
    "PCL reference",
    "PCL paper",
    "PCL weighted (global)",
    "PCL weighted (batch)",
    "PCL expected_cost (global)",
    "PCL expected_cost (batch)",
]


def test_seven_panel_grid_titles_fit_their_columns_and_rows_leave_room():
    fig = confusion_grid(
        {name: MATRIX for name in SETTINGS_02}, NAMES, title="probe: test confusion, summed over seeds"
    )
    layout = fig.layout.to_plotly_json()
    xaxes = [axis for name, axis in layout.items() if name.startswith("xaxis")]
    assert len(xaxes) == 9 and fig.layout.width is None  # three rows of three; the cell's full width
    yaxes = [axis for name, axis in layout.items() if name.startswith("yaxis")]
    # gold labels once per row, left of column 1: a long label in columns 2-3 would run into the panel on its left
    assert [axis.get("showticklabels") for axis in yaxes] == [True, False, False] * 3
    width, font = 800, fig.layout.annotations[0].font.size  # a page 800 px wide; plotly's subplot title font
    for annotation in fig.layout.annotations:
        column = next(axis["domain"] for axis in xaxes if abs(sum(axis["domain"]) / 2 - annotation.x) < 1e-9)
        longest = max(len(line) for line in annotation.text.split("<br>"))
        assert longest * 0.6 * font < (column[1] - column[0]) * width, annotation.text  # about 0.6 em per character
    plot_height = fig.layout.height - 180  # plotly's default margins: 100 top, 80 bottom
    rows = sorted({tuple(axis["domain"]) for name, axis in layout.items() if name.startswith("yaxis")}, reverse=True)
    lines = max(annotation.text.count("<br>") + 1 for annotation in fig.layout.annotations)
    for upper, lower in zip(rows, rows[1:]):  # tick labels and "predicted" (45 px) below, the next row's titles above
        assert (upper[0] - lower[1]) * plot_height >= 45 + lines * 1.3 * font
