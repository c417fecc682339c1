"""Seeded stratified splits and de-duplication across splits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from datasets import Dataset, DatasetDict

from workbench.data.features import check_seed

DEFAULT_FRACTIONS: dict[str, float] = {"train": 0.8, "validation": 0.1, "test": 0.1}


def stratified_split(ds: Dataset, fractions: Mapping[str, float] | None = None, seed: int = 0) -> DatasetDict:
    """Split ``ds`` into named parts with the same label proportions in each: within each class the
    examples are permuted with ``np.random.default_rng(seed)`` and cut at ``round(n_c * cumsum(fractions))``
    (positive, summing to 1; default ``DEFAULT_FRACTIONS``). Each split keeps the original order.
    ValueError for an empty ``ds``, a split that would get no example, or a bad ``seed``."""
    fractions = dict(DEFAULT_FRACTIONS if fractions is None else fractions)
    if not fractions or any(not 0.0 < f <= 1.0 for f in fractions.values()):
        raise ValueError(f"fractions: each must be in (0, 1], got {fractions}")
    if abs(sum(fractions.values()) - 1.0) > 1e-6:
        raise ValueError(f"fractions: must sum to 1, got {sum(fractions.values())!r}")
    rng = np.random.default_rng(check_seed(seed))
    if len(ds) == 0:
        raise ValueError("ds: must hold at least one example to split, got an empty dataset")
    labels = np.asarray(ds["label"], dtype=np.int64)
    bounds = np.cumsum([0.0, *fractions.values()])
    parts: dict[str, list[np.ndarray]] = {name: [] for name in fractions}
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        cuts = np.round(bounds * members.size).astype(int)
        for name, start, stop in zip(fractions, cuts[:-1], cuts[1:]):
            parts[name].append(members[start:stop])
    for name, chunks in parts.items():
        if sum(chunk.size for chunk in chunks) == 0:
            raise ValueError(
                f"fractions: split {name!r} would be empty ({fractions[name]:g} of {len(ds)} examples, "
                f"rounded per class); use more data or a larger fraction, got {fractions}"
            )
    return DatasetDict({name: ds.select(np.sort(np.concatenate(chunks))) for name, chunks in parts.items()})


def stratified_sample(ds: Dataset, size: int, seed: int = 0) -> Dataset:
    """``size`` examples of ``ds`` with its label proportions (``ds`` itself when it holds no more): class c keeps
    n_c x size / n examples, the remainders rounded by largest fraction, at least one per class while ``size`` allows
    (taken from the largest classes); within each class the examples are drawn with ``np.random.default_rng(seed)``.
    The sample keeps the original order. A file sorted by label keeps every class (its first rows would not)."""
    if size >= len(ds):
        return ds
    labels = np.asarray(ds["label"], dtype=np.int64)
    classes, counts = np.unique(labels, return_counts=True)
    quotas = counts * size / counts.sum()
    kept = np.floor(quotas).astype(int)
    for index in np.argsort(-(quotas - kept), kind="stable")[: size - kept.sum()]:
        kept[index] += 1
    for index in np.flatnonzero(kept == 0) if size >= len(classes) else ():  # a rare class keeps one example
        kept[np.argmax(kept)] -= 1
        kept[index] += 1
    rng = np.random.default_rng(check_seed(seed))
    chosen = [rng.permutation(np.flatnonzero(labels == label))[:keep] for label, keep in zip(classes, kept)]
    return ds.select(np.sort(np.concatenate(chosen)))


def deduplicate_splits(
    dsdict: DatasetDict,
    keys: Sequence[str] = ("text", "text_pair"),
    priority: Sequence[str] = ("test", "validation", "train"),
) -> tuple[DatasetDict, dict[str, int]]:
    """Remove from each split the examples (compared on the ``keys`` columns every split has) that occur
    in a split before it in ``priority`` (every split, highest first: by default an example in test is
    dropped from validation and train). Duplicates within one split stay.
    Returns the cleaned DatasetDict and ``{split: number removed}``."""
    if sorted(priority) != sorted(dsdict) or len(set(priority)) != len(priority):
        raise ValueError(f"priority: must list each split once, splits are {sorted(dsdict)}, got {list(priority)}")
    columns = [key for key in keys if all(key in split.column_names for split in dsdict.values())]
    if not columns:
        raise ValueError(f"keys: none of {list(keys)} is a column of every split")
    seen: set[tuple[str, ...]] = set()
    cleaned = {}
    removed = {}
    for name in priority:
        rows = list(zip(*(dsdict[name][column] for column in columns)))
        keep = [i for i, row in enumerate(rows) if row not in seen]
        seen.update(rows)
        cleaned[name] = dsdict[name].select(keep)
        removed[name] = len(rows) - len(keep)
    return DatasetDict({name: cleaned[name] for name in dsdict}), removed


def shared_with_train(dsdict: DatasetDict) -> dict[str, int]:
    """``{split: rows whose text (and text_pair) also occur in train}`` for every other split."""
    pairs = {name: DatasetDict(train=dsdict["train"], other=split) for name, split in dsdict.items() if name != "train"}
    return {name: deduplicate_splits(pair, priority=("train", "other"))[1]["other"] for name, pair in pairs.items()}
