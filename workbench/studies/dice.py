"""Experiments of "Dice Loss for Data-imbalanced NLP Tasks" (Li et al., ACL 2020, arXiv 1911.02855), notebook 01.

Table 8 (:func:`imbalance_study`), Table 9 (:func:`balanced_splits`), Table 10 (:func:`tversky_sweep`) and the
released code's NaN at p = 1 (:func:`saturation_check`). Each run fits a :class:`workbench.train.Fitter`; the scores
are the test F1 of the positive class (label 1, the paper's metric), macro-F1 and accuracy.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset, DatasetDict

from workbench.checks import check_choice, check_names, check_number, check_seeds
from workbench.config import DataConfig, LossSpec
from workbench.data import (
    TABLE8_SETTINGS,
    SynonymAugmenter,
    label_counts,
    label_names,
    load_splits,
    rebalance,
    table8_training_sets,
)
from workbench.losses import build_loss
from workbench.metrics import classification_report
from workbench.stats import formatted, row_statistics, summarize
from workbench.synonyms import SynonymTable
from workbench.train import Fitter, loss_from_spec

LOSS_ZOO: dict[str, LossSpec] = {
    "CE": LossSpec("ce"),
    "WCE": LossSpec("wce"),  # alpha_t = lg((n - n_t)/n_t + K), counts from the training split
    "FL": LossSpec("focal", {"gamma": 2.0}),
    "DL": LossSpec("dice", {"gamma": 1.0}),
    "TL": LossSpec("tversky", {"alpha": 0.3, "beta": 0.7, "gamma": 1.0}),
    "DSC": LossSpec("dsc", {"preset": "paper"}),
}
"""The paper's losses (sec. 3) with the settings of this study."""
AUGMENTATIONS = ("synonyms", "copies")
"""Table 8's added examples: synonym replacement (new sentences, the paper's reading) or exact copies (an option)."""
METRICS = ("f1_positive", "macro_f1", "accuracy")
POSITIVE_LABEL = 1


def study_splits(data: DataConfig | Mapping[str, Any], positive_share: float | None = None) -> DatasetDict:
    """A binary task's splits (label 1 positive); ``positive_share`` in (0, 0.5] down-samples the training positives."""
    splits = load_splits(data)
    if len(label_names(splits["train"])) != 2 or "test" not in splits:
        raise ValueError(
            f"data: must give two labels (1 = positive) and a test split, got {label_names(splits['train'])}"
        )
    if positive_share is None:
        return splits
    check_number("positive_share", positive_share, 0, 0.5, low_inclusive=False)
    seed = DataConfig.from_mapping(data).seed
    ratio = positive_share / (1.0 - positive_share)
    train = rebalance(splits["train"], ratio, positive_label=POSITIVE_LABEL, method="downsample", seed=seed)
    return DatasetDict({**splits, "train": train})


@dataclass
class Table8Sets:
    """Table 8's training sets (setting -> split), the ``augmentation``, the augmenter's ``calls`` and ``unchanged``."""

    sets: OrderedDict[str, Dataset]
    augmentation: str
    calls: int
    unchanged: int


def zoo(parameter: str, names: Sequence[str]) -> dict[str, LossSpec]:
    """The :data:`LOSS_ZOO` specs of ``names``, the notebook's ``parameter`` (each name once)."""
    return {name: LOSS_ZOO[name] for name in check_names(parameter, names, list(LOSS_ZOO))}


def table8_sets(
    train: Dataset, seed: int = 0, augmentation: str = "synonyms", lexicon: str | None = None
) -> Table8Sets:
    """Table 8's five training sets (:func:`workbench.data.table8_training_sets`), added examples by ``synonyms`` (a
    jieba word replaced from ``lexicon``, a Cilin / .tsv path or None: the shipped one) or ``copies`` (not the paper's)."""
    check_choice("augmentation", augmentation, AUGMENTATIONS)
    augmenter = SynonymAugmenter(SynonymTable.from_path(lexicon), seed=seed) if augmentation == "synonyms" else None
    sets = table8_training_sets(train, seed, augmenter, positive_label=POSITIVE_LABEL)
    return Table8Sets(sets, augmentation, getattr(augmenter, "calls", 0), getattr(augmenter, "unchanged", 0))


def table8_counts(table8: Table8Sets) -> pd.DataFrame:
    """Per setting: negative, positive, total, positive share, added (rows appended to the original) and added rows
    whose text equals an original training text (every copy, and replacements that found no synonym)."""
    sets, original = table8.sets, table8.sets["original"]
    counts = pd.DataFrame(
        [label_counts(train, 2) for train in sets.values()], index=list(sets), columns=["negative", "positive"]
    )
    counts["total"] = counts.sum(axis=1)
    counts["positive share"] = counts["positive"] / counts["total"]
    added = [train["text"][len(original) :] for train in sets.values()]
    counts["added"] = [len(texts) for texts in added]
    seen = set(original["text"])
    counts["added, same text as an original example"] = [sum(text in seen for text in texts) for texts in added]
    return counts.rename_axis("setting")


