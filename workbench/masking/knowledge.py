"""Word knowledge for knowledge-based dynamic masking: entity/event ranks and corpus IDF."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat

import numpy as np

ENTITY_TAGS = frozenset({"ns", "nt", "nz"})
ENTITY_TAG_PREFIX = "nr"  # nr, nrfg, nrt: person names
EVENT_TAGS = frozenset({"v", "vn"})
ENTITY_RANK, EVENT_RANK, OTHER_RANK = 0, 1, 2


def tag_rank(tag: str) -> int:
    """0 for a named-entity POS tag (nr*, ns, nt, nz), 1 for an event tag (v, vn), else 2."""
    if tag in ENTITY_TAGS or tag.startswith(ENTITY_TAG_PREFIX):
        return ENTITY_RANK
    return EVENT_RANK if tag in EVENT_TAGS else OTHER_RANK


class _TagRanks(dict):
    """tag -> :func:`tag_rank`, filled on first sight so look-ups stay at C speed."""

    def __missing__(self, tag: str) -> int:
        self[tag] = rank = tag_rank(tag)
        return rank


_TAG_RANKS = _TagRanks()


def word_priority(
    tags: Sequence[str], words: Sequence[str], entities: frozenset[str], idf: Mapping[str, float], unseen_idf: float
) -> np.ndarray:
    """One sort key per word, smaller = masked first: rank * (M + 1) - idf(word).

    rank is 0 for entities (by tag or listed in ``entities``), 1 for events, 2
    otherwise; idf comes from ``idf`` (``unseen_idf`` = M, the largest idf, for
    missing words), so 0 <= idf <= M and ranks never overlap. ``words`` is only
    read when ``entities`` or ``idf`` is given.
    """
    ranks = np.array(list(map(_TAG_RANKS.__getitem__, tags)), dtype=np.float64)
    if entities:
        ranks[np.array(list(map(entities.__contains__, words)), dtype=bool)] = ENTITY_RANK
    if not idf:
        return ranks
    return ranks * (unseen_idf + 1.0) - np.array(list(map(idf.get, words, repeat(unseen_idf))), dtype=np.float64)


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
