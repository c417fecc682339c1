"""Tokenize texts and align every token with the jieba word it belongs to.

Run once per dataset (e.g. inside ``datasets.map(batched=True)``); the masking
collators then work on the stored word indices and never segment again.
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.checks import check_int

from .segment import JiebaSegmenter

NO_WORD = -1


def _char_to_word(text: str, segmenter: JiebaSegmenter) -> tuple[list[int], list[str], list[str]]:
    """Per character of ``text``: the index of its jieba word; plus the words and their POS tags."""
    char_word: list[int] = []
    words: list[str] = []
    tags: list[str] = []
    for index, (word, tag) in enumerate(segmenter.segment(text)):
        char_word.extend([index] * len(word))
        words.append(word)
        tags.append(tag)
    return char_word, words, tags


def encode_words(
    tokenizer,
    texts: Sequence[str],
    segmenter: JiebaSegmenter,
    max_length: int = 128,
    text_pairs: Sequence[str] | None = None,
) -> list[dict]:
    """Encode ``texts`` (and optional ``text_pairs``) with word alignment for whole-word masking.

    Each token is mapped to the jieba word containing its first character (via
    the fast tokenizer's offset mapping). Words are numbered 0, 1, 2, ... in the
    order their first token appears, over the whole sequence, so the second
    segment of a pair continues after the first; words with no token (spaces,
    or cut off by truncation) get no number.

    Returns one dict per text with ``input_ids``, ``attention_mask``,
    ``token_type_ids``, ``word_ids`` (-1 for special tokens), ``word_pos`` (the
    POS tag of each token's word, "" for special tokens), ``words`` and
    ``word_tags`` (the string and POS tag of each numbered word).
    """
    check_int("max_length", max_length, 2)  # room for [CLS] and [SEP]
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"tokenizer: must be a fast tokenizer (offset mappings are needed), got {type(tokenizer).__name__}")
    texts = list(texts)
    if text_pairs is not None:
        text_pairs = list(text_pairs)
        if len(text_pairs) != len(texts):
            raise ValueError(f"text_pairs: must have one entry per text ({len(texts)}), got {len(text_pairs)}")
    encoded = tokenizer(
        texts,
        text_pairs,
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
        return_token_type_ids=True,
        return_attention_mask=True,
    )
    features = []
    for row, text in enumerate(texts):
        segments = [_char_to_word(text, segmenter)]
        if text_pairs is not None:
            segments.append(_char_to_word(text_pairs[row], segmenter))
        renumbered: dict[tuple[int, int], int] = {}
        words: list[str] = []
        word_tags: list[str] = []
        word_ids: list[int] = []
        word_pos: list[str] = []
        offsets = encoded["offset_mapping"][row]
        for sequence_id, (start, end) in zip(encoded.sequence_ids(row), offsets):
            if sequence_id is None or end <= start:
                word_ids.append(NO_WORD)
                word_pos.append("")
                continue
            char_word, segment_words, segment_tags = segments[sequence_id]
            key = (sequence_id, char_word[start])
            if key not in renumbered:
                renumbered[key] = len(words)
                words.append(segment_words[key[1]])
                word_tags.append(segment_tags[key[1]])
            word_ids.append(renumbered[key])
            word_pos.append(segment_tags[key[1]])
        features.append(
            {
                "input_ids": list(encoded["input_ids"][row]),
                "attention_mask": list(encoded["attention_mask"][row]),
                "token_type_ids": list(encoded["token_type_ids"][row]),
                "word_ids": word_ids,
                "word_pos": word_pos,
                "words": words,
                "word_tags": word_tags,
            }
        )
    return features
