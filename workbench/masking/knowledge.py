"""Word knowledge for knowledge-based dynamic masking: entity/event types, their sampling weights and corpus IDF."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

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


def word_weights(
    tags: Sequence[str],
    words: Sequence[str],
    entities: frozenset[str],
    idf: Mapping[str, float],
    unseen_idf: float,
    type_weights: np.ndarray,
) -> np.ndarray:
    """One sampling weight per word: w = type_weights[type] * idf(word).

    type: ENTITY for an entity tag or a word in ``entities``, EVENT for an event tag, else OTHER;
    idf(word) from ``idf`` (``unseen_idf``, the largest, for a missing word), 1 when ``idf`` is empty.
    ``words`` is read only when ``entities`` or ``idf`` is given.
    """
    types = np.array([word_type(tag) for tag in tags], dtype=np.int64)
    if entities:
        types[np.array([word in entities for word in words], dtype=bool)] = ENTITY
    weights = type_weights[types]
    if idf:
        weights = weights * np.array([idf.get(word, unseen_idf) for word in words], dtype=np.float64)
    return weights


def compute_idf(segmented_texts: Iterable[Iterable[str]]) -> dict[str, float]:
    """Smoothed inverse document frequency of every word of a segmented corpus, counted streaming (one
    text in memory at a time): idf(w) = ln((1 + N) / (1 + df(w))) + 1, N texts, df(w) = texts holding w
    (scikit-learn's TfidfTransformer, smooth_idf)."""
    document_frequency: Counter[str] = Counter()
    n_texts = 0
    for words in segmented_texts:
        n_texts += 1
        document_frequency.update(set(words))
    if n_texts == 0:
        raise ValueError("segmented_texts: must hold at least one text, got none")
    return {word: math.log((1 + n_texts) / (1 + df)) + 1.0 for word, df in document_frequency.items()}
