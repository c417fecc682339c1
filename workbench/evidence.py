"""Claims and their evidence: one row per claim, its statistics and verdict, and the results page that prints them.

A claim is what a paper prints (:class:`Claim`: the paper, its table or equation, the sentence quoted verbatim). A
row tests it in one setting of this workbench against one baseline, on the paper's metric:

* :func:`compare`: per-seed test scores of a method and its baseline (mean ± sample std over seeds), the mean
  paired difference and its 95% CI (``workbench.stats.paired_bootstrap_ci``: seed s paired with seed s, test examples
  and seed pairs resampled), and the verdict of :data:`VERDICT_RULE`;
* :func:`rate`: a measured proportion (the true-negatives paper's Table 2 rates) with its exact (Clopper-Pearson) 95%
  interval against the range the paper prints.

A notebook of the ``results`` parameter set records its rows with :func:`record` in its metrics.json (``evidence``);
:func:`results_page` prints the run's rows, and nothing else, as ``results.md`` (``workbench.runs.results``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy.stats import binomtest

from workbench.checks import check_choice, check_int, check_text
from workbench.metrics import (
    LOWER_IS_BETTER,
    SCORES,
    compute_score,
    expected_calibration_error,
    reliability_bins,
)
from workbench.redaction import redact
from workbench.stats import describe, paired_bootstrap_ci

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive at this scale"
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)
EXPECTATIONS = ("better", "worse")
"""What the paper says of the method against the baseline on the metric (macro-MAE: lower is better)."""
CONFIDENCE = 0.95
VERDICT_RULE = (
    "A comparison holds when the 95% CI of the difference (method minus baseline) lies entirely on the side the "
    "paper claims (above 0 for a claimed gain; below 0 for a claimed loss; the other way round for macro-MAE, where "
    "lower is better); it does not hold when the CI lies entirely on the other side, or is exactly [0, 0] (the two "
    "made the same test predictions on every seed); otherwise (the CI contains 0) it is inconclusive at this scale. "
    "A rate holds when its exact 95% (Clopper-Pearson) interval lies within the range the paper prints, does not hold "
    "when the interval lies outside it, and is inconclusive when the two overlap."
)
CI_RULE = (
    "Difference: the mean over seeds of metric(method, seed s) - metric(baseline, seed s), the same test set for both. "
    "95% CI: percentile bootstrap (workbench.stats.paired_bootstrap_ci), each resample drawing the test examples with "
    "replacement (the same indices for every seed and both methods) and the seed pairs with replacement, so test "
    "sampling and training randomness both widen it. Each row's CI stands alone: there is no correction for the "
    "number of rows."
)
LABELS = {
    "macro_f1": "macro-F1",
    "accuracy": "accuracy",
    "f1_positive": "F1 of the minority (positive) class",
    "macro_mae": "macro-MAE",
}
SCALE = {"macro_mae": 1.0}  # the others are printed x 100, as the papers print them
ECE_BINS = 15


@dataclass(frozen=True)
class Claim:
    """A paper's claim: ``paper`` (an arXiv id or a venue), ``where`` (a table or an equation), ``quote`` (verbatim)."""

    paper: str
    where: str
    quote: str

    def __post_init__(self) -> None:
        for name in ("paper", "where", "quote"):
            check_text(name, getattr(self, name))


def verdict(low: float, high: float, expected: str, metric: str) -> str:
    """:data:`VERDICT_RULE` for a CI [low, high] of method minus baseline on ``metric``."""
    check_choice("expected", expected, EXPECTATIONS)
    if low == 0.0 and high == 0.0:
        return DOES_NOT_HOLD
    sign = 1.0 if (expected == "better") != (metric in LOWER_IS_BETTER) else -1.0
    low, high = sorted((sign * low, sign * high))
    if low > 0:
        return HOLDS
    if high < 0:
        return DOES_NOT_HOLD
    return INCONCLUSIVE


def split_label(provenance: Mapping[str, Any] | None, split: str = "test") -> str:
    """A split's name on the page from a ``load_splits`` provenance: the release file's stem (``test_public``) when the
    split is that file, else ``<split> (cut from <file>)`` or ``<split> (generated)``."""
    entry = ((provenance or {}).get("splits") or {}).get(split, {})
    if "cut" in entry:
        return f"{split} (cut from {entry['cut']['from']})"
    if "file" in entry:
        return str(entry["file"]).rsplit("/", 1)[-1].split(".", 1)[0]
    return f"{split} (generated)" if "generated" in (provenance or {}) else split


