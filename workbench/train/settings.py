"""The notebooks' named loss settings: one table (:data:`LOSS_SETTINGS`, label -> ``LossSpec``), from which each
notebook offers its own labels, and one settings-to-specs function (:func:`settings_specs`), which adds a notebook's
``epsilon`` and ``cost_matrix`` where they belong and its ``extra_settings`` (losses of yours, docs/your_own_loss.md),
and :func:`check_settings_values`, which builds each (the values checked before any data is read);
:func:`extra_rows`: the results page's rows of the extra settings, with ``workbench.evidence.compare`` as every row.

A label means one loss with one set of parameters wherever it appears: "DSC" is eq. 12 of the Dice paper
(``preset="paper"``), "DSC reference" what its released code ran.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from workbench.checks import check_names
from workbench.config import LossSpec, extra_claims, extra_specs
from workbench.decisions import logit_adjustment_rule
from workbench.evidence import N_RESAMPLES, Claim, compare, identity
from workbench.losses import GRADIENT_FREE_VARIANTS, loss_defaults
from workbench.train.losses_from_specs import check_loss_spec, check_specs

LOSS_SETTINGS: dict[str, LossSpec] = {
    "CE": LossSpec("ce"),
    "WCE": LossSpec("wce"),  # alpha_t = lg((n - n_t)/n_t + K), counts from the training split
    "LS": LossSpec("ls"),
    "FL": LossSpec("focal", {"gamma": 2.0}),
    "DL": LossSpec("dice", {"gamma": 1.0}),
    "TL": LossSpec("tversky", {"alpha": 0.3, "beta": 0.7, "gamma": 1.0}),
    "DSC": LossSpec("dsc", {"preset": "paper"}),  # the Dice paper's eq. 12
    "DSC reference": LossSpec("dsc", {"preset": "reference"}),  # what the released scripts ran
    "PCL reference": LossSpec("pcl", {"variant": "reference"}),  # the released code
    "PCL paper": LossSpec("pcl", {"variant": "paper"}),  # eq. 4 with eq. 2-3 as printed
    "PCL weighted (global)": LossSpec("pcl", {"variant": "weighted", "counts": "global"}),
    "PCL weighted (batch)": LossSpec("pcl", {"variant": "weighted", "counts": "batch"}),
    "PCL expected_cost (global)": LossSpec("pcl", {"variant": "expected_cost", "counts": "global"}),
    "PCL expected_cost (batch)": LossSpec("pcl", {"variant": "expected_cost", "counts": "batch"}),
    "class-balanced CE": LossSpec("class_balanced", {"beta": 0.9999}),  # the fair baselines: Cui et al. 2019
    "logit-adjusted CE": LossSpec("logit_adjusted", {"tau": 1.0}),  # Menon et al. 2021
    "CORN (ordinal)": LossSpec("corn"),  # an ordinal model for ordered labels (Shi et al.; K - 1 outputs)
}
"""Every named loss setting of the notebooks: the Dice paper's losses (sec. 3) with the settings of notebook 01, the
released DSC, LS and every PCL form (``paper`` eq. 4, ``reference`` the released code, ``weighted`` and
``expected_cost`` the workbench's gradient-bearing forms), and the fair baselines."""
SHARED_EPSILON = ("ls", "pcl")
"""The losses that take a notebook's ``epsilon`` (label smoothing's and PCL's)."""


def offered(labels: Sequence[str]) -> dict[str, LossSpec]:
    """The :data:`LOSS_SETTINGS` entries of ``labels``, in their order: the settings a notebook offers."""
    return {label: LOSS_SETTINGS[label] for label in labels}


def settings_specs(
    settings: Sequence[str],
    choices: Mapping[str, LossSpec] | Sequence[str] = tuple(LOSS_SETTINGS),
    *,
    parameter: str = "settings",
    required: Sequence[str] = (),
    epsilon: float | None = None,
    cost_matrix: Sequence[Sequence[float]] | None = None,
    extra_settings: Mapping[str, Any] | None = None,
) -> dict[str, LossSpec]:
    """Label -> ``LossSpec`` of each of ``settings`` (the notebook's ``parameter``: labels of ``choices``, each once,
    every ``required`` one among them), then of each ``extra_settings`` entry.

    ``epsilon`` (when given) goes to every setting of the table whose loss takes it (:data:`SHARED_EPSILON`); a
    ``cost_matrix`` (K x K) replaces the severity of the PCL forms that take one (not ``reference``), as nominal
    labels need. An extra setting is built as written (``{loss: name, params: {...}}``), under a label that is no
    label of the table. Every spec names a registered loss and parameters its class takes (ValueError naming the
    parameter and the label otherwise), checked before anything is trained; the values are the loss's to check, when
    it is built (a notebook's checks cell builds each at once: :func:`check_settings_values`)."""
    chosen = check_names(parameter, settings, list(choices), required=required)
    specs = {}
    for label in chosen:
        spec = LOSS_SETTINGS[label]
        added = {"epsilon": epsilon} if epsilon is not None and spec.name in SHARED_EPSILON else {}
        if cost_matrix is not None and spec.name == "pcl" and spec.params.get("variant") != "reference":
            added["cost_matrix"] = [list(row) for row in cost_matrix]
        specs[label] = spec.replace(params={**spec.params, **added})
    extra = extra_specs(extra_settings)
    taken = sorted(set(extra) & set(LOSS_SETTINGS))
    if taken:
        raise ValueError(
            f"extra_settings: labels must differ from the notebook's named settings (workbench.train.LOSS_SETTINGS), "
            f"got {taken}"
        )
    return {**check_specs(specs, parameter), **check_specs(extra, "extra_settings")}


def check_settings_values(
    specs: Mapping[str, LossSpec], extra_settings: Mapping[str, Any] | None = None
) -> dict[str, LossSpec]:
    """``specs`` (:func:`settings_specs`' result) once each loss is built with stand-in label counts
    (``workbench.train.check_loss_spec``): every value checked by its loss's own rule before any data is read, as a
    notebook's checks cell does before any kernel starts. A table setting's values are the notebook's ``epsilon`` and
    ``cost_matrix`` (``epsilon: must be a number in [0, 1), got 1.5``); an extra setting's are its own, named under it
    (``extra_settings['F'].params.gamma: must be ...``)."""
    extra = extra_specs(extra_settings)
    for label, spec in specs.items():
        try:
            check_loss_spec(spec)
        except ValueError as error:
            if label not in extra:
                raise
            named = str(error).split(":")[0] in spec.params  # the loss's message begins with the parameter's name
            raise ValueError(f"extra_settings[{label!r}].params{'.' if named else ': '}{error}") from None
    return dict(specs)


NO_CLAIM = "extra_settings (no paper's claim)"
EXTRA_QUOTE = (
    "A setting of this run's extra_settings, compared with the notebook's baselines and the paper's method; the "
    "hypothesis tested is that it does better."
)


def _adds_constants(spec: LossSpec) -> bool:
    """True for a PCL form whose correction is a constant per loss cell (``workbench.losses.GRADIENT_FREE_VARIANTS``:
    eq. 4 as printed, the released code): its gradient is label smoothing's."""
    variant = {**loss_defaults(spec.name), **spec.params}.get("variant") if spec.name == "pcl" else None
    return variant in GRADIENT_FREE_VARIANTS


def trained_as(spec: LossSpec) -> tuple[str, dict[str, Any]]:
    """What ``spec`` trains as, decided from the spec alone: its loss's name and every parameter, the class's defaults
    filled in (``workbench.losses.loss_defaults``); a PCL form that adds constants to label smoothing trains as label
    smoothing at its epsilon and reduction."""
    parameters = {**loss_defaults(spec.name), **spec.params}
    if _adds_constants(spec):
        smoothing = {"epsilon": parameters["epsilon"], "reduction": parameters["reduction"]}
        return "ls", {**loss_defaults("ls"), **smoothing}
    return spec.name, parameters


def identical_by_construction(method: str, method_spec: LossSpec, baseline: str, baseline_spec: LossSpec) -> str:
    """The reason the setting ``method`` trains and predicts as ``baseline`` by construction, decided from their specs
    (:func:`trained_as`), or "" when it need not: the same loss with the same parameters (defaults included), or a
    PCL form that adds constants to label smoothing at the other's epsilon. Either way each step's gradient is the
    baseline's, so with the same seed, initialisation and batch order the fits are the same: a row comparing them is
    an identity (``workbench.evidence.identity``), not a test. The one rule for the notebooks' own settings and for
    the extra settings of yours (:func:`extra_rows`)."""
    names = {method_spec.name, baseline_spec.name}
    if len(names) > 1 and names != {"ls", "pcl"}:
        return ""  # two losses, and not PCL against LS (the one pair of losses that can train alike): not the same
    if trained_as(method_spec) != trained_as(baseline_spec):
        return ""
    if _adds_constants(method_spec) or _adds_constants(baseline_spec):
        return (
            f"{method} and {baseline} differ by a constant per loss cell (PCL as printed or as released adds it to "
            f"label smoothing, from label counts, not from the logits): the same gradient, so {method} trains and "
            f"predicts as {baseline}"
        )
    name, parameters = trained_as(method_spec)
    shown = json.dumps(parameters, ensure_ascii=False, sort_keys=True, default=str)
    return (
        f"{method} is {baseline}'s loss with the same parameters ({name} {shown}, defaults included): "
        f"its gradient is {baseline}'s at every step, so it trains and predicts as {baseline}"
    )


def extra_rows(
    extra_settings: Mapping[str, Any] | None,
    predictions: Mapping[tuple[str, int], np.ndarray],
    references: Sequence[str],
    *,
    y_true: Sequence[int] | np.ndarray,
    train_counts: Sequence[int],
    test: str,
    setting: str,
    metrics: Sequence[str],
    num_labels: int,
    n_resamples: int = N_RESAMPLES,
    specs: Mapping[str, LossSpec] | None = None,
    **compare_options: Any,
) -> list[dict[str, Any]]:
    """The results page's rows of each extra setting that ran: against each of ``references`` (labels: the task's
    baselines and the paper's method) that ran, on each of ``metrics``, from the test argmax ``predictions``
    ((label, seed) -> predictions, as a study keeps them; seed s paired with seed s) by
    ``workbench.evidence.compare``, the statistics of every other row: the same interval, trivial baseline (the
    prior of ``train_counts``, the training label counts), Holm family and non-test rules, one decision rule for both
    sides (argmax), no paper's difference (no paper printed one for a loss of yours); ``compare_options``: its further
    arguments (``seed``, ``note``). Under the setting's own ``claim`` when it gives one (expected: better), else under
    :data:`NO_CLAIM`. An extra setting that trains as a reference by construction (:func:`identical_by_construction`
    of its spec and the reference's in ``specs``, label -> the spec it trained with: ``settings_specs``' result) is
    one identity row against it, not a test, as the notebooks' own identities. A reference that equals another by
    construction is the study's to leave out of ``references`` (PCL as printed and as released train as LS: rows
    against them would repeat the LS rows)."""
    by_label: dict[str, dict[int, np.ndarray]] = {}
    for (label, seed), predicted in predictions.items():
        by_label.setdefault(label, {})[seed] = predicted
    extra, claims = extra_specs(extra_settings), extra_claims(extra_settings)
    shared = {
        "y_true": np.asarray(y_true, dtype=np.int64),
        "test": test,
        "num_labels": num_labels,
        "train_counts": list(train_counts),
        "decision_rule": "argmax",
        "paper_difference": None,
        "n_resamples": n_resamples,
        **compare_options,
    }
    rows = []
    for label in (label for label in extra if label in by_label):
        where = f"{label}: {extra[label].name} {json.dumps(extra[label].params, ensure_ascii=False)}"
        claim = Claim(**claims[label]) if claims[label] else Claim(NO_CLAIM, where, EXTRA_QUOTE)
        for reference in (reference for reference in references if reference in by_label):
            known = reference in (specs or {})
            reason = identical_by_construction(label, extra[label], reference, specs[reference]) if known else ""
            pair = {
                "setting": setting,
                "method": label,
                "baseline": reference,
                "method_predictions": by_label[label],
                "baseline_predictions": by_label[reference],
            }
            if reason:
                rows.append(identity(claim, **pair, reason=reason, test=test))
                continue
            rows += [compare(claim, **pair, metric=metric, **shared) for metric in metrics]
    return rows


def fair_baseline_predictions(
    argmax: Mapping[str, Mapping[int, np.ndarray]],
    names: Sequence[str],
    ce_fits: Mapping[int, Any] | None,
    label_counts: Sequence[int],
    adjusted: str,
) -> dict[str, dict[int, np.ndarray]]:
    """The fair baselines a claimed method is set against (a reviewer's comparison: the papers compare with CE or LS
    only), as test predictions per seed: each of ``names`` that ran (its ``argmax`` predictions, setting -> seed ->
    predictions), in the order of ``names``, then, when CE ran (``ce_fits``: seed -> ``Fit``), CE under the post-hoc
    logit adjustment of the training ``label_counts`` (``workbench.decisions.logit_adjustment_rule``: a rule fixed by
    the prior, nothing tuned), under the label ``adjusted``."""
    baselines = {name: dict(argmax[name]) for name in names if name in argmax}
    if ce_fits:
        rule = logit_adjustment_rule(label_counts)
        baselines[adjusted] = {seed: rule.predict(fit.test_probabilities) for seed, fit in ce_fits.items()}
    return baselines
