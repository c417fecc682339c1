"""Sentence-order prediction (SOP): a block's two halves, in order or swapped.

ALBERT (Lan et al., 2020, Sec. 3.1) replaced BERT's next-sentence prediction by SOP: two
consecutive segments of one document, in their order (label 0) or swapped (label 1); the
Erlangshen pre-training of the PCL paper uses it too ("Erlangshen is pre-trained with Masked
Language Modeling (MLM) [...] and Sentence-Order Prediction (SOP) [...] task", Sec. 3.1). The
workbench reading for its packed blocks: cut each block's tokens at the word boundary
nearest its middle and swap the halves with probability 0.5, giving
``[CLS] A [SEP] B [SEP]`` with ``token_type_ids`` 0 for A and 1 for B. The block grows by
one [SEP], so a corpus for SOP is packed to ``max_length - 1``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

NO_WORD = -1


def _cut(word_ids: list[int]) -> int:
    """Index (into the inner tokens) of the word boundary nearest the middle; a cut inside a word
    only when the block holds a single word."""
    middle = len(word_ids) / 2
    boundaries = [i for i in range(1, len(word_ids)) if word_ids[i] != word_ids[i - 1] or word_ids[i] == NO_WORD]
    return min(boundaries, key=lambda i: (abs(i - middle), i)) if boundaries else max(1, len(word_ids) // 2)


def sentence_order(feature: Mapping[str, Any], swap: bool, cls_id: int, sep_id: int) -> dict[str, Any]:
    """``feature`` (a packed block: ``[CLS] tokens [SEP]`` with ``word_ids`` / ``word_pos``) as two
    segments, swapped when ``swap``; ``words`` / ``word_tags`` are kept (word ids still index them)."""
    ids, word_ids, word_pos = list(feature["input_ids"]), list(feature["word_ids"]), list(feature["word_pos"])
    if len(ids) < 4:  # [CLS] x [SEP]: nothing to cut
        return dict(feature)
    inner = slice(1, len(ids) - 1)
    cut = _cut(word_ids[inner])
    parts = [
        (ids[inner][:cut], word_ids[inner][:cut], word_pos[inner][:cut]),
        (ids[inner][cut:], word_ids[inner][cut:], word_pos[inner][cut:]),
    ]
    first, second = parts[::-1] if swap else parts
    input_ids = [cls_id, *first[0], sep_id, *second[0], sep_id]
    return {
        **feature,
        "input_ids": input_ids,
        "attention_mask": [1] * len(input_ids),
        "token_type_ids": [0] * (len(first[0]) + 2) + [1] * (len(second[0]) + 1),
        "word_ids": [NO_WORD, *first[1], NO_WORD, *second[1], NO_WORD],
        "word_pos": ["", *first[2], "", *second[2], ""],
    }


def sentence_order_batch(
    features: list[Mapping[str, Any]], rng: np.random.Generator, cls_id: int, sep_id: int
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Every feature reordered with a fair coin from ``rng``; returns the features and the labels
    (1 = swapped, 0 = in order; a block too short to cut keeps label 0)."""
    swaps = rng.random(len(features)) < 0.5
    reordered = [sentence_order(feature, bool(swap), cls_id, sep_id) for feature, swap in zip(features, swaps)]
    labels = np.array([bool(swap) and len(feature["input_ids"]) >= 4 for feature, swap in zip(features, swaps)], dtype=np.int64)
    return reordered, labels
