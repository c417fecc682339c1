"""Seeded stratified splits and the removal of duplicate texts: across splits and within the evaluation splits
(:func:`deduplicate_splits`, which :func:`~workbench.data.load_splits` applies), within a list of texts
(:func:`unique_texts`, :func:`~workbench.data.load_texts`)."""

from __future__ import annotations

import unicodedata
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


PRIORITY = ("test", "validation", "train")
"""Which split keeps a text that several splits hold: test first, then validation, then train."""
ONCE_IN = ("validation", "test")
"""The splits in which a text (pair) is kept once: the evaluation splits (a repeated example would count twice in
every score and in the bootstrap, which resamples examples as independent). The training split keeps its repeats."""
NORMALISATION = "Unicode NFKC, whitespace runs collapsed to one space, ends stripped"
"""How :func:`text_key` compares texts (docs/data.md)."""


def text_key(*texts: str) -> tuple[str, ...]:
    """The form in which texts are compared for duplicates (:data:`NORMALISATION`): Unicode NFKC (full- and half-width
    forms are one character), every run of whitespace one space, none at the ends."""
    return tuple(" ".join(unicodedata.normalize("NFKC", text).split()) for text in texts)


def deduplicate_splits(
    dsdict: DatasetDict,
    keys: Sequence[str] = ("text", "text_pair"),
    priority: Sequence[str] = PRIORITY,
    once_in: Sequence[str] = ONCE_IN,
) -> tuple[DatasetDict, dict[str, dict[str, int]]]:
    """Remove from each split the examples (compared on the ``keys`` columns every split has, by :func:`text_key`)
    that a split before it in ``priority`` holds (every split, highest first: by default an example in test leaves
    validation and train), and in the splits of ``once_in`` every repeat of an example after its first occurrence.
    Returns the cleaned DatasetDict (in ``dsdict``'s order) and ``{split: {"shared": removed because a split before it
    holds them, "repeated": removed as repeats within it, "of": examples before}}``."""
    if sorted(priority) != sorted(dsdict) or len(set(priority)) != len(priority):
        raise ValueError(f"priority: must list each split once, splits are {sorted(dsdict)}, got {list(priority)}")
    columns = [key for key in keys if all(key in split.column_names for split in dsdict.values())]
    if not columns:
        raise ValueError(f"keys: none of {list(keys)} is a column of every split")
    earlier: set[tuple[str, ...]] = set()
    cleaned = {}
    removed = {}
    for name in priority:
        rows = [text_key(*row) for row in zip(*(dsdict[name][column] for column in columns))]
        kept: list[int] = []
        seen: set[tuple[str, ...]] = set()
        shared = 0
        for index, row in enumerate(rows):
            if row in earlier:
                shared += 1
            elif row not in seen or name not in once_in:
                kept.append(index)
            seen.add(row)
        earlier.update(seen)
        cleaned[name] = dsdict[name] if len(kept) == len(rows) else dsdict[name].select(kept)
        removed[name] = {"shared": shared, "repeated": len(rows) - shared - len(kept), "of": len(rows)}
    return DatasetDict({name: cleaned[name] for name in dsdict}), removed


def shared_with_train(dsdict: DatasetDict) -> dict[str, int]:
    """``{split: rows whose text (and text_pair) also occur in train}`` for every other split (compared by
    :func:`text_key`)."""
    pairs = {name: DatasetDict(train=dsdict["train"], other=split) for name, split in dsdict.items() if name != "train"}
    return {
        name: deduplicate_splits(pair, priority=("train", "other"), once_in=())[1]["other"]["shared"]
        for name, pair in pairs.items()
    }


def unique_texts(texts: Sequence[str], pairs: Sequence[str] | None = None) -> tuple[list[str], list[str] | None, int]:
    """``texts`` (and their ``pairs``) with each text (pair) once, at its first occurrence (compared by
    :func:`text_key`), and the number of repeats removed."""
    rows = zip(texts, pairs) if pairs is not None else zip(texts)
    seen: set[tuple[str, ...]] = set()
    kept = []
    for index, row in enumerate(rows):
        key = text_key(*row)
        if key not in seen:
            seen.add(key)
            kept.append(index)
    unique = [texts[index] for index in kept]
    return unique, (None if pairs is None else [pairs[index] for index in kept]), len(texts) - len(kept)
