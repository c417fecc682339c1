"""Chinese MLM masking: jieba segmentation, word-aligned encoding, random / whole-word / knowledge-based
collators and :func:`build_collator` from a :class:`MaskingSpec`; corpus preparation (sentence packing,
parallel encoding, on-disk cache); held-out evaluation is ``workbench.train.heldout``."""

from __future__ import annotations

from workbench.config import MaskingSpec
from workbench.masking.build import build_collator
from workbench.masking.cache import PreparedCorpus, default_cache_dir, prepare_corpus
from workbench.masking.collators import KnowledgeMaskCollator, RandomMaskCollator, WholeWordMaskCollator
from workbench.masking.corpus import count_tokens, encode_corpus
from workbench.masking.encode import encode_words
from workbench.masking.knowledge import compute_idf
from workbench.masking.packing import pack_documents, split_sentences
from workbench.masking.segment import JiebaSegmenter

__all__ = [
    "JiebaSegmenter",
    "KnowledgeMaskCollator",
    "MaskingSpec",
    "PreparedCorpus",
    "RandomMaskCollator",
    "WholeWordMaskCollator",
    "build_collator",
    "compute_idf",
    "count_tokens",
    "default_cache_dir",
    "encode_corpus",
    "encode_words",
    "pack_documents",
    "prepare_corpus",
    "split_sentences",
]
