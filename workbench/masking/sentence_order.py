"""Sentence-order prediction (SOP): a block's two halves, in order or swapped.

ALBERT (Lan et al., 2020, Sec. 3.1): two consecutive segments of one document, in order (label 0) or swapped (label
1); Erlangshen (the PCL paper, Sec. 3.1) is pre-trained "with Masked Language Modeling (MLM) [...] and Sentence-Order
Prediction (SOP)". The workbench's reading for packed blocks: cut at the word boundary nearest the middle, swap with
probability 0.5, giving ``[CLS] A [SEP] B [SEP]`` (``token_type_ids`` 0 for A, 1 for B); one [SEP] more, so a corpus
for SOP is packed to ``max_length - 1``.

The halves may straddle documents: consecutive documents share a packed block (``pack_documents``), so the cut may
fall inside the second document, or a half may hold the end of one document and the start of the next. Such a pair is
not ALBERT's two segments of one document; in order or swapped, its label says only which half came first in the
block.
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
    """``feature`` (a packed block: ``[CLS] tokens [SEP]`` with ``word_ids`` / ``word_pos``) as two segments, swapped
    when ``swap``; ``words`` / ``word_tags`` are kept (word ids still index them)."""
    ids, word_ids, word_pos = (list(feature[key]) for key in ("input_ids", "word_ids", "word_pos"))
    if len(ids) < 4:  # [CLS] x [SEP]: nothing to cut
        return dict(feature)
    cut = 1 + _cut(word_ids[1:-1])
    first, second = (slice(cut, -1), slice(1, cut)) if swap else (slice(1, cut), slice(cut, -1))
    input_ids = [cls_id, *ids[first], sep_id, *ids[second], sep_id]
    return {
        **feature,
        "input_ids": input_ids,
        "attention_mask": [1] * len(input_ids),
        "token_type_ids": [0] * (len(ids[first]) + 2) + [1] * (len(ids[second]) + 1),
        "word_ids": [NO_WORD, *word_ids[first], NO_WORD, *word_ids[second], NO_WORD],
        "word_pos": ["", *word_pos[first], "", *word_pos[second], ""],
    }


def sentence_order_batch(
    features: list[Mapping[str, Any]], rng: np.random.Generator, cls_id: int, sep_id: int
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """Every feature reordered with a fair coin from ``rng``; returns the features and the labels
    (1 = swapped, 0 = in order; a block too short to cut keeps label 0)."""
    swaps = rng.random(len(features)) < 0.5
    reordered = [sentence_order(feature, bool(swap), cls_id, sep_id) for feature, swap in zip(features, swaps)]
    labels = np.array(
        [bool(swap) and len(feature["input_ids"]) >= 4 for feature, swap in zip(features, swaps)], dtype=np.int64
    )
    return reordered, labels