def balanced_splits(splits: DatasetDict, seed: int = 0) -> DatasetDict:
    """Every split down-sampled to equal classes: the balanced, accuracy-oriented task of the Table 9 caveat."""
    return DatasetDict({name: rebalance(split, 1.0, method="downsample", seed=seed) for name, split in splits.items()})


def fit_and_score(splits: DatasetDict, loss: LossSpec, seed: int, fitter: Fitter) -> dict[str, float]:
    """Fit ``loss`` at ``seed`` (epoch kept on validation macro-F1): test f1_positive, macro_f1, accuracy; validation F1."""
    names = label_names(splits["train"])
    fit = fitter.fit(splits, loss_from_spec(loss, splits["train"]), seed)
    test = classification_report(np.asarray(splits["test"]["label"]), fit.test_predictions, label_names=names)
    validation = classification_report(
        np.asarray(splits["validation"]["label"]), fit.validation_predictions, label_names=names
    )
    positive = names[POSITIVE_LABEL]
    return {
        "f1_positive": test["per_class"][positive]["f1"],
        "macro_f1": test["macro_f1"],
        "accuracy": test["accuracy"],
        "validation_f1_positive": validation["per_class"][positive]["f1"],
    }


def run_grid(
    settings: Mapping[str, DatasetDict], losses: Mapping[str, LossSpec], seeds: Sequence[int], fitter: Fitter
) -> pd.DataFrame:
    """One :func:`fit_and_score` per setting x loss x seed: columns setting, loss, seed and the scores."""
    check_seeds("seeds", seeds)
    if not settings or not losses:
        raise ValueError(f"settings, losses: must each hold at least one entry, got {len(settings)} and {len(losses)}")
    return pd.DataFrame(
        [
            {"setting": setting, "loss": label, "seed": seed, **fit_and_score(splits, spec, seed, fitter)}
            for setting, splits in settings.items()
            for label, spec in losses.items()
            for seed in seeds
        ]
    )


def imbalance_study(
    splits: DatasetDict,
    losses: Mapping[str, LossSpec],
    seeds: Sequence[int],
    fitter: Fitter,
    training_sets: Table8Sets | None = None,
) -> pd.DataFrame:
    """Table 8: :func:`run_grid` over the five training sets (``training_sets``, else :func:`table8_sets`)."""
    training_sets = training_sets or table8_sets(splits["train"])
    settings = {name: DatasetDict({**splits, "train": train}) for name, train in training_sets.sets.items()}
    return run_grid(settings, losses, seeds, fitter)


def tversky_sweep(splits: DatasetDict, alphas: Sequence[float], seeds: Sequence[int], fitter: Fitter) -> pd.DataFrame:
    """Table 10: :data:`LOSS_ZOO`'s TL with alpha (false-positive weight) over ``alphas``, beta = 1 - alpha;
    :func:`run_grid`'s table with a column ``alpha``."""
    for alpha in alphas:
        check_number("alphas", alpha, 0, 1)
    if not alphas or len(set(alphas)) != len(alphas):
        raise ValueError(f"alphas: must be a non-empty list of distinct numbers in [0, 1], got {list(alphas)}")
    tversky = LOSS_ZOO["TL"]
    losses = {f"{a:g}": tversky.replace(params={**tversky.params, "alpha": a, "beta": 1.0 - a}) for a in alphas}
    table = run_grid({"TL": splits}, losses, seeds, fitter)
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
    per_setting = "; ".join(
        f"{setting}: " + ", ".join(f"{loss} {cell(setting, loss)}" for loss in losses) for setting in TABLE8_SETTINGS
    )
    return (
        f"This run ({table8['seed'].nunique()} seed(s); test, x100): F1 of the positive class, {per_setting} "
        f"(added examples: {sets.augmentation}, {sets.unchanged} of {sets.calls} left unchanged). DSC presets on original: "
        f"eq. 12 {cell('presets', 'DSC paper')}, reference {cell('presets', 'DSC reference')}. Tversky: alpha = {chosen['alpha']:g} "
        f"chosen on validation, test F1 {100 * chosen['test_f1_positive']:.1f}. Balanced task (Table 9), accuracy: "
        + ", ".join(f"{loss} {cell('balanced', loss, 'accuracy')}" for loss in dict.fromkeys(table9["loss"]))
        + "."
    )
