"""Experiments of the Dice-loss paper (Li et al., 2020, "Dice Loss for Data-imbalanced NLP Tasks", ACL).

* the loss zoo (CE, WCE, FL, DL, TL, DSC) as ``LOSS_ZOO`` (:class:`~workbench.config.LossSpec` each);
* Table 8: training on the paper's five training sets, original / +positive / +negative /
  -negative / +positive & +negative (:func:`table8_sets`, :func:`table8_counts`,
  :func:`imbalance_study`), the added examples made by synonym replacement (the paper's
  reading: new sentences) or, as a labelled option, by copying;
* Table 9: an accuracy-oriented balanced task (:func:`balanced_splits`, :func:`run_grid`);
* Table 10: the Tversky alpha sweep with beta = 1 - alpha (:func:`tversky_sweep`);
* the released code's NaN at p = 1 against the workbench's finite DSC (:func:`saturation_check`).

Every run trains one classifier with one loss and one seed through a
:class:`workbench.train.Fitter` (the bag-of-characters probe, or a transformer) and scores the
test split: F1 of the positive class (the paper's metric for these tasks), macro-F1 and
accuracy, plus the validation F1 used for any selection.
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

from workbench.checks import check_seeds
from workbench.data import (
    TABLE8_SETTINGS,  # noqa: F401 - re-exported: the five Table 8 settings, in the paper's order
    SynonymAugmenter,
    label_counts,
    label_names,
    load_chnsenticorp,
    rebalance,
    sample_sentence_splits,
    stratified_split,
    table8_training_sets,
)
from workbench.lexicon import SynonymTable
from workbench.losses import LossSpec, build_loss, resolve
from workbench.metrics import classification_report
from workbench.stats import row_statistics, summarize
from workbench.train import Fitter

LOSS_ZOO: dict[str, LossSpec] = {
    "CE": LossSpec("ce"),
    "WCE": LossSpec("wce"),  # alpha_t = lg((n - n_t)/n_t + K), counts from the training split
    "FL": LossSpec("focal", {"gamma": 2.0}),
    "DL": LossSpec("dice", {"gamma": 1.0}),
    "TL": LossSpec("tversky", {"alpha": 0.3, "beta": 0.7, "gamma": 1.0}),
    "DSC": LossSpec("dsc", {"preset": "paper"}),
}
"""The paper's losses (sec. 3) with the settings used in this study."""

AUGMENTATIONS = ("synonyms", "copies")
"""How Table 8's added examples are made: ``synonyms`` (the default, the paper's reading: new
sentences) or ``copies`` (exact duplicates, the workbench's labelled option)."""
METRICS = ("f1_positive", "macro_f1", "accuracy")
POSITIVE_LABEL = 1


def study_splits(
    data_path: str | None = None,
    seed: int = 0,
    n_train: int = 2000,
    n_eval: int = 400,
    positive_share: float | None = None,
) -> DatasetDict:
    """Train/validation/test splits of a binary task with label 1 the positive class.

    ``data_path=None`` generates the sample review sentences (``sample_sentence_splits``:
    ``n_train`` / ``n_eval`` / ``n_eval``, positives about 18%); otherwise a ChnSentiCorp
    file (text TAB label) is cut 80/10/10 by ``stratified_split``. With ``positive_share``
    in (0, 0.5] the training split's positives are down-sampled to that share (a balanced
    corpus made imbalanced; validation and test keep their distribution).
    """
    if data_path is None:
        splits = sample_sentence_splits(seed=seed, n_train=n_train, n_validation=n_eval, n_test=n_eval)
    else:
        splits = stratified_split(load_chnsenticorp(data_path), {"train": 0.8, "validation": 0.1, "test": 0.1}, seed=seed)
    if positive_share is None:
        return DatasetDict(splits)
    if not 0.0 < positive_share <= 0.5:
        raise ValueError(f"positive_share: must be null or in (0, 0.5], got {positive_share!r}")
    ratio = positive_share / (1.0 - positive_share)
    train = rebalance(splits["train"], ratio, positive_label=POSITIVE_LABEL, method="downsample", seed=seed)
    return DatasetDict({**splits, "train": train})


@dataclass
class Table8Sets:
    """The Table 8 training sets (:func:`table8_sets`): ``sets`` (setting -> training split, in
    :data:`TABLE8_SETTINGS` order), the ``augmentation`` used, ``calls`` (texts given to the
    synonym augmenter; 0 for copies) and ``unchanged`` (of those, the texts it could not change
    because no word had a synonym in the lexicon: added as exact copies;
    ``SynonymAugmenter.unchanged``)."""

    sets: OrderedDict[str, Dataset]
    augmentation: str
    calls: int
    unchanged: int


