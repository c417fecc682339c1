"""Experiments of the Propensity-Corrected Loss (PCL) on 3-class query-title relevance (CLUE QBQTC).

PCL (the Fengshenbang team's QBQTC solution) adds a "propensity correction" to label
smoothing (LS): for a far mistake (gold 0 predicted 2, ...) it adds PCL+, for a near
one it subtracts PCL-, eq. 4, with PCL- = (n0 + n2) / n1 and PCL+ from eq. 2 (the paper)
or (n1 + n2) / n0 (the released code). Both the released correction and eq. 4 as
written add constants chosen from the argmax prediction, so their gradient is LS's
(DESIGN.md); the workbench's ``weighted`` and ``expected_cost`` variants do change it.

* :data:`PCL_SETTINGS`: the rows of the ablation (the shape of the paper's Table 4);
* :func:`relevance_splits`: the generated sample pairs, or a QBQTC file cut by ``stratified_split``;
* :func:`gradient_comparison`: per variant, the loss offset and the gradient difference from LS
  on one seeded batch of logits;
* :func:`fit_pair_probe`: one seeded run of a fast pair classifier (``workbench.probes``), returning
  test predictions, so that "identical predictions with the same seed" can be checked exactly;
* :func:`run_ablation` / :func:`ablation_table`: settings x seeds (the probe, or a transformer
  fine-tuned by the trainer), then mean +- std per setting with the column "identical predictions to LS".

The probe is a siamese bag-of-characters matcher (mean character embeddings u, v of query
and title; an MLP over [u, v, u * v, |u - v|], the InferSent feature set of Conneau et al.,
2017; ``workbench.probes``, settings :class:`ProbeTraining`). It trains in about a second on
CPU, so seven losses x three seeds fit in the notebook's two-minute budget; the tiny BERT of
``workbench.models`` learns nothing on this task in that budget. With a trainer ``model``
section (e.g. ``{"model_name_or_path": "hfl/chinese-roberta-wwm-ext"}``) :func:`run_ablation`
fine-tunes that transformer instead, per setting x seed, through the team's trainer
(``workbench.studies.finetuning.fit_transformer``; query and title as a sentence pair).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset, DatasetDict
from torch import nn

from workbench.data import label_names, load_qbqtc, sample_relevance_splits, stratified_split
from workbench.losses import QBQTC_LABEL_COUNTS, build_loss
from workbench.metrics import classification_report
from workbench.probes import PAIR_COLUMNS, EncodedSplit, ProbeTraining, encode_split, fit_probe
from workbench.studies.dice import summarize
from workbench.studies.finetuning import fit_transformer
from workbench.train.finetune import loss_from_config
from workbench.vocab import load_tokenizer

LossSpec = tuple[str, dict[str, Any]]
"""(registry name for ``build_loss``, parameters without ``epsilon``)."""

PCL_SETTINGS: dict[str, LossSpec] = {
    "LS": ("ls", {}),
    "PCL reference": ("pcl", {"variant": "reference"}),
    "PCL paper": ("pcl", {"variant": "paper"}),
    "PCL weighted (global)": ("pcl", {"variant": "weighted", "counts": "global"}),
    "PCL weighted (batch)": ("pcl", {"variant": "weighted", "counts": "batch"}),
    "PCL expected_cost (global)": ("pcl", {"variant": "expected_cost", "counts": "global"}),
    "PCL expected_cost (batch)": ("pcl", {"variant": "expected_cost", "counts": "batch"}),
}
"""Ablation rows: LS (the base) and every PCL form; global counts come from the training split."""

GRADIENT_FREE = ("PCL reference", "PCL paper")
"""Settings whose gradient equals LS's (constants added per sample)."""

BASELINE = "LS"
METRICS = ("macro_f1", "accuracy", "far_error_rate")
NUM_LABELS = 3


def relevance_splits(
    data_path: str | None = None, seed: int = 0, n_train: int = 2000, n_eval: int = 400
) -> DatasetDict:
    """Train/validation/test relevance pairs (labels 0/1/2).

    ``data_path=None``: the generated sample (``sample_relevance_splits``: ``n_train`` /
    ``n_eval`` / ``n_eval`` in QBQTC's label shares). Otherwise a QBQTC JSON file (e.g. the
    public dev.json: the train split is not public) cut 80/10/10 by ``stratified_split``.
    """
    if data_path is None:
        return sample_relevance_splits(seed=seed, n_train=n_train, n_validation=n_eval, n_test=n_eval)
    return stratified_split(load_qbqtc(data_path), {"train": 0.8, "validation": 0.1, "test": 0.1}, seed=seed)


