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

from workbench.config import DataConfig, LossSpec, TrainingConfig
from workbench.data import RELEASES, label_counts, label_names
from workbench.decisions import tuned_predictions
from workbench.evidence import N_RESAMPLES, Claim, compare
from workbench.metrics import classification_report, small_class_warning
from workbench.stats import formatted, mean_std_table, row_statistics, summarize
from workbench.train import extra_rows, fixed_hyperparameters, offered, settings_specs

COMPARISON: dict[str, LossSpec] = offered(("CE", "LS", "DSC reference", "PCL reference", "PCL expected_cost (global)"))
"""The side-by-side in teaching order; LS and PCL take epsilon (:func:`comparison_specs`)."""
EXTRA_REFERENCES = ("CE", "LS", "DSC reference")
"""What an extra setting is compared with on the results page: CE, LS and each paper's method as released (PCL as
released is LS by construction, ``pcl.IDENTITY_REASON``: rows against it would repeat the LS rows)."""
GENERATED = {
    "sample_relevance": "generated query-title pairs in QBQTC's label shares (the workbench's sample)",
    "sample_sentences": "generated review sentences (the workbench's sample)",
}


def comparison_specs(
    settings: Sequence[str],
    epsilon: float,
    cost_matrix: Sequence[Sequence[float]] | None = None,
    extra_settings: Mapping[str, Any] | None = None,
) -> dict[str, LossSpec]:
    """The specs of ``settings`` (:data:`COMPARISON` keys, "CE" and "LS" among them: the notebook shows both) and of
    ``extra_settings`` (``workbench.train.settings_specs``): LS and PCL at ``epsilon``, PCL with ``cost_matrix`` if
    one is given. Two settings whose metrics.json keys (:func:`metric_key`) would be one are a ValueError."""
    specs = settings_specs(
        settings,
        COMPARISON,
        required=("CE", "LS"),
        epsilon=epsilon,
        cost_matrix=cost_matrix,
        extra_settings=extra_settings,
    )
    metric_keys(specs)
    return specs


def metric_key(setting: str) -> str:
    """A setting's metrics.json key stem: its label before " (", lower case, spaces as "_" ("PCL expected_cost
    (global)" -> "pcl_expected_cost")."""
    return setting.split(" (")[0].lower().replace(" ", "_")


def metric_keys(settings: Sequence[str]) -> dict[str, str]:
    """Setting -> :func:`metric_key`; ValueError naming two settings that share one, or a setting whose key is
    "majority" (the majority baseline's): a metric would be lost."""
    settings = list(dict.fromkeys(settings))
    keys: dict[str, str] = {"always predicting the majority": "majority"}
    for setting in settings:
        shared = [other for other, key in keys.items() if key == metric_key(setting)]
        if shared:
            raise ValueError(
                f"settings: {shared[0]!r} and {setting!r} would share the metrics.json key "
                f"{metric_key(setting)}_macro_f1; give one of them another label"
            )
        keys[setting] = metric_key(setting)
    return {setting: key for setting, key in keys.items() if setting in settings}


def label_table(splits: Mapping[str, Dataset]) -> pd.DataFrame:
    """Label counts, one row per label name and one column per split, plus each split's shares (``<split> share``)."""
    names = label_names(splits["train"])
    counts = pd.DataFrame({split: label_counts(data, len(names)) for split, data in splits.items()}, index=names)
    return pd.concat([counts, (counts / counts.sum()).add_suffix(" share")], axis=1).rename_axis("label")


def data_summary(data: DataConfig, splits: Mapping[str, Dataset]) -> str:
    """What was loaded, in one paragraph the notebook prints: the source (a file's name), the classes (ordered or not)
    with their training counts, each split's size, and a warning for each test class with fewer than
    :data:`~workbench.metrics.SMALL_TEST_CLASS` examples (its recall and F1 are too noisy to read)."""
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
    warning = small_class_warning(tested)
    if warning:
        text += f" {warning}"
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
    keys = metric_keys(runs["setting"])
    for _, row in summarize(runs, ["setting"], ["macro_f1"]).iterrows():
        metrics[keys[row["setting"]] + "_macro_f1"] = row_statistics(row, "macro_f1")
    metrics.update(majority_macro_f1=float(baseline["macro_f1"]), majority_accuracy=float(baseline["accuracy"]))
    reference = runs[runs["setting"] == "PCL reference"]
    if len(reference):
        metrics["pcl_reference_identical_share"] = float(reference["identical_to_ls"].mean())
    return metrics


