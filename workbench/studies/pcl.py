"""The PCL ablation (notebook 02): label smoothing against every form of the Propensity-Corrected Loss.

"Towards No.1 in CLUE Semantic Matching Challenge: Pre-trained Language Model Erlangshen with Propensity-Corrected
Loss" (arXiv 2208.02959), sec. 3.2, eq. 2-4: PCL+ = eps n_0 / (n_1 + n_2), PCL- = eps (n_0 + n_2) / n_1 and
L = LS - PCL- (condition 1), LS + PCL+ (condition 2), LS (condition 3); released code: Fengshenbang-LM
``fengshen/examples/clue_sim/loss.py``. Table 4, encoders x {LS, PCL} over seeds: :func:`run_encoder_ablation`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset, DatasetDict

from workbench.checks import check_int, check_names, check_seeds
from workbench.config import LossSpec
from workbench.data import label_names
from workbench.decisions import logit_adjustment_rule, tuned_predictions
from workbench.evidence import Claim, calibration, compare
from workbench.losses import QBQTC_LABEL_COUNTS
from workbench.metrics import classification_report
from workbench.stats import formatted, row_statistics, summarize
from workbench.train import Fitter, build_fitter, fixed_hyperparameters, loss_from_spec, needs_label_counts

PCL_SETTINGS: dict[str, LossSpec] = {
    "LS": LossSpec("ls"),
    "PCL reference": LossSpec("pcl", {"variant": "reference"}),
    "PCL paper": LossSpec("pcl", {"variant": "paper"}),
    "PCL weighted (global)": LossSpec("pcl", {"variant": "weighted", "counts": "global"}),
    "PCL weighted (batch)": LossSpec("pcl", {"variant": "weighted", "counts": "batch"}),
    "PCL expected_cost (global)": LossSpec("pcl", {"variant": "expected_cost", "counts": "global"}),
    "PCL expected_cost (batch)": LossSpec("pcl", {"variant": "expected_cost", "counts": "batch"}),
}
"""LS and every PCL form (epsilon added by :func:`setting_specs`): ``paper`` is eq. 4 with eq. 2-3 as printed,
``reference`` the released code, ``weighted`` and ``expected_cost`` the workbench's gradient-bearing forms."""
GRADIENT_FREE = ("PCL reference", "PCL paper")
"""Settings whose gradient equals LS's (constants added per sample)."""
BASELINES: dict[str, LossSpec] = {
    "CE": LossSpec("ce"),
    "class-balanced CE": LossSpec("class_balanced"),
    "logit-adjusted CE": LossSpec("logit_adjusted"),
    "CORN (ordinal)": LossSpec("corn"),
}
"""The fair baselines beside LS (the notebook's ``baselines``): CE, class-balanced CE (Cui et al. 2019), logit-adjusted
CE (Menon et al. 2021), and CORN, an ordinal model for ordered labels (Shi et al.; a head of K - 1 outputs)."""
BASELINE = "LS"
METRICS = ("macro_f1", "accuracy", "far_error_rate")
"""Test scores; ``far_error_rate`` (share of predictions two or more steps from gold) for ordinal labels only."""
TABLE4_METRICS = ("macro_f1", "accuracy")


def setting_specs(
    settings: Sequence[str], epsilon: float, cost_matrix: Sequence[Sequence[float]] | None = None
) -> dict[str, LossSpec]:
    """The loss spec of each of ``settings`` (:data:`PCL_SETTINGS` keys) at ``epsilon``; a ``cost_matrix`` (K x K)
    replaces the PCL forms' severity, as nominal labels need (:func:`run_ablation`)."""
    specs = {}
    for setting in check_names("settings", settings, list(PCL_SETTINGS)):
        spec = PCL_SETTINGS[setting]
        takes_costs = cost_matrix is not None and spec.name == "pcl" and spec.params["variant"] != "reference"
        costs = {"cost_matrix": [list(row) for row in cost_matrix]} if takes_costs else {}
        specs[setting] = spec.replace(params={**spec.params, "epsilon": epsilon, **costs})
    return specs


def baseline_specs(baselines: Sequence[str]) -> dict[str, LossSpec]:
    """The specs of ``baselines`` (:data:`BASELINES` keys, each once; none is allowed)."""
    if not baselines:
        return {}
    return {name: BASELINES[name] for name in check_names("baselines", baselines, list(BASELINES))}