def setting_loss(setting: str, epsilon: float, train: Dataset) -> nn.Module:
    """The loss of ``setting`` (a :data:`PCL_SETTINGS` key) at ``epsilon``; global-count PCL
    takes the training split's label counts (as ``workbench.train.finetune`` does)."""
    if setting not in PCL_SETTINGS:
        raise ValueError(f"setting must be one of {list(PCL_SETTINGS)}, got {setting!r}")
    name, params = PCL_SETTINGS[setting]
    return loss_from_config({"name": name, "params": {**params, "epsilon": epsilon}}, train, NUM_LABELS)


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
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: must be an integer >= 1, got {batch_size!r}")
    generator = torch.Generator().manual_seed(seed)
    shares = torch.as_tensor(label_counts, dtype=torch.float64)
    labels = torch.multinomial(shares / shares.sum(), batch_size, replacement=True, generator=generator)
    logits = 2.0 * torch.randn(batch_size, len(shares), generator=generator, dtype=torch.float64)

    def value_and_gradient(setting: str) -> tuple[float, torch.Tensor]:
        if setting not in PCL_SETTINGS:
            raise ValueError(f"settings must be among {list(PCL_SETTINGS)}, got {setting!r}")
        name, params = PCL_SETTINGS[setting]
        if name == "pcl" and params.get("counts", "global") == "global":
            params = {**params, "label_counts": list(label_counts)}
        leaf = logits.clone().requires_grad_(True)
        value = build_loss(name, epsilon=epsilon, **params)(leaf, labels)
        (gradient,) = torch.autograd.grad(value, leaf)
        return value.item(), gradient

    ls_value, ls_gradient = value_and_gradient(BASELINE)
    rows = []
    for setting in settings:
        value, gradient = value_and_gradient(setting)
        rows.append({
            "setting": setting,
            "loss": value,
            "loss_minus_ls": value - ls_value,
            "max_abs_grad_diff": (gradient - ls_gradient).abs().max().item(),
            "same_gradient": bool(torch.equal(gradient, ls_gradient)),
        })
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the probe


def encode_pairs(splits: Mapping[str, Dataset], tokenizer: Any, max_length: int) -> dict[str, EncodedSplit]:
    """Every split's queries and titles as character ids (``workbench.probes.encode_split``)."""
    return {name: encode_split(split, tokenizer, max_length, PAIR_COLUMNS) for name, split in splits.items()}


def fit_pair_probe(
    encoded: Mapping[str, EncodedSplit], loss: nn.Module, seed: int, training: ProbeTraining, vocab_size: int
) -> dict[str, Any]:
    """Train a pair :class:`workbench.probes.CharacterProbe` on ``encoded["train"]`` with ``loss``
    (``workbench.probes.fit_probe``: AdamW, the epoch with the best validation macro-F1 kept,
    first best on ties) and predict the test split.

    Initialisation and batch order come from ``seed`` only (a forked RNG; the global one is
    untouched), so two losses with equal gradients give bitwise equal predictions. Returns
    ``test_predictions`` (np.ndarray), ``best_epoch`` (1-based) and ``validation_macro_f1``.
    """
    fit = fit_probe(encoded, loss, training, vocab_size, NUM_LABELS, seed=seed)
    return {"test_predictions": fit.predictions, "best_epoch": fit.best_epoch, "validation_macro_f1": fit.validation["macro_f1"]}


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
    splits: DatasetDict,
    settings: Sequence[str] = tuple(PCL_SETTINGS),
    seeds: Sequence[int] = (0, 1, 2),
    epsilon: float = 0.1,
    training: ProbeTraining | None = None,
    tokenizer: Any = None,
    loss_for: Callable[[str, float, Dataset], nn.Module] = setting_loss,
    known_settings: Sequence[str] = tuple(PCL_SETTINGS),
    model: Mapping[str, Any] | None = None,
    model_training: Mapping[str, Any] | None = None,
) -> Ablation:
    """Train one classifier per setting x seed and score the held-out test split.

    ``model=None``: the pair probe (:func:`fit_pair_probe` with ``training`` and ``tokenizer``).
    A trainer ``model`` section (``{"model_name_or_path": ...}`` or ``{"tiny": {...}}``):
    that transformer is fine-tuned on query + title pairs by
    ``workbench.studies.finetuning.fit_transformer`` with ``model_training`` (the trainer's
    ``training`` section, e.g. ``epochs``, ``lr``, ``precision: bf16``; None: its defaults),
    inputs truncated to ``training.max_length`` tokens (the only ``training`` field it reads) and
    its own tokenizer (``tokenizer`` must then be None).

    ``settings`` are ``known_settings`` keys (default :data:`PCL_SETTINGS`) and must include
    ``"LS"`` (the baseline the "identical predictions" column compares against, run with the
    same seed); ``loss_for(setting, epsilon, train)`` builds each setting's loss (default
    :func:`setting_loss`). ``runs`` has ``setting, seed``, the test ``macro_f1, accuracy,
    far_error_rate``, ``recall_<label name>`` per class, ``best_epoch``,
    ``validation_macro_f1`` and ``identical_to_ls`` (test predictions equal LS's, same seed).
    """
    unknown = [setting for setting in settings if setting not in known_settings]
    if unknown:
        raise ValueError(f"settings: must be among {list(known_settings)}, got unknown {unknown}")
    if BASELINE not in settings:
        raise ValueError(f"settings: must include {BASELINE!r} (the 'identical predictions' baseline), got {list(settings)}")
    if not seeds:
        raise ValueError("seeds: must hold at least one seed")
    training = ProbeTraining() if training is None else training
    if model is None:
        if model_training is not None:
            raise ValueError("model_training: only with a trainer model section (model is None: the probe runs)")
        tokenizer = load_tokenizer() if tokenizer is None else tokenizer
        encoded = encode_pairs(splits, tokenizer, training.max_length)

        def fit(loss: nn.Module, seed: int) -> dict[str, Any]:
            return fit_pair_probe(encoded, loss, seed, training, len(tokenizer))
    elif isinstance(model, Mapping):
        if tokenizer is not None:
            raise ValueError("tokenizer: must be None with a trainer model section (the model's own tokenizer is used)")

        def fit(loss: nn.Module, seed: int) -> dict[str, Any]:
            run = fit_transformer(splits, loss, seed, model, model_training or {}, training.max_length)
            return {"test_predictions": run.test_predictions, "best_epoch": run.best_epoch,
                    "validation_macro_f1": run.validation_macro_f1}
    else:
        raise ValueError(f"model: must be None (the probe) or a trainer model section (mapping), got {model!r}")
    names = label_names(splits["train"])
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    rows, predictions, confusion = [], {}, {}
    for setting in [BASELINE, *(setting for setting in settings if setting != BASELINE)]:
        loss = loss_for(setting, epsilon, splits["train"])
        for seed in seeds:
            run = fit(loss, seed)
            predicted = predictions[(setting, seed)] = run["test_predictions"]
            report = classification_report(gold, predicted, label_names=names)
            confusion[setting] = confusion.get(setting, 0) + np.asarray(report["confusion_matrix"])
            rows.append({
                "setting": setting,
                "seed": seed,
                **{metric: report[metric] for metric in METRICS},
                **{f"recall_{name}": report["per_class"][name]["recall"] for name in names},
                "best_epoch": run["best_epoch"],
                "validation_macro_f1": run["validation_macro_f1"],
                "identical_to_ls": bool(np.array_equal(predicted, predictions[(BASELINE, seed)])),
            })
    order = {setting: index for index, setting in enumerate(settings)}
    runs = pd.DataFrame(rows).sort_values("setting", key=lambda column: column.map(order), kind="stable")
    return Ablation(runs.reset_index(drop=True), predictions, {setting: confusion[setting] for setting in settings}, names)


