"""One constructor for the MLM collators: :func:`build_collator` from a :class:`~workbench.config.MaskingSpec`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from workbench.config import MaskingSpec
from workbench.masking.collators import KnowledgeMaskCollator, RandomMaskCollator, WholeWordMaskCollator
from workbench.masking.knowledge import compute_idf


def build_collator(
    spec: MaskingSpec | dict[str, Any],
    tokenizer: Any,
    seed: int = 0,
    return_word_ids: bool = False,
    segmented_texts: Iterable[Sequence[str]] | None = None,
    sentence_order: bool = False,
) -> RandomMaskCollator | WholeWordMaskCollator | KnowledgeMaskCollator:
    """The collator of ``spec.strategy`` (random tokens, whole words, or knowledge-based dynamic
    masking) with ``spec.mlm_probability``; WWM takes ``spec.max_ngram``; KDM weighs words by the
    IDF of ``segmented_texts`` (each a list of jieba words, e.g. ``feature["words"]``; none: no IDF).
    ``seed`` seeds the collator's own generator; ``return_word_ids`` keeps the word spans in the
    batch (hard correction needs them); ``sentence_order`` adds sentence-order prediction (halves swapped
    with p = 0.5, ``sop_labels`` in the batch)."""
    spec = MaskingSpec.from_mapping(spec)
    common = {"mlm_probability": spec.mlm_probability, "seed": seed, "return_word_ids": return_word_ids,
              "sentence_order": sentence_order}
    if spec.strategy == "random":
        return RandomMaskCollator(tokenizer, **common)
    if spec.strategy == "wwm":
        return WholeWordMaskCollator(tokenizer, max_ngram=spec.max_ngram, **common)
    idf = compute_idf(segmented_texts) if segmented_texts is not None else None
    return KnowledgeMaskCollator(tokenizer, idf=idf, **common)
