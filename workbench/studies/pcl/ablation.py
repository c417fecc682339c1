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
from datasets import DatasetDict

from workbench.checks import check_int, check_seeds
from workbench.config import LossSpec, ModelConfig, TrainingConfig
from workbench.data import label_names
from workbench.losses import QBQTC_LABEL_COUNTS
from workbench.metrics import classification_report
from workbench.stats import formatted, row_statistics, summarize
from workbench.train import (
    Fitter,
    build_fitter,
    identical_by_construction,
    loss_from_spec,
    needs_label_counts,
    offered,
    settings_specs,
)

PCL_SETTINGS: dict[str, LossSpec] = offered(
    (
        "LS",
        "PCL reference",
        "PCL paper",
        "PCL weighted (global)",
        "PCL weighted (batch)",
        "PCL expected_cost (global)",
        "PCL expected_cost (batch)",
    )
)
"""LS and every PCL form (epsilon added by :func:`setting_specs`): ``paper`` is eq. 4 with eq. 2-3 as printed,
``reference`` the released code, ``weighted`` and ``expected_cost`` the workbench's gradient-bearing forms."""
BASELINE = "LS"
GRADIENT_FREE = tuple(
    label
    for label, spec in PCL_SETTINGS.items()
    if label != BASELINE and identical_by_construction(label, spec, BASELINE, PCL_SETTINGS[BASELINE])
)
"""Settings whose gradient equals LS's (constants added per loss cell): "PCL reference" and "PCL paper", by
``workbench.train.identical_by_construction``, the rule every identity row is decided by."""
BASELINES: dict[str, LossSpec] = offered(("CE", "class-balanced CE", "logit-adjusted CE", "CORN (ordinal)"))
"""The fair baselines beside LS (the notebook's ``baselines``): CE, class-balanced CE (Cui et al. 2019), logit-adjusted
CE (Menon et al. 2021), and CORN, an ordinal model for ordered labels (Shi et al.; a head of K - 1 outputs)."""
METRICS = ("macro_f1", "accuracy", "far_error_rate")
"""Test scores; ``far_error_rate`` (share of predictions two or more steps from gold) for ordinal labels only."""
TABLE4_METRICS = ("macro_f1", "accuracy")


def setting_specs(
    settings: Sequence[str],
    epsilon: float,
    cost_matrix: Sequence[Sequence[float]] | None = None,
    extra_settings: Mapping[str, Any] | None = None,
) -> dict[str, LossSpec]:
    """The loss spec of each of ``settings`` (:data:`PCL_SETTINGS` keys) at ``epsilon``, then of each
    ``extra_settings`` entry (``workbench.train.settings_specs``); a ``cost_matrix`` (K x K) replaces the PCL forms'
    severity, as nominal labels need (:func:`run_ablation`)."""
    return settings_specs(
        settings, PCL_SETTINGS, epsilon=epsilon, cost_matrix=cost_matrix, extra_settings=extra_settings
    )


def baseline_specs(baselines: Sequence[str]) -> dict[str, LossSpec]:
    """The specs of ``baselines`` (:data:`BASELINES` keys, each once; none is allowed)."""
    return settings_specs(baselines, BASELINES, parameter="baselines") if baselines else {}


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
    every ``Fit`` (``fits[(setting, seed)]``: validation and test probabilities, for decision rules and calibration)
    and the ``specs`` each setting trained with (an extra setting identical to one by construction is an identity)."""

    runs: pd.DataFrame
    predictions: dict[tuple[str, int], np.ndarray]
    confusion: dict[str, np.ndarray]
    label_names: list[str]
    fits: dict[tuple[str, int], Any] = field(default_factory=dict)
    specs: dict[str, LossSpec] = field(default_factory=dict)


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
    built = {setting: loss_from_spec(spec, splits["train"]) for setting, spec in losses.items()}  # before any fit
    for setting, loss in built.items():
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
    return Ablation(runs.assign(identical_to_ls=same), predictions, confusion, names, fits, dict(losses))


def encoder_fitters(
    encoders: Mapping[str, ModelConfig | Mapping[str, Any]], training: TrainingConfig, max_length: int
) -> dict[str, Fitter]:
    """Table 4's encoder axis: a :func:`~workbench.train.build_fitter` per ``encoders`` entry (a name -> ``model``
    section, each checked here, where it enters), all with the config's validated ``training`` section."""
    if (
        not isinstance(encoders, Mapping)
        or not encoders
        or not all(isinstance(name, str) and name.strip() for name in encoders)
    ):
        raise ValueError(f"encoders: must be a non-empty mapping of name -> model section, got {encoders!r}")
    return {
        name: build_fitter(ModelConfig.from_mapping(section), training, max_length)
        for name, section in encoders.items()
    }


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
