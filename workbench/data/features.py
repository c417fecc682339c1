"""Label-name helpers shared by the loaders and the generated sample data.

Every dataset in the workbench stores its class names as the ``names`` of a
``datasets.ClassLabel`` feature on the integer ``label`` column.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

RELEVANCE_LABEL_NAMES: tuple[str, ...] = ("irrelevant", "related", "highly_relevant")
"""QBQTC's ordinal labels "0", "1", "2" (and the generated relevance pairs)."""


def label_names(ds: Dataset | DatasetDict) -> list[str]:
    """Class names stored on the ``label`` column's ClassLabel feature.

    Raises ValueError when the dataset has no ``label`` column or the column is
    not a ClassLabel.
    """
    if isinstance(ds, DatasetDict):
        if not ds:
            raise ValueError("ds: the DatasetDict has no splits")
        ds = next(iter(ds.values()))
    feature = ds.features.get("label")
    if not isinstance(feature, ClassLabel):
        raise ValueError(f"ds: the 'label' column must be a ClassLabel feature, got {feature!r}")
    return list(feature.names)


def classification_features(names: Sequence[str], pair: bool) -> Features:
    """Features ``text`` (and ``text_pair`` when ``pair``) as strings, ``label`` as ClassLabel(names)."""
    columns = {"text": Value("string")}
    if pair:
        columns["text_pair"] = Value("string")
    columns["label"] = ClassLabel(names=list(names))
    return Features(columns)


def build_dataset(columns: dict[str, list], names: Sequence[str]) -> Dataset:
    """A Dataset from ``text``/``text_pair``/``label`` columns with the label names attached."""
    features = classification_features(names, pair="text_pair" in columns)
    return Dataset.from_dict({name: columns[name] for name in features}, features=features)


def label_counts(ds: Dataset, num_labels: int | None = None) -> list[int]:
    """Examples per class, ``[n_0, ..., n_{K-1}]`` (the counts PCL and weighted CE take).

    ``num_labels`` (K) defaults to the number of ClassLabel names. Raises
    ValueError when a label lies outside ``[0, K-1]``.
    """
    if num_labels is None:
        num_labels = len(label_names(ds))
    if not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"num_labels: must be an integer >= 1, got {num_labels!r}")
    labels = np.asarray(ds["label"], dtype=np.int64)
    if labels.size and (labels.min() < 0 or labels.max() >= num_labels):
        raise ValueError(f"num_labels: labels must lie in [0, {num_labels - 1}], got range [{labels.min()}, {labels.max()}]")
    return np.bincount(labels, minlength=num_labels).tolist()


def check_seed(seed: int) -> int:
    """``seed`` as an int; ValueError "seed: must be an integer >= 0, got ..." otherwise
    (numpy's generators reject negative seeds, ``random.Random`` would hash them)."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: must be an integer >= 0, got {seed!r}")
    return int(seed)