def ablation_table(runs: pd.DataFrame, digits: int = 3) -> pd.DataFrame:
    """The Table-4-shaped view: one row per setting, "mean ± std" over seeds (sample std,
    ddof = 1; "mean" alone for one seed) of each metric, and "identical predictions to LS"
    as "k/n" seeds."""
    summary = summarize(runs, ["setting"], METRICS)
    identical = runs.groupby("setting", sort=False)["identical_to_ls"].agg(["sum", "size"])

    def cell(row: pd.Series, metric: str) -> str:
        std = row[f"{metric}_std"]
        return f"{row[f'{metric}_mean']:.{digits}f}" + ("" if pd.isna(std) else f" ± {std:.{digits}f}")

    table = pd.DataFrame({"setting": summary["setting"]})
    for metric in METRICS:
        table[metric] = summary.apply(cell, axis=1, metric=metric)
    table["identical predictions to LS"] = [f"{identical.loc[s, 'sum']}/{identical.loc[s, 'size']}" for s in summary["setting"]]
    return table.set_index("setting")


def headline_metrics(runs: pd.DataFrame) -> dict[str, Any]:
    """metrics.json content: LS's and the best gradient-bearing setting's mean test macro-F1
    (top level, numeric) and the per-setting means and stds (nested)."""
    summary = summarize(runs, ["setting"], METRICS).set_index("setting")
    bearing = summary.drop(index=[s for s in (BASELINE, *GRADIENT_FREE) if s in summary.index])
    metrics: dict[str, Any] = {
        "ls_macro_f1": summary.loc[BASELINE, "macro_f1_mean"],
        "ls_far_error_rate": summary.loc[BASELINE, "far_error_rate_mean"],
        "gradient_free_identical_share": float(runs[runs["setting"].isin(GRADIENT_FREE)]["identical_to_ls"].mean())
        if runs["setting"].isin(GRADIENT_FREE).any() else None,
        "per_setting": summary.drop(columns="n").to_dict(orient="index"),
    }
    if len(bearing):
        best = bearing["macro_f1_mean"].idxmax()
        metrics.update(best_pcl_setting=best, best_pcl_macro_f1=bearing.loc[best, "macro_f1_mean"])
    return metrics
