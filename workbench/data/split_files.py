"""A data section's files: read by its source's reader, checked, and cut into splits.

:func:`read_section_file` reads one labelled file of a section (a table by :func:`~workbench.data.loaders.load_table`,
a named data set's by its release's reader). The rules every labelled source's files meet are written here once, for
a section that names its files (:func:`file_splits`) and a named data set of the data root
(:mod:`workbench.data.named_sets`) alike: the file the training split comes from holds two or more classes and some
text (:func:`check_training_file`), every class a labels file names has a training example
(:func:`check_every_class`), a table's ordinal labels have an order (:func:`check_ordinal_order`), and a split of one
class is named in a warning (:func:`warn_one_class_splits`). A split the section does not give is cut from a file by
a seeded stratified split (:func:`cut_file`, recorded by :func:`cut_record`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from workbench.config import DataConfig
from workbench.data.features import label_names
from workbench.data.loaders import existing_file, load_table
from workbench.data.releases import RELEASES, release
from workbench.data.root_files import warn_once
from workbench.data.splits import stratified_split

SPLIT_NAMES = ("train", "validation", "test")


def section_paths(data: DataConfig, key: str = "path") -> list[Path]:
    """The files of ``data.<key>`` (one path or a list); ValueError naming ``data.<key>`` when it is not given or a
    file is missing."""
    value = getattr(data, key)
    if value is None:
        raise ValueError(f"data.{key}: source {data.source!r} needs a file path")
    return [existing_file(item, f"data.{key}") for item in (value if isinstance(value, list) else [value])]


def read_section_file(data: DataConfig, path: Path, classes: list[str] | None = None, labels_path: Path | None = None):
    """The labelled file ``path`` of ``data.source``; a table's labels must be among ``classes`` when given."""
    if data.source == "table":
        if data.label is None or data.text is None:
            raise ValueError(
                f"data.text / data.label: must name the table's columns, got {data.text!r} / {data.label!r}"
            )
        columns = {"text": data.text, "text_pair": data.text_pair, "label": data.label}
        classes_of = {"label_names": data.label_names, "label_values": data.label_values, "classes": classes}
        return load_table(path, **columns, **classes_of)
    return release(data.source).read(path, labels_path=labels_path if labels_path is not None else data.labels_path)


def check_ordinal_order(data: DataConfig, names: Sequence[str]) -> None:
    """Ordinal labels (``data.is_ordinal``) need an order: a table's classes ``names`` read from its file are in it only
    when every label is a number (text labels sort by name: ``high, low, mid``); else ValueError naming
    ``data.label_names``, the file and the labels."""
    if data.source != "table" or not data.is_ordinal or data.label_names is not None:
        return
    try:
        [Decimal(name) for name in names]
    except InvalidOperation:
        raise ValueError(
            f"data.label_names: data.ordinal is true but the labels of {str(data.path)!r} are text, {list(names)} "
            "(sorted by name, not by rank): list them from lowest to highest in data.label_names"
        ) from None


def check_training_file(train: Dataset, parameter: str, file: str | Path | Sequence[str]) -> None:
    """The file the training split is read (or cut) from must hold two or more classes and some text: else ValueError
    naming ``parameter`` (``data.path``; ``data.source`` for a data set of the data root), the ``file`` and its one
    label (a classifier of one class learns nothing) or the empty text column. The one rule for every labelled
    source."""
    present = sorted(set(train["label"]))
    if len(present) < 2:
        name = label_names(train)[present[0]] if present else None
        raise ValueError(
            f"{parameter}: {str(file)!r} holds one class, {name!r}, on every line; a classifier needs two or more"
        )
    columns = [column for column in ("text", "text_pair") if column in train.column_names]
    if not any(text.strip() for column in columns for text in train[column]):
        raise ValueError(
            f"{parameter}: every text of {str(file)!r} is empty (columns {columns}); nothing to learn from"
        )


