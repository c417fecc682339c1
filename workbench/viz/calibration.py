"""Reliability diagrams: per loss, the accuracy of the argmax against the mean top-class probability in equal-width
bins (Guo et al., 2017, "On Calibration of Modern Neural Networks", Figure 1), from
``workbench.metrics.reliability_bins`` (``workbench.evidence.calibration`` pools them over seeds)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import plotly.graph_objects as go


def reliability_diagram(
    bins: Mapping[str, Mapping[str, Any]], ece: Mapping[str, float] | None = None, title: str | None = None
) -> go.Figure:
    """One line per loss through its filled bins (x: mean confidence, y: accuracy; hover: the bin and its count), and
    the diagonal of perfect calibration; ``ece`` (loss -> ECE) goes into the legend, in percent
    (the mean gap between confidence and accuracy, in points of probability x 100). Below the diagonal: the model is
    more confident than it is right (overconfident)."""
    if not bins:
        raise ValueError("bins: must hold at least one loss -> reliability bins entry, got none")
    figure = go.Figure()
    figure.add_scatter(
        x=[0, 1], y=[0, 1], mode="lines", name="perfect calibration", line={"dash": "dot", "color": "grey"}
    )
    for name, values in bins.items():
        count = np.asarray(values["count"], dtype=np.float64)
        filled = count > 0
        lower, upper = np.asarray(values["lower"])[filled], np.asarray(values["upper"])[filled]
        label = name if ece is None or name not in ece else f"{name} (ECE {100 * ece[name]:.2f}%)"
        figure.add_scatter(
            x=np.asarray(values["confidence"])[filled].tolist(),
            y=np.asarray(values["accuracy"])[filled].tolist(),
            mode="lines+markers",
            name=label,
            customdata=np.stack([lower, upper, count[filled]], axis=1).tolist(),
            hovertemplate="bin (%{customdata[0]:.2f}, %{customdata[1]:.2f}]: %{customdata[2]:.0f} predictions<br>"
            "confidence %{x:.3f}, accuracy %{y:.3f}<extra>%{fullData.name}</extra>",
        )
    figure.update_layout(
        title=title or "Reliability diagram (test, seeds pooled)",
        xaxis={"title": "mean top-class probability (confidence)", "range": [0, 1]},
        yaxis={"title": "accuracy of the argmax", "range": [0, 1]},
        height=480,
    )
    return figure
