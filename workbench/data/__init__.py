"""Datasets: generated samples, loaders of the real files, the named data sets of the data root (:data:`RELEASES`,
``$WORKBENCH_DATA``), seeded splits, imbalance tools, and :func:`load_splits` / :func:`load_texts` for a config's
``data`` section. Every dataset has ``text`` (and ``text_pair``) and an integer ``label`` whose ClassLabel names the
classes (``label_names(ds)``)."""

from __future__ import annotations

from workbench.data.features import RELEVANCE_LABEL_NAMES, label_counts, label_names
from workbench.data.imbalance import (
    TABLE8_SETTINGS,
    SynonymAugmenter,
    downsample,
    rebalance,
    synonym_replace,
    table8_class_counts,
    table8_training_sets,
    upsample,
)
from workbench.data.loaders import (
    TNEWS_LABELS,
    Splits,
    Texts,
    load_chnsenticorp,
    load_lcqmc,
    load_qbqtc,
    load_splits,
    load_table,
    load_texts,
    load_tnews,
)
from workbench.data.releases import RELEASES, MissingDataError, Release, ReleaseFile, release
from workbench.data.samples import (
    SENTIMENT_LABEL_NAMES,
    SYNONYM_GROUPS,
    sample_corpus,
    sample_relevance_pairs,
    sample_relevance_splits,
    sample_sentence_splits,
    sample_sentences,
)
from workbench.data.splits import (
    NORMALISATION,
    deduplicate_splits,
    shared_with_train,
    stratified_sample,
    stratified_split,
    text_key,
    unique_texts,
)
from workbench.data_root import data_root

__all__ = [
    "NORMALISATION",
    "RELEASES",
    "RELEVANCE_LABEL_NAMES",
    "MissingDataError",
    "Release",
    "ReleaseFile",
    "Splits",
    "Texts",
    "SENTIMENT_LABEL_NAMES",
    "SYNONYM_GROUPS",
    "SynonymAugmenter",
    "TABLE8_SETTINGS",
    "TNEWS_LABELS",
    "data_root",
    "deduplicate_splits",
    "downsample",
    "label_counts",
    "label_names",
    "load_chnsenticorp",
    "load_lcqmc",
    "load_qbqtc",
    "load_splits",
    "load_table",
    "load_texts",
    "load_tnews",
    "rebalance",
    "release",
    "sample_corpus",
    "sample_relevance_pairs",
    "sample_relevance_splits",
    "sample_sentence_splits",
    "sample_sentences",
    "shared_with_train",
    "stratified_sample",
    "stratified_split",
    "synonym_replace",
    "table8_class_counts",
    "table8_training_sets",
    "text_key",
    "unique_texts",
    "upsample",
]