def gradient_comparison(
    epsilon: float = 0.1, batch_size: int = 64, seed: int = 0, settings: Sequence[str] = tuple(PCL_SETTINGS)
) -> pd.DataFrame:
    """Each setting's loss and gradient against LS's on one seeded float64 batch (logits ~ N(0, 2^2), labels in
    QBQTC's shares, its counts the global ones): loss, ``loss_minus_ls``, ``max_abs_grad_diff`` and
    ``same_gradient`` (bitwise)."""
    check_int("batch_size", batch_size, 1)
    specs = setting_specs(list(dict.fromkeys([BASELINE, *settings])), epsilon)
    generator = torch.Generator().manual_seed(seed)
    shares = torch.as_tensor(QBQTC_LABEL_COUNTS, dtype=torch.float64)
    labels = torch.multinomial(shares / shares.sum(), batch_size, replacement=True, generator=generator)
    logits = 2.0 * torch.randn(batch_size, len(shares), generator=generator, dtype=torch.float64)
    values = {}
    gradients = {}
    for setting, spec in specs.items():
        counts = {"label_counts": list(QBQTC_LABEL_COUNTS)} if needs_label_counts(spec) else {}
        leaf = logits.clone().requires_grad_(True)
        value = loss_from_spec(spec.replace(params={**spec.params, **counts}))(leaf, labels)
        values[setting] = value.item()
        gradients[setting] = torch.autograd.grad(value, leaf)[0]
    return pd.DataFrame(
        {
            "setting": list(settings),
            "loss": [values[setting] for setting in settings],
            "loss_minus_ls": [values[setting] - values[BASELINE] for setting in settings],
            "max_abs_grad_diff": [
                (gradients[setting] - gradients[BASELINE]).abs().max().item() for setting in settings
            ],
            "same_gradient": [torch.equal(gradients[setting], gradients[BASELINE]) for setting in settings],
        }
    )


@dataclass
class Ablation:
    """:func:`run_ablation`'s result: ``runs``, test ``predictions[(setting, seed)]``, ``confusion[setting]`` (summed),
    and every ``Fit`` (``fits[(setting, seed)]``: validation and test probabilities, for decision rules and
    calibration)."""

    runs: pd.DataFrame
    predictions: dict[tuple[str, int], np.ndarray]
    confusion: dict[str, np.ndarray]
    label_names: list[str]
    fits: dict[tuple[str, int], Any] = field(default_factory=dict)


def run_ablation(
    splits: DatasetDict, losses: Mapping[str, LossSpec], seeds: Sequence[int], fitter: Fitter, ordinal: bool = True
) -> Ablation:
    """One classifier per loss (:func:`setting_specs`, LS included) x seed. ``runs``: setting, seed, test scores
    (far_error_rate when ``ordinal``), ``recall_<label>``, best_epoch, validation_macro_f1 and identical_to_ls (the
    same test predictions as LS at that seed). Nominal labels run PCL only with a ``cost_matrix``, never as released."""
    pcl = {name: spec.params for name, spec in losses.items() if spec.name == "pcl"}
    if not ordinal and any(
        params.get("cost_matrix") is None or params.get("variant") == "reference" for params in pcl.values()
    ):
        raise ValueError(
            f"cost_matrix: PCL's near and far cases need ordinal labels (data.ordinal: false); give one (not for "
            f"PCL reference) or drop {list(pcl)} from the settings"
        )
    if BASELINE not in losses:
        raise ValueError(f"losses: must include the baseline {BASELINE!r}, got {list(losses)}")
    seeds = check_seeds("seeds", seeds)
    names = label_names(splits["train"])
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    rows = []
    predictions = {}
    fits = {}
    confusion = dict.fromkeys(losses, 0)
    for setting, spec in losses.items():
        loss = loss_from_spec(spec, splits["train"])
        for seed in seeds:
            fit = fitter.fit(splits, loss, seed)
            predictions[(setting, seed)] = fit.test_predictions
            fits[(setting, seed)] = fit
            report = classification_report(gold, fit.test_predictions, label_names=names, ordinal=ordinal)
            confusion[setting] += np.asarray(report["confusion_matrix"])
            scores = {metric: report[metric] for metric in METRICS if metric in report}
            recalls = {f"recall_{name}": report["per_class"][name]["recall"] for name in names}
            selection = {"best_epoch": fit.best_epoch, "validation_macro_f1": fit.validation_score}
            rows.append({"setting": setting, "seed": seed, **scores, **recalls, **selection})
    runs = pd.DataFrame(rows)
    same = [
        np.array_equal(predictions[key], predictions[(BASELINE, key[1])]) for key in zip(runs["setting"], runs["seed"])
    ]
    return Ablation(runs.assign(identical_to_ls=same), predictions, confusion, names, fits)


