"""How the results page prints a value: a score and a difference in the page's units (x 100; macro-MAE unscaled), a
mean ± std, an interval, a p-value, a count, a metric's label and a line of a markdown table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.evidence import LABELS, SCALE


def number(value: float, metric: str) -> str:
    """A score as the page prints it: x 100 with 2 decimals (macro-MAE: 3 decimals, unscaled)."""
    return f"{value:.3f}" if metric in SCALE else f"{100 * value:.2f}"


def signed(value: float, metric: str) -> str:
    return f"{value:+.3f}" if metric in SCALE else f"{100 * value:+.2f}"


def statistic(stats: Mapping[str, Any], metric: str) -> str:
    """``{"mean", "std", "n"}`` as "mean ± std" in the page's units (the mean alone for one seed)."""
    text = number(stats["mean"], metric)
    return text if stats.get("std") is None else f"{text} ± {number(stats['std'], metric)}"


def interval(row: Mapping[str, Any]) -> str:
    """A comparison's difference and CI, "+1.23 [+0.40, +2.05]", or a rate's value and interval in %."""
    if row["kind"] == "rate":
        return f"{100 * row['value']:.2f}% [{100 * row['ci_low']:.2f}%, {100 * row['ci_high']:.2f}%]"
    metric = row["metric"]
    return f"{signed(row['difference'], metric)} [{signed(row['ci_low'], metric)}, {signed(row['ci_high'], metric)}]"


def p_text(value: float | None) -> str:
    if value is None:
        return ""
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def escaped(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table_line(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(escaped(cell) for cell in cells) + " |"


def count_text(value: Any) -> str:
    return "not recorded" if value is None else f"{value:,}"


def metric_label(row: Mapping[str, Any]) -> str:
    return LABELS.get(row.get("metric", ""), row.get("measure", ""))
