"""Checking a notebook's recorded ``evidence`` entry (:func:`check_record`): every key, type and finite number the
page prints, and every interval recomputed from the numbers it was made of."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from scipy.stats import binomtest

from workbench.evidence.rules import CONFIDENCE, EXPECTATIONS
from workbench.metrics import SCORES
from workbench.stats import interval as interval_of


def _get(mapping: Any, key: str, where: str) -> Any:
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{where}: must be a JSON object, got {type(mapping).__name__}")
    if key not in mapping:
        raise ValueError(f"{where}.{key}: missing")
    return mapping[key]


def _number(mapping: Any, key: str, where: str, low: float = -math.inf, high: float = math.inf) -> float:
    value = _get(mapping, key, where)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}.{key}: must be a finite number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{where}.{key}: must lie in [{low:g}, {high:g}], got {value!r}")
    return float(value)


def _count_of(mapping: Any, key: str, where: str, low: int = 0) -> int:
    value = _get(mapping, key, where)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{where}.{key}: must be an integer >= {low}, got {value!r}")
    return value


def _text_of(mapping: Any, key: str, where: str, allowed: Sequence[str] | None = None) -> str:
    value = _get(mapping, key, where)
    if not isinstance(value, str) or (allowed is not None and value not in allowed):
        wanted = f"one of {list(allowed)}" if allowed is not None else "a string"
        raise ValueError(f"{where}.{key}: must be {wanted}, got {value!r}")
    return value


def _close(recorded: float, recomputed: float) -> bool:
    return abs(recorded - recomputed) <= 1e-9 + 1e-6 * abs(recomputed)


def _check_side(row: Mapping[str, Any], side: str, where: str, seeds: int) -> None:
    stats = _get(row, side, where)
    for key in ("mean", "low", "high"):
        _number(stats, key, f"{where}.{side}")
    if _get(stats, "std", f"{where}.{side}") is not None:
        _number(stats, "std", f"{where}.{side}", 0)
    if _count_of(stats, "n", f"{where}.{side}", 1) != seeds:
        raise ValueError(f"{where}.{side}.n: must equal the notebook's {seeds} seeds, got {stats['n']}")


def _check_comparison(row: Mapping[str, Any], where: str, seeds: int) -> None:
    for key in ("baseline", "decision_rule", "test"):
        _text_of(row, key, where)
    _text_of(row, "metric", where, SCORES)
    _text_of(row, "expected", where, EXPECTATIONS)
    if _count_of(row, "n_seeds", where, 1) != seeds:
        raise ValueError(f"{where}.n_seeds: must equal the notebook's {seeds} seeds, got {row['n_seeds']}")
    _count_of(row, "n_test", where, 1)
    for side in ("method_score", "baseline_score"):
        _check_side(row, side, where, seeds)
    difference, se = _number(row, "difference", where), _number(row, "se", where, 0)
    df = _get(row, "df", where)
    df = math.inf if df is None else _number(row, "df", where, 1e-9)
    _number(row, "p_value", where, 0, 1)
    if _number(row, "confidence_level", where, 0, 1) != CONFIDENCE:
        raise ValueError(f"{where}.confidence_level: must be {CONFIDENCE}, got {row['confidence_level']}")
    low, high = interval_of(difference, se, df)
    for key, recomputed in (("ci_low", low), ("ci_high", high)):
        if not _close(_number(row, key, where), recomputed):
            raise ValueError(
                f"{where}.{key}: {row[key]!r} disagrees with difference, se and df (recomputed {recomputed!r})"
            )
    trivial = _get(row, "trivial", where)
    for key in ("score", "majority", "prior"):
        _number(trivial, key, f"{where}.trivial")
    _text_of(trivial, "rule", f"{where}.trivial")
    paper = _get(row, "paper_difference", where)
    if paper is not None:
        if not isinstance(paper, list) or not paper:
            raise ValueError(f"{where}.paper_difference: must be null or a list of numbers, got {paper!r}")
        for index, value in enumerate(paper):
            _number({f"paper_difference[{index}]": value}, f"paper_difference[{index}]", where)


def _check_rate(row: Mapping[str, Any], where: str) -> None:
    _text_of(row, "measure", where)
    _text_of(row, "test", where)
    if "event" in row:
        _text_of(row, "event", where)
    trials = _count_of(row, "trials", where, 1)
    successes = _count_of(row, "successes", where, 0)
    if successes > trials:
        raise ValueError(f"{where}.successes: must be at most trials ({trials}), got {successes}")
    paper_low, paper_high = _number(row, "paper_low", where, 0, 1), _number(row, "paper_high", where, 0, 1)
    if paper_low > paper_high:
        raise ValueError(f"{where}.paper_low: must be at most paper_high ({paper_high}), got {paper_low}")
    if not _close(_number(row, "value", where, 0, 1), successes / trials):
        raise ValueError(f"{where}.value: {row['value']!r} disagrees with successes / trials ({successes / trials!r})")
    exact = binomtest(successes, trials).proportion_ci(CONFIDENCE, method="exact")
    for key, recomputed in (("ci_low", float(exact.low)), ("ci_high", float(exact.high))):
        if not _close(_number(row, key, where, 0, 1), recomputed):
            raise ValueError(
                f"{where}.{key}: {row[key]!r} disagrees with successes and trials (recomputed {recomputed!r})"
            )


def check_record(evidence: Any) -> None:
    """Refuse a notebook's ``evidence`` entry the page cannot print truthfully: a missing key, a value of the wrong
    type, a number that is not finite, an unknown metric, a row whose seed count disagrees with the notebook's, an
    interval that its own difference, standard error and df (or successes and trials) do not give. ValueError
    naming the key (``claims[3].ci_high``)."""
    _text_of(evidence, "title", "evidence")
    _text_of(evidence, "scale", "evidence")
    seeds = _get(evidence, "seeds", "evidence")
    if not isinstance(seeds, list) or not all(isinstance(seed, int) and not isinstance(seed, bool) for seed in seeds):
        raise ValueError(f"evidence.seeds: must be a list of integers, got {seeds!r}")
    claims = _get(evidence, "claims", "evidence")
    if not isinstance(claims, list):
        raise ValueError(f"evidence.claims: must be a list of rows, got {type(claims).__name__}")
    for index, row in enumerate(claims):
        where = f"evidence.claims[{index}]"
        kind = _text_of(row, "kind", where, ("comparison", "identity", "rate"))
        for key in ("paper", "where", "quote", "setting", "method"):
            _text_of(row, key, where)
        if kind == "comparison":
            _check_comparison(row, where, len(seeds))
        elif kind == "rate":
            _check_rate(row, where)
        else:
            for key in ("baseline", "reason", "test"):
                _text_of(row, key, where)
            if _count_of(row, "n_seeds", where, 1) != len(seeds):
                raise ValueError(f"{where}.n_seeds: must equal the notebook's {len(seeds)} seeds, got {row['n_seeds']}")
            _count_of(row, "identical_seeds", where, 0)
            _count_of(row, "n_test", where, 1)
    for key in ("fixed", "chosen"):
        if not isinstance(evidence.get(key) or {}, Mapping):
            raise ValueError(f"evidence.{key}: must be a mapping of names, got {evidence[key]!r}")
    for name in evidence.get("chosen") or {}:
        _text_of(evidence["chosen"], name, "evidence.chosen")
    for index, row in enumerate(evidence.get("calibration") or []):
        where = f"evidence.calibration[{index}]"
        _text_of(row, "setting", where)
        _number(_get(row, "ece", where), "mean", f"{where}.ece", 0, 1)