def encoder_fitters(
    encoders: Mapping[str, Mapping[str, Any]], training: Mapping[str, Any], max_length: int
) -> dict[str, Fitter]:
    """Table 4's encoder axis: a :func:`~workbench.train.build_fitter` per ``encoders`` entry (a name ->
    ``model`` section)."""
    if (
        not isinstance(encoders, Mapping)
        or not encoders
        or not all(isinstance(name, str) and name.strip() for name in encoders)
    ):
        raise ValueError(f"encoders: must be a non-empty mapping of name -> model section, got {encoders!r}")
    return {name: build_fitter(section, training, max_length) for name, section in encoders.items()}


@dataclass
class EncoderAblation:
    """:func:`run_encoder_ablation`'s result: ``runs`` (with a first column ``encoder``) and ``ablations`` per
    encoder."""

    runs: pd.DataFrame
    ablations: dict[str, Ablation]


def run_encoder_ablation(
    splits: DatasetDict,
    losses: Mapping[str, LossSpec],
    seeds: Sequence[int],
    fitters: Mapping[str, Fitter],
    ordinal: bool = True,
) -> EncoderAblation:
    """Table 4's grid: :func:`run_ablation` for every encoder of ``fitters``, each with its own LS baseline."""
    if not isinstance(fitters, Mapping) or not fitters:
        raise ValueError(f"fitters: must be a non-empty mapping of encoder name -> Fitter, got {fitters!r}")
    ablations = {name: run_ablation(splits, losses, seeds, fitter, ordinal) for name, fitter in fitters.items()}
    runs = pd.concat({name: ablation.runs for name, ablation in ablations.items()}, names=["encoder", None])
    return EncoderAblation(runs.reset_index(level="encoder").reset_index(drop=True), ablations)


def ablation_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (encoder,) setting: each metric's "mean ± std" over seeds, "identical predictions to LS" (k/n)."""
    groups = ["encoder", "setting"] if "encoder" in runs.columns else ["setting"]
    metrics = [metric for metric in METRICS if metric in runs.columns]
    table = formatted(summarize(runs, groups, metrics), metrics).set_index(groups)[metrics]
    identical = runs.groupby(groups, sort=False)["identical_to_ls"].agg(["sum", "size"]).loc[table.index]
    table["identical predictions to LS"] = identical["sum"].astype(str) + "/" + identical["size"].astype(str)
    return table


def table4(runs: pd.DataFrame, metrics: Sequence[str] = TABLE4_METRICS, digits: int = 3) -> pd.DataFrame:
    """Table 4's layout: one row per encoder, columns (setting, metric) "mean ± std" over seeds, with the mean minus
    LS's in brackets (the paper's "(+2.09)"). QBQTC's F1 is macro-F1."""
    runs = runs if "encoder" in runs.columns else runs.assign(encoder="encoder")
    summary = summarize(runs, ["encoder", "setting"], metrics)
    cells = formatted(summary, metrics, digits)
    base = summary[summary["setting"] == BASELINE].set_index("encoder")
    for metric in metrics:
        delta = summary[f"{metric}_mean"] - summary["encoder"].map(base[f"{metric}_mean"])
        shown = (summary["setting"] != BASELINE) & delta.notna()
        cells[metric] += np.where(shown, delta.map(lambda value: f" ({value:+.{digits}f})"), "")
    table = cells.pivot(index="encoder", columns="setting", values=list(metrics)).swaplevel(axis=1).fillna("")
    columns = pd.MultiIndex.from_product([list(dict.fromkeys(runs["setting"])), metrics], names=["setting", "metric"])
    return table.reindex(index=list(dict.fromkeys(runs["encoder"])), columns=columns)


