"""Word knowledge for knowledge-based dynamic masking: entity/event types, their sampling weights and corpus IDF."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

import numpy as np

ENTITY_TAGS = frozenset({"ns", "nt", "nz"})
ENTITY_TAG_PREFIX = "nr"  # nr, nrfg, nrt: person names
EVENT_TAGS = frozenset({"v", "vn"})
ENTITY, EVENT, OTHER = 0, 1, 2
"""Word types, the indices of the ``type_weights`` given to :func:`word_weights`."""


def word_type(tag: str) -> int:
    """ENTITY (0) for a named-entity POS tag (nr*, ns, nt, nz), EVENT (1) for an event tag (v, vn), else OTHER (2)."""
    if tag in ENTITY_TAGS or tag.startswith(ENTITY_TAG_PREFIX):
        return ENTITY
    return EVENT if tag in EVENT_TAGS else OTHER


class _TagTypes(dict):
    """tag -> :func:`word_type`, filled on first sight so look-ups stay at C speed."""

    def __missing__(self, tag: str) -> int:
        self[tag] = kind = word_type(tag)
        return kind


_TAG_TYPES = _TagTypes()


def word_weights(
    tags: Sequence[str],
    words: Sequence[str],
    entities: frozenset[str],
    idf: Mapping[str, float],
    unseen_idf: float,
    type_weights: np.ndarray,
) -> np.ndarray:
    """One sampling weight per word: w = type_weights[type] * idf(word).

    type is ENTITY for an entity tag or a word listed in ``entities``, EVENT
    for an event tag, else OTHER; idf(word) comes from ``idf`` (``unseen_idf``,
    the largest idf, for missing words: they count as the rarest) and is 1 for
    every word when ``idf`` is empty. ``words`` is only read when ``entities``
    or ``idf`` is given.
    """
    types = np.fromiter(map(_TAG_TYPES.__getitem__, tags), dtype=np.int64, count=len(tags))
    if entities:
        types[np.fromiter(map(entities.__contains__, words), dtype=bool, count=len(words))] = ENTITY
    weights = type_weights[types]
    if idf:
        weights = weights * np.fromiter(map(idf.get, words, repeat(unseen_idf)), dtype=np.float64, count=len(words))
    return weights


def compute_idf(segmented_texts: Iterable[Iterable[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of every word in a segmented corpus.

    idf(w) = ln((1 + N) / (1 + df(w))) + 1, N = number of texts, df(w) = texts
    containing w (the smoothed form of scikit-learn's TfidfTransformer).
    """
    document_frequency: Counter[str] = Counter()
    n_texts = 0
    for words in segmented_texts:
        n_texts += 1
        document_frequency.update(set(words))
    if n_texts == 0:
        raise ValueError("segmented_texts: must hold at least one text, got none")
    return {word: math.log((1 + n_texts) / (1 + df)) + 1.0 for word, df in document_frequency.items()}
