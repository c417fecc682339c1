"""The PCL ablation (notebook 02): label smoothing against every form of the Propensity-Corrected Loss.

Paper: "Towards No.1 in CLUE Semantic Matching Challenge: Pre-trained Language Model
Erlangshen with Propensity-Corrected Loss" (arXiv 2208.02959), sec. 3.2, eq. 2-4:
PCL+ = eps n_0 / (n_1 + n_2), PCL- = eps (n_0 + n_2) / n_1 ("ε is a scaling ratio"), and
L = LS - PCL- (condition 1, "encourage"), LS + PCL+ (condition 2, "punish"), LS (condition 3).
The released code is Fengshenbang-LM ``fengshen/examples/clue_sim/loss.py``.

The paper's Table 4 is an ablation of 3 encoders (RoBERTa-wwm, MacBERT, Erlangshen) x {label
smoothing, PCL}, F1 and accuracy on QBQTC's public test set. The study has the same shape:
encoders x {LS, the PCL forms}.

* :data:`PCL_SETTINGS` and :func:`setting_specs`: the loss axis as loss specs at one epsilon;
* :func:`encoder_fitters`: the encoder axis, one :class:`workbench.train.Fitter` per named
  config ``model`` section (the probe, a transformer from scratch, a checkpoint);
* :func:`relevance_splits`: the generated sample pairs, or a QBQTC file cut by ``stratified_split``;
* :func:`gradient_comparison`: per setting, the loss offset and the gradient difference from LS
  on one seeded batch of logits;
* :func:`run_ablation` / :func:`ablation_table`: settings x seeds through one fitter, then
  mean ± std per setting with the column "identical predictions to LS";
  :func:`run_encoder_ablation` repeats it per encoder (one block of rows per encoder) and
  :func:`table4` lays the result out as the paper's Table 4 (one row per encoder).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import DatasetDict

from workbench.checks import check_int, check_seeds
from workbench.data import label_names, load_qbqtc, sample_relevance_splits, stratified_split
from workbench.losses import QBQTC_LABEL_COUNTS, LossSpec, needs_label_counts, resolve
from workbench.metrics import classification_report
from workbench.stats import formatted, mean_std, row_statistics, summarize
from workbench.train import Fitter, build_fitter

PCL_SETTINGS: dict[str, LossSpec] = {
    "LS": LossSpec("ls"),
    "PCL reference": LossSpec("pcl", {"variant": "reference"}),
    "PCL paper": LossSpec("pcl", {"variant": "paper"}),
    "PCL weighted (global)": LossSpec("pcl", {"variant": "weighted", "counts": "global"}),
    "PCL weighted (batch)": LossSpec("pcl", {"variant": "weighted", "counts": "batch"}),
    "PCL expected_cost (global)": LossSpec("pcl", {"variant": "expected_cost", "counts": "global"}),
    "PCL expected_cost (batch)": LossSpec("pcl", {"variant": "expected_cost", "counts": "batch"}),
}
"""Ablation rows without epsilon: LS (the base) and every PCL form; global counts come from the training split.
``PCL paper`` is eq. 4 with eq. 2-3 as printed; ``PCL reference`` the released code; ``weighted`` and
``expected_cost`` are the workbench's gradient-bearing forms (``workbench.losses.pcl``)."""

GRADIENT_FREE = ("PCL reference", "PCL paper")
"""Settings whose gradient equals LS's (constants added per sample)."""

BASELINE = "LS"
METRICS = ("macro_f1", "accuracy", "far_error_rate")


def relevance_splits(data_path: str | None = None, seed: int = 0, n_train: int = 2000, n_eval: int = 400) -> DatasetDict:
    """Train/validation/test relevance pairs (labels 0/1/2).

    ``data_path=None``: the generated sample (``sample_relevance_splits``: ``n_train`` /
    ``n_eval`` / ``n_eval`` in QBQTC's label shares). Otherwise a QBQTC JSON file (e.g. the
    public dev.json: the train split is not public) cut 80/10/10 by ``stratified_split``.
    """
    if data_path is None:
        return sample_relevance_splits(seed=seed, n_train=n_train, n_validation=n_eval, n_test=n_eval)
    return stratified_split(load_qbqtc(data_path), {"train": 0.8, "validation": 0.1, "test": 0.1}, seed=seed)


