"""Chinese MLM masking: jieba segmentation, word-aligned encoding, the collators and corpus preparation (held-out
evaluation is ``workbench.train.pretraining``)."""

from __future__ import annotations

from workbench.config import MaskingSpec
from workbench.masking.collators import (
    KnowledgeMaskCollator,
    RandomMaskCollator,
    WholeWordMaskCollator,
    build_collator,
    compute_idf,
)
from workbench.masking.corpus import PreparedCorpus, count_tokens, default_cache_dir, encode_corpus, prepare_corpus
from workbench.masking.packing import encode_words, pack_documents, split_sentences
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
