"""The rules of the results page: the verdicts and non-tests, the thresholds, the sentences the page prints
(:data:`VERDICT_RULE`, :data:`CI_RULE`), a paper's :class:`Claim`, and the direction a paper claims."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.checks import check_choice, check_text
from workbench.metrics import LOWER_IS_BETTER

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE = "holds", "does not hold", "inconclusive at this scale"
VERDICTS = (HOLDS, DOES_NOT_HOLD, INCONCLUSIVE)
IDENTICAL, NOT_TESTABLE = "identical by construction", "not testable at this scale"
NON_TESTS = (IDENTICAL, NOT_TESTABLE)
"""What a row is when it is not a test; never counted as a verdict."""
EXPECTATIONS = ("better", "worse")
"""What the paper says of the method against the baseline on the metric (macro-MAE: lower is better)."""
CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
POWER = 0.8
MIN_SEEDS = 2
MIN_TEST = 100
N_RESAMPLES = 4000
VERDICT_RULE = (
    f"A row is tested only when both sides ran on at least {MIN_SEEDS} seeds and {MIN_TEST} test examples and each "
    "side's own 95% interval beats the task's trivial baseline on the metric (the best of always predicting one "
    "class and guessing by the training label prior); a rate is tested only when the event it counts occurs. A "
    "method that equals its baseline by construction (decided from the setting, e.g. a loss whose gradient is the "
    "baseline's) is identical by construction. Neither is a verdict. The tested rows of the page form one family: "
    "Holm's step-down procedure adjusts their p-values. A comparison holds when its Holm-adjusted p < 0.05 and the "
    "difference lies on the side the paper claims (above 0 for a claimed gain, below 0 for a claimed loss, the other "
    "way round for macro-MAE, where lower is better), does not hold when the adjusted p < 0.05 and it lies on the "
    "other side, and is otherwise inconclusive at this scale. A rate holds when its exact test that the rate lies "
    "within the paper's range has an adjusted p < 0.05, does not hold when the test that it lies outside has, and is "
    "otherwise inconclusive."
)
CI_RULE = (
    "Difference: the mean over seeds of metric(method, seed s) - metric(baseline, seed s), the same test set for "
    "both. Its variance counts each component of the crossed design once (workbench.stats.paired_ci): the test "
    "examples (a bootstrap of the examples, the same for every seed and both sides), the interaction of examples and "
    "seeds (a seed changes which examples are right) and whole runs (a seed moves the whole score; the variance of "
    "the per-seed differences less the interaction). The 95% CI is the difference -/+ Student's t times its "
    "standard error, on Satterthwaite's degrees of freedom (df; infinite when no run variance is estimated); p is "
    "the two-sided t-test of no difference. A simulation of the crossed design (python -m benchmarks intervals, "
    "docs/benchmarks.md) shows its coverage. Detectable: the smallest true difference this design detects at 80% "
    "power in a two-sided test at 0.05 (per row, before Holm's adjustment), (t(0.975, df) + t(0.8, df)) x SE. "
    "Paper: the paper's own difference, from its table; when it prints several (models or data sets), the one "
    'nearest 0. "No paper-sized gain": the difference lies significantly below the paper\'s (the t-test of the '
    "paper's difference, Holm-adjusted over the rows with one, p < 0.05)."
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


def points(metric: str) -> float:
    """The factor from a score to the page's units: x 100 (macro-MAE: 1)."""
    return SCALE.get(metric, 100.0)


def orientation(expected: str, metric: str) -> float:
    """+1 when a positive difference is the direction the paper claims, else -1 (a claimed loss, or macro-MAE)."""
    check_choice("expected", expected, EXPECTATIONS)
    return 1.0 if (expected == "better") != (metric in LOWER_IS_BETTER) else -1.0


def verdict(p_adjusted: float, difference: float, expected: str, metric: str) -> str:
    """:data:`VERDICT_RULE` for a tested comparison: its family-adjusted p-value and the sign of its difference."""
    if p_adjusted >= ALPHA:
        return INCONCLUSIVE
    return HOLDS if orientation(expected, metric) * difference > 0 else DOES_NOT_HOLD


def split_label(provenance: Mapping[str, Any] | None, split: str = "test") -> str:
    """A split's name on the page from a ``load_splits`` provenance: the release file's stem (``test_public``) when the
    split is that file, else ``<split> (cut from <file>)`` or ``<split> (generated)``."""
    entry = ((provenance or {}).get("splits") or {}).get(split, {})
    if "cut" in entry:
        return f"{split} (cut from {entry['cut']['from']})"
    if "file" in entry:
        return str(entry["file"]).rsplit("/", 1)[-1].split(".", 1)[0]
    return f"{split} (generated)" if "generated" in (provenance or {}) else split
