"""Sentence splitting and packing of documents into MLM blocks with word-aligned features.

``run_mlm``'s ``group_texts`` concatenates all texts and cuts every ``block_size``
tokens, wherever that falls. :func:`pack_documents` groups text the same way (over
document boundaries too) but cuts only where it keeps sentences and jieba words
whole, in the manner of RoBERTa's FULL-SENTENCES inputs:

1. a document is split into sentences after 。！？ (with any closing quotes or
   brackets that follow) and at every run of whitespace (newlines; the space that
   joins a news story's paragraphs); whitespace yields no token;
2. each sentence is segmented with jieba and the document tokenized once; every
   token is aligned with the word holding its first character (as
   :func:`workbench.masking.encode_words` does);
3. sentences are appended to the current block while it stays within
   ``max_length`` tokens including [CLS] and [SEP]. With ``block_boundary="sentence"``
   (default) a sentence that does not fit closes the block and opens the next, so
   blocks hold whole sentences; with ``"word"`` the block is first filled with the
   sentence's longest prefix of whole words that fits (blocks are full, as in
   ``group_texts``, but may start and end inside a sentence). A sentence longer
   than a block is cut into block-sized pieces at word boundaries (a word longer
   than a whole block is cut between tokens);
4. consecutive documents share a block, separated by one [SEP] (word id -1, never
   masked): document boundaries are sentence boundaries that cost one token.

No text is dropped: the last block is kept however short. Every block carries the
features of :func:`workbench.masking.encode_words` (``input_ids``,
``attention_mask``, ``token_type_ids``, ``word_ids``, ``word_pos``, ``words``,
``word_tags``), with words numbered from 0 within the block, so the existing
collators mask blocks unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.config import BLOCK_BOUNDARIES  # the choices, defined once

from .encode import NO_WORD, _char_to_word
from .segment import JiebaSegmenter

_BOUNDARY = re.compile(r"[。！？]+[”’」』）》〉】)\]\"']*|\s+")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``, in order.

    A sentence ends after a run of 。！？ (closing quotes and brackets that follow
    stay with it) and at whitespace, which belongs to no sentence. The spans cover
    every non-whitespace character exactly once.
    """
    spans = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        whitespace = match.group()[0].isspace()
        end = match.start() if whitespace else match.end()
        if end > start:
            spans.append((start, end))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


@dataclass
class _Document:
    """One tokenized document: token ids, each token's word (-1: none), the words and POS tags,
    the token ranges of its sentences, and where a block may start without splitting a word."""

    ids: list[int]
    token_word: list[int]
    words: list[str]
    tags: list[str]
    sentences: list[tuple[int, int]]
    word_starts: list[bool]

    def last_word_start(self, start: int, limit: int) -> int | None:
        """The last token index in (start, limit] where a word starts, or None."""
        for cut in range(limit, start, -1):
            if self.word_starts[cut]:
                return cut
        return None


def _analyse(text: str, ids: list[int], offsets: list[tuple[int, int]], segmenter: JiebaSegmenter) -> _Document:
    char_word = [NO_WORD] * len(text)
    char_sentence = [0] * len(text)
    words: list[str] = []
    tags: list[str] = []
    for number, (start, end) in enumerate(split_sentences(text)):
        sentence_word, sentence_words, sentence_tags = _char_to_word(text[start:end], segmenter)
        first = len(words)
        char_word[start:end] = [word + first for word in sentence_word]
        char_sentence[start:end] = [number] * (end - start)
        words += sentence_words
        tags += sentence_tags
    token_word = [char_word[start] if end > start else NO_WORD for start, end in offsets]
    token_sentence = [char_sentence[min(start, len(text) - 1)] for start, _ in offsets]
    sentences = []
    word_starts = []
    for index, (word, sentence) in enumerate(zip(token_word, token_sentence)):
        new_sentence = index == 0 or sentence != token_sentence[index - 1]
        if new_sentence:
            sentences.append([index, index + 1])
        else:
            sentences[-1][1] = index + 1
        word_starts.append(new_sentence or word < 0 or word != token_word[index - 1])
    word_starts.append(True)  # the end of the document
    return _Document(ids, token_word, words, tags, [tuple(span) for span in sentences], word_starts)


