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
    masking) with ``spec.mlm_probability``.

    Args:
        spec: a :class:`MaskingSpec` or its mapping; WWM takes ``spec.max_ngram``.
        tokenizer: the model's tokenizer (``workbench.vocab.load_tokenizer``).
        seed: seeds the collator's own generator.
        return_word_ids: keep the word spans in the batch (hard correction needs them).
        segmented_texts: for KDM, texts as lists of jieba words (e.g. ``feature["words"]``) whose IDF
            weighs the words; None: no IDF.
        sentence_order: add sentence-order prediction (halves swapped with p = 0.5, ``sop_labels``
            in the batch).

    Returns:
        A ``RandomMaskCollator``, ``WholeWordMaskCollator`` or ``KnowledgeMaskCollator``.
    """
    spec = MaskingSpec.from_mapping(spec)
    common = {
        "mlm_probability": spec.mlm_probability,
        "seed": seed,
        "return_word_ids": return_word_ids,
        "sentence_order": sentence_order,
    }
    if spec.strategy == "random":
        return RandomMaskCollator(tokenizer, **common)
    if spec.strategy == "wwm":
        return WholeWordMaskCollator(tokenizer, max_ngram=spec.max_ngram, **common)
    idf = compute_idf(segmented_texts) if segmented_texts is not None else None
    return KnowledgeMaskCollator(tokenizer, idf=idf, **common)