def _matrix(name: str, predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray) -> np.ndarray:
    if isinstance(predictions, Mapping):
        predictions = [predictions[seed] for seed in sorted(predictions)]
    matrix = np.asarray(predictions)
    if matrix.ndim != 2 or matrix.shape[0] == 0:
        raise ValueError(f"{name}: must be one test prediction array per seed, got shape {matrix.shape}")
    return matrix


def compare(
    claim: Claim,
    *,
    setting: str,
    method: str,
    baseline: str,
    metric: str,
    y_true: Sequence[int] | np.ndarray,
    method_predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    baseline_predictions: Mapping[int, np.ndarray] | Sequence[np.ndarray] | np.ndarray,
    test: str,
    num_labels: int,
    expected: str = "better",
    n_resamples: int = 2000,
    seed: int = 0,
    note: str = "",
) -> dict[str, Any]:
    """One comparison row: ``method`` against ``baseline`` on ``metric`` (one of ``workbench.metrics.SCORES``) over the
    seeds' test predictions (one array per seed, or a mapping seed -> array; seed s of the method is paired with seed
    s of the baseline, so both must list the same seeds in the same order). ``test`` names the split (its size is
    added). Returns a JSON-ready dict: the claim, the setting, per-side ``{"mean", "std", "n"}``, the paired
    ``difference`` with ``ci_low`` / ``ci_high``, the ``verdict`` and how it was computed."""
    check_choice("metric", metric, SCORES)
    check_choice("expected", expected, EXPECTATIONS)
    gold = np.asarray(y_true)
    a, b = _matrix("method_predictions", method_predictions), _matrix("baseline_predictions", baseline_predictions)
    if isinstance(method_predictions, Mapping) and isinstance(baseline_predictions, Mapping):
        if sorted(method_predictions) != sorted(baseline_predictions):
            raise ValueError(
                f"baseline_predictions: must hold the method's seeds {sorted(method_predictions)} to pair them, got "
                f"{sorted(baseline_predictions)}"
            )
    ci = paired_bootstrap_ci(gold, a, b, metric, n_resamples, seed, CONFIDENCE, num_labels=num_labels)
    sides = {
        side: describe(compute_score(gold, row, metric, num_labels) for row in matrix)
        for side, matrix in (("method_score", a), ("baseline_score", b))
    }
    return {
        "kind": "comparison",
        **asdict(claim),
        "setting": check_text("setting", setting),
        "method": check_text("method", method),
        "baseline": check_text("baseline", baseline),
        "metric": metric,
        "expected": expected,
        **sides,
        "difference": ci["difference"],
        "ci_low": ci["low"],
        "ci_high": ci["high"],
        "confidence_level": ci["confidence_level"],
        "n_resamples": ci["n_resamples"],
        "resample_seeds": ci["resample_seeds"],
        "n_seeds": ci["n_seeds"],
        "test": check_text("test", test),
        "n_test": ci["n_examples"],
        "verdict": verdict(ci["low"], ci["high"], expected, metric),
        "note": note,
    }


def rate(
    claim: Claim,
    *,
    setting: str,
    method: str,
    measure: str,
    successes: int,
    trials: int,
    paper_range: tuple[float, float],
    test: str,
    note: str = "",
) -> dict[str, Any]:
    """One rate row: ``successes`` / ``trials`` with its exact 95% interval (``scipy.stats.binomtest``'s
    Clopper-Pearson ``proportion_ci``) against ``paper_range`` (low, high), proportions in [0, 1]."""
    trials = check_int("trials", trials, 1)
    successes = check_int("successes", successes, 0, trials)
    low, high = (float(value) for value in paper_range)
    if not 0 <= low <= high <= 1:
        raise ValueError(f"paper_range: must be (low, high) with 0 <= low <= high <= 1, got {paper_range!r}")
    interval = binomtest(successes, trials).proportion_ci(CONFIDENCE, method="exact")
    if low <= interval.low and interval.high <= high:
        outcome = HOLDS
    elif interval.high < low or interval.low > high:
        outcome = DOES_NOT_HOLD
    else:
        outcome = INCONCLUSIVE
    return {
        "kind": "rate",
        **asdict(claim),
        "setting": check_text("setting", setting),
        "method": check_text("method", method),
        "measure": check_text("measure", measure),
        "value": successes / trials,
        "successes": successes,
        "trials": trials,
        "ci_low": float(interval.low),
        "ci_high": float(interval.high),
        "confidence_level": CONFIDENCE,
        "paper_low": low,
        "paper_high": high,
        "test": check_text("test", test),
        "verdict": outcome,
        "note": note,
    }


