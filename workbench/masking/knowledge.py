"""Word knowledge for knowledge-based dynamic masking: entity/event ranks and corpus IDF."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

ENTITY_TAGS = frozenset({"ns", "nt", "nz"})
ENTITY_TAG_PREFIX = "nr"  # nr, nrfg, nrt: person names
EVENT_TAGS = frozenset({"v", "vn"})
ENTITY_RANK, EVENT_RANK, OTHER_RANK = 0, 1, 2


def word_rank(word: str, tag: str, entities: frozenset[str]) -> int:
    """0 for a named entity (POS nr*, ns, nt, nz or listed in ``entities``), 1 for an event (v, vn), else 2."""
    if word in entities or tag in ENTITY_TAGS or tag.startswith(ENTITY_TAG_PREFIX):
        return ENTITY_RANK
    if tag in EVENT_TAGS:
        return EVENT_RANK
    return OTHER_RANK


def word_priority_keys(
    words: Sequence[str], tags: Sequence[str], entities: frozenset[str], idf: Mapping[str, float], unseen_idf: float
) -> tuple[np.ndarray, np.ndarray]:
    """Sort keys (rank, -idf) per word: smaller keys are masked first."""
    ranks = np.fromiter((word_rank(w, t, entities) for w, t in zip(words, tags)), dtype=np.int64, count=len(words))
    negative_idf = np.fromiter((-idf.get(w, unseen_idf) for w in words), dtype=np.float64, count=len(words))
    return ranks, negative_idf


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
        raise ValueError("segmented_texts must hold at least one text")
    return {word: math.log((1 + n_texts) / (1 + df)) + 1.0 for word, df in document_frequency.items()}
