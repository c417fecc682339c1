"""Tokenize texts and align every token with the jieba word it belongs to, once per dataset (e.g. inside
``datasets.map(batched=True)``): the collators then mask stored word indices and never segment again."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.checks import check_int

from .segment import JiebaSegmenter

NO_WORD = -1


def _char_to_word(text: str, segmenter: JiebaSegmenter) -> tuple[list[int], list[str], list[str]]:
    """Per character of ``text``: the index of its jieba word; plus the words and their POS tags."""
    pairs = segmenter.segment(text)
    char_word = [index for index, (word, _) in enumerate(pairs) for _ in word]
    return char_word, [word for word, _ in pairs], [tag for _, tag in pairs]


def encode_words(
    tokenizer, texts: Sequence[str], segmenter: JiebaSegmenter, max_length: int = 128, text_pairs: Sequence[str] | None = None
) -> list[dict]:
    """Encode ``texts`` (and optional ``text_pairs``, truncated to ``max_length``) with word alignment.

    A token belongs to the jieba word holding its first character (the fast tokenizer's offsets). Words
    are numbered 0, 1, ... in the order of their first token over the whole sequence (a pair's second
    segment continues the first's numbering); words without a token (spaces, truncated) get no number.
    Returns per text ``input_ids``, ``attention_mask``, ``token_type_ids``, ``word_ids`` (-1 for special
    tokens), ``word_pos`` (each token's word's POS tag, "" for special tokens), ``words`` and
    ``word_tags`` (each numbered word and its tag).
    """
    check_int("max_length", max_length, 2)  # room for [CLS] and [SEP]
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"tokenizer: must be a fast tokenizer (offset mappings are needed), got {type(tokenizer).__name__}")
    texts = list(texts)
    if text_pairs is not None and len(text_pairs := list(text_pairs)) != len(texts):
        raise ValueError(f"text_pairs: must have one entry per text ({len(texts)}), got {len(text_pairs)}")
    encoded = tokenizer(
        texts, text_pairs, truncation=True, max_length=max_length, return_offsets_mapping=True, return_token_type_ids=True
    )
    features = []
    for row, text in enumerate(texts):
        segments = [_char_to_word(text, segmenter)] + ([] if text_pairs is None else [_char_to_word(text_pairs[row], segmenter)])
        renumbered: dict[tuple[int, int], int] = {}
        feature = {"word_ids": [], "word_pos": [], "words": [], "word_tags": []}
        for sequence, (start, end) in zip(encoded.sequence_ids(row), encoded["offset_mapping"][row]):
            if sequence is None or end <= start:
                feature["word_ids"].append(NO_WORD)
                feature["word_pos"].append("")
                continue
            char_word, words, tags = segments[sequence]
            word = char_word[start]
            if (sequence, word) not in renumbered:
                renumbered[sequence, word] = len(feature["words"])
                feature["words"].append(words[word])
                feature["word_tags"].append(tags[word])
            feature["word_ids"].append(renumbered[sequence, word])
            feature["word_pos"].append(tags[word])
        columns = ("input_ids", "attention_mask", "token_type_ids")
        features.append({name: list(encoded[name][row]) for name in columns} | feature)
    return features