def best_gradient_bearing(runs: pd.DataFrame, score: str = "macro_f1") -> str | None:
    """One encoder's gradient-bearing PCL setting (not LS, a constant offset or a baseline) of best mean ``score``
    (``validation_macro_f1`` selects on validation); None if none ran."""
    if "encoder" in runs.columns and runs["encoder"].nunique() > 1:
        raise ValueError(f"runs: must hold one encoder's runs, got encoders {list(dict.fromkeys(runs['encoder']))}")
    bearing = runs["setting"].isin(PCL_SETTINGS) & ~runs["setting"].isin([BASELINE, *GRADIENT_FREE])
    means = runs[bearing].groupby("setting", sort=False)[score].mean()
    return None if means.empty else str(means.idxmax())


def encoder_key(encoder: str) -> str:
    """A metrics.json key prefix for an encoder name: lower case, runs of other characters as "_"."""
    return re.sub(r"[^0-9a-z]+", "_", encoder.lower()).strip("_")


def headline_metrics(runs: pd.DataFrame) -> dict[str, Any]:
    """metrics.json ``metrics``: LS's test macro-F1 (and far-error rate for ordinal labels), the best gradient-bearing
    setting's macro-F1 (``{"mean", "std", "n"}``) and the share of seeds where a constant-offset form predicted as LS.
    Several encoders: the same keys per encoder, prefixed with :func:`encoder_key` and "_"."""
    if "encoder" in runs.columns and runs["encoder"].nunique() > 1:
        return {
            f"{encoder_key(encoder)}_{key}": value
            for encoder, block in runs.groupby("encoder", sort=False)
            for key, value in headline_metrics(block.drop(columns="encoder")).items()
        }
    scores = [metric for metric in METRICS if metric in runs.columns]
    summary = summarize(runs, ["setting"], scores).set_index("setting")
    metrics = {
        f"ls_{metric}": row_statistics(summary.loc[BASELINE], metric) for metric in scores if metric != "accuracy"
    }
    free = runs["setting"].isin(GRADIENT_FREE)
    if free.any():
        metrics["gradient_free_identical_share"] = float(runs[free]["identical_to_ls"].mean())
    best = best_gradient_bearing(runs)
    if best is not None:
        metrics["best_pcl_macro_f1"] = row_statistics(summary.loc[best], "macro_f1")
    return metrics


def this_run(runs: pd.DataFrame) -> str:
    """The run's key numbers in one line (test, mean ± std over seeds), which the notebook's reading quotes."""
    runs = runs if "encoder" in runs.columns else runs.assign(encoder="encoder")
    table = ablation_table(runs)
    parts = []
    for encoder, block in runs.groupby("encoder", sort=False):
        rows = table.loc[encoder]
        text = f"{encoder}: macro-F1 " + ", ".join(f"{setting} {cell}" for setting, cell in rows["macro_f1"].items())
        identical = rows["identical predictions to LS"].drop(BASELINE, errors="ignore")
        text += "; identical predictions to LS: " + ", ".join(
            f"{setting} {cell}" for setting, cell in identical.items()
        )
        best = best_gradient_bearing(block)
        text += f"; best gradient-bearing form: {best}" if best else ""
        if "far_error_rate" in rows.columns:
            text += "; far-error rate " + ", ".join(
                f"{setting} {cell}" for setting, cell in rows["far_error_rate"].items()
            )
        parts.append(text)
    return f"This run ({runs['seed'].nunique()} seed(s), test): " + "; ".join(parts) + "."


TABLE4_CLAIM = Claim(
    "arXiv 2208.02959",
    "Table 4",
    "PCL helps all models to achieve a better performance than the original label smoothing one.",
)
PURPOSE_CLAIM = Claim(
    "arXiv 2208.02959",
    "sec. 3.2, against the fair baselines (not a comparison the paper makes)",
    "We introduce the Propensity-Corrected Loss (PCL) to encourage the model to predict the dominant categories, "
    "which corrects the predicting propensity.",
)
CLAIM_METRICS = ("macro_f1", "accuracy", "macro_mae")
"""Table 4's F1 (QBQTC's macro-F1) and accuracy, and macro-MAE, the error measure of ordered labels."""


def tuned_setting(ablation: Ablation, splits: DatasetDict, setting: str, score: str = "macro_f1") -> dict:
    """Per seed, ``setting``'s test predictions under a decision rule tuned on its validation probabilities only
    (``workbench.decisions.tune_rule``: per-class offsets, a threshold for two classes)."""
    fits = {seed: fit for (name, seed), fit in ablation.fits.items() if name == setting}
    return tuned_predictions(fits, np.asarray(splits["validation"]["label"], dtype=np.int64), score)