class _Packer:
    """Greedy sentence packing into blocks of at most ``capacity`` tokens (without [CLS]/[SEP])."""

    def __init__(self, cls_id: int, sep_id: int, capacity: int, block_boundary: str):
        self.cls_id, self.sep_id, self.capacity = cls_id, sep_id, capacity
        self.fill_with_words = block_boundary == "word"
        self.blocks: list[dict] = []
        self.pieces: list[list] = []  # [document, start, end] token ranges of the open block
        self.used = 0

    def add(self, document: _Document) -> None:
        for start, end in document.sentences:
            separator = int(bool(self.pieces) and self.pieces[-1][0] is not document)
            room = self.capacity - self.used - separator
            if end - start <= room:
                self._append(document, start, end, separator)
                continue
            cut = document.last_word_start(start, start + room) if self.fill_with_words and room > 0 else None
            if cut is not None:
                self._append(document, start, cut, separator)
                start = cut
            self._close()
            while end - start > self.capacity:
                cut = document.last_word_start(start, start + self.capacity) or start + self.capacity
                self._append(document, start, cut, 0)
                self._close()
                start = cut
            self._append(document, start, end, 0)

    def finish(self) -> list[dict]:
        self._close()
        return self.blocks

    def _append(self, document: _Document, start: int, end: int, separator: int) -> None:
        if self.pieces and self.pieces[-1][0] is document and self.pieces[-1][2] == start:
            self.pieces[-1][2] = end
        else:
            self.pieces.append([document, start, end])
        self.used += separator + end - start

    def _close(self) -> None:
        if self.pieces:
            self.blocks.append(self._features())
        self.pieces, self.used = [], 0

    def _features(self) -> dict:
        input_ids, word_ids, word_pos = [self.cls_id], [NO_WORD], [""]
        words: list[str] = []
        word_tags: list[str] = []
        for number, (document, start, end) in enumerate(self.pieces):
            if number and document is not self.pieces[number - 1][0]:
                input_ids.append(self.sep_id)
                word_ids.append(NO_WORD)
                word_pos.append("")
            renumbered: dict[int, int] = {}
            for token in range(start, end):
                input_ids.append(document.ids[token])
                word = document.token_word[token]
                if word < 0:
                    word_ids.append(NO_WORD)
                    word_pos.append("")
                    continue
                if word not in renumbered:
                    renumbered[word] = len(words)
                    words.append(document.words[word])
                    word_tags.append(document.tags[word])
                word_ids.append(renumbered[word])
                word_pos.append(document.tags[word])
        input_ids.append(self.sep_id)
        word_ids.append(NO_WORD)
        word_pos.append("")
        return {
            "input_ids": input_ids,
            "attention_mask": [1] * len(input_ids),
            "token_type_ids": [0] * len(input_ids),
            "word_ids": word_ids,
            "word_pos": word_pos,
            "words": words,
            "word_tags": word_tags,
        }


def check_max_length(max_length: int) -> None:
    """Raise ValueError unless ``max_length`` leaves room for [CLS], one token and [SEP]."""
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 3:
        raise ValueError(f"max_length: must be an integer >= 3 ([CLS], a token, [SEP]), got {max_length!r}")


def check_block_boundary(block_boundary: str) -> None:
    """Raise ValueError unless ``block_boundary`` is one of :data:`BLOCK_BOUNDARIES`."""
    if block_boundary not in BLOCK_BOUNDARIES:
        raise ValueError(f"block_boundary: must be one of {list(BLOCK_BOUNDARIES)}, got {block_boundary!r}")


def pack_documents(
    tokenizer,
    documents: Sequence[str] | Iterable[str],
    segmenter: JiebaSegmenter,
    max_length: int = 128,
    block_boundary: str = "sentence",
) -> list[dict]:
    """Pack ``documents`` into blocks of at most ``max_length`` tokens (see the module docstring);
    ``block_boundary``: blocks end at sentence boundaries (``"sentence"``) or fill up to
    ``max_length`` and end at word boundaries (``"word"``).

    Returns one feature dict per block, as :func:`workbench.masking.encode_words` does for
    texts; a piece of a document that continues in the next block keeps the same words
    (a word is only ever split when it alone is longer than ``max_length - 2`` tokens).
    Documents with no token (empty, whitespace) are skipped.
    """
    check_max_length(max_length)
    check_block_boundary(block_boundary)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("tokenizer must be a fast tokenizer (offset mappings are needed)")
    documents = list(documents)
    encoded = tokenizer(
        documents,
        add_special_tokens=False,
        return_offsets_mapping=True,
        return_attention_mask=False,
        return_token_type_ids=False,
    )
    packer = _Packer(tokenizer.cls_token_id, tokenizer.sep_token_id, max_length - 2, block_boundary)
    for text, ids, offsets in zip(documents, encoded["input_ids"], encoded["offset_mapping"]):
        if ids:
            packer.add(_analyse(text, list(ids), offsets, segmenter))
    return packer.finish()
