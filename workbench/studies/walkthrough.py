"""The PCL-vs-Dice teaching walkthrough: the same relevance data, one probe, five losses.

A teacher's sequence on the 3-class query-title relevance task (labels 0/1/2, the majority
class 1; CLUE QBQTC or the generated sample):

* :func:`label_table` and :func:`majority_baseline`: the imbalance, and what always predicting
  the training majority scores (high accuracy, low macro-F1);
* :func:`run_comparison`: CE, LS, DSC (Li et al. 2020, multi-class one-vs-rest, the released
  code's ``reference`` preset), PCL as released (``reference``) and the gradient-bearing PCL
  ``expected_cost`` form, each trained with the same seeds on the same splits by
  ``workbench.studies.pcl``'s pair probe (or a fine-tuned transformer); held-out test scores,
  per-class recall and whether the test predictions equal LS's with the same seed;
* :func:`recall_table`: per-class recall, mean ± std over seeds (``studies.pcl.ablation_table``
  gives the macro-F1 / accuracy / far-error view of the same runs);
* :func:`key_metrics`: the numbers for ``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from datasets import Dataset, DatasetDict
from torch import nn

from workbench.data import label_counts, label_names
from workbench.losses import build_loss
from workbench.metrics import classification_report
from workbench.studies.dice import mean_std_table, summarize
from workbench.studies.pcl import (
    METRICS,
    PCL_SETTINGS,
    Ablation,
    ProbeTraining,
    run_ablation,
    setting_loss,
)

LossSpec = tuple[str, dict[str, Any]]
"""(registry name for ``build_loss``, parameters)."""

OTHER_LOSSES: dict[str, LossSpec] = {
    "CE": ("ce", {}),
    "DSC": ("dsc", {"preset": "reference"}),
}
"""The comparison's losses that are not PCL-study settings (those come from ``PCL_SETTINGS`` at epsilon)."""

COMPARISON = ("CE", "LS", "DSC", "PCL reference", "PCL expected_cost (global)")
"""The walkthrough's side-by-side, in teaching order."""


def comparison_loss(setting: str, epsilon: float, train: Dataset) -> nn.Module:
    """The loss module of ``setting``: CE or DSC (:data:`OTHER_LOSSES`), else the PCL study's
    setting (LS and the PCL forms, with ``epsilon`` and the training split's label counts)."""
    if setting in OTHER_LOSSES:
        name, params = OTHER_LOSSES[setting]
        return build_loss(name, **params)
    return setting_loss(setting, epsilon, train)


def label_table(splits: Mapping[str, Dataset]) -> pd.DataFrame:
    """Label counts, one row per label name and one column per split, plus each split's shares
    (``<split> share``)."""
    names = label_names(splits["train"])
    counts = pd.DataFrame({split: label_counts(data, len(names)) for split, data in splits.items()}, index=names)
    shares = (counts / counts.sum()).add_suffix(" share")
    table = pd.concat([counts, shares], axis=1)
    table.index.name = "label"
    return table


def majority_baseline(splits: Mapping[str, Dataset]) -> dict[str, Any]:
    """Scores on the test split of always predicting the training split's most frequent label.

    Returns ``majority_label`` (its name), ``accuracy`` (= the test share of that label),
    ``macro_f1`` (the majority's F1 over K: the other classes score 0) and ``far_error_rate``.
    """
    names = label_names(splits["train"])
    majority = int(np.argmax(label_counts(splits["train"], len(names))))
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    report = classification_report(gold, np.full_like(gold, majority), label_names=names)
    return {"majority_label": names[majority], **{metric: report[metric] for metric in METRICS}}


def run_comparison(
    splits: DatasetDict,
    settings: Sequence[str] = COMPARISON,
    seeds: Sequence[int] = (0, 1, 2),
    epsilon: float = 0.1,
    training: ProbeTraining | None = None,
    tokenizer: Any = None,
    model: Mapping[str, Any] | None = None,
    model_training: Mapping[str, Any] | None = None,
) -> Ablation:
    """``studies.pcl.run_ablation`` over the walkthrough's losses: :data:`OTHER_LOSSES` or
    ``PCL_SETTINGS`` keys (including ``"LS"``), built by :func:`comparison_loss`; the pair probe
    (or, with a trainer ``model`` section and its ``model_training``, that transformer fine-tuned
    by the trainer; epoch chosen on validation macro-F1) once per setting x seed, scored on the
    test split, with per-class recall and whether the predictions equal LS's with the same seed."""
    return run_ablation(
        splits, settings, seeds, epsilon, training, tokenizer,
        loss_for=comparison_loss, known_settings=[*OTHER_LOSSES, *PCL_SETTINGS],
        model=model, model_training=model_training,
    )


def recall_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-class test recall (%), one row per setting and one column per label, "mean ± std"
    over seeds (sample std; the mean alone for one seed), via ``studies.dice.mean_std_table``."""
    recalls = [column for column in runs.columns if column.startswith("recall_")]
    if not recalls:
        raise ValueError(f"runs: has no recall_<label> columns (columns: {list(runs.columns)})")
    long = runs.melt(id_vars=["setting", "seed"], value_vars=recalls, var_name="label", value_name="recall")
    long["label"] = long["label"].str.removeprefix("recall_")
    return mean_std_table(summarize(long, ["setting", "label"], ["recall"]), rows="setting", columns="label", metric="recall")


def _key(setting: str) -> str:
    return setting.split(" (")[0].lower().replace(" ", "_")


def key_metrics(runs: pd.DataFrame, baseline: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json content: ``<setting>_macro_f1`` (mean over seeds; e.g. ``ce_macro_f1``,
    ``pcl_expected_cost_macro_f1``), the majority baseline's ``majority_macro_f1`` and
    ``majority_accuracy``, ``pcl_reference_identical_share`` (share of seeds where PCL reference
    predicted exactly as LS; None without that setting) and the per-setting means and stds (nested)."""
    summary = summarize(runs, ["setting"], [*METRICS, *(c for c in runs.columns if c.startswith("recall_"))])
    summary = summary.set_index("setting")
    reference = runs[runs["setting"] == "PCL reference"]
    return {
        **{f"{_key(setting)}_macro_f1": float(summary.loc[setting, "macro_f1_mean"]) for setting in summary.index},
        "majority_macro_f1": float(baseline["macro_f1"]),
        "majority_accuracy": float(baseline["accuracy"]),
        "pcl_reference_identical_share": float(reference["identical_to_ls"].mean()) if len(reference) else None,
        "n_seeds": int(runs["seed"].nunique()),
        "per_setting": summary.drop(columns="n").to_dict(orient="index"),
    }