def headline_descriptions(runs: pd.DataFrame) -> dict[str, str]:
    """What each key :func:`headline_metrics` can write holds, for metrics.json's descriptions."""
    return {
        **{f"{key}_macro_f1": f"test macro-F1 of {setting}" for setting, key in metric_keys(runs["setting"]).items()},
        "majority_macro_f1": "test macro-F1 of always predicting the training majority",
        "majority_accuracy": "test accuracy of always predicting the training majority",
        "pcl_reference_identical_share": "share of seeds where PCL reference predicted exactly as LS",
    }


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


PCL_ROWS = "The PCL against LS rows (Table 4) of the same data and settings"
"""What the walkthrough's record points to instead of repeating (notebook 02 records them once)."""


def dice_rows(
    comparison: Any, splits: Mapping[str, Dataset], test: str, encoder: str, n_resamples: int = N_RESAMPLES
) -> list[dict[str, Any]]:
    """DSC (the released preset, one-vs-rest) against CE on macro-F1 (``pcl.run_ablation``'s result, seeds paired),
    with argmax decisions and with per-class offsets tuned on validation for both; none unless both ran. The PCL rows
    are notebook 02's (:data:`PCL_ROWS`): the walkthrough points to them."""
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    validation = np.asarray(splits["validation"]["label"], dtype=np.int64)
    counts = label_counts(splits["train"], len(comparison.label_names))
    rows: list[dict[str, Any]] = []
    if {"DSC reference", "CE"} <= set(comparison.runs["setting"]):

        def argmax(setting: str) -> dict[int, np.ndarray]:
            return {seed: pred for (name, seed), pred in comparison.predictions.items() if name == setting}

        def fits(setting: str) -> dict[int, Any]:
            return {seed: fit for (name, seed), fit in comparison.fits.items() if name == setting}

        tuned = {
            setting: tuned_predictions(fits(setting), validation, "macro_f1") for setting in ("DSC reference", "CE")
        }
        for rule, method, baseline in (
            ("argmax", argmax("DSC reference"), argmax("CE")),
            ("per-class offsets tuned on each side's validation", tuned["DSC reference"], tuned["CE"]),
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
                    train_counts=list(counts),
                    decision_rule=rule,
                    n_resamples=n_resamples,
                )
            )
    return rows


def extra_setting_rows(
    comparison: Any,
    splits: Mapping[str, Dataset],
    test: str,
    encoder: str,
    extra_settings: Mapping[str, Any] | None,
    n_resamples: int = N_RESAMPLES,
) -> list[dict[str, Any]]:
    """Each setting of ``extra_settings`` that ran (``pcl.run_ablation``'s result) against :data:`EXTRA_REFERENCES`
    that ran, on macro-F1 as :func:`dice_rows`, argmax decisions for both sides, seeds paired
    (``workbench.train.extra_rows``: ``workbench.evidence.compare``, as every row; an identity row where the
    setting trains as the reference by construction, from the comparison's ``specs``)."""
    return extra_rows(
        extra_settings,
        comparison.predictions,
        EXTRA_REFERENCES,
        y_true=np.asarray(splits["test"]["label"], dtype=np.int64),
        train_counts=list(label_counts(splits["train"], len(comparison.label_names))),
        test=test,
        setting=f"{encoder}, argmax",
        metrics=("macro_f1",),
        num_labels=len(comparison.label_names),
        n_resamples=n_resamples,
        specs=comparison.specs,
    )


def hyperparameters(training: TrainingConfig, specs: Mapping[str, LossSpec], train: Dataset) -> dict[str, Any]:
    """What notebook 05 fixes and what it chooses on validation, for the results page (issue 36): ``fixed``, the
    training section's optimiser settings and each setting's loss hyperparameters (``specs``, the same for every seed,
    none tuned: ``workbench.train.fixed_hyperparameters``); ``chosen`` on validation: each fit's epoch, and the
    decision rule of the rows that say so (for both sides)."""
    return {
        "fixed": fixed_hyperparameters(training, specs, train),
        "chosen": {
            "epoch": "each fit's epoch with the best validation macro-F1, the same rule for every loss",
            "decision rule": "per-class offsets tuned on each side's validation for both sides of a tuned row, argmax "
            "for both sides of every other row",
        },
    }
