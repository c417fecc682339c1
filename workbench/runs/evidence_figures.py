"""The results page's figures: a forest plot of every tested row (its difference, 95% CI and the paper's own
difference) and the reliability diagrams of each notebook's calibration table.

Two forms of each: a plotly figure for the run's ``index.html`` (which inlines plotly.js) and a static SVG written
beside the markdown page (``results.md``, ``docs/results.md``), which any markdown viewer shows offline. The SVG is
written here, element by element: plotly's static export needs kaleido and a browser, and the workbench keeps no
plotting library besides plotly.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import escape

COLOURS = {
    "holds": "#1a7f37",
    "does not hold": "#cf222e",
    "inconclusive at this scale": "#57606a",
}
PAPER_COLOUR = "#8250df"
FONT = 'font-family="sans-serif" font-size="11"'


def forest_entries(
    sections: Mapping[str, Mapping[str, Any]], judged: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """One entry per tested comparison scored x 100 (macro-MAE rows are on another scale and left out): ``label``,
    ``difference``, ``low``, ``high`` (points), ``paper`` (the paper's difference nearest 0, points, or None) and
    ``verdict``, in page order."""
    entries = []
    for name, evidence in sections.items():
        for row, entry in zip(evidence["claims"], judged[name]):
            if row["kind"] != "comparison" or entry["verdict"] is None or row["metric"] == "macro_mae":
                continue
            paper = row.get("paper_difference")
            entries.append(
                {
                    "label": f"{name[:2]} {row['method']} vs {row['baseline']} ({row['setting']}; {row['metric']})",
                    "difference": 100 * row["difference"],
                    "low": 100 * row["ci_low"],
                    "high": 100 * row["ci_high"],
                    "paper": None if not paper else 100 * min(paper, key=abs),
                    "verdict": entry["verdict"],
                }
            )
    return entries


def _ticks(low: float, high: float) -> list[float]:
    """About six round tick values spanning [low, high]."""
    step = 10 ** math.floor(math.log10(max(high - low, 1e-9) / 6))
    for factor in (1, 2, 5, 10):
        if (high - low) / (step * factor) <= 8:
            step *= factor
            break
    first = math.ceil(low / step) * step
    return [round(first + i * step, 10) for i in range(int((high - first) / step) + 1)]


def forest_svg(entries: Sequence[Mapping[str, Any]]) -> str:
    """The forest plot as an SVG document: one line per entry, its CI as a bar, its difference as a dot coloured by
    verdict, the paper's difference as a purple diamond; 0 as a vertical line."""
    longest = max((len(entry["label"]) for entry in entries), default=20)
    label_width = int(12 + 6.2 * longest)  # 11 px sans-serif: about 6 px a character
    plot_width, row_height, top = 380, 18, 52
    height = top + row_height * len(entries) + 40
    values = [v for e in entries for v in (e["low"], e["high"], e["paper"]) if v is not None] + [0.0]
    low, high = min(values), max(values)
    pad = 0.05 * (high - low or 1.0)
    low, high = low - pad, high + pad

    def x(value: float) -> float:
        return label_width + plot_width * (value - low) / (high - low)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_width + plot_width + 20}" height="{height}" '
        f'viewBox="0 0 {label_width + plot_width + 20} {height}">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="18" {FONT} font-weight="bold">Difference (method - baseline, points x 100) with its 95% CI;'
        f" purple diamond: the paper's own difference</text>",
        f'<text x="10" y="32" {FONT}>dot and bar: green holds, red does not hold, grey inconclusive at this scale'
        " (Holm-adjusted)</text>",
        f'<line x1="{x(0):.1f}" y1="{top - 8}" x2="{x(0):.1f}" y2="{height - 32}" stroke="#999" '
        'stroke-dasharray="3,3"/>',
    ]
    for i, entry in enumerate(entries):
        y = top + row_height * i + row_height / 2
        colour = COLOURS.get(entry["verdict"], "#57606a")
        parts.append(
            f'<text x="{label_width - 8}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{escape(entry["label"])}</text>'
        )
        parts.append(
            f'<line x1="{x(entry["low"]):.1f}" y1="{y:.1f}" x2="{x(entry["high"]):.1f}" y2="{y:.1f}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        parts.append(f'<circle cx="{x(entry["difference"]):.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        if entry["paper"] is not None:
            px = x(entry["paper"])
            parts.append(
                f'<path d="M {px:.1f} {y - 5:.1f} L {px + 5:.1f} {y:.1f} L {px:.1f} {y + 5:.1f} L {px - 5:.1f} '
                f'{y:.1f} Z" fill="none" stroke="{PAPER_COLOUR}" stroke-width="1.5"/>'
            )
    axis = height - 30
    parts.append(f'<line x1="{label_width}" y1="{axis}" x2="{label_width + plot_width}" y2="{axis}" stroke="#333"/>')
    for tick in _ticks(low, high):
        parts.append(f'<line x1="{x(tick):.1f}" y1="{axis}" x2="{x(tick):.1f}" y2="{axis + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x(tick):.1f}" y="{axis + 16}" text-anchor="middle" {FONT}>{tick:g}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def reliability_svg(title: str, bins: Mapping[str, Mapping[str, Sequence[float | None]]]) -> str:
    """Reliability diagrams as an SVG document, one panel per setting: the accuracy of each confidence bin against
    its mean confidence (dots joined, bins without an example left out) and the diagonal of perfect calibration."""
    panel, gap, columns = 170, 30, 4
    rows = max(1, math.ceil(len(bins) / columns))
    width, height = columns * (panel + gap) + gap, rows * (panel + gap + 20) + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="10" y="18" {FONT} font-weight="bold">{escape(title)}: accuracy (y) against confidence (x) per '
        f"bin, test split, seeds pooled</text>",
    ]
    for i, (setting, values) in enumerate(bins.items()):
        left = gap + (i % columns) * (panel + gap)
        top = 40 + (i // columns) * (panel + gap + 20)
        parts.append(f'<text x="{left}" y="{top - 4}" {FONT}>{escape(setting)}</text>')
        parts.append(f'<rect x="{left}" y="{top}" width="{panel}" height="{panel}" fill="none" stroke="#333"/>')
        parts.append(
            f'<line x1="{left}" y1="{top + panel}" x2="{left + panel}" y2="{top}" stroke="#999" '
            'stroke-dasharray="3,3"/>'
        )
        points = [
            (left + panel * c, top + panel * (1 - a))
            for c, a, n in zip(values["confidence"], values["accuracy"], values["count"])
            if c is not None and a is not None and n
        ]
        if points:
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="#0969da" stroke-width="1.5"/>')
            parts += [f'<circle cx="{px:.1f}" cy="{py:.1f}" r="2.5" fill="#0969da"/>' for px, py in points]
        for tick in (0, 0.5, 1):
            parts.append(
                f'<text x="{left + panel * tick:.1f}" y="{top + panel + 12}" text-anchor="middle" {FONT}>'
                f"{tick:g}</text>"
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def forest_figure(entries: Sequence[Mapping[str, Any]]) -> Any:
    """The forest plot as a plotly figure (the run's index.html): the same marks as :func:`forest_svg`."""
    import plotly.graph_objects as go

    figure = go.Figure()
    labels = [entry["label"] for entry in entries]
    for verdict, colour in COLOURS.items():
        chosen = [entry for entry in entries if entry["verdict"] == verdict]
        if not chosen:
            continue
        figure.add_trace(
            go.Scatter(
                x=[entry["difference"] for entry in chosen],
                y=[entry["label"] for entry in chosen],
                mode="markers",
                name=verdict,
                marker={"color": colour, "size": 8},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [entry["high"] - entry["difference"] for entry in chosen],
                    "arrayminus": [entry["difference"] - entry["low"] for entry in chosen],
                },
            )
        )
    papers = [entry for entry in entries if entry["paper"] is not None]
    if papers:
        figure.add_trace(
            go.Scatter(
                x=[entry["paper"] for entry in papers],
                y=[entry["label"] for entry in papers],
                mode="markers",
                name="the paper's difference",
                marker={"color": PAPER_COLOUR, "symbol": "diamond-open", "size": 9},
            )
        )
    figure.add_vline(x=0, line_dash="dot", line_color="#999")
    figure.update_layout(
        title="Difference (method - baseline, points) with its 95% CI",
        yaxis={"categoryorder": "array", "categoryarray": labels[::-1], "automargin": True},
        height=120 + 22 * len(entries),
        template="plotly_white",
    )
    return figure
