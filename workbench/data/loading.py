"""A config's ``data`` section read: :func:`load_splits` (the labelled splits, with their provenance) and
:func:`load_texts` (the pre-training texts). Whatever the source (generated samples, files a section names, a named
data set of the data root), no text is in two splits and each pre-training text is given once (docs/data.md, "No
text in two splits"); ``max_train_samples`` / ``max_eval_samples`` then keep a seeded stratified sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from datasets import DatasetDict

from workbench.config import LABELLED_SOURCES, DataConfig
from workbench.data.named_sets import root_corpus, root_splits
from workbench.data.releases import RELEASES
from workbench.data.samples import sample_corpus, sample_relevance_splits, sample_sentence_splits
from workbench.data.split_files import file_splits, section_paths, warn_one_class_splits
from workbench.data.splits import (
    NORMALISATION,
    ONCE_IN,
    PRIORITY,
    deduplicate_splits,
    stratified_sample,
    unique_texts,
)
from workbench.text_files import read_lines


class Splits(DatasetDict):
    """The splits of :func:`load_splits`, a ``DatasetDict`` with ``provenance``: a JSON-ready record of where each
    split came from (docs/data.md): ``source``, ``duplicates`` (what :func:`deduplicate_splits` removed: ``removed``,
    per split ``shared``, ``repeated`` and ``of``), ``splits`` (per split: ``file``, ``cut`` when it was cut from a
    file, ``examples``) and, for a data set read from the data root, ``data_root`` and ``missing`` (its absent
    files)."""

    provenance: dict[str, Any] | None = None


def _without_duplicates(splits: DatasetDict) -> tuple[DatasetDict, dict[str, Any]]:
    """``splits`` by :func:`deduplicate_splits` (every split, in :data:`PRIORITY` order) and the provenance's
    ``duplicates`` record; ValueError naming the split that nothing is left of."""
    priority = [name for name in PRIORITY if name in splits]
    cleaned, removed = deduplicate_splits(splits, priority=priority)
    for name in priority:
        if len(cleaned[name]) == 0:
            holders = " or ".join(priority[: priority.index(name)])
            raise ValueError(
                f"data: every example of the {name} split ({len(splits[name])}) is also in the {holders} split, "
                "which keeps it; give splits that share fewer texts"
            )
    compared = [key for key in ("text", "text_pair") if all(key in split.column_names for split in splits.values())]
    return cleaned, {
        "compared": compared,
        "normalisation": NORMALISATION,
        "priority": priority,
        "once_in": [name for name in ONCE_IN if name in splits],
        "removed": removed,
    }


def load_splits(data: DataConfig | Mapping[str, Any]) -> Splits:
    """Splits ``train``, ``validation`` (and ``test``) of a labelled source, with their ``provenance``
    (:class:`Splits`).

    Sample sources come split. A file source reads ``data.path`` and ``validation_path`` / ``test_path`` with the
    training file's classes, or cuts ``path`` by ``stratified_split`` (``data.split``, ``data.seed``; a 0 test
    fraction: no test). A named data set without a path (``{source: qbqtc}``) reads its release files from the data
    root; a split whose file is absent is cut from the present ones (a warning says which); no file present is a
    :class:`~workbench.data.root_files.MissingDataError` naming the files, the root and the fetch command.
    Then, for every source, no text is in two splits: :func:`deduplicate_splits` removes from each split what a split
    before it in test, validation, train holds (``text`` and ``text_pair``, by :func:`text_key`) and the repeats within
    validation and test; the provenance's ``duplicates`` counts them. After it, ``max_train_samples`` /
    ``max_eval_samples`` keep a seeded stratified sample of N examples of each split
    (:func:`stratified_sample`, ``data.seed``): the first N rows of a file sorted by label would lose classes."""
    data = DataConfig.from_mapping(data)
    if data.source in ("sample_relevance", "sample_sentences"):
        generate = sample_relevance_splits if data.source == "sample_relevance" else sample_sentence_splits
        splits = generate(seed=data.seed)
        record = {"generated": {"seed": data.seed}, "splits": {}}
    elif (
        data.source in RELEASES
        and RELEASES[data.source].labelled
        and data.path is None
        and data.validation_path is None
    ):
        splits, record = root_splits(data)
    elif data.source in LABELLED_SOURCES:
        splits, record = file_splits(data)
    else:
        raise ValueError(f"data.source: {data.source!r} has no labels; use one of {', '.join(LABELLED_SOURCES)}")
    splits, duplicates = _without_duplicates(splits)
    limits = {name: data.max_train_samples if name == "train" else data.max_eval_samples for name in splits}
    result = Splits(
        {
            name: split if limits[name] is None else stratified_sample(split, limits[name], data.seed)
            for name, split in splits.items()
        }
    )
    warn_one_class_splits(result)
    entries = record.pop("splits")
    result.provenance = {
        "source": data.source,
        **record,
        "duplicates": duplicates,
        "splits": {
            name: {
                **entries.get(name, {}),
                "examples": len(split),
                **({"stratified_sample": {"max": limits[name], "seed": data.seed}} if limits[name] else {}),
            }
            for name, split in result.items()
        },
    }
    return result


class Texts(tuple):
    """``(texts, pairs)`` of :func:`load_texts` (it unpacks as a pair) with ``provenance``: a JSON-ready record,
    ``source``, ``duplicates`` (the repeats removed: ``removed.texts`` with ``repeated`` and ``of``, as in
    :class:`Splits`), ``texts`` (how many are given) and, for a labelled source, ``splits`` (its ``load_splits``
    provenance)."""

    provenance: dict[str, Any]

    def __new__(cls, texts: list[str], pairs: list[str] | None, provenance: dict[str, Any]) -> Texts:
        loaded = super().__new__(cls, (texts, pairs))
        loaded.provenance = provenance
        return loaded


def load_texts(data: DataConfig | Mapping[str, Any]) -> Texts:
    """Texts (and second segments, or None) for MLM pre-training, each text (pair) once: ``sample_corpus``'s
    ``n_sentences``; ``corpus``: the non-blank lines of ``data.path`` (a file or a list, ``.gz`` allowed), without a
    path the ``corpus`` data set's files present in the data root (a warning names the absent ones); a labelled
    source: its training split (which shares no text with its validation and test splits, :func:`load_splits`) in a
    seeded random order (``data.seed``; a file sorted by label gives texts of every class). A text repeating an
    earlier one (by :func:`text_key`) is removed before ``max_train_samples`` keeps the first N texts of that order, so
    the texts after them are unseen (notebook 03 holds them out). A :class:`Texts` with its provenance."""
    data = DataConfig.from_mapping(data)
    pairs = None
    record: dict[str, Any] = {"source": data.source}
    if data.source == "sample_corpus":
        texts = sample_corpus(n_sentences=data.n_sentences, seed=data.seed)
    elif data.source == "corpus":
        paths = section_paths(data) if data.path is not None else root_corpus()
        texts = [line.strip() for path in paths for _, line in read_lines(path) if line.strip()]
        if not texts:
            raise ValueError(
                f"data.path: must hold at least one non-blank line, got none in {', '.join(map(str, paths))}"
            )
    else:  # every training text, shuffled: the first N and those after them come from every class
        splits = load_splits(data.replace(max_train_samples=None))
        train = splits["train"].select(np.random.default_rng(data.seed).permutation(len(splits["train"])))
        texts = list(train["text"])
        pairs = list(train["text_pair"]) if "text_pair" in train.column_names else None
        record["splits"] = splits.provenance
    unique, unique_pairs, repeated = unique_texts(texts, pairs)
    kept = unique[: data.max_train_samples]
    record["duplicates"] = {
        "normalisation": NORMALISATION,
        "removed": {"texts": {"shared": 0, "repeated": repeated, "of": len(texts)}},
    }
    record["texts"] = len(kept)
    return Texts(kept, None if unique_pairs is None else unique_pairs[: data.max_train_samples], record)
