"""Claims and their evidence: one row per claim and setting, the rules that judge it, and its assessment on a page.

A claim is what a paper prints (:class:`Claim`: the paper, its table or equation, the sentence quoted verbatim). A
row tests it in one setting of this workbench against one baseline, on the paper's metric:

* :func:`compare`: per-seed test scores of a method and its baseline under one decision rule for both (argmax, or a
  rule tuned on validation for both), the mean paired difference with its 95% CI and p-value
  (``workbench.stats.paired_ci``: test examples, seeds and their interaction each counted once), each side's own
  interval against the task's trivial baseline (:func:`trivial_baseline`) and the paper's own difference;
* :func:`identity`: a method that is the baseline by construction (a loss whose gradient is the baseline's), decided
  from the setting, with a one-line reason: no test;
* :func:`rate`: a measured proportion (the true-negatives paper's Table 2 rates) with its exact (Clopper-Pearson) 95%
  interval against the range the paper prints.

:func:`assess` judges the rows of a page together (:data:`VERDICT_RULE`): rows that cannot be tested are set apart
with their reason (:data:`NON_TESTS`), the tested rows form one family whose p-values Holm's procedure adjusts, and
each verdict is read from its adjusted p-value. A notebook of the ``results`` parameter set records its rows with
:func:`record` in its metrics.json (``evidence``); ``workbench.runs.results`` checks and prints them.

One module a concern: :mod:`~workbench.evidence.rules` (the verdicts, thresholds and printed rules, :class:`Claim`),
:mod:`~workbench.evidence.rows` (the rows), :mod:`~workbench.evidence.assessment` (judging a page's rows),
:mod:`~workbench.evidence.checking` (refusing a record the page cannot print truthfully) and
:mod:`~workbench.evidence.record` (the metrics.json entry, scale and calibration). Every public name is importable
from ``workbench.evidence``.
"""

from workbench.evidence.assessment import assess, failing_sides, rate_p_value, why_not_tested
from workbench.evidence.checking import check_record
from workbench.evidence.record import calibration, fit_size, record, run_size, scale, size
from workbench.evidence.rows import compare, identity, rate, trivial_baseline
from workbench.evidence.rules import (
    ALPHA,
    CI_RULE,
    CONFIDENCE,
    DOES_NOT_HOLD,
    ECE_BINS,
    EXPECTATIONS,
    HOLDS,
    IDENTICAL,
    INCONCLUSIVE,
    LABELS,
    MIN_SEEDS,
    MIN_TEST,
    N_RESAMPLES,
    NON_TESTS,
    NOT_TESTABLE,
    POWER,
    SCALE,
    VERDICT_RULE,
    VERDICTS,
    Claim,
    orientation,
    points,
    split_label,
    verdict,
)
from workbench.stats import detectable_difference, two_sided_p
from workbench.stats import interval as interval_of

__all__ = [
    "ALPHA",
    "CI_RULE",
    "CONFIDENCE",
    "DOES_NOT_HOLD",
    "ECE_BINS",
    "EXPECTATIONS",
    "HOLDS",
    "IDENTICAL",
    "INCONCLUSIVE",
    "LABELS",
    "MIN_SEEDS",
    "MIN_TEST",
    "N_RESAMPLES",
    "NON_TESTS",
    "NOT_TESTABLE",
    "POWER",
    "SCALE",
    "VERDICTS",
    "VERDICT_RULE",
    "Claim",
    "assess",
    "calibration",
    "check_record",
    "compare",
    "detectable_difference",
    "failing_sides",
    "fit_size",
    "identity",
    "interval_of",
    "orientation",
    "points",
    "rate",
    "rate_p_value",
    "record",
    "run_size",
    "scale",
    "size",
    "split_label",
    "trivial_baseline",
    "two_sided_p",
    "verdict",
    "why_not_tested",
]