def scale(**sections: Any) -> str:
    """The scale of a notebook's runs in one sentence, from its parameter sections as given (``model={...},
    data={...}, training={...}``): the page names encoder sizes and data caps from the run's own parameters."""
    if not sections:
        raise ValueError("sections: must name at least one parameter section, got none")
    shown = redact(sections)  # a section holding a secret (training.hub_token) shows its mark
    return "; ".join(f"{name} {json.dumps(value, ensure_ascii=False)}" for name, value in shown.items()) + "."


def record(
    title: str,
    scale: str,
    seeds: Sequence[int],
    rows: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any] | None,
    calibration: Sequence[Mapping[str, Any]] = (),
    comment: str = "",
) -> dict[str, Any]:
    """A notebook's ``evidence`` entry for metrics.json: ``title`` (the paper), ``scale`` (encoder sizes and data caps,
    one sentence, :func:`scale`), ``seeds``, the ``data`` provenance of its splits (``load_splits``), the claim
    ``rows``, the ``calibration`` rows of :func:`calibration` (ECE per setting) and a ``comment`` the page prints
    under the scale (what the setting stands for)."""
    return {
        "comment": comment,
        "title": check_text("title", title),
        "scale": check_text("scale", scale),
        "seeds": list(seeds),
        "data": dict(data or {}),
        "claims": [dict(row) for row in rows],
        "calibration": [dict(row) for row in calibration],
    }


# ------------------------------------------------------------------------------------------------ the results page


def number(value: float, metric: str) -> str:
    """A score as the page prints it: x 100 with 2 decimals (macro-MAE: 3 decimals, unscaled)."""
    return f"{value:.3f}" if metric in SCALE else f"{100 * value:.2f}"


def statistic(stats: Mapping[str, Any], metric: str) -> str:
    """``{"mean", "std", "n"}`` as "mean ± std" in the page's units (the mean alone for one seed)."""
    text = number(stats["mean"], metric)
    return text if stats.get("std") is None else f"{text} ± {number(stats['std'], metric)}"


