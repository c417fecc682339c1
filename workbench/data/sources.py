"""A config's ``data`` section (:class:`workbench.config.DataConfig`) turned into datasets.

* :func:`load_splits`: labelled ``train`` / ``validation`` (/ ``test``) splits for fine-tuning;
* :func:`load_texts`: raw texts (and optional second segments) for MLM pre-training.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict

from workbench.config import DataConfig
from workbench.data.loaders import load_chnsenticorp, load_lcqmc, load_qbqtc, load_table, load_tnews
from workbench.data.samples import sample_corpus, sample_relevance_splits, sample_sentence_splits
from workbench.data.splits import stratified_split
from workbench.lexicon import read_lines

SPLIT_NAMES = ("train", "validation", "test")
LABELLED_FILE_SOURCES = ("qbqtc", "tnews", "chnsenticorp", "lcqmc", "table")
LABELLED_SOURCES = ("sample_relevance", "sample_sentences", *LABELLED_FILE_SOURCES)


def _require_paths(data: DataConfig, key: str = "path") -> list[Path]:
    value = getattr(data, key)
    if value is None:
        raise ValueError(f"data.{key}: source {data.source!r} needs a file path")
    paths = [Path(item) for item in (value if isinstance(value, list) else [value])]
    for path in paths:
        if not path.is_file():
            raise ValueError(f"data.{key}: no such file {str(path)!r}")
    return paths


def _require_path(data: DataConfig, key: str = "path") -> Path:
    return _require_paths(data, key)[0]


def _read_labelled_file(data: DataConfig, key: str) -> Dataset:
    path = _require_path(data, key)
    if data.source == "qbqtc":
        return load_qbqtc(path)
    if data.source == "tnews":
        return load_tnews(path, labels_path=data.labels_path)
    if data.source == "chnsenticorp":
        return load_chnsenticorp(path)
    if data.source == "lcqmc":
        return load_lcqmc(path)
    if data.label is None or data.text is None:
        raise ValueError(f"data.text / data.label: must name the columns for source 'table', got {data.text!r} / {data.label!r}")
    return load_table(path, text=data.text, text_pair=data.text_pair, label=data.label)


def _split_file(data: DataConfig, fractions: dict[str, float]) -> DatasetDict:
    """``data.path`` cut by ``stratified_split``; too few examples for a split is an error naming
    ``data.split`` and the file."""
    dataset = _read_labelled_file(data, "path")
    try:
        return stratified_split(dataset, fractions, seed=data.seed)
    except ValueError as error:
        raise ValueError(f"data.split: cannot cut {str(_require_path(data))!r} into {list(data.split)!r}: {error}") from None


def _limit(dataset: Dataset, limit: int | None) -> Dataset:
    return dataset if limit is None or limit >= len(dataset) else dataset.select(range(limit))


def load_splits(data: DataConfig | Mapping[str, Any]) -> DatasetDict:
    """Labelled splits ``train``, ``validation`` and (when there is one) ``test``.

    Sample sources come split. A file source reads ``data.path``; with
    ``validation_path`` (and optionally ``test_path``) those files are the other
    splits, otherwise ``path`` is cut by ``stratified_split`` into ``data.split``
    fractions with ``data.seed`` (a zero test fraction gives no test split).
    ``max_train_samples`` / ``max_eval_samples`` keep the first N examples.
    """
    data = DataConfig.from_mapping(data)
    if data.source == "sample_relevance":
        splits = sample_relevance_splits(seed=data.seed)
    elif data.source == "sample_sentences":
        splits = sample_sentence_splits(seed=data.seed)
    elif data.source in LABELLED_FILE_SOURCES:
        if data.validation_path is not None:
            splits = DatasetDict(
                {"train": _read_labelled_file(data, "path"), "validation": _read_labelled_file(data, "validation_path")}
            )
            if data.test_path is not None:
                splits["test"] = _read_labelled_file(data, "test_path")
        else:
            fractions = {name: fraction for name, fraction in zip(SPLIT_NAMES, data.split) if fraction > 0}
            if "validation" not in fractions:
                raise ValueError(f"data.split: the validation fraction must be > 0, got {list(data.split)!r}")
            splits = _split_file(data, fractions)
    else:
        raise ValueError(f"data.source: {data.source!r} has no labels; use one of {', '.join(LABELLED_SOURCES)}")
    return DatasetDict(
        {
            name: _limit(split, data.max_train_samples if name == "train" else data.max_eval_samples)
            for name, split in splits.items()
        }
    )


def _read_lines(path: Path) -> list[str]:
    return [line.strip() for line in read_lines(path) if line.strip()]  # ValueError naming file:line for bad bytes


def load_texts(data: DataConfig | Mapping[str, Any]) -> tuple[list[str], list[str] | None]:
    """Texts (and second segments, or None) for MLM pre-training.

    ``sample_corpus`` generates ``n_sentences`` sentences; ``corpus`` reads one
    text a line from ``data.path`` (one file or a list, in order; ``.gz`` allowed; blank lines are
    skipped, ValueError naming the files when none is left); a labelled source gives
    its training split's ``text`` (and ``text_pair``). ``max_train_samples``
    keeps the first N.
    """
    data = DataConfig.from_mapping(data)
    if data.source == "sample_corpus":
        texts, pairs = sample_corpus(n_sentences=data.n_sentences, seed=data.seed), None
    elif data.source == "corpus":
        paths = _require_paths(data)
        texts, pairs = [line for path in paths for line in _read_lines(path)], None
        if not texts:
            raise ValueError(f"data.path: must hold at least one non-blank line, got none in {', '.join(map(str, paths))}")
    else:
        train = load_splits(data)["train"]
        texts = list(train["text"])
        pairs = list(train["text_pair"]) if "text_pair" in train.column_names else None
    limit = data.max_train_samples
    if limit is not None:
        texts = texts[:limit]
        pairs = pairs[:limit] if pairs is not None else None
    return texts, pairs
