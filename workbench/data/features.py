"""Class names and counts: every dataset keeps its class names as the ``names`` of a ClassLabel
feature on its integer ``label`` column."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from workbench.checks import check_int

RELEVANCE_LABEL_NAMES: tuple[str, ...] = ("irrelevant", "related", "highly_relevant")
"""QBQTC's ordinal labels "0", "1", "2" (and the generated relevance pairs)."""


def label_names(ds: Dataset | DatasetDict) -> list[str]:
    """Class names of the ``label`` column (of the first split of a DatasetDict); ValueError when
    there is no ``label`` column or it is not a ClassLabel."""
    if isinstance(ds, DatasetDict):
        if not ds:
            raise ValueError("ds: the DatasetDict has no splits")
        ds = next(iter(ds.values()))
    feature = ds.features.get("label")
    if not isinstance(feature, ClassLabel):
        raise ValueError(f"ds: the 'label' column must be a ClassLabel feature, got {feature!r}")
    return list(feature.names)


def build_dataset(columns: dict[str, list], names: Sequence[str]) -> Dataset:
    """A Dataset of string ``text`` (and ``text_pair``) and ClassLabel(``names``) ``label`` columns."""
    features = Features({name: Value("string") for name in ("text", "text_pair") if name in columns})
    features["label"] = ClassLabel(names=list(names))
    return Dataset.from_dict({name: columns[name] for name in features}, features=features)


def label_counts(ds: Dataset, num_labels: int | None = None) -> list[int]:
    """Examples per class, ``[n_0, ..., n_{K-1}]`` (the counts PCL and weighted CE take); K is
    ``num_labels``, default the number of class names. ValueError for a label outside [0, K-1]."""
    if num_labels is None:
        num_labels = len(label_names(ds))
    check_int("num_labels", num_labels, 1)
    labels = np.asarray(ds["label"], dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= num_labels):
        raise ValueError(
            f"num_labels: labels must lie in [0, {num_labels - 1}], got range [{labels.min()}, {labels.max()}]"
        )
    return np.bincount(labels, minlength=num_labels).tolist()


def check_seed(seed: int) -> int:
    """``seed`` as an int >= 0 (numpy integers too); ValueError naming ``seed`` otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
    return int(seed)
