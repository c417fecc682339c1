"""Chinese MLM masking: jieba segmentation, word-aligned encoding, random / whole-word / knowledge-based collators."""

from __future__ import annotations

from .collators import KnowledgeMaskCollator, RandomMaskCollator, WholeWordMaskCollator
from .encode import encode_words
from .knowledge import compute_idf
from .segment import JiebaSegmenter

__all__ = [
    "JiebaSegmenter",
    "KnowledgeMaskCollator",
    "RandomMaskCollator",
    "WholeWordMaskCollator",
    "compute_idf",
    "encode_words",
]
