"""Mean, spread and count over repeated runs, the "mean ± std" format, and the paired statistics of a comparison.

One helper for every study table and for the run report: the spread is the sample
standard deviation (ddof = 1), NaN for a single run, and a formatted cell shows the
std only when there is more than one run.

Paired comparisons of two methods on one test set (the results page): :func:`paired_ci`, the CI and p-value of a
score difference over test examples and training seeds (a crossed design: each variance component counted once),
:func:`interval`, :func:`two_sided_p` and :func:`detectable_difference` (recomputed from its printed numbers),
:func:`holm` (the family's adjusted p-values) and :func:`mcnemar_test`, the exact McNemar test of paired accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest
from scipy.stats import t as student_t

from workbench.checks import check_choice, check_int, check_number
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


def _label_array(name: str, values: Any) -> np.ndarray:
    """``values`` as a non-empty 1-d int64 array of class ids; ValueError naming ``name`` otherwise."""
    array = np.asarray(values)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name}: must be a non-empty 1-d array of integer class ids, got shape {array.shape}")
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name}: must hold integer class ids, got dtype {array.dtype}")
    return array.astype(np.int64)


def _prediction_matrix(name: str, predictions: Any, n: int) -> np.ndarray:
    """``predictions`` as an int64 (seeds, n) matrix: one row per seed (a 1-d array is one seed)."""
    matrix = np.asarray(predictions)
    matrix = matrix[None, :] if matrix.ndim == 1 else matrix
    if matrix.ndim != 2 or matrix.shape[1] != n or matrix.shape[0] == 0:
        raise ValueError(f"{name}: must have shape (n,) or (seeds, n) with n = len(y_true) = {n}, got {matrix.shape}")
    if not np.issubdtype(matrix.dtype, np.integer):
        raise ValueError(f"{name}: must hold integer class ids, got dtype {matrix.dtype}")
    return matrix.astype(np.int64)


def _paired_inputs(
    y_true: Any, pred_a: Any, pred_b: Any, num_labels: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The gold ids (n,), both prediction matrices (S, n) and K, checked once for every paired statistic."""
    gold = _label_array("y_true", y_true)
    a, b = _prediction_matrix("pred_a", pred_a, gold.size), _prediction_matrix("pred_b", pred_b, gold.size)
    if a.shape != b.shape:
        raise ValueError(
            f"pred_b: must have pred_a's shape {a.shape} (seed s of a paired with seed s of b), got {b.shape}"
        )
    largest = int(max(gold.max(), a.max(), b.max()))
    k = largest + 1 if num_labels is None else check_int("num_labels", num_labels, 2)
    if min(gold.min(), a.min(), b.min()) < 0 or largest >= k:
        raise ValueError(f"y_true, pred_a, pred_b: class ids must lie in [0, {k - 1}]")
    return gold, a, b, max(k, 2)


