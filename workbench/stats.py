"""Mean, spread and count over repeated runs, and the "mean ± std" format.

One helper for every study table and for the run report: the spread is the sample
standard deviation (ddof = 1), NaN for a single run, and a formatted cell shows the
std only when there is more than one run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

PLUS_MINUS = " ± "


def describe(values: Iterable[float]) -> dict[str, float | int | None]:
    """``{"mean", "std", "n"}`` of ``values`` (NaNs dropped); std is None for fewer than two values."""
    array = np.asarray([value for value in values if value is not None], dtype=np.float64)
    array = array[~np.isnan(array)]
    if array.size == 0:
        raise ValueError("values: must hold at least one number, got none")
    std = float(array.std(ddof=1)) if array.size > 1 else None
    return {"mean": float(array.mean()), "std": std, "n": int(array.size)}


def summarize(table: pd.DataFrame, by: str | Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Per group of ``by``: ``<metric>_mean``, ``<metric>_std`` (ddof = 1; NaN for one run) and ``n``.

    Groups keep their order of first appearance. Raises ValueError naming missing columns.
    """
    by = [by] if isinstance(by, str) else list(by)
    missing = [column for column in (*by, *metrics) if column not in table.columns]
    if missing:
        raise ValueError(f"by/metrics: must be columns of the table {list(table.columns)}, got missing {missing}")
    grouped = table.groupby(by, sort=False)
    summary = pd.concat(
        {
            f"{metric}_{statistic}": grouped[metric].agg(statistic)
            for metric in metrics
            for statistic in ("mean", "std")
        },
        axis=1,
    )
    summary["n"] = grouped.size()
    return summary.reset_index()


def mean_std(mean: float, std: float | None, digits: int = 3, scale: float = 1.0) -> str:
    """ "mean ± std" with ``digits`` decimals after multiplying by ``scale``; the mean alone when
    std is None or NaN (a single run)."""
    text = f"{scale * mean:.{digits}f}"
    if std is None or (isinstance(std, float) and math.isnan(std)):
        return text
    return f"{text}{PLUS_MINUS}{scale * std:.{digits}f}"


def formatted(summary: pd.DataFrame, metrics: Sequence[str], digits: int = 3, scale: float = 1.0) -> pd.DataFrame:
    """``summary`` (from :func:`summarize`) with one "mean ± std" text column per metric."""
    columns = {
        metric: [mean_std(m, s, digits, scale) for m, s in zip(summary[f"{metric}_mean"], summary[f"{metric}_std"])]
        for metric in metrics
    }
    return summary.assign(**columns)


def mean_std_table(
    summary: pd.DataFrame, rows: str, columns: str, metric: str, digits: int = 1, scale: float = 100.0
) -> pd.DataFrame:
    """A ``rows`` x ``columns`` table of "mean ± std" cells of ``metric`` from :func:`summarize`
    (times ``scale``), rows and columns in order of first appearance."""
    cells = formatted(summary, [metric], digits, scale)
    table = cells.pivot(index=rows, columns=columns, values=metric)
    return table.reindex(index=list(dict.fromkeys(summary[rows])), columns=list(dict.fromkeys(summary[columns])))


def row_statistics(row: pd.Series, metric: str) -> dict[str, Any]:
    """``{"mean", "std", "n"}`` of ``metric`` in one row of a :func:`summarize` table (std None for one run):
    a metrics.json entry the run report aggregates."""
    std = row[f"{metric}_std"]
    return {"mean": float(row[f"{metric}_mean"]), "std": None if pd.isna(std) else float(std), "n": int(row["n"])}
