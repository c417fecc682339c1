"""A config's ``data`` section (:class:`workbench.config.DataConfig`) turned into datasets:
:func:`load_splits` (labelled splits, every source) and :func:`load_texts` (MLM pre-training)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from workbench.config import DataConfig
from workbench.data.features import label_names
from workbench.data.loaders import existing_file, load_chnsenticorp, load_lcqmc, load_qbqtc, load_table, load_tnews, read_lines
from workbench.data.samples import sample_corpus, sample_relevance_splits, sample_sentence_splits
from workbench.data.splits import stratified_split

SPLIT_NAMES = ("train", "validation", "test")
LABELLED_SOURCES = ("sample_relevance", "sample_sentences", "qbqtc", "tnews", "chnsenticorp", "lcqmc", "table")


def _paths(data: DataConfig, key: str = "path") -> list[Path]:
    value = getattr(data, key)
    if value is None:
        raise ValueError(f"data.{key}: source {data.source!r} needs a file path")
    return [existing_file(item, f"data.{key}") for item in (value if isinstance(value, list) else [value])]


def _read(data: DataConfig, key: str, classes: list[str] | None = None) -> Dataset:
    """The labelled file ``data.<key>``; a table's labels must be among ``classes`` when given."""
    path = _paths(data, key)[0]
    if data.source == "table":
        if data.label is None or data.text is None:
            raise ValueError(
                f"data.text / data.label: must name the columns for source 'table', got {data.text!r} / {data.label!r}"
            )
        return load_table(path, data.text, data.text_pair, data.label, data.label_names, classes=classes)
    if data.source == "tnews":
        return load_tnews(path, labels_path=data.labels_path)
    return {"qbqtc": load_qbqtc, "chnsenticorp": load_chnsenticorp, "lcqmc": load_lcqmc}[data.source](path)


def _file_splits(data: DataConfig) -> DatasetDict:
    train = _read(data, "path")
    if data.validation_path is not None:  # one label vocabulary: train's (or data.label_names)
        others = {"validation": "validation_path", "test": "test_path"}
        return DatasetDict(
            {"train": train, **{name: _read(data, key, label_names(train)) for name, key in others.items() if getattr(data, key)}}
        )
    fractions = {name: fraction for name, fraction in zip(SPLIT_NAMES, data.split) if fraction > 0}
    if "validation" not in fractions:
        raise ValueError(f"data.split: the validation fraction must be > 0, got {list(data.split)!r}")
    try:
        return stratified_split(train, fractions, seed=data.seed)
    except ValueError as error:
        raise ValueError(f"data.split: cannot cut {data.path!r} into {list(data.split)!r}: {error}") from None


def load_splits(data: DataConfig | Mapping[str, Any]) -> DatasetDict:
    """Labelled splits ``train``, ``validation`` and (when there is one) ``test`` of any labelled source.

    Sample sources come split. A file source reads ``data.path``; with ``validation_path`` (and
    optionally ``test_path``) those files are the other splits, read with the training file's
    classes (a label it lacks is an error naming file, line and label); otherwise ``path`` is cut
    by ``stratified_split`` into ``data.split`` fractions with ``data.seed`` (a zero test fraction
    gives no test split). ``max_train_samples`` / ``max_eval_samples`` keep the first N examples.
    """
    data = DataConfig.from_mapping(data)
    if data.source == "sample_relevance":
        splits = sample_relevance_splits(seed=data.seed)
    elif data.source == "sample_sentences":
        splits = sample_sentence_splits(seed=data.seed)
    elif data.source in LABELLED_SOURCES:
        splits = _file_splits(data)
    else:
        raise ValueError(f"data.source: {data.source!r} has no labels; use one of {', '.join(LABELLED_SOURCES)}")
    limits = {name: data.max_train_samples if name == "train" else data.max_eval_samples for name in splits}
    return DatasetDict({name: split.select(range(min(limits[name] or len(split), len(split)))) for name, split in splits.items()})


def load_texts(data: DataConfig | Mapping[str, Any]) -> tuple[list[str], list[str] | None]:
    """Texts (and second segments, or None) for MLM pre-training.

    ``sample_corpus`` generates ``n_sentences`` sentences; ``corpus`` reads one text a line from
    ``data.path`` (one file or a list, in order; ``.gz`` allowed; blank lines skipped; ValueError
    naming the files when none is left, naming file:line for a line that is not UTF-8 or a broken
    ``.gz``); a labelled source gives its training split's ``text`` (and ``text_pair``).
    ``max_train_samples`` keeps the first N.
    """
    data = DataConfig.from_mapping(data)
    pairs = None
    if data.source == "sample_corpus":
        texts = sample_corpus(n_sentences=data.n_sentences, seed=data.seed)
    elif data.source == "corpus":
        paths = _paths(data)
        texts = [line.strip() for path in paths for _, line in read_lines(path) if line.strip()]
        if not texts:
            raise ValueError(f"data.path: must hold at least one non-blank line, got none in {', '.join(map(str, paths))}")
    else:
        train = load_splits(data)["train"]
        texts = list(train["text"])
        pairs = list(train["text_pair"]) if "text_pair" in train.column_names else None
    limit = data.max_train_samples
    return texts[:limit], (pairs[:limit] if pairs is not None else None)