def table8_sets(
    train: Dataset, seed: int = 0, augmentation: str = "synonyms", lexicon: str | None = None, n_words: int = 1
) -> Table8Sets:
    """The five training sets of the paper's Table 8 (``workbench.data.table8_training_sets``,
    whose docstring quotes the paper's definitions and says where its text is inconsistent).

    ``augmentation="synonyms"`` (default; the paper's reading: "we first randomly chose positive
    training examples in the original training set as templates. Then we used Spacy to retrieve
    entity mentions and replace them with new ones", i.e. new sentences): every added example is
    its template with ``n_words`` jieba words replaced by a synonym
    (:class:`~workbench.data.SynonymAugmenter`, seeded with ``seed``) from ``lexicon`` (a Cilin
    file or WordNet .tsv path; None: the tiny lexicon shipped with the package). A template with
    no word in the lexicon is added unchanged and counted in ``unchanged``.
    ``augmentation="copies"``: added examples are exact copies (the workbench's option, not the
    paper's method). Labels: 1 is the positive class.
    """
    if augmentation not in AUGMENTATIONS:
        raise ValueError(f"augmentation: must be one of {list(AUGMENTATIONS)}, got {augmentation!r}")
    augmenter = None
    if augmentation == "synonyms":
        augmenter = SynonymAugmenter(SynonymTable.from_path(lexicon), seed=seed, n_words=n_words)
    sets = table8_training_sets(train, seed, augmenter, positive_label=POSITIVE_LABEL)
    if augmenter is None:
        return Table8Sets(sets, augmentation, 0, 0)
    return Table8Sets(sets, augmentation, augmenter.calls, augmenter.unchanged)


def table8_counts(table8: Table8Sets) -> pd.DataFrame:
    """One row per Table 8 setting: ``negative``, ``positive``, ``total``, ``positive share``,
    ``added`` (rows appended to the original training set) and ``added, same text as an
    original example`` (added rows whose text equals some original training text: every copy,
    and every synonym replacement that found no synonym or happened to produce an existing
    sentence)."""
    original = table8.sets["original"]
    seen = set(original["text"])
    rows = []
    for setting, train in table8.sets.items():
        negative, positive = label_counts(train, 2)
        added = train.select(range(len(original), len(train)))["text"] if len(train) > len(original) else []
        rows.append(
            {
                "setting": setting,
                "negative": negative,
                "positive": positive,
                "total": len(train),
                "positive share": positive / len(train),
                "added": len(added),
                "added, same text as an original example": sum(text in seen for text in added),
            }
        )
    return pd.DataFrame(rows).set_index("setting")


def balanced_splits(splits: DatasetDict, seed: int = 0) -> DatasetDict:
    """Every split down-sampled to equal classes (the larger class loses examples): the
    accuracy-oriented balanced task of the paper's Table 9 caveat."""
    return DatasetDict({name: rebalance(split, 1.0, method="downsample", seed=seed) for name, split in splits.items()})


# ----------------------------------------------------------------------------- one run


def _scores(gold: np.ndarray, predicted: np.ndarray, names: Sequence[str]) -> dict[str, float]:
    """The study's scores of ``predicted`` against ``gold``."""
    report = classification_report(gold, predicted, label_names=list(names))
    return {
        "f1_positive": report["per_class"][names[POSITIVE_LABEL]]["f1"],
        "macro_f1": report["macro_f1"],
        "accuracy": report["accuracy"],
    }


def fit_and_score(splits: DatasetDict, loss: LossSpec, seed: int, fitter: Fitter) -> dict[str, float]:
    """Train one classifier on ``splits["train"]`` with ``loss`` (wce gets the training split's
    label counts, ``workbench.losses.resolve``) and ``seed`` through ``fitter``; the epoch is kept
    on validation macro-F1. Returns test ``f1_positive``, ``macro_f1``, ``accuracy`` and
    ``validation_f1_positive``."""
    names = label_names(splits["train"])
    fit = fitter.fit(splits, resolve(loss, splits["train"]), seed)
    test = _scores(np.asarray(splits["test"]["label"]), fit.test_predictions, names)
    validation = _scores(np.asarray(splits["validation"]["label"]), fit.validation_predictions, names)
    return {**test, "validation_f1_positive": validation["f1_positive"]}


# ----------------------------------------------------------------------------- grids