def claim_rows(
    ablation: Ablation,
    splits: DatasetDict,
    test: str,
    encoder: str = "probe",
    ordinal: bool = True,
    n_resamples: int = 2000,
    fair_baselines: bool = True,
) -> list[dict[str, Any]]:
    """The results page's rows for one encoder's ablation (``workbench.evidence.compare``, seeds paired):

    * Table 4: every PCL form that ran against LS, on macro-F1, accuracy and (``ordinal``) macro-MAE, argmax decisions;
    * Table 4 after tuning: the gradient-bearing form of best mean *validation* macro-F1 against LS, both with
      per-class offsets tuned on validation (an imbalance loss that wins only until the decision rule is tuned has
      not won);
    * with ``fair_baselines``, that form against each baseline that ran (:data:`BASELINES`), against CE with the
      post-hoc logit adjustment (training label counts) and against CE with tuned offsets, on macro-F1 and macro-MAE.
    """
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    k = len(ablation.label_names)
    settings = list(dict.fromkeys(ablation.runs["setting"]))

    def argmax(setting: str) -> dict[int, np.ndarray]:
        return {seed: ablation.predictions[(name, seed)] for name, seed in ablation.predictions if name == setting}

    def row(claim: Claim, rule: str, method: str, baseline: str, metric: str, a: dict, b: dict) -> dict[str, Any]:
        return compare(
            claim,
            setting=f"{encoder}, {rule}",
            method=method,
            baseline=baseline,
            metric=metric,
            y_true=gold,
            method_predictions=a,
            baseline_predictions=b,
            test=test,
            num_labels=k,
            n_resamples=n_resamples,
        )

    metrics = CLAIM_METRICS if ordinal else ("macro_f1", "accuracy")
    rows = [
        row(TABLE4_CLAIM, "argmax", setting, BASELINE, metric, argmax(setting), argmax(BASELINE))
        for setting in settings
        if setting in PCL_SETTINGS and setting != BASELINE
        for metric in metrics
    ]
    best = best_gradient_bearing(ablation.runs, "validation_macro_f1")
    if best is None:
        return rows
    tuned = "per-class offsets tuned on validation"
    best_tuned, ls_tuned = tuned_setting(ablation, splits, best), tuned_setting(ablation, splits, BASELINE)
    rows += [row(TABLE4_CLAIM, tuned, f"{best} + offsets", "LS + offsets", "macro_f1", best_tuned, ls_tuned)]
    baselines = {name: argmax(name) for name in settings if name in BASELINES and fair_baselines}
    if "CE" in baselines:
        counts = np.bincount(np.asarray(splits["train"]["label"], dtype=np.int64), minlength=k)
        rule = logit_adjustment_rule(counts)
        ce_fits = {seed: fit for (name, seed), fit in ablation.fits.items() if name == "CE"}
        baselines["CE + post-hoc logit adjustment"] = {
            seed: rule.predict(fit.test_probabilities) for seed, fit in ce_fits.items()
        }
        baselines["CE + offsets tuned on validation"] = tuned_setting(ablation, splits, "CE")
    for name, predictions in baselines.items():
        for metric in ("macro_f1", "macro_mae") if ordinal else ("macro_f1",):
            rows.append(row(PURPOSE_CLAIM, "fair baselines", best, name, metric, argmax(best), predictions))
    return rows


def calibration_table(ablation: Ablation, splits: DatasetDict) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """ECE per setting over seeds and the pooled reliability bins (``workbench.evidence.calibration``)."""
    probabilities: dict[str, list[np.ndarray]] = {}
    for (setting, _), fit in ablation.fits.items():
        probabilities.setdefault(setting, []).append(fit.test_probabilities)
    return calibration(probabilities, np.asarray(splits["test"]["label"], dtype=np.int64))


def hyperparameters(specs: Mapping[str, LossSpec], training: Mapping[str, Any], train: Dataset) -> dict[str, Any]:
    """What notebook 02 fixes (the optimiser settings, each setting's loss hyperparameters: none tuned) and chooses on
    validation (the epoch, the PCL form and decision rules of the tuned rows), for the results page (issue 36)."""
    return fixed_hyperparameters(
        specs,
        training,
        train,
        epoch="the probe's epoch with the best validation macro-F1, the same rule for every loss",
        pcl_form="the gradient-bearing PCL form with the best mean validation macro-F1 (the tuned rows)",
        decision_rule="per-class offsets tuned on validation, for both sides of a tuned row",
    )