def warn_one_class_splits(splits: Mapping[str, Dataset]) -> None:
    """A warning (once per process) for each split whose labels hold one class, naming the split and the class: a
    classifier learns nothing from such a training split, a rule tuned on such a validation split stays the argmax
    (``workbench.decisions.tune_rule``) and scores on such a test split say little about the other classes."""
    for name, split in splits.items():
        present = sorted(set(split["label"]))
        if len(present) == 1:
            warn_once(
                f"data: the {name} split holds one class, {label_names(split)[present[0]]!r}, in all its "
                f"{len(split)} examples; scores on it and anything tuned on it say nothing of the other classes"
            )


def cut_file(data: DataConfig, ds: Dataset, fractions: dict[str, float], name: str) -> DatasetDict:
    """``ds`` (the file ``name``) cut by :func:`stratified_split` into ``fractions`` (renormalised), seeded by
    ``data.seed``; ValueError naming ``data.split`` when a part would be empty."""
    total = sum(fractions.values())
    shares = {split: fraction / total for split, fraction in fractions.items()}
    try:
        return stratified_split(ds, shares, seed=data.seed)
    except ValueError as error:
        raise ValueError(f"data.split: cannot cut {name} into {list(data.split)!r}: {error}") from None


def cut_record(name: str, fractions: dict[str, float], seed: int) -> dict[str, Any]:
    total = sum(fractions.values())
    shares = {split: round(fraction / total, 6) for split, fraction in fractions.items()}
    return {"from": name, "method": "stratified_split", "shares": shares, "seed": seed}


def file_splits(data: DataConfig) -> tuple[DatasetDict, dict[str, Any]]:
    """The splits of a section that names its files, and their record: ``data.path`` (checked by the rules above)
    with ``validation_path`` / ``test_path`` read with its classes, or ``data.path`` cut into the fractions of
    ``data.split`` (a 0 test fraction: no test)."""
    train_path = section_paths(data, "path")[0]
    train = read_section_file(data, train_path)
    check_ordinal_order(data, label_names(train))
    check_training_file(train, "data.path", data.path)
    if data.source in RELEASES and RELEASES[data.source].labels_file is not None:
        check_every_class(train, str(train_path), data.labels_path)
    if data.validation_path is not None:  # one label vocabulary: train's (or data.label_names)
        others = {"validation": "validation_path", "test": "test_path"}
        files = {
            "train": train_path,
            **{name: section_paths(data, key)[0] for name, key in others.items() if getattr(data, key)},
        }
        splits = {
            "train": train,
            **{
                name: read_section_file(data, path, label_names(train))
                for name, path in files.items()
                if name != "train"
            },
        }
        return DatasetDict(splits), {"splits": {name: {"file": str(path)} for name, path in files.items()}}
    fractions = {name: fraction for name, fraction in zip(SPLIT_NAMES, data.split) if fraction > 0}
    if "validation" not in fractions:
        raise ValueError(f"data.split: the validation fraction must be > 0, got {list(data.split)!r}")
    cut = cut_record(str(train_path), fractions, data.seed)
    splits = cut_file(data, train, fractions, repr(data.path))
    return splits, {"splits": {name: {"file": str(train_path), "cut": cut} for name in splits}}


def check_every_class(train: Dataset, train_file: str, labels_file: str | Path | None) -> None:
    """Every class a labels file names needs an example in the training split: else ValueError naming the classes, the
    labels file and the training file (a class without an example cannot be learnt, and scores 0 in macro-F1)."""
    if labels_file is None:
        return
    present = set(train["label"])
    empty = [name for k, name in enumerate(label_names(train)) if k not in present]
    if empty:
        raise ValueError(
            f"labels_path: {str(labels_file)!r} names {empty}, which no example of the training split "
            f"({train_file}) has; a class without a training example cannot be learnt: remove it from the labels "
            "file, or check that both files are the release's"
        )