def run_grid(
    settings: Mapping[str, DatasetDict], losses: Mapping[str, LossSpec], seeds: Sequence[int], fitter: Fitter
) -> pd.DataFrame:
    """One :func:`fit_and_score` per setting x loss x seed.

    Returns a long table: ``setting, loss, seed`` and the scores (``METRICS`` on test,
    ``validation_f1_positive``).
    """
    check_seeds("seeds", seeds)
    if not settings or not losses:
        raise ValueError(f"settings, losses: must each hold at least one entry, got {len(settings)} and {len(losses)}")
    rows = []
    for setting, splits in settings.items():
        for loss_label, spec in losses.items():
            for seed in seeds:
                rows.append({"setting": setting, "loss": loss_label, "seed": seed, **fit_and_score(splits, spec, seed, fitter)})
    return pd.DataFrame(rows)


def imbalance_study(
    splits: DatasetDict,
    losses: Mapping[str, LossSpec],
    seeds: Sequence[int],
    fitter: Fitter,
    resample_seed: int = 0,
    *,
    training_sets: Table8Sets | Mapping[str, Dataset] | None = None,
    augmentation: str = "synonyms",
    lexicon: str | None = None,
) -> pd.DataFrame:
    """Table 8: :func:`run_grid` over the five training sets (same validation and test).

    ``training_sets`` (a :func:`table8_sets` result or setting -> training split) is used as
    given; without it :func:`table8_sets` builds them from ``splits["train"]`` with
    ``resample_seed``, ``augmentation`` and ``lexicon``.
    """
    if training_sets is None:
        training_sets = table8_sets(splits["train"], seed=resample_seed, augmentation=augmentation, lexicon=lexicon)
    if isinstance(training_sets, Table8Sets):
        training_sets = training_sets.sets
    settings = {name: DatasetDict({**splits, "train": train}) for name, train in training_sets.items()}
    return run_grid(settings, losses, seeds, fitter)


def tversky_sweep(
    splits: DatasetDict, alphas: Sequence[float], seeds: Sequence[int], fitter: Fitter, gamma: float = 1.0
) -> pd.DataFrame:
    """Table 10: Tversky loss with alpha (false-positive weight) over ``alphas`` and beta = 1 - alpha.

    Returns :func:`run_grid`'s table with the column ``alpha`` (setting = loss = "TL").
    """
    for alpha in alphas:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"alphas: every alpha must be in [0, 1], got {alpha!r}")
    losses = {f"{alpha:g}": LossSpec("tversky", {"alpha": alpha, "beta": 1.0 - alpha, "gamma": gamma}) for alpha in alphas}
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


# ----------------------------------------------------------------------------- saturation


def saturation_check(logit_gap: float = 30.0, alpha: float = 0.01) -> pd.DataFrame:
    """DSC value and gradient for a positive predicted with logits (-gap/2, gap/2) in float32.

    At gap 30, p = sigmoid(30) rounds to exactly 1.0 in float32. Rows: the released code's
    factor (1 - p)^alpha p (ShannonAI/dice_loss_for_NLP, its gradient is NaN there:
    alpha (1 - p)^(alpha - 1) = inf times dp/dz = 0) and the workbench's ``dsc`` presets
    "reference" and "paper" (log(1 - p) computed stably). Columns ``implementation, p,
    loss_finite, gradient_finite``.
    """
    if not logit_gap > 0:
        raise ValueError(f"logit_gap: must be > 0, got {logit_gap!r}")
    labels = torch.tensor([POSITIVE_LABEL])
    rows = []

    def record(implementation: str, value_of) -> None:
        logits = torch.tensor([[-logit_gap / 2, logit_gap / 2]], requires_grad=True)
        value = value_of(logits)
        value.backward()
        p = torch.softmax(logits.detach(), -1)[0, POSITIVE_LABEL].item()
        rows.append(
            {
                "implementation": implementation,
                "p": p,
                "loss_finite": bool(torch.isfinite(value)),
                "gradient_finite": bool(torch.isfinite(logits.grad).all()),
            }
        )

    def released_factor(logits: torch.Tensor) -> torch.Tensor:
        p = torch.softmax(logits, -1)[:, POSITIVE_LABEL]
        return ((1 - p) ** alpha * p).sum()

    record(f"released code: (1-p)^{alpha:g} p", released_factor)
    for preset in ("reference", "paper"):
        record(f"workbench dsc preset={preset!r}", lambda logits, preset=preset: build_loss("dsc", preset=preset)(logits, labels))
    return pd.DataFrame(rows)
