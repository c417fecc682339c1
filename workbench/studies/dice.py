"""Experiments of "Dice Loss for Data-imbalanced NLP Tasks" (Li et al., ACL 2020, arXiv 1911.02855), notebook 01.

Table 8 (:func:`imbalance_study`), Table 9 (:func:`balanced_splits`), Table 10 (:func:`tversky_sweep`) and the
released code's NaN at p = 1 (:func:`saturation_check`). Each run fits a :class:`workbench.train.Fitter`; the scores
are the test F1 of the positive class (the paper's metric), macro-F1 and accuracy. The positive class
(:func:`scored_label`) is label 1 of a binary task; a task of more classes scores its smallest training class against
the rest (Table 8's sets are built for it), and the dice losses score every class one-vs-rest and average over classes
(``class_reduction="mean"``; the released code sums).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset, DatasetDict
from torch import nn

from workbench.checks import check_bool, check_choice, check_number, check_seeds
from workbench.config import DataConfig, LossSpec
from workbench.data import (
    TABLE8_SETTINGS,
    Splits,
    SynonymAugmenter,
    downsample,
    label_counts,
    label_names,
    load_splits,
    rebalance,
    table8_training_sets,
)
from workbench.losses import build_loss
from workbench.metrics import classification_report, small_class_warning
from workbench.stats import formatted, row_statistics, summarize
from workbench.synonyms import SynonymTable
from workbench.train import Fitter, fixed_hyperparameters, loss_from_spec, offered, settings_specs

LOSS_ZOO: dict[str, LossSpec] = offered(
    ("CE", "WCE", "FL", "DL", "TL", "DSC", "DSC reference", "class-balanced CE", "logit-adjusted CE")
)
"""The paper's losses (sec. 3) with the settings of this study (``workbench.train.LOSS_SETTINGS``: FL gamma 2, DL
gamma 1, TL alpha 0.3 beta 0.7, DSC eq. 12), the released DSC, and two fair baselines."""
AUGMENTATIONS = ("synonyms", "copies")
"""Table 8's added examples: synonym replacement (new sentences, the paper's reading) or exact copies (an option)."""
METRICS = ("f1_positive", "macro_f1", "accuracy")
POSITIVE_LABEL = 1
"""The positive class of a binary task."""


def scored_label(train: Dataset) -> int:
    """The class the study scores and Table 8 resamples (its "positive" class): label 1 of a binary task, else the class
    with the fewest examples in ``train`` (the lowest id among ties)."""
    counts = label_counts(train)
    return POSITIVE_LABEL if len(counts) == 2 else int(np.argmin(counts))


def scored_class_line(splits: Mapping[str, Dataset], positive: int) -> str:
    """The class the study scores (:func:`scored_label`), its examples in each split, and the warning of
    :func:`~workbench.metrics.small_class_warning` when the test split holds too few of them to read its F1."""
    names = label_names(splits["train"])
    why = "label 1 of a binary task" if len(names) == 2 else "the smallest training class, scored against the rest"
    counts = ", ".join(f"{split} {label_counts(data, len(names))[positive]}" for split, data in splits.items())
    line = f"The scored (positive) class: {names[positive]!r}, {why}; its examples: {counts}."
    if "test" in splits:
        warning = small_class_warning({names[positive]: label_counts(splits["test"], len(names))[positive]})
        line += f" {warning}" if warning else ""
    return line


def check_study_options(positive_share: float | None, thin_evaluation: bool) -> None:
    """:func:`study_splits`' options before any data is read: ``positive_share`` None or in (0, 0.5], a bool
    ``thin_evaluation``; ValueError naming the parameter."""
    if positive_share is not None:
        check_number("positive_share", positive_share, 0, 0.5, low_inclusive=False)
    check_bool("thin_evaluation", thin_evaluation)


def study_splits(
    data: DataConfig | Mapping[str, Any], positive_share: float | None = None, thin_evaluation: bool = False
) -> DatasetDict:
    """A task's splits (two or more classes and a test split, with their provenance); ``positive_share`` in (0, 0.5]
    down-samples the training examples of the positive class (:func:`scored_label`) to that share, and with
    ``thin_evaluation`` those of validation and test too (Table 8 tests on a set with the original training set's
    share); the provenance records it (``downsampled``)."""
    check_study_options(positive_share, thin_evaluation)
    splits = load_splits(data)
    if len(label_names(splits["train"])) < 2 or "test" not in splits:
        raise ValueError(
            f"data: must give two or more labels and a test split, got labels {label_names(splits['train'])} and "
            f"splits {list(splits)}"
        )
    if positive_share is None:
        return splits
    seed = DataConfig.from_mapping(data).seed
    ratio = positive_share / (1.0 - positive_share)
    positive = scored_label(splits["train"])
    thinned = list(splits) if thin_evaluation else ["train"]
    result = Splits(dict(splits))
    provenance = copy.deepcopy(splits.provenance or {"splits": {}})
    for name in thinned:
        result[name] = rebalance(splits[name], ratio, positive_label=positive, method="downsample", seed=seed)
        entry = provenance["splits"].setdefault(name, {})
        entry.update(examples=len(result[name]), downsampled={"positive_share": positive_share, "seed": seed})
    result.provenance = provenance
    return result


@dataclass
class Table8Sets:
    """Table 8's training sets (setting -> split), the ``augmentation``, the augmenter's ``calls`` and ``unchanged``,
    and the ``positive_label`` they were built for (:func:`scored_label`; every other class is a negative) and, with
    more than two classes, its name ``smallest_class``."""

    sets: OrderedDict[str, Dataset]
    augmentation: str
    calls: int
    unchanged: int
    positive_label: int = POSITIVE_LABEL
    smallest_class: str | None = None


def zoo(parameter: str, names: Sequence[str], extra_settings: Mapping[str, Any] | None = None) -> dict[str, LossSpec]:
    """The :data:`LOSS_ZOO` specs of ``names``, the notebook's ``parameter`` (each name once), then those of
    ``extra_settings`` (``workbench.train.settings_specs``)."""
    return settings_specs(names, LOSS_ZOO, parameter=parameter, extra_settings=extra_settings)


def table8_sets(
    train: Dataset, seed: int = 0, augmentation: str = "synonyms", lexicon: str | None = None
) -> Table8Sets:
    """Table 8's five training sets (:func:`workbench.data.table8_training_sets`) for the positive class
    (:func:`scored_label`) against the rest, added examples by ``synonyms`` (a jieba word replaced from ``lexicon``, a
    Cilin / .tsv path or None: the shipped one) or ``copies`` (not the paper's)."""
    check_choice("augmentation", augmentation, AUGMENTATIONS)
    augmenter = SynonymAugmenter(SynonymTable.from_path(lexicon), seed=seed) if augmentation == "synonyms" else None
    positive = scored_label(train)
    names = label_names(train)
    sets = table8_training_sets(train, seed, augmenter, positive_label=positive)
    calls = getattr(augmenter, "calls", 0)
    unchanged = getattr(augmenter, "unchanged", 0)
    return Table8Sets(sets, augmentation, calls, unchanged, positive, names[positive] if len(names) > 2 else None)


def table8_counts(table8: Table8Sets) -> pd.DataFrame:
    """Per setting: negative (every class but the positive one), positive, total, positive share, added (rows appended
    to the original) and added rows whose text equals an original training text (every copy, and replacements that
    found no synonym)."""
    sets = table8.sets
    original = table8.sets["original"]
    positives = [label_counts(train)[table8.positive_label] for train in sets.values()]
    counts = pd.DataFrame(
        [(len(train) - n, n) for train, n in zip(sets.values(), positives)],
        index=list(sets),
        columns=["negative", "positive"],
    )
    counts["total"] = counts.sum(axis=1)
    counts["positive share"] = counts["positive"] / counts["total"]
    added = [train["text"][len(original) :] for train in sets.values()]
    counts["added"] = [len(texts) for texts in added]
    seen = set(original["text"])
    counts["added, same text as an original example"] = [sum(text in seen for text in texts) for texts in added]
    return counts.rename_axis("setting")


def balanced_splits(splits: DatasetDict, seed: int = 0) -> DatasetDict:
    """Every split down-sampled to equal classes: the balanced, accuracy-oriented task of the Table 9 caveat (with more
    than two classes, each class down-sampled to the split's smallest, as SST-5 in the paper's Table 9)."""
    if len(label_names(splits)) > 2:
        return DatasetDict({name: _equal_classes(split, seed) for name, split in splits.items()})
    return DatasetDict({name: rebalance(split, 1.0, method="downsample", seed=seed) for name, split in splits.items()})


def _equal_classes(split: Dataset, seed: int) -> Dataset:
    """``split`` with every class down-sampled (seeded, per class) to the size of its smallest class."""
    smallest = min(label_counts(split))
    for label in range(len(label_names(split))):
        split = downsample(split, label, target=smallest, seed=seed + label)
    return split


def fit_and_score(
    splits: DatasetDict,
    loss: LossSpec | nn.Module,
    seed: int,
    fitter: Fitter,
    positive_label: int | None = None,
    fits: dict | None = None,
) -> dict[str, float]:
    """Fit ``loss`` (a spec, or the loss built from it) at ``seed`` (epoch kept on validation macro-F1): test
    f1_positive (of ``positive_label``, default :func:`scored_label` of the training split), macro_f1, accuracy;
    validation F1 of the positive class. ``fits`` (a dict, when given) receives the ``Fit`` under ``seed``."""
    names = label_names(splits["train"])
    positive_label = scored_label(splits["train"]) if positive_label is None else positive_label
    loss = loss if isinstance(loss, nn.Module) else loss_from_spec(loss, splits["train"])
    fit = fitter.fit(splits, loss, seed)
    if fits is not None:
        fits[seed] = fit
    test = classification_report(np.asarray(splits["test"]["label"]), fit.test_predictions, label_names=names)
    validation = classification_report(
        np.asarray(splits["validation"]["label"]), fit.validation_predictions, label_names=names
    )
    positive = names[positive_label]
    return {
        "f1_positive": test["per_class"][positive]["f1"],
        "macro_f1": test["macro_f1"],
        "accuracy": test["accuracy"],
        "validation_f1_positive": validation["per_class"][positive]["f1"],
    }


def run_grid(
    settings: Mapping[str, DatasetDict],
    losses: Mapping[str, LossSpec],
    seeds: Sequence[int],
    fitter: Fitter,
    positive_label: int | None = None,
    fits: dict | None = None,
) -> pd.DataFrame:
    """One :func:`fit_and_score` per setting x loss x seed (F1 of ``positive_label``, default each setting's
    :func:`scored_label`): columns setting, loss, seed and the scores. ``fits`` (a dict, when given) receives every
    ``Fit`` under (setting, loss): {seed: Fit}, for decision rules and paired statistics."""
    check_seeds("seeds", seeds)
    if not settings or not losses:
        raise ValueError(f"settings, losses: must each hold at least one entry, got {len(settings)} and {len(losses)}")
    built = {  # every loss built (its parameters checked) before the first fit
        (setting, label): loss_from_spec(spec, splits["train"])
        for setting, splits in settings.items()
        for label, spec in losses.items()
    }
    return pd.DataFrame(
        [
            {
                "setting": setting,
                "loss": label,
                "seed": seed,
                **fit_and_score(
                    splits, built[setting, label], seed, fitter, positive_label, _cell(fits, setting, label)
                ),
            }
            for setting, splits in settings.items()
            for label in losses
            for seed in seeds
        ]
    )


def _cell(fits: dict | None, setting: str, loss: str) -> dict | None:
    """The {seed: Fit} dict of one grid cell inside ``fits`` (None when fits are not kept)."""
    return None if fits is None else fits.setdefault((setting, loss), {})


def imbalance_study(
    splits: DatasetDict,
    losses: Mapping[str, LossSpec],
    seeds: Sequence[int],
    fitter: Fitter,
    training_sets: Table8Sets | None = None,
    fits: dict | None = None,
) -> pd.DataFrame:
    """Table 8: :func:`run_grid` over the five training sets (``training_sets``, else :func:`table8_sets`), scoring the
    class they were built for; ``fits`` as :func:`run_grid`'s."""
    training_sets = training_sets or table8_sets(splits["train"])
    settings = {name: DatasetDict({**splits, "train": train}) for name, train in training_sets.sets.items()}
    return run_grid(settings, losses, seeds, fitter, training_sets.positive_label, fits)


def check_alphas(parameter: str, alphas: Sequence[float]) -> list[float]:
    """Table 10's Tversky alphas, the notebook's ``parameter``: a non-empty list of distinct numbers in [0, 1]."""
    if not isinstance(alphas, list | tuple) or not alphas:
        raise ValueError(f"{parameter}: must be a non-empty list of distinct numbers in [0, 1], got {alphas!r}")
    for alpha in alphas:
        check_number(parameter, alpha, 0, 1)
    if len(set(alphas)) != len(alphas):
        raise ValueError(f"{parameter}: must be a non-empty list of distinct numbers in [0, 1], got {list(alphas)}")
    return list(alphas)


def tversky_sweep(
    splits: DatasetDict, alphas: Sequence[float], seeds: Sequence[int], fitter: Fitter, fits: dict | None = None
) -> pd.DataFrame:
    """Table 10: :data:`LOSS_ZOO`'s TL with alpha (false-positive weight) over ``alphas``, beta = 1 - alpha;
    :func:`run_grid`'s table with a column ``alpha``; ``fits`` as :func:`run_grid`'s (loss: the alpha, ``f"{a:g}"``)."""
    check_alphas("alphas", alphas)
    tversky = LOSS_ZOO["TL"]
    losses = {f"{a:g}": tversky.replace(params={**tversky.params, "alpha": a, "beta": 1.0 - a}) for a in alphas}
    table = run_grid({"TL": splits}, losses, seeds, fitter, fits=fits)
    return table.assign(alpha=table["loss"].astype(float), loss="TL")


def best_alpha(sweep: pd.DataFrame) -> dict[str, float]:
    """The alpha with the highest mean validation F1 (selection on validation only) and its test scores."""
    summary = summarize(sweep, ["alpha"], ("validation_f1_positive", *METRICS))
    best = summary.loc[summary["validation_f1_positive_mean"].idxmax()]
    return {"alpha": float(best["alpha"]), **{f"test_{metric}": float(best[f"{metric}_mean"]) for metric in METRICS}}


def headline_metrics(table8_summary: pd.DataFrame, metric: str = "f1_positive") -> dict[str, dict[str, Any]]:
    """``{"<metric>_<loss>_original": {"mean", "std", "n"}}`` for every loss of the Table 8 ``original`` setting."""
    original = table8_summary[table8_summary["setting"] == "original"]
    if original.empty:
        raise ValueError("table8_summary: has no rows for the 'original' setting")
    return {f"{metric}_{row['loss'].lower()}_original": row_statistics(row, metric) for _, row in original.iterrows()}


TVERSKY_DESCRIPTIONS = {
    "tversky_best_alpha": "the Tversky alpha with the best mean validation F1 (beta = 1 - alpha)",
    "tversky_best_test_f1_positive": "test F1 of the positive class at that alpha",
}
"""What notebook 01's Tversky entries of metrics.json (:func:`best_alpha`'s choice) hold."""


def headline_descriptions(table8_summary: pd.DataFrame) -> dict[str, str]:
    """What each key of :func:`headline_metrics` (F1 of the positive class) and :data:`TVERSKY_DESCRIPTIONS` holds,
    for metrics.json's descriptions (index.html prints each beside its metric)."""
    losses = dict.fromkeys(table8_summary.loc[table8_summary["setting"] == "original", "loss"])
    return {
        **{
            f"f1_positive_{loss.lower()}_original": f"test F1 of the positive class, {loss}, Table 8's original set"
            for loss in losses
        },
        **TVERSKY_DESCRIPTIONS,
    }


def saturation_check(logit_gap: float = 30.0, alpha: float = 0.01) -> pd.DataFrame:
    """DSC value and gradient for a positive with logits (-gap/2, gap/2) in float32, where p rounds to 1.0 at gap 30:
    the released factor (1 - p)^alpha p (gradient alpha (1 - p)^(alpha - 1) dp/dz = inf x 0 = NaN) against the
    workbench's ``dsc`` presets. Columns implementation, p, loss_finite, gradient_finite."""
    check_number("logit_gap", logit_gap, 0, low_inclusive=False)

    def released(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        p = logits.softmax(-1)[:, 1]
        return ((1 - p) ** alpha * p).sum()

    losses = {
        f"released code: (1-p)^{alpha:g} p": released,
        "workbench dsc preset='reference'": build_loss("dsc", preset="reference"),
        "workbench dsc preset='paper'": build_loss("dsc", preset="paper"),
    }
    rows = []
    for name, loss in losses.items():
        logits = torch.tensor([[-logit_gap / 2, logit_gap / 2]], requires_grad=True)
        value = loss(logits, torch.tensor([1]))
        (gradient,) = torch.autograd.grad(value, logits)
        p = logits.detach().softmax(-1)[0, 1].item()
        rows.append((name, p, bool(torch.isfinite(value)), bool(torch.isfinite(gradient).all())))
    return pd.DataFrame(rows, columns=["implementation", "p", "loss_finite", "gradient_finite"])


def this_run(
    table8: pd.DataFrame, table9: pd.DataFrame, presets: pd.DataFrame, sets: Table8Sets, chosen: Mapping[str, float]
) -> str:
    """The run's key numbers in one line (test, x100, mean ± std over seeds), which the notebook's reading quotes."""
    tables = pd.concat([table8, table9.assign(setting="balanced"), presets.assign(setting="presets")])
    summary = summarize(tables, ["setting", "loss"], METRICS)
    cells = formatted(summary, METRICS, digits=1, scale=100).set_index(["setting", "loss"])

    def cell(setting: str, loss: str, metric: str = "f1_positive") -> str:
        return cells[metric].get((setting, loss), "n/a")

    losses = list(dict.fromkeys(table8["loss"]))
    scored = "the positive class" if sets.smallest_class is None else f"the smallest class ({sets.smallest_class})"
    per_setting = "; ".join(
        f"{setting}: " + ", ".join(f"{loss} {cell(setting, loss)}" for loss in losses) for setting in TABLE8_SETTINGS
    )
    return (
        f"This run ({table8['seed'].nunique()} seed(s); test, x100): F1 of {scored}, {per_setting} "
        f"(added examples: {sets.augmentation}, {sets.unchanged} of {sets.calls} left unchanged). "
        f"DSC presets on original: eq. 12 {cell('presets', 'DSC')}, "
        f"reference {cell('presets', 'DSC reference')}. "
        f"Tversky: alpha = {chosen['alpha']:g} chosen on validation, "
        f"test F1 {100 * chosen['test_f1_positive']:.1f}. Balanced task (Table 9), accuracy: "
        + ", ".join(f"{loss} {cell('balanced', loss, 'accuracy')}" for loss in dict.fromkeys(table9["loss"]))
        + "."
    )


def hyperparameters(
    training: Mapping[str, Any], losses: Mapping[str, LossSpec], train: Dataset, tversky_alphas: Sequence[float] = ()
) -> dict[str, Any]:
    """What notebook 01 fixes and what it chooses on validation, for the results page (issue 36): ``fixed``, the
    training section's optimiser settings and each of ``losses``' hyperparameters as it trains (FL's gamma, WCE's K,
    the Dice family's gamma and smoothing, class-balanced beta: ``workbench.train.fixed_hyperparameters``), the same
    for every training set and seed, none tuned; ``chosen`` on validation: each fit's epoch, and TL's alpha among
    ``tversky_alphas``."""
    chosen = {"epoch": "each fit's epoch with the best validation macro-F1, the same rule for every loss"}
    if tversky_alphas:
        chosen["TL alpha"] = (
            f"the alpha of {[float(alpha) for alpha in tversky_alphas]} with the best mean validation F1 of the "
            "scored class (beta = 1 - alpha)"
        )
    return {"fixed": fixed_hyperparameters(training, losses, train), "chosen": chosen}
