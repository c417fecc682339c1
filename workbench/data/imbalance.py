"""Resampling for imbalanced data, as in the Dice-loss paper's Table 8
(Li et al., 2020, "Dice Loss for Data-imbalanced NLP Tasks"): "+positive"
(upsample positives), "+negative" (upsample negatives), "-negative"
(downsample negatives), "+positive & -negative".

All functions are seeded (``np.random.default_rng(seed)``), leave the rows they
keep in their original order and append new rows at the end.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from datasets import Dataset, concatenate_datasets


Augmenter = Callable[[str], str]
METHODS = ("downsample", "upsample")


def _class_indices(ds: Dataset, label: int) -> np.ndarray:
    num_labels = len(ds.features["label"].names)
    if not isinstance(label, int) or not 0 <= label < num_labels:
        raise ValueError(f"label: must be a class id in [0, {num_labels - 1}], got {label!r}")
    return np.flatnonzero(np.asarray(ds["label"], dtype=np.int64) == label)


def _drop_random(ds: Dataset, members: np.ndarray, n_drop: int, seed: int) -> Dataset:
    """``ds`` without ``n_drop`` rows drawn uniformly without replacement from ``members``."""
    dropped = np.random.default_rng(seed).choice(members, size=n_drop, replace=False)
    return ds.select(np.setdiff1d(np.arange(len(ds)), dropped))


def _add_copies(ds: Dataset, members: np.ndarray, n_extra: int, seed: int, augmenter: Augmenter | None) -> Dataset:
    """``ds`` plus ``n_extra`` rows copied from ``members`` in whole random passes
    (each member once before any twice); with ``augmenter`` the copies' text is augmented."""
    if n_extra == 0:
        return ds
    rng = np.random.default_rng(seed)
    passes = -(-n_extra // members.size)
    sources = np.concatenate([rng.permutation(members) for _ in range(passes)])[:n_extra]
    added = ds.select(sources)
    if augmenter is not None:
        columns = added.to_dict()
        columns["text"] = [_augmented(augmenter, text) for text in columns["text"]]
        added = Dataset.from_dict(columns, features=ds.features)
    return concatenate_datasets([ds, added])


def _augmented(augmenter: Augmenter, text: str) -> str:
    result = augmenter(text)
    if not isinstance(result, str):
        raise ValueError(f"augmenter: must return a str, got {type(result).__name__}")
    return result


def downsample(
    ds: Dataset, label: int, ratio: float | None = None, target: int | None = None, seed: int = 0
) -> Dataset:
    """Keep a random subset of class ``label``: ``target`` examples, or ``round(ratio * n_label)``.

    Give exactly one of ``ratio`` (in (0, 1]) and ``target`` (in [0, n_label]).
    Other classes are untouched.
    """
    members = _class_indices(ds, label)
    if (ratio is None) == (target is None):
        raise ValueError("ratio: give exactly one of ratio and target")
    if ratio is not None:
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"ratio: must be in (0, 1], got {ratio!r}")
        target = int(round(ratio * members.size))
    if not isinstance(target, int) or not 0 <= target <= members.size:
        raise ValueError(f"target: must be an integer in [0, {members.size}] (examples of label {label}), got {target!r}")
    return _drop_random(ds, members, members.size - target, seed)


def upsample(
    ds: Dataset, label: int, target: int, seed: int = 0, augmenter: Augmenter | None = None
) -> Dataset:
    """Grow class ``label`` to ``target`` examples by appending ``target - n_label`` rows.

    Source rows are drawn from the class in whole random passes (every example
    is copied once before any is copied twice). The copies are exact
    duplicates or, with ``augmenter`` (a callable text -> text), have ``text``
    replaced by ``augmenter(text)``.
    """
    members = _class_indices(ds, label)
    if members.size == 0:
        raise ValueError(f"label: class {label} has no examples to upsample")
    if not isinstance(target, int) or target < members.size:
        raise ValueError(f"target: must be an integer >= {members.size} (examples of label {label}), got {target!r}")
    return _add_copies(ds, members, target - members.size, seed, augmenter)


def rebalance(
    ds: Dataset,
    target_ratio: float,
    positive_label: int = 1,
    method: str = "downsample",
    seed: int = 0,
    augmenter: Augmenter | None = None,
) -> Dataset:
    """Resample to ``n_positive / n_negative = target_ratio`` (negatives: every other class).

    ``method="downsample"`` removes random examples from the side with too many;
    ``"upsample"`` appends copies (or ``augmenter`` outputs) of the side with too
    few. Negatives are drawn uniformly across the negative classes; the new size
    of the resampled side is rounded to the nearest integer.
    """
    if method not in METHODS:
        raise ValueError(f"method: must be one of {METHODS}, got {method!r}")
    if not target_ratio > 0:
        raise ValueError(f"target_ratio: must be > 0, got {target_ratio!r}")
    positives = _class_indices(ds, positive_label)
    negatives = np.setdiff1d(np.arange(len(ds)), positives)
    if positives.size == 0 or negatives.size == 0:
        raise ValueError(
            f"positive_label: need both positives and negatives, got {positives.size} and {negatives.size}"
        )
    wanted_positives = int(round(target_ratio * negatives.size))
    wanted_negatives = int(round(positives.size / target_ratio))
    if method == "downsample":
        if positives.size > wanted_positives:
            return _drop_random(ds, positives, positives.size - wanted_positives, seed)
        return _drop_random(ds, negatives, negatives.size - wanted_negatives, seed)
    if positives.size < wanted_positives:
        return _add_copies(ds, positives, wanted_positives - positives.size, seed, augmenter)
    return _add_copies(ds, negatives, max(wanted_negatives - negatives.size, 0), seed, augmenter)
