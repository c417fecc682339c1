"""The PCL-vs-Dice teaching walkthrough (notebook 05): the same relevance data, one model, five losses.

A teacher's sequence on the 3-class query-title relevance task (labels 0/1/2, the majority
class 1; CLUE QBQTC or the generated sample):

* :func:`label_table` and :func:`majority_baseline`: the imbalance, and what always predicting
  the training majority scores (high accuracy, low macro-F1);
* :data:`COMPARISON` / :func:`comparison_specs`: CE, LS, DSC (Li et al. 2020, multi-class
  one-vs-rest, the released code's ``reference`` preset), PCL as released (``reference``) and
  the gradient-bearing PCL ``expected_cost`` form, as loss specs at one epsilon; the notebook
  trains them with ``workbench.studies.pcl.run_ablation`` (same seeds, same splits);
* :func:`recall_table`: per-class recall, mean ± std over seeds;
* :func:`key_metrics`: the numbers for ``metrics.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from datasets import Dataset

from workbench.data import label_counts, label_names
from workbench.losses import LossSpec
from workbench.metrics import classification_report
from workbench.stats import mean_std_table, row_statistics, summarize

COMPARISON: dict[str, LossSpec] = {
    "CE": LossSpec("ce"),
    "LS": LossSpec("ls"),
    "DSC": LossSpec("dsc", {"preset": "reference"}),
    "PCL reference": LossSpec("pcl", {"variant": "reference"}),
    "PCL expected_cost (global)": LossSpec("pcl", {"variant": "expected_cost", "counts": "global"}),
}
"""The walkthrough's side-by-side in teaching order; LS and PCL take epsilon (:func:`comparison_specs`)."""

TAKES_EPSILON = ("ls", "pcl")
METRICS = ("macro_f1", "accuracy", "far_error_rate")


def comparison_specs(settings: Sequence[str], epsilon: float) -> dict[str, LossSpec]:
    """The specs of ``settings`` (:data:`COMPARISON` keys), LS and PCL at ``epsilon``."""
    unknown = [setting for setting in settings if setting not in COMPARISON]
    if unknown:
        raise ValueError(f"settings: must be among {list(COMPARISON)}, got unknown {unknown}")
    return {
        setting: COMPARISON[setting].replace(params={**COMPARISON[setting].params, "epsilon": epsilon})
        if COMPARISON[setting].name in TAKES_EPSILON
        else COMPARISON[setting]
        for setting in settings
    }


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
    report = classification_report(gold, np.full_like(gold, majority), label_names=names, ordinal=True)
    return {"majority_label": names[majority], **{metric: report[metric] for metric in METRICS}}


def recall_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-class test recall (%), one row per setting and one column per label, "mean ± std"
    over seeds (sample std; the mean alone for one seed)."""
    recalls = [column for column in runs.columns if column.startswith("recall_")]
    if not recalls:
        raise ValueError(f"runs: has no recall_<label> columns (columns: {list(runs.columns)})")
    long = runs.melt(id_vars=["setting", "seed"], value_vars=recalls, var_name="label", value_name="recall")
    long["label"] = long["label"].str.removeprefix("recall_")
    return mean_std_table(summarize(long, ["setting", "label"], ["recall"]), rows="setting", columns="label", metric="recall")


def _key(setting: str) -> str:
    return setting.split(" (")[0].lower().replace(" ", "_")


def key_metrics(runs: pd.DataFrame, baseline: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json ``metrics``: ``<setting>_macro_f1`` over seeds (``{"mean", "std", "n"}``; e.g.
    ``ce_macro_f1``, ``pcl_expected_cost_macro_f1``), the majority baseline's ``majority_macro_f1``
    and ``majority_accuracy``, and ``pcl_reference_identical_share`` (share of seeds where PCL
    reference predicted exactly as LS) when that setting ran."""
    summary = summarize(runs, ["setting"], ["macro_f1"])
    metrics: dict[str, Any] = {
        f"{_key(row['setting'])}_macro_f1": row_statistics(row, "macro_f1") for _, row in summary.iterrows()
    }
    metrics.update(majority_macro_f1=float(baseline["macro_f1"]), majority_accuracy=float(baseline["accuracy"]))
    reference = runs[runs["setting"] == "PCL reference"]
    if len(reference):
        metrics["pcl_reference_identical_share"] = float(reference["identical_to_ls"].mean())
    return metrics
