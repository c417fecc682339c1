"""Datasets: generated samples, loaders of the real files, the named data sets of the data root (:data:`RELEASES`,
``$WORKBENCH_DATA``), seeded splits, imbalance tools, and :func:`load_splits` / :func:`load_texts` for a config's
``data`` section. Every dataset has ``text`` (and ``text_pair``) and an integer ``label`` whose ClassLabel names the
classes (``label_names(ds)``).

Names are imported on first use (PEP 562), so that the config reads the named data sets
(:mod:`workbench.data.releases`, which imports no ``datasets``) without loading the rest.
"""

from __future__ import annotations

import importlib
from typing import Any

_MODULES = {
    "features": ("RELEVANCE_LABEL_NAMES", "label_counts", "label_names"),
    "imbalance": (
        "TABLE8_SETTINGS",
        "SynonymAugmenter",
        "downsample",
        "rebalance",
        "synonym_replace",
        "table8_class_counts",
        "table8_training_sets",
        "upsample",
    ),
    "loaders": ("TNEWS_LABELS", "load_chnsenticorp", "load_lcqmc", "load_qbqtc", "load_table", "load_tnews"),
    "loading": ("Splits", "Texts", "load_splits", "load_texts"),
    "releases": ("RELEASES", "Build", "Download", "Release", "ReleaseFile", "release"),
    "root_files": ("MissingDataError",),
    "samples": (
        "SENTIMENT_LABEL_NAMES",
        "SYNONYM_GROUPS",
        "sample_corpus",
        "sample_relevance_pairs",
        "sample_relevance_splits",
        "sample_sentence_splits",
        "sample_sentences",
    ),
    "splits": (
        "NORMALISATION",
        "deduplicate_splits",
        "shared_with_train",
        "stratified_sample",
        "stratified_split",
        "text_key",
        "unique_texts",
    ),
}
_EXPORTS = {name: f"workbench.data.{module}" for module, names in _MODULES.items() for name in names}
_EXPORTS["data_root"] = "workbench.data_root"
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workbench.data' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
