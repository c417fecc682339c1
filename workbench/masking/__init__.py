"""Chinese MLM masking: jieba segmentation, word-aligned encoding, random / whole-word / knowledge-based
collators and :func:`build_collator` from a :class:`MaskingSpec`."""

from __future__ import annotations

from workbench.config import MaskingSpec
from workbench.masking.build import build_collator
from workbench.masking.collators import KnowledgeMaskCollator, RandomMaskCollator, WholeWordMaskCollator
from workbench.masking.encode import encode_words
from workbench.masking.knowledge import compute_idf
from workbench.masking.segment import JiebaSegmenter

__all__ = [
    "JiebaSegmenter",
    "KnowledgeMaskCollator",
    "MaskingSpec",
    "RandomMaskCollator",
    "WholeWordMaskCollator",
    "build_collator",
    "compute_idf",
    "encode_words",
]
