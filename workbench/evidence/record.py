"""A notebook's ``evidence`` entry for its metrics.json (:func:`record`), with the scale sentence and table lines
(:func:`scale`, :func:`size`) and the calibration rows (:func:`calibration`)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from workbench.checks import check_int, check_text
from workbench.evidence.rules import ECE_BINS
from workbench.metrics import expected_calibration_error, reliability_bins
from workbench.redaction import redact
from workbench.stats import describe


def scale(**sections: Any) -> str:
    """The scale of a notebook's runs in one sentence, from its parameter sections as given (``model={...},
    data={...}, training={...}``): the page names encoder sizes and data caps from the run's own parameters."""
    if not sections:
        raise ValueError("sections: must name at least one parameter section, got none")
    shown = redact(sections)  # a section holding a secret (training.hub_token) shows its mark
    return "; ".join(f"{name} {json.dumps(value, ensure_ascii=False)}" for name, value in shown.items()) + "."


def size(model: str, parameters: int | None, training_examples: int, steps: int | None) -> dict[str, Any]:
    """One line of the page's scale table: the ``model`` (its name on the page), its trained ``parameters``, the
    ``training_examples`` and the optimizer ``steps`` of one fit (None where the fit did not report them)."""
    return {
        "model": check_text("model", model),
        "parameters": None if parameters is None else check_int("parameters", parameters, 1),
        "training_examples": check_int("training_examples", training_examples, 0),
        "steps": None if steps is None else check_int("steps", steps, 0),
    }


def fit_size(model: str, fit: Any, training_examples: int) -> dict[str, Any]:
    """:func:`size` of one fit (``workbench.train.Fit``: its ``num_parameters`` and ``steps``, None if absent)."""
    return size(model, getattr(fit, "num_parameters", None), training_examples, getattr(fit, "steps", None))


def run_size(model: str, metrics: Mapping[str, Any], training_examples: int) -> dict[str, Any]:
    """:func:`size` of a trainer run from its metrics.json: ``num_parameters`` (its ``total``) and ``train_steps``."""
    parameters = metrics.get("num_parameters")
    parameters = parameters.get("total") if isinstance(parameters, Mapping) else parameters
    return size(model, parameters, training_examples, metrics.get("train_steps"))


def record(
    title: str,
    scale: str,
    seeds: Sequence[int],
    rows: Sequence[Mapping[str, Any]],
    data: Mapping[str, Any] | None,
    calibration: Sequence[Mapping[str, Any]] = (),
    comment: str = "",
    *,
    sizes: Sequence[Mapping[str, Any]] = (),
    paper_scale: Mapping[str, str] | None = None,
    fixed: Mapping[str, Any] | None = None,
    chosen: Mapping[str, str] | None = None,
    reliability: Mapping[str, Mapping[str, Sequence[float]]] | None = None,
    see_also: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A notebook's ``evidence`` entry for metrics.json: ``title`` (the paper), ``scale`` (encoder sizes and data caps,
    one sentence, :func:`scale`), ``seeds``, the ``data`` provenance of its splits (``load_splits``), the claim
    ``rows``, the ``calibration`` rows of :func:`calibration` (ECE per setting) with the ``reliability`` bins of each
    setting, a ``comment`` the page prints under the scale (what the setting stands for); ``sizes`` (:func:`size`
    lines of the scale table) beside the ``paper_scale`` (``{"model", "parameters", "training examples"}`` as the
    paper states them); ``fixed``: the hyperparameters the notebook fixes instead of choosing them on validation
    (name -> value, ``workbench.train.fixed_hyperparameters``); ``chosen``: what it chooses on validation, the same
    way for every side (name -> how); ``see_also``: another notebook's folder -> the rows of it this notebook would
    repeat."""
    return {
        "comment": comment,
        "title": check_text("title", title),
        "scale": check_text("scale", scale),
        "seeds": list(seeds),
        "data": dict(data or {}),
        "claims": [dict(row) for row in rows],
        "calibration": [dict(row) for row in calibration],
        "reliability": {setting: _finite_bins(bins) for setting, bins in (reliability or {}).items()},
        "sizes": [dict(line) for line in sizes],
        "paper_scale": dict(paper_scale or {}),
        "fixed": dict(fixed or {}),
        "chosen": {name: check_text(f"chosen[{name!r}]", how) for name, how in dict(chosen or {}).items()},
        "see_also": dict(see_also or {}),
    }


def _finite_bins(bins: Mapping[str, Sequence[float]]) -> dict[str, list[float | None]]:
    """Reliability bins as JSON takes them: an empty bin's NaN mean becomes None."""
    return {key: [None if math.isnan(value) else float(value) for value in values] for key, values in bins.items()}


def calibration(
    probabilities: Mapping[str, Sequence[np.ndarray]], labels: Sequence[int] | np.ndarray, n_bins: int = ECE_BINS
) -> tuple[list[dict[str, Any]], dict[str, dict[str, list[float]]]]:
    """Per setting (name -> one test probability matrix per seed): the expected calibration error over seeds
    (``{"setting", "ece": {"mean", "std", "n"}}`` rows) and the reliability bins of the seeds pooled (for a
    reliability diagram, ``workbench.viz.reliability_diagram``, and the results page); ``workbench.metrics``
    computes both."""
    gold = np.asarray(labels)
    rows, bins = [], {}
    for setting, matrices in probabilities.items():
        errors = [expected_calibration_error(matrix, gold, n_bins) for matrix in matrices]
        rows.append({"setting": setting, "ece": describe(errors)})
        pooled = reliability_bins(np.concatenate(list(matrices)), np.tile(gold, len(matrices)), n_bins)
        bins[setting] = {key: values.tolist() for key, values in pooled.items()}
    return rows, bins
