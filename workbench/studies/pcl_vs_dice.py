"""The PCL-vs-Dice teaching walkthrough (notebook 05): the same relevance data, one model, five losses.

:func:`data_summary` (what was loaded, from the data itself), :func:`label_table` and :func:`majority_baseline` (the
imbalance); :data:`COMPARISON` (CE, LS, DSC with the released
``reference`` preset, PCL as released and the gradient-bearing ``expected_cost``), run by ``pcl.run_ablation``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from datasets import Dataset

from workbench.checks import check_names
from workbench.config import DataConfig, LossSpec
from workbench.data import RELEASES, label_counts, label_names
from workbench.decisions import tuned_predictions
from workbench.evidence import Claim, compare
from workbench.metrics import classification_report
from workbench.stats import formatted, mean_std_table, row_statistics, summarize
from workbench.train import fixed_hyperparameters

COMPARISON: dict[str, LossSpec] = {
    "CE": LossSpec("ce"),
    "LS": LossSpec("ls"),
    "DSC": LossSpec("dsc", {"preset": "reference"}),
    "PCL reference": LossSpec("pcl", {"variant": "reference"}),
    "PCL expected_cost (global)": LossSpec("pcl", {"variant": "expected_cost", "counts": "global"}),
}
"""The side-by-side in teaching order; LS and PCL take epsilon (:func:`comparison_specs`)."""
SMALL_TEST_CLASS = 20  # test examples below which a class's recall and F1 are too noisy to read
GENERATED = {
    "sample_relevance": "generated query-title pairs in QBQTC's label shares (the workbench's sample)",
    "sample_sentences": "generated review sentences (the workbench's sample)",
}


def comparison_specs(settings: Sequence[str], epsilon: float, cost_matrix=None) -> dict[str, LossSpec]:
    """The specs of ``settings`` (:data:`COMPARISON` keys): LS and PCL at ``epsilon``, PCL with ``cost_matrix`` if
    one is given."""
    specs = {}
    chosen = check_names("settings", settings, list(COMPARISON), required=("CE", "LS"))  # the notebook shows both
    for setting in chosen:
        spec = COMPARISON[setting]
        extra = {"epsilon": epsilon} if spec.name in ("ls", "pcl") else {}
        if cost_matrix is not None and spec.name == "pcl" and spec.params["variant"] != "reference":
            extra["cost_matrix"] = [list(row) for row in cost_matrix]
        specs[setting] = spec.replace(params={**spec.params, **extra})
    return specs


def label_table(splits: Mapping[str, Dataset]) -> pd.DataFrame:
    """Label counts, one row per label name and one column per split, plus each split's shares (``<split> share``)."""
    names = label_names(splits["train"])
    counts = pd.DataFrame({split: label_counts(data, len(names)) for split, data in splits.items()}, index=names)
    return pd.concat([counts, (counts / counts.sum()).add_suffix(" share")], axis=1).rename_axis("label")


def data_summary(data: DataConfig, splits: Mapping[str, Dataset]) -> str:
    """What was loaded, in one paragraph the notebook prints: the source (a file's name), the classes (ordered or not)
    with their training counts, each split's size, and a warning for each test class with fewer than
    :data:`SMALL_TEST_CLASS` examples (its recall and F1 are too noisy to read)."""
    names = label_names(splits["train"])
    counts = label_table(splits)
    provenance = getattr(splits, "provenance", None) or {}
    train_file = (provenance.get("splits", {}).get("train") or {}).get("file")
    if data.source in GENERATED:
        what = GENERATED[data.source]
    elif data.source in RELEASES:
        what = RELEASES[data.source].description + (f", from {train_file}" if train_file else "")
    else:
        what = f"the table {train_file or data.path} (columns {data.text!r}, {data.label!r})"
    order = "ordered" if data.is_ordinal else "unordered"
    train = counts["train"]
    classes = ", ".join(f"{name!r} {int(train[name])} ({train[name] / train.sum():.0%})" for name in names)
    sizes = ", ".join(f"{split} {int(counts[split].sum())}" for split in splits)
    text = f"Data: {what}. {len(names)} {order} classes, training examples per class: {classes}. Examples: {sizes}."
    tested = {name: int(counts.loc[name, "test"]) for name in names} if "test" in splits else {}
    small = [(name, count) for name, count in tested.items() if count < SMALL_TEST_CLASS]
    if small:
        listed = ", ".join(f"{name!r} ({count})" for name, count in small)
        text += (
            f" Warning: the test split holds fewer than {SMALL_TEST_CLASS} examples of {listed}: the per-class"
            " recall and F1 of these classes below are too noisy to read (one example more or less moves them by over"
            " 5 points)."
        )
    return text


def majority_baseline(splits: Mapping[str, Dataset], ordinal: bool = True) -> dict[str, Any]:
    """Always predicting the training majority: majority_label and its test accuracy, macro_f1 (far_error_rate)."""
    names = label_names(splits["train"])
    majority = int(np.argmax(label_counts(splits["train"], len(names))))
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    report = classification_report(gold, np.full_like(gold, majority), label_names=names, ordinal=ordinal)
    metrics = ("macro_f1", "accuracy", "far_error_rate")
    return {"majority_label": names[majority], **{metric: report[metric] for metric in metrics if metric in report}}


