"""Mean, spread and count over repeated runs, the "mean ± std" format, and the paired statistics of a comparison.

One helper for every study table and for the run report: the spread is the sample
standard deviation (ddof = 1), NaN for a single run, and a formatted cell shows the
std only when there is more than one run.

Paired comparisons of two methods on one test set (the results page): :func:`paired_bootstrap_ci`, the percentile
bootstrap CI of a score difference, and :func:`mcnemar_test`, the exact McNemar test of paired accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from workbench.checks import check_bool, check_choice, check_int, check_number
from workbench.metrics import SCORES, confusion_scores

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


def _prediction_matrix(name: str, predictions: Any, n: int) -> np.ndarray:
    """``predictions`` as an int64 (seeds, n) matrix: one row per seed (a 1-d array is one seed)."""
    matrix = np.asarray(predictions)
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    if matrix.ndim != 2 or matrix.shape[1] != n or matrix.shape[0] == 0:
        raise ValueError(f"{name}: must have shape (n,) or (seeds, n) with n = len(y_true) = {n}, got {matrix.shape}")
    if matrix.size and not np.issubdtype(matrix.dtype, np.integer):
        raise ValueError(f"{name}: must hold integer class ids, got dtype {matrix.dtype}")
    return matrix.astype(np.int64)


def paired_bootstrap_ci(
    y_true: Sequence[int] | np.ndarray,
    pred_a: Sequence[int] | np.ndarray,
    pred_b: Sequence[int] | np.ndarray,
    metric: str = "macro_f1",
    n_resamples: int = 2000,
    seed: int = 0,
    confidence_level: float = 0.95,
    resample_seeds: bool = True,
    num_labels: int | None = None,
) -> dict[str, Any]:
    """Percentile bootstrap CI of metric(a) - metric(b) on one test set, paired (Efron and Tibshirani, 1993, ch. 13).

    ``pred_a`` and ``pred_b`` are test predictions, (n,) for one fit each or (S, n) for S seeds, row s of a paired
    with row s of b (the same seed). The estimate is D = (1/S) sum_s [metric(a_s) - metric(b_s)]. Each resample draws
    n test examples with replacement, the same indices for every seed and both methods, and, with
    ``resample_seeds`` and S > 1, also S seed pairs with replacement (a two-level bootstrap: test sampling and
    training randomness both enter the interval; Davison and Hinkley, 1997, sec. 3.8); it recomputes D from the
    resampled confusion matrices (:func:`workbench.metrics.confusion_scores`). The interval holds the
    (1 - level)/2 and (1 + level)/2 quantiles of the resampled D. Identical predictions give D = 0 on every resample,
    so the CI is exactly [0, 0]. numpy's seeded Generator draws the resamples (scipy.stats.bootstrap resamples one
    level only).

    Args:
        y_true: gold class ids (n,).
        pred_a, pred_b: predicted class ids, (n,) or (S, n), the same shape.
        metric: one of ``workbench.metrics.SCORES`` (macro_f1, accuracy, f1_positive, macro_mae).
        n_resamples: bootstrap resamples, >= 100.
        seed: seeds the resampling.
        confidence_level: in (0, 1).
        resample_seeds: also resample the seed pairs (S > 1).
        num_labels: K; default 1 + the largest class id seen.

    Returns:
        ``{"difference", "low", "high", "confidence_level", "n_resamples", "n_examples", "n_seeds",
        "resample_seeds", "metric"}``; ValueError for bad shapes or values, naming the argument.
    """
    gold = np.asarray(y_true)
    if gold.ndim != 1 or gold.size == 0 or not np.issubdtype(gold.dtype, np.integer):
        raise ValueError(f"y_true: must be a non-empty 1-d array of integer class ids, got shape {gold.shape}")
    a, b = _prediction_matrix("pred_a", pred_a, gold.size), _prediction_matrix("pred_b", pred_b, gold.size)
    if a.shape != b.shape:
        raise ValueError(
            f"pred_b: must have pred_a's shape {a.shape} (seed s of a paired with seed s of b), got {b.shape}"
        )
    check_choice("metric", metric, SCORES)
    n_resamples = check_int("n_resamples", n_resamples, 100)
    check_int("seed", seed, 0)
    confidence_level = check_number(
        "confidence_level", confidence_level, 0, 1, low_inclusive=False, high_inclusive=False
    )
    check_bool("resample_seeds", resample_seeds)
    k = int(max(gold.max(), a.max(), b.max())) + 1 if num_labels is None else check_int("num_labels", num_labels, 2)
    if min(gold.min(), a.min(), b.min()) < 0 or max(gold.max(), a.max(), b.max()) >= k:
        raise ValueError(f"y_true, pred_a, pred_b: class ids must lie in [0, {k - 1}]")
    k = max(k, 2)
    seeds, n = a.shape
    cells = np.stack([gold * k + a, gold * k + b])  # (2, S, n): the confusion cell of every prediction
    offsets = np.arange(2 * seeds).reshape(2, seeds, 1) * k * k

    def differences(indices: np.ndarray) -> np.ndarray:
        """Per resample (rows of ``indices``) and seed: metric(a_s) - metric(b_s), shape (B, S)."""
        flat = (cells[:, :, indices] + offsets[..., None]).transpose(2, 0, 1, 3).reshape(len(indices), -1)
        counts = np.stack([np.bincount(row, minlength=2 * seeds * k * k) for row in flat])
        scores = confusion_scores(counts.reshape(len(indices), 2, seeds, k, k), metric)
        return scores[:, 0] - scores[:, 1]

    estimate = float(differences(np.arange(n)[None, :])[0].mean())
    generator = np.random.default_rng(seed)
    resampled = []
    for start in range(0, n_resamples, 100):  # 100 resamples at a time bound the memory
        size = min(100, n_resamples - start)
        per_seed = differences(generator.integers(0, n, (size, n)))
        if resample_seeds and seeds > 1:
            per_seed = np.take_along_axis(per_seed, generator.integers(0, seeds, (size, seeds)), axis=1)
        resampled.append(per_seed.mean(1))
    low, high = np.quantile(np.concatenate(resampled), [(1 - confidence_level) / 2, (1 + confidence_level) / 2])
    return {
        "metric": metric,
        "difference": estimate,
        "low": float(low),
        "high": float(high),
        "confidence_level": confidence_level,
        "n_resamples": n_resamples,
        "n_examples": int(n),
        "n_seeds": int(seeds),
        "resample_seeds": bool(resample_seeds and seeds > 1),
    }


def mcnemar_test(
    y_true: Sequence[int] | np.ndarray, pred_a: Sequence[int] | np.ndarray, pred_b: Sequence[int] | np.ndarray
) -> dict[str, Any]:
    """Exact McNemar test of paired accuracy (McNemar, 1947; the exact form: a two-sided binomial test of the
    discordant pairs, ``scipy.stats.binomtest``): n_ab examples only a gets right, n_ba only b; under H0 n_ab ~
    Binomial(n_ab + n_ba, 1/2). Returns ``{"a_only", "b_only", "p_value"}``; p = 1 without a discordant pair."""
    gold = np.asarray(y_true)
    a, b = _prediction_matrix("pred_a", pred_a, gold.size), _prediction_matrix("pred_b", pred_b, gold.size)
    if a.shape[0] != 1 or b.shape[0] != 1:
        raise ValueError(f"pred_a, pred_b: must be one fit each, shape (n,), got {a.shape} and {b.shape}")
    right_a, right_b = a[0] == gold, b[0] == gold
    a_only, b_only = int((right_a & ~right_b).sum()), int((right_b & ~right_a).sum())
    p_value = 1.0 if a_only + b_only == 0 else float(binomtest(a_only, a_only + b_only, 0.5).pvalue)
    return {"a_only": a_only, "b_only": b_only, "p_value": p_value}