def setting_specs(settings: Sequence[str], epsilon: float) -> dict[str, LossSpec]:
    """The loss spec of each of ``settings`` (:data:`PCL_SETTINGS` keys) at ``epsilon`` (the label
    smoothing and PCL strength; the loss checks its range when it is built)."""
    unknown = [setting for setting in settings if setting not in PCL_SETTINGS]
    if unknown:
        raise ValueError(f"settings: must be among {list(PCL_SETTINGS)}, got unknown {unknown}")
    return {
        setting: PCL_SETTINGS[setting].replace(params={**PCL_SETTINGS[setting].params, "epsilon": epsilon})
        for setting in settings
    }


# ----------------------------------------------------------------------------- gradients


def gradient_comparison(
    epsilon: float = 0.1,
    label_counts: Sequence[float] = QBQTC_LABEL_COUNTS,
    batch_size: int = 64,
    seed: int = 0,
    settings: Sequence[str] = tuple(PCL_SETTINGS),
) -> pd.DataFrame:
    """Each setting's loss and gradient against LS's on one seeded batch (float64).

    Logits ~ N(0, 2^2), labels drawn in ``label_counts`` shares. Columns: ``setting``,
    ``loss``, ``loss_minus_ls`` (the added correction), ``max_abs_grad_diff``
    (max |dL/dz - dL_LS/dz| over the batch) and ``same_gradient`` (bitwise equal).
    Global-count PCL uses ``label_counts``.
    """
    check_int("batch_size", batch_size, 1)
    specs = setting_specs([BASELINE, *settings], epsilon)
    generator = torch.Generator().manual_seed(seed)
    shares = torch.as_tensor(label_counts, dtype=torch.float64)
    labels = torch.multinomial(shares / shares.sum(), batch_size, replacement=True, generator=generator)
    logits = 2.0 * torch.randn(batch_size, len(shares), generator=generator, dtype=torch.float64)

    def value_and_gradient(setting: str) -> tuple[float, torch.Tensor]:
        spec = specs[setting]
        if needs_label_counts(spec):  # the losses' label-count rule, given these counts instead of a split
            spec = spec.replace(params={**spec.params, "label_counts": list(label_counts)})
        leaf = logits.clone().requires_grad_(True)
        value = resolve(spec)(leaf, labels)
        (gradient,) = torch.autograd.grad(value, leaf)
        return value.item(), gradient

    ls_value, ls_gradient = value_and_gradient(BASELINE)
    rows = []
    for setting in settings:
        value, gradient = value_and_gradient(setting)
        rows.append(
            {
                "setting": setting,
                "loss": value,
                "loss_minus_ls": value - ls_value,
                "max_abs_grad_diff": (gradient - ls_gradient).abs().max().item(),
                "same_gradient": bool(torch.equal(gradient, ls_gradient)),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the ablation


@dataclass
class Ablation:
    """What :func:`run_ablation` produced: ``runs`` (one row per setting x seed), test
    ``predictions[(setting, seed)]``, summed test ``confusion[setting]`` over seeds, and
    ``label_names``."""

    runs: pd.DataFrame
    predictions: dict[tuple[str, int], np.ndarray]
    confusion: dict[str, np.ndarray]
    label_names: list[str]


def run_ablation(
    splits: DatasetDict, losses: Mapping[str, LossSpec], seeds: Sequence[int], fitter: Fitter, baseline: str = BASELINE
) -> Ablation:
    """Train one classifier per loss x seed through ``fitter`` and score the held-out test split.

    ``losses`` maps a setting name to its spec (:func:`setting_specs`, or any specs) and must hold
    ``baseline`` (LS by default), which every setting's test predictions are compared with at the
    same seed (``identical_to_ls``). Each loss is built once by ``workbench.losses.resolve``
    (global-count PCL and wce take the training split's label counts). ``runs`` has ``setting,
    seed``, the test ``macro_f1, accuracy, far_error_rate``, ``recall_<label name>`` per class,
    ``best_epoch``, ``validation_macro_f1`` and ``identical_to_ls``.
    """
    if baseline not in losses:
        raise ValueError(
            f"losses: must include the baseline {baseline!r} (the 'identical predictions' reference), got {list(losses)}"
        )
    seeds = check_seeds("seeds", seeds)
    names = label_names(splits["train"])
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    rows, predictions, confusion = [], {}, {}
    for setting in [baseline, *(setting for setting in losses if setting != baseline)]:
        loss = resolve(losses[setting], splits["train"])
        for seed in seeds:
            fit = fitter.fit(splits, loss, seed)
            predicted = predictions[(setting, seed)] = fit.test_predictions
            report = classification_report(gold, predicted, label_names=names, ordinal=True)
            confusion[setting] = confusion.get(setting, 0) + np.asarray(report["confusion_matrix"])
            rows.append(
                {
                    "setting": setting,
                    "seed": seed,
                    **{metric: report[metric] for metric in METRICS},
                    **{f"recall_{name}": report["per_class"][name]["recall"] for name in names},
                    "best_epoch": fit.best_epoch,
                    "validation_macro_f1": fit.validation_score,
                    "identical_to_ls": bool(np.array_equal(predicted, predictions[(baseline, seed)])),
                }
            )
    order = {setting: index for index, setting in enumerate(losses)}
    runs = pd.DataFrame(rows).sort_values("setting", key=lambda column: column.map(order), kind="stable")
    return Ablation(runs.reset_index(drop=True), predictions, {setting: confusion[setting] for setting in losses}, names)


def encoder_fitters(encoders: Mapping[str, Mapping[str, Any]], training: Mapping[str, Any], max_length: int) -> dict[str, Fitter]:
    """The encoder axis of Table 4: ``{name: build_fitter(model_section, training, max_length)}`` for
    every entry of ``encoders`` (name -> a config ``model`` section as a mapping: the probe, a tiny
    BERT from scratch with a ``vocab_file``, or a ``model_name_or_path`` checkpoint), in order."""
    if not isinstance(encoders, Mapping) or not encoders:
        raise ValueError(f"encoders: must be a non-empty mapping of name -> model section, got {encoders!r}")
    for name in encoders:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"encoders: every name must be a non-empty string, got {name!r}")
    return {name: build_fitter(section, training, max_length) for name, section in encoders.items()}


@dataclass
class EncoderAblation:
    """What :func:`run_encoder_ablation` produced: ``runs`` (:func:`run_ablation`'s rows with a first
    column ``encoder``: one block of rows per encoder, in the order given) and ``ablations``
    (encoder -> its :class:`Ablation`: predictions and confusion matrices)."""

    runs: pd.DataFrame
    ablations: dict[str, Ablation]


def run_encoder_ablation(
    splits: DatasetDict,
    losses: Mapping[str, LossSpec],
    seeds: Sequence[int],
    fitters: Mapping[str, Fitter],
    baseline: str = BASELINE,
) -> EncoderAblation:
    """Table 4's grid: :func:`run_ablation` of ``losses`` x ``seeds`` for every encoder of
    ``fitters`` (:func:`encoder_fitters`), each with its own LS baseline."""
    if not isinstance(fitters, Mapping) or not fitters:
        raise ValueError(f"fitters: must be a non-empty mapping of encoder name -> Fitter, got {fitters!r}")
    ablations = {name: run_ablation(splits, losses, seeds, fitter, baseline) for name, fitter in fitters.items()}
    runs = pd.concat([ablation.runs.assign(encoder=name) for name, ablation in ablations.items()], ignore_index=True)
    return EncoderAblation(runs[["encoder", *(column for column in runs.columns if column != "encoder")]], ablations)


def _groups(runs: pd.DataFrame) -> list[str]:
    return ["encoder", "setting"] if "encoder" in runs.columns else ["setting"]


def ablation_table(runs: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """One row per setting (per encoder and setting when ``runs`` has an ``encoder`` column),
    "mean ± std" over seeds (sample std, ddof = 1; "mean" alone for one seed) of each metric,
    and "identical predictions to LS" as "k/n" seeds."""
    groups = _groups(runs)
    summary = formatted(summarize(runs, groups, METRICS), METRICS, digits)
    identical = runs.groupby(groups, sort=False)["identical_to_ls"].agg(["sum", "size"])
    table = summary[[*groups, *METRICS]].set_index(groups)
    counts = identical.loc[table.index]
    table["identical predictions to LS"] = [f"{same}/{size}" for same, size in zip(counts["sum"], counts["size"])]
    return table


TABLE4_METRICS = ("macro_f1", "accuracy")


def table4(
    runs: pd.DataFrame, metrics: Sequence[str] = TABLE4_METRICS, digits: int = 3, baseline: str = BASELINE
) -> pd.DataFrame:
    """The paper's Table 4 layout: one row per encoder, columns (setting, metric) with "mean ± std"
    over seeds; every setting other than ``baseline`` also shows, in brackets, its mean minus the
    baseline's mean for the same encoder (the paper's "(+2.09)"). ``runs`` without an ``encoder``
    column count as one encoder named "encoder". The paper reports "F1 Score" and "Accuracy";
    QBQTC's F1 is macro-F1."""
    runs = runs if "encoder" in runs.columns else runs.assign(encoder="encoder")
    missing = [column for column in ("encoder", "setting", *metrics) if column not in runs.columns]
    if missing:
        raise ValueError(f"runs: missing columns {missing}; expected run_ablation / run_encoder_ablation runs")
    summary = summarize(runs, ["encoder", "setting"], metrics).set_index(["encoder", "setting"])
    encoders = list(dict.fromkeys(runs["encoder"]))
    settings = list(dict.fromkeys(runs["setting"]))
    cells: dict[tuple[str, str], list[str]] = {}
    for setting in settings:
        for metric in metrics:
            column = []
            for encoder in encoders:
                if (encoder, setting) not in summary.index:
                    column.append("")
                    continue
                row = summary.loc[(encoder, setting)]
                text = mean_std(row[f"{metric}_mean"], row[f"{metric}_std"], digits)
                if setting != baseline and (encoder, baseline) in summary.index:
                    delta = row[f"{metric}_mean"] - summary.loc[(encoder, baseline), f"{metric}_mean"]
                    text += f" ({delta:+.{digits}f})"
                column.append(text)
            cells[(setting, metric)] = column
    table = pd.DataFrame(cells, index=pd.Index(encoders, name="encoder"))
    table.columns = pd.MultiIndex.from_tuples(table.columns, names=["setting", "metric"])
    return table


def _one_encoder(runs: pd.DataFrame) -> None:
    if "encoder" in runs.columns and runs["encoder"].nunique() > 1:
        raise ValueError(f"runs: must hold one encoder's runs, got encoders {list(dict.fromkeys(runs['encoder']))}")


def best_gradient_bearing(runs: pd.DataFrame) -> str | None:
    """The gradient-bearing setting (not LS, not the constant-offset forms) with the best mean test
    macro-F1 in one encoder's runs; None when the runs hold none."""
    _one_encoder(runs)
    means = runs[~runs["setting"].isin([BASELINE, *GRADIENT_FREE])].groupby("setting", sort=False)["macro_f1"].mean()
    return None if means.empty else str(means.idxmax())


def encoder_key(encoder: str) -> str:
    """A metrics.json key prefix for an encoder name: lower case, runs of other characters as "_"."""
    return re.sub(r"[^0-9a-z]+", "_", encoder.lower()).strip("_")


def headline_metrics(runs: pd.DataFrame) -> dict[str, Any]:
    """metrics.json ``metrics``: LS's test macro-F1 and far-error rate and the best gradient-bearing
    setting's macro-F1 (``{"mean", "std", "n"}`` over seeds), and the share of seeds where a
    constant-offset form predicted exactly as LS.

    With an ``encoder`` column holding several encoders, the same keys per encoder, each prefixed
    with :func:`encoder_key` and "_" (``scratch_ls_macro_f1``); one encoder keeps the plain keys."""
    if "encoder" in runs.columns and runs["encoder"].nunique() > 1:
        return {
            f"{encoder_key(encoder)}_{key}": value
            for encoder, block in runs.groupby("encoder", sort=False)
            for key, value in headline_metrics(block.drop(columns="encoder")).items()
        }
    summary = summarize(runs, ["setting"], METRICS).set_index("setting")
    free = runs["setting"].isin(GRADIENT_FREE)
    metrics: dict[str, Any] = {
        "ls_macro_f1": row_statistics(summary.loc[BASELINE], "macro_f1"),
        "ls_far_error_rate": row_statistics(summary.loc[BASELINE], "far_error_rate"),
    }
    if free.any():
        metrics["gradient_free_identical_share"] = float(runs[free]["identical_to_ls"].mean())
    best = best_gradient_bearing(runs)
    if best is not None:
        metrics["best_pcl_macro_f1"] = row_statistics(summary.loc[best], "macro_f1")
    return metrics