def recall_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per-class test recall (%), one row per setting and one column per label, "mean ± std" over seeds."""
    recalls = [column for column in runs.columns if column.startswith("recall_")]
    if not recalls:
        raise ValueError(f"runs: has no recall_<label> columns (columns: {list(runs.columns)})")
    long = runs.melt(id_vars=["setting", "seed"], value_vars=recalls, var_name="label", value_name="recall")
    long["label"] = long["label"].str.removeprefix("recall_")
    return mean_std_table(
        summarize(long, ["setting", "label"], ["recall"]), rows="setting", columns="label", metric="recall"
    )


def headline_metrics(runs: pd.DataFrame, baseline: Mapping[str, Any]) -> dict[str, Any]:
    """metrics.json ``metrics``: ``<setting>_macro_f1`` (``{"mean", "std", "n"}``; e.g. ``pcl_expected_cost_macro_f1``),
    ``majority_macro_f1``, ``majority_accuracy`` and ``pcl_reference_identical_share`` when that setting ran."""
    metrics: dict[str, Any] = {}
    for _, row in summarize(runs, ["setting"], ["macro_f1"]).iterrows():
        metrics[row["setting"].split(" (")[0].lower().replace(" ", "_") + "_macro_f1"] = row_statistics(row, "macro_f1")
    metrics.update(majority_macro_f1=float(baseline["macro_f1"]), majority_accuracy=float(baseline["accuracy"]))
    reference = runs[runs["setting"] == "PCL reference"]
    if len(reference):
        metrics["pcl_reference_identical_share"] = float(reference["identical_to_ls"].mean())
    return metrics


def this_run(runs: pd.DataFrame, baseline: Mapping[str, Any]) -> str:
    """The run's key numbers in one line (test, mean ± std over seeds), which the notebook's reading quotes."""
    metrics = [metric for metric in ("macro_f1", "far_error_rate") if metric in runs.columns]
    cells = formatted(summarize(runs, ["setting"], metrics), metrics).set_index("setting")
    recall = recall_table(runs)
    identical = runs.groupby("setting", sort=False)["identical_to_ls"].agg(["sum", "size"])
    text = (
        f"This run ({runs['seed'].nunique()} seed(s), test): always predicting {baseline['majority_label']!r}: "
        f"accuracy {baseline['accuracy']:.3f}, macro-F1 {baseline['macro_f1']:.3f}. Macro-F1 "
        + ", ".join(f"{setting} {cell}" for setting, cell in cells["macro_f1"].items())
        + ". Recall (%) of CE: "
        + (
            ", ".join(f"{label} {recall.loc['CE', label]}" for label in recall.columns)
            if "CE" in recall.index
            else "n/a"
        )
        + ". Identical predictions to LS: "
        + ", ".join(f"{setting} {row['sum']}/{row['size']}" for setting, row in identical.iterrows() if setting != "LS")
    )
    if "far_error_rate" in runs.columns:
        text += ". Far-error rate: " + ", ".join(
            f"{setting} {cell}" for setting, cell in cells["far_error_rate"].items()
        )
    return text + "."


DICE_CLAIM = Claim(
    "arXiv 1911.02855",
    "abstract (a multi-class task: one-vs-rest, the released preset)",
    "we propose to use dice loss in replacement of the standard cross-entropy objective for data-imbalanced NLP tasks.",
)


def dice_rows(
    comparison: Any, splits: Mapping[str, Dataset], test: str, encoder: str, n_resamples: int = 2000
) -> list[dict[str, Any]]:
    """DSC (the released preset, one-vs-rest) against CE on macro-F1 (``pcl.run_ablation``'s result, seeds paired),
    with argmax decisions and with per-class offsets tuned on validation for both; none unless both ran. (The PCL rows
    of the walkthrough come from ``pcl.claim_rows``.)"""
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    validation = np.asarray(splits["validation"]["label"], dtype=np.int64)
    rows: list[dict[str, Any]] = []
    if {"DSC", "CE"} <= set(comparison.runs["setting"]):

        def argmax(setting: str) -> dict[int, np.ndarray]:
            return {seed: pred for (name, seed), pred in comparison.predictions.items() if name == setting}

        def fits(setting: str) -> dict[int, Any]:
            return {seed: fit for (name, seed), fit in comparison.fits.items() if name == setting}

        tuned = {setting: tuned_predictions(fits(setting), validation, "macro_f1") for setting in ("DSC", "CE")}
        for rule, method, baseline in (
            ("argmax", argmax("DSC"), argmax("CE")),
            ("per-class offsets tuned on validation", tuned["DSC"], tuned["CE"]),
        ):
            rows.append(
                compare(
                    DICE_CLAIM,
                    setting=f"{encoder}, {rule}",
                    method="DSC (released preset)",
                    baseline="CE",
                    metric="macro_f1",
                    y_true=gold,
                    method_predictions=method,
                    baseline_predictions=baseline,
                    test=test,
                    num_labels=len(comparison.label_names),
                    n_resamples=n_resamples,
                )
            )
    return rows


def hyperparameters(specs: Mapping[str, LossSpec], training: Mapping[str, Any], train: Dataset) -> dict[str, Any]:
    """What notebook 05 fixes and what it chooses on validation, for the results page (issue 36): the training
    section's optimiser settings and each setting's loss hyperparameters (``specs``), the same for every seed, none
    tuned; chosen on validation: the epoch, and the decision rules of the rows that say so (for both sides)."""
    return fixed_hyperparameters(
        specs,
        training,
        train,
        epoch="the probe's epoch with the best validation macro-F1, the same rule for every loss",
        decision_rule="per-class offsets tuned on validation, for both sides of a tuned row",
    )
