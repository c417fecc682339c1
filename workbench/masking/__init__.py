"""Chinese MLM masking: jieba segmentation, word-aligned encoding, random / whole-word / knowledge-based collators;
corpus preparation (sentence packing, parallel encoding, on-disk cache) and held-out evaluation."""

from __future__ import annotations

from .cache import PreparedCorpus, default_cache_dir, prepare_corpus
from .collators import KnowledgeMaskCollator, RandomMaskCollator, WholeWordMaskCollator
from .corpus import count_tokens, encode_corpus
from .encode import encode_words
from .heldout import evaluate_masked_lm, fixed_mask_batches, split_heldout
from .knowledge import compute_idf
from .packing import pack_documents, split_sentences
from .segment import JiebaSegmenter

__all__ = [
    "JiebaSegmenter",
    "KnowledgeMaskCollator",
    "PreparedCorpus",
    "RandomMaskCollator",
    "WholeWordMaskCollator",
    "compute_idf",
    "count_tokens",
    "default_cache_dir",
    "encode_corpus",
    "encode_words",
    "evaluate_masked_lm",
    "fixed_mask_batches",
    "pack_documents",
    "prepare_corpus",
    "split_heldout",
    "split_sentences",
]