def interval(row: Mapping[str, Any]) -> str:
    """A comparison's difference and CI, "+1.23 [+0.40, +2.05]", or a rate's value and interval in %."""
    if row["kind"] == "rate":
        return f"{100 * row['value']:.2f}% [{100 * row['ci_low']:.2f}%, {100 * row['ci_high']:.2f}%]"
    metric = row["metric"]
    scale = SCALE.get(metric, 100.0)
    digits = 3 if metric in SCALE else 2
    parts = [f"{scale * row[key]:+.{digits}f}" for key in ("difference", "ci_low", "ci_high")]
    return f"{parts[0]} [{parts[1]}, {parts[2]}]"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _data_sentence(data: Mapping[str, Any]) -> str:
    """The provenance of a notebook's splits in one sentence (every part from the record)."""
    if not data:
        return "Data: not recorded."
    parts = [f"Data: `{data.get('source', '?')}`"]
    if "data_root" in data:
        parts.append(" from the data root")
    if data.get("missing"):
        parts.append(", missing " + ", ".join(f"`{name}`" for name in data["missing"]))
    splits = []
    for name, entry in (data.get("splits") or {}).items():
        if "cut" in entry:
            origin = f"cut from `{entry['cut']['from']}` ({entry['cut']['method']}, seed {entry['cut']['seed']})"
        else:
            origin = f"`{entry['file']}`" if "file" in entry else "generated"
        first = f", the first {entry['first']:,}" if entry.get("first") else ""
        thinned = entry.get("downsampled")
        thinned = (
            f", positives down-sampled to {thinned['positive_share']:g} (seed {thinned['seed']})" if thinned else ""
        )
        splits.append(f"{name} {entry.get('examples', 0):,} ({origin}{first}{thinned})")
    return "".join(parts) + ("; " + "; ".join(splits) if splits else "") + "."


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [
        "| setting | method | baseline | metric | method: mean ± std | baseline: mean ± std "
        "| difference [95% CI] | test split | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        if row["kind"] == "rate":
            paper = f"paper: {100 * row['paper_low']:.1f}% to {100 * row['paper_high']:.1f}%"
            cells = (
                row["setting"],
                row["method"],
                paper,
                row["measure"],
                f"{row['successes']:,} of {row['trials']:,}",
                "",
                interval(row),
                row["test"],
                row["verdict"],
            )
        else:
            metric = row["metric"]
            cells = (
                row["setting"],
                row["method"],
                row["baseline"],
                f"{LABELS[metric]} (claimed: {row['expected']})",
                statistic(row["method_score"], metric),
                statistic(row["baseline_score"], metric),
                interval(row),
                f"{row['test']}, n = {row['n_test']:,}",
                row["verdict"],
            )
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return lines


def notebook_section(name: str, evidence: Mapping[str, Any]) -> str:
    """One notebook's part of the page: the paper, scale, data, then one table per claim (its quote above it)."""
    rows = evidence.get("claims") or []
    counts = {outcome: sum(row["verdict"] == outcome for row in rows) for outcome in VERDICTS}
    lines = [
        f"## {name}: {evidence['title']}",
        "",
        f"Scale: {evidence['scale']} Seeds: {len(evidence['seeds'])} ({', '.join(map(str, evidence['seeds']))}).",
        "",
        *([evidence["comment"], ""] if evidence.get("comment") else []),
        _data_sentence(evidence.get("data") or {}),
        "",
        f"{len(rows)} rows: " + ", ".join(f"{count} {outcome}" for outcome, count in counts.items()) + ".",
    ]
    claims: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        claims.setdefault((row["paper"], row["where"], row["quote"]), []).append(row)
    for (paper, where, quote), block in claims.items():
        lines += ["", f"### {paper}, {where}", "", f'> "{quote}"', "", *_table(block)]
        notes = [row["note"] for row in block if row.get("note")]
        lines += ["", *(f"- {note}" for note in dict.fromkeys(notes))] if notes else []
    if evidence.get("calibration"):
        lines += [
            "",
            f"Calibration (test): expected calibration error, {ECE_BINS} equal-width bins of the top-class "
            "probability, "
            "x 100, mean ± std over the seeds:",
            "",
            "| setting | ECE |",
            "|---|---|",
        ]
        lines += [f"| {_cell(row['setting'])} | {statistic(row['ece'], 'ece')} |" for row in evidence["calibration"]]
    if evidence.get("data"):
        shown = {key: value for key, value in evidence["data"].items() if key != "data_root"}  # a path of this machine
        provenance = json.dumps(shown, indent=1, ensure_ascii=False)
        lines += ["", f"Data provenance of {name} (`load_splits`):", "", "```json", provenance, "```"]
    return "\n".join(lines)


def results_page(header: Mapping[str, Any], sections: Mapping[str, Mapping[str, Any]]) -> str:
    """The results page of a run: ``header`` (``run_id``, ``command``, ``started``, ``finished``, ``machine``,
    ``params_set``) then each notebook's :func:`notebook_section`, with the verdict and CI rules."""
    machine = header.get("machine") or {}
    seeds = sorted({len(section["seeds"]) for section in sections.values()})
    lines = [
        "# Results: each paper's claim at this scale",
        "",
        f"Run `{header.get('run_id', '?')}` of the `{header.get('params_set', '?')}` parameter set: "
        f"`{header.get('command', '?')}`, started {header.get('started', '?')}, "
        f"finished {header.get('finished', '?')}.",
        "",
        "Machine: " + ", ".join(f"{key} {value}" for key, value in machine.items()) + ".",
        "",
        f"Seeds per setting: {', '.join(map(str, seeds)) or 'none'}. Every number below is printed from the run's "
        "metrics.json files (`python -m workbench results <run folder>`); scores are on the test split, x 100 "
        "(macro-MAE unscaled), mean ± sample std over the seeds.",
        "",
        f"**Verdicts.** {VERDICT_RULE}",
        "",
        f"**Statistics.** {CI_RULE}",
    ]
    if not sections:
        lines += ["", "No notebook of this run recorded claims (the `results` parameter set turns them on)."]
    for name, evidence in sections.items():
        lines += ["", notebook_section(name, evidence)]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------ calibration


def calibration(
    probabilities: Mapping[str, Sequence[np.ndarray]], labels: Sequence[int] | np.ndarray, n_bins: int = ECE_BINS
) -> tuple[list[dict[str, Any]], dict[str, dict[str, list[float]]]]:
    """Per setting (name -> one test probability matrix per seed): the expected calibration error over seeds
    (``{"setting", "ece": {"mean", "std", "n"}}`` rows) and the reliability bins of the seeds pooled (for a
    reliability diagram, ``workbench.viz.reliability_diagram``); ``workbench.metrics`` computes both."""
    gold = np.asarray(labels)
    rows, bins = [], {}
    for setting, matrices in probabilities.items():
        errors = [expected_calibration_error(matrix, gold, n_bins) for matrix in matrices]
        rows.append({"setting": setting, "ece": describe(errors)})
        pooled = reliability_bins(np.concatenate(list(matrices)), np.tile(gold, len(matrices)), n_bins)
        bins[setting] = {key: values.tolist() for key, values in pooled.items()}
    return rows, bins