def _resampled_scores(
    gold: np.ndarray, a: np.ndarray, b: np.ndarray, k: int, metric: str, n_resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """metric of each side and seed on the test set itself (2, S) and on ``n_resamples`` bootstrap resamples of its
    examples (B, 2, S), the same resample for every seed and both sides. A resample's confusion counts are how often
    it drew each example times the one-hot confusion cell of every prediction."""
    seeds, n = a.shape
    cells = np.stack([gold * k + a, gold * k + b]) + np.arange(2 * seeds).reshape(2, seeds, 1) * k * k
    one_hot = np.zeros((n, 2 * seeds * k * k))
    for column in cells.reshape(2 * seeds, n):  # each side and seed fills its own block of K x K columns
        one_hot[np.arange(n), column] = 1.0

    def scores(counts: np.ndarray) -> np.ndarray:
        return confusion_scores((counts @ one_hot).reshape(len(counts), 2, seeds, k, k), metric)

    generator = np.random.default_rng(seed)
    chunks = []
    for start in range(0, n_resamples, 500):  # 500 resamples at a time bound the memory
        size = min(500, n_resamples - start)
        draws = generator.integers(0, n, (size, n)) + n * np.arange(size)[:, None]  # n examples with replacement
        chunks.append(scores(np.bincount(draws.ravel(), minlength=size * n).reshape(size, n).astype(np.float64)))
    return scores(np.ones((1, n)))[0], np.concatenate(chunks)


def _crossed_interval(per_seed: np.ndarray, resampled: np.ndarray, confidence_level: float) -> dict[str, Any]:
    """:func:`paired_ci`'s estimate, variance components, degrees of freedom, interval and p-value of a per-seed
    statistic (S,) given its values on bootstrap resamples of the test examples (B, S).

    The estimate is D = (1/S) sum_s d_s. Its variance has three components (a two-way crossed random-effects model;
    Searle, Casella and McCulloch, 1992, ch. 4; Owen, 2007, "The pigeonhole bootstrap"):

    * test examples, shared by every seed: V_ex, the variance of D over bootstrap resamples of the test examples
      (the same examples for every seed and both sides); it holds the interaction divided by S;
    * the interaction (a seed changes which examples are right): c, the part of one seed's test-sampling variance
      that is not shared across seeds, c = S/(S - 1) (mean_s Var*(d_s) - V_ex);
    * whole runs (a seed moves every example's score): sigma_run^2 = max(0, MS - c), MS the sample variance of the
      d_s over seeds (ddof = 1), whose expectation is sigma_run^2 + c.

    Var(D) = V_ex + sigma_run^2 / S counts each component once (a bootstrap of both examples and seeds counts the
    interaction twice, and a percentile interval over S = 5 seeds ignores that their variance is estimated). The
    interval is D -/+ t * sqrt(Var(D)), t Student's quantile with Satterthwaite's (1946) degrees of freedom for the
    one estimated term that varies with few seeds, MS / S on S - 1 degrees of freedom: df = (S - 1) (Var(D) /
    (MS / S))^2; infinite when sigma_run^2 is estimated as 0 (then Var(D) = V_ex, estimated from n examples). The
    two-sided p-value of H0: "no difference" is that of D / sqrt(Var(D)) on the same t."""
    seeds = per_seed.size
    estimate = float(per_seed.mean())
    examples = float(resampled.mean(1).var(ddof=1))
    interaction = runs = mean_square = 0.0
    if seeds > 1:
        interaction = max(0.0, (float(resampled.var(0, ddof=1).mean()) - examples) * seeds / (seeds - 1))
        mean_square = float(per_seed.var(ddof=1))
        runs = max(0.0, mean_square - interaction)
    variance = examples + runs / seeds
    df = math.inf if runs == 0.0 else (seeds - 1) * (variance / (mean_square / seeds)) ** 2
    se = math.sqrt(variance)
    low, high = interval(estimate, se, df, confidence_level)
    return {
        "estimate": estimate,
        "se": se,
        "df": df,
        "low": low,
        "high": high,
        "p_value": two_sided_p(estimate, se, df),
        "components": {"examples": examples, "interaction": interaction, "runs": runs},
    }


def paired_ci(
    y_true: Sequence[int] | np.ndarray,
    pred_a: Sequence[int] | np.ndarray,
    pred_b: Sequence[int] | np.ndarray,
    metric: str = "macro_f1",
    n_resamples: int = 4000,
    seed: int = 0,
    confidence_level: float = 0.95,
    num_labels: int | None = None,
) -> dict[str, Any]:
    """The CI and p-value of a score difference metric(a) - metric(b) in a crossed design: every training seed is
    scored on the same test examples, so examples, seeds and their interaction each add variance.

    ``pred_a`` and ``pred_b`` are test predictions, (n,) for one fit each or (S, n) for S seeds, row s of a paired
    with row s of b (the same seed). The estimate is D = (1/S) sum_s d_s, d_s = metric(a_s) - metric(b_s); its
    variance counts the test examples, their interaction with the seeds and whole runs once each, and its interval is
    Student's t on Satterthwaite's degrees of freedom (:func:`_crossed_interval` gives the estimator and its
    sources). One seed (S = 1) leaves the run variance unestimated (``run_variance_estimated`` False): the interval
    holds test sampling only. Identical predictions give D = 0 with Var(D) = 0: the interval is exactly [0, 0] and
    p = 1. ``scores`` holds the same interval for each side's own score (mean over seeds), which the results page
    sets against a trivial baseline. ``python -m benchmarks intervals`` shows by simulation that the interval covers
    at its nominal level whether seeds only reshuffle which examples are right or whole runs differ
    (docs/benchmarks.md).

    Args:
        y_true: gold class ids (n,).
        pred_a, pred_b: predicted class ids, (n,) or (S, n), the same shape.
        metric: one of ``workbench.metrics.SCORES`` (macro_f1, accuracy, f1_positive, macro_mae).
        n_resamples: bootstrap resamples of the test examples, >= 100; the Monte Carlo error of the interval's
            half-width is about 1/sqrt(2 n_resamples) of it (1.1% at the default 4,000).
        seed: seeds the resampling.
        confidence_level: in (0, 1).
        num_labels: K; default 1 + the largest class id seen.

    Returns:
        ``{"metric", "difference", "se", "df", "low", "high", "p_value", "confidence_level", "n_resamples",
        "n_examples", "n_seeds", "run_variance_estimated", "components": {"examples", "interaction", "runs"},
        "scores": {"a": {...}, "b": {...}}}`` (``components``: V_ex, c and sigma_run^2; each side's ``{"mean",
        "se", "df", "low", "high"}``); ValueError for bad shapes or values, naming the argument.
    """
    gold, a, b, k = _paired_inputs(y_true, pred_a, pred_b, num_labels)
    n_resamples, confidence_level = _resampling_options(metric, n_resamples, seed, confidence_level)
    seeds, n = a.shape
    point, resampled = _resampled_scores(gold, a, b, k, metric, n_resamples, seed)
    difference = _crossed_interval(point[0] - point[1], resampled[:, 0] - resampled[:, 1], confidence_level)
    return {
        "metric": metric,
        "difference": difference["estimate"],
        **{key: difference[key] for key in ("se", "df", "low", "high", "p_value")},
        "confidence_level": confidence_level,
        "n_resamples": n_resamples,
        "n_examples": int(n),
        "n_seeds": int(seeds),
        "run_variance_estimated": seeds > 1,
        "components": difference["components"],
        "scores": _side_intervals(point, resampled, confidence_level),
    }


def _resampling_options(metric: str, n_resamples: int, seed: int, confidence_level: float) -> tuple[int, float]:
    """:func:`paired_ci`'s ``metric`` (one of ``workbench.metrics.SCORES``), ``n_resamples`` (>= 100), ``seed``
    (>= 0) and ``confidence_level`` (in (0, 1)) checked: ``(n_resamples, confidence_level)``."""
    check_choice("metric", metric, SCORES)
    n_resamples = check_int("n_resamples", n_resamples, 100)
    check_int("seed", seed, 0)
    confidence_level = check_number(
        "confidence_level", confidence_level, 0, 1, low_inclusive=False, high_inclusive=False
    )
    return n_resamples, confidence_level


def _side_intervals(point: np.ndarray, resampled: np.ndarray, confidence_level: float) -> dict[str, dict[str, Any]]:
    """Each side's own score (``a`` and ``b``: the mean over seeds) with its crossed-design interval
    (:func:`_crossed_interval`): ``{"mean", "se", "df", "low", "high"}``."""
    sides = {}
    for index, side in enumerate(("a", "b")):
        own = _crossed_interval(point[index], resampled[:, index], confidence_level)
        sides[side] = {"mean": own["estimate"], **{key: own[key] for key in ("se", "df", "low", "high")}}
    return sides


def two_sided_p(estimate: float, se: float, df: float) -> float:
    """The two-sided p-value of ``estimate`` / ``se`` on Student's t with ``df`` degrees of freedom (a normal for
    infinite df); 1 when both are 0 (identical predictions), 0 for a non-zero estimate with no spread."""
    if se == 0.0:
        return 1.0 if estimate == 0.0 else 0.0
    return float(min(1.0, 2 * student_t.sf(abs(estimate) / se, df)))


def interval(estimate: float, se: float, df: float, confidence_level: float = 0.95) -> tuple[float, float]:
    """``estimate`` -/+ Student's t quantile (``df``; infinite: normal) times ``se``: :func:`paired_ci`'s interval,
    recomputed from its printed numbers (``python -m workbench results``)."""
    quantile = float(student_t.ppf((1 + confidence_level) / 2, df))
    return estimate - quantile * se, estimate + quantile * se


def detectable_difference(se: float, df: float, confidence_level: float = 0.95, power: float = 0.8) -> float:
    """The smallest true difference a two-sided test at 1 - ``confidence_level`` detects with probability ``power``,
    given the standard error ``se`` of the estimate: (t_(1 - alpha/2) + t_power) se (the usual normal-theory
    minimum detectable effect; Bloom, 1995)."""
    return float((student_t.ppf((1 + confidence_level) / 2, df) + student_t.ppf(power, df)) * se)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's (1979) step-down adjusted p-values of a family: sort ascending, multiply the i-th smallest (i from 0)
    by m - i, carry the running maximum, cap at 1. Rejecting where the adjusted p < alpha keeps the chance of any
    false rejection in the family at most alpha. ValueError for a p outside [0, 1] or not a number."""
    values = np.asarray(p_values, dtype=np.float64)
    if values.ndim != 1 or np.any(~np.isfinite(values)) or np.any((values < 0) | (values > 1)):
        raise ValueError(f"p_values: must be numbers in [0, 1], got {list(p_values)!r}")
    order = np.argsort(values, kind="stable")
    m = values.size
    stepped = np.maximum.accumulate(values[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted.tolist()


def mcnemar_test(
    y_true: Sequence[int] | np.ndarray, pred_a: Sequence[int] | np.ndarray, pred_b: Sequence[int] | np.ndarray
) -> dict[str, Any]:
    """Exact McNemar test of paired accuracy (McNemar, 1947; the exact form: a two-sided binomial test of the
    discordant pairs, ``scipy.stats.binomtest``): n_ab examples only a gets right, n_ba only b; under H0 n_ab ~
    Binomial(n_ab + n_ba, 1/2). Returns ``{"a_only", "b_only", "p_value"}``; p = 1 without a discordant pair.
    Empty or non-integer labels or predictions are a ValueError naming the argument, as in :func:`paired_ci`."""
    gold, a, b, _ = _paired_inputs(y_true, pred_a, pred_b, None)
    if a.shape[0] != 1 or b.shape[0] != 1:
        raise ValueError(f"pred_a, pred_b: must be one fit each, shape (n,), got {a.shape} and {b.shape}")
    right_a, right_b = a[0] == gold, b[0] == gold
    a_only, b_only = int((right_a & ~right_b).sum()), int((right_b & ~right_a).sum())
    p_value = 1.0 if a_only + b_only == 0 else float(binomtest(a_only, a_only + b_only, 0.5).pvalue)
    return {"a_only": a_only, "b_only": b_only, "p_value": p_value}
