"""Word vectors counted from a corpus, a stand-in for the Word2Vec / GloVe vectors of the true-negatives paper's
embedding look-up (notebook 03, Table 6, second block); :meth:`workbench.synonyms.SynonymTable.from_embeddings` turns
them into a synonym table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from workbench.checks import check_int


def corpus_word_vectors(
    documents: Sequence[Sequence[str]], dim: int = 50, window: int = 2, min_count: int = 2
) -> tuple[np.ndarray, list[str]]:
    """Count-based word vectors, a stand-in for the paper's Word2Vec / GloVe (Levy, Goldberg & Dagan 2015):
    ``(vectors, words)`` for the words of ``documents`` (lists of words) seen at least ``min_count`` times, ordered by
    count, then text.

    PPMI(w, c) = max(0, log(n(w, c) N / (n(w) n_0.75(c)))), n(w, c) counting words at most ``window`` apart,
    n_0.75(c) = N n(c)^0.75 / sum_c' n(c')^0.75; vectors U_d S_d^(1/2) of its SVD, d = min(``dim``, words).
    Deterministic (dense SVD up to 4,000 words, ARPACK with a fixed start vector beyond).
    """
    from scipy import sparse
    from scipy.sparse.linalg import svds

    for name, value in (("dim", dim), ("window", window), ("min_count", min_count)):
        check_int(name, value, 1)
    counts = Counter(word for document in documents for word in document)
    words = sorted(
        (word for word, count in counts.items() if count >= min_count), key=lambda word: (-counts[word], word)
    )
    if len(words) < 2:
        raise ValueError(f"documents: need at least two words seen min_count={min_count} times, got {len(words)}")
    index = {word: number for number, word in enumerate(words)}
    pairs: Counter[tuple[int, int]] = Counter()
    for document in documents:
        ids = [index.get(word, -1) for word in document]
        for position, word in enumerate(ids):
            context = ids[max(0, position - window) : position] + ids[position + 1 : position + window + 1]
            pairs.update((word, other) for other in context if word >= 0 and other >= 0)
    size = len(words)
    rows = np.array([word for word, _ in pairs], dtype=np.int64)
    columns = np.array([other for _, other in pairs], dtype=np.int64)
    n = np.array(list(pairs.values()), dtype=np.float64)
    context = np.bincount(columns, weights=n, minlength=size) ** 0.75
    with np.errstate(divide="ignore"):
        pmi = np.log(n * context.sum()) - np.log(np.bincount(rows, weights=n, minlength=size)[rows] * context[columns])
    keep = pmi > 0
    matrix = sparse.csr_matrix((pmi[keep], (rows[keep], columns[keep])), shape=(size, size))
    dim = min(dim, size)
    if size <= 4000 or dim >= size - 1:
        left, singular, _ = np.linalg.svd(matrix.toarray(), full_matrices=False)
        left = left[:, :dim]
        singular = singular[:dim]
    else:
        left, singular, _ = svds(matrix, k=dim, v0=np.full(size, 1.0 / np.sqrt(size)))
    return (left * np.sqrt(singular)).astype(np.float32), words
