"""Packing documents into MLM blocks that keep sentences and jieba words whole, in three steps.

``run_mlm``'s ``group_texts`` concatenates texts and cuts every ``block_size`` tokens wherever that
falls; here blocks are cut where sentences and words stay whole (RoBERTa's FULL-SENTENCES inputs):

1. :func:`segment_document`: sentences end after 。！？ (closing quotes and brackets stay with them) and
   at whitespace (which yields no token); each sentence is segmented by jieba;
2. :func:`align_tokens`: each token of the document (tokenized once) belongs to the word holding its
   first character, as in :func:`~workbench.masking.encode_words`;
3. :class:`Packer`: sentences fill the open block while it holds at most ``max_length`` tokens with
   [CLS] and [SEP]. ``block_boundary="sentence"``: a sentence that does not fit opens the next block;
   ``"word"``: the block is first filled with the sentence's longest prefix of whole words. A sentence
   longer than a block is cut at word boundaries (a word longer than a block, between tokens).
   Consecutive documents share a block, separated by one [SEP] (word id -1).

No text is dropped. A block carries the features of ``encode_words`` (words numbered from 0 per block),
so the collators mask blocks unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from workbench.checks import check_choice, check_int
from workbench.config import BLOCK_BOUNDARIES  # the choices, defined once

from .encode import NO_WORD
from .segment import JiebaSegmenter

BLOCK_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "word_ids", "word_pos", "words", "word_tags")
"""The features of a block, as :func:`~workbench.masking.encode_words` gives them for a text."""
_BOUNDARY = re.compile(r"[。！？]+[”’」』）》〉】)\]\"']*|\s+")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``, in order, covering every
    non-whitespace character once: a sentence ends after a run of 。！？ (with the closing quotes and
    brackets that follow) and at whitespace."""
    spans = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        end = match.start() if match.group()[0].isspace() else match.end()
        if end > start:
            spans.append((start, end))
        start = match.end()
    if start < len(text):
        spans.append((start, len(text)))
    return spans


def segment_document(text: str, segmenter: JiebaSegmenter) -> tuple[list[str], list[str], list[int]]:
    """Step 1: the jieba words and POS tags of the sentences of ``text`` (:func:`split_sentences`), and
    the number of words of each sentence."""
    words, tags, counts = [], [], []
    for start, end in split_sentences(text):
        pairs = segmenter.segment(text[start:end])
        words += [word for word, _ in pairs]
        tags += [tag for _, tag in pairs]
        counts.append(len(pairs))
    return words, tags, counts


def align_tokens(
    text: str, offsets: Sequence[tuple[int, int]], words: Sequence[str], sentence_words: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Step 2: per token (character ``offsets``), the word holding its first character (-1: none), and
    the token where each sentence with a token starts."""
    char_word, char_sentence = [NO_WORD] * len(text), [0] * len(text)
    lengths = iter(map(len, words))
    word = 0
    for sentence, ((start, _), count) in enumerate(zip(split_sentences(text), sentence_words)):
        for _ in range(count):
            end = start + next(lengths)
            char_word[start:end] = [word] * (end - start)
            char_sentence[start:end] = [sentence] * (end - start)
            start, word = end, word + 1
    token_word = [char_word[start] if end > start else NO_WORD for start, end in offsets]
    token_sentence = [char_sentence[min(start, len(text) - 1)] for start, _ in offsets]
    return token_word, [i for i, sentence in enumerate(token_sentence) if i == 0 or sentence != token_sentence[i - 1]]


@dataclass
class _Document:
    """A document's token ids, each token's word, its words and tags, the token spans of its sentences,
    and per token (and its end) whether a block may start there without splitting a word."""

    ids: list[int]
    token_word: list[int]
    words: list[str]
    tags: list[str]
    sentences: list[tuple[int, int]]
    word_starts: list[bool]

    def last_word_start(self, start: int, limit: int) -> int | None:
        """The last token index in (start, limit] where a word starts, or None."""
        return next((cut for cut in range(limit, start, -1) if self.word_starts[cut]), None)


class Packer:
    """Step 3: greedy packing of documents' sentences into blocks of at most ``max_length`` tokens."""

    def __init__(self, cls_id: int, sep_id: int, max_length: int, block_boundary: str):
        self.cls_id, self.sep_id, self.capacity = cls_id, sep_id, max_length - 2
        self.fill_with_words = block_boundary == "word"
        self.blocks: list[dict] = []
        self.pieces: list[list] = []  # [document, start, end] token ranges of the open block
        self.used = 0

    def add(self, ids: list[int], token_word: list[int], sentence_starts: list[int], words: list[str], tags: list[str]):
        """Append one document (steps 1 and 2 give its words, tags, token words and sentence starts)."""
        bounds = [*sentence_starts, len(ids)]
        starts = set(sentence_starts)
        word_starts = [i in starts or w < 0 or w != token_word[i - 1] for i, w in enumerate(token_word)] + [True]
        document = _Document(ids, token_word, words, tags, list(zip(bounds, bounds[1:])), word_starts)
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
        """The blocks, the open one closed."""
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
        input_ids, word_ids, word_pos, words, word_tags = [self.cls_id], [NO_WORD], [""], [], []
        for number, (document, start, end) in enumerate(self.pieces):
            if number and document is not self.pieces[number - 1][0]:
                input_ids.append(self.sep_id)
                word_ids.append(NO_WORD)
                word_pos.append("")
            renumbered: dict[int, int] = {}
            for token in range(start, end):
                input_ids.append(document.ids[token])
                word = document.token_word[token]
                if word >= 0 and word not in renumbered:
                    renumbered[word] = len(words)
                    words.append(document.words[word])
                    word_tags.append(document.tags[word])
                word_ids.append(renumbered[word] if word >= 0 else NO_WORD)
                word_pos.append(document.tags[word] if word >= 0 else "")
        input_ids.append(self.sep_id)
        word_ids.append(NO_WORD)
        word_pos.append("")
        ones, zeros = [1] * len(input_ids), [0] * len(input_ids)
        return dict(zip(BLOCK_COLUMNS, (input_ids, ones, zeros, word_ids, word_pos, words, word_tags)))


def check_packing(tokenizer, max_length: int, block_boundary: str) -> None:
    """ValueError naming ``max_length`` (room for [CLS], a token, [SEP]), ``block_boundary`` or ``tokenizer`` (fast)."""
    check_int("max_length", max_length, 3)
    check_choice("block_boundary", block_boundary, BLOCK_BOUNDARIES)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(f"tokenizer: must be a fast tokenizer (offset mappings are needed), got {type(tokenizer).__name__}")


def pack_documents(
    tokenizer,
    documents: Sequence[str] | Iterable[str],
    segmenter: JiebaSegmenter,
    max_length: int = 128,
    block_boundary: str = "sentence",
) -> list[dict]:
    """The three steps in memory: ``documents`` packed into blocks of at most ``max_length`` tokens
    (module docstring), one feature dict per block; documents with no token are skipped."""
    check_packing(tokenizer, max_length, block_boundary)
    documents = list(documents)
    encoded = tokenizer(documents, add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False)
    packer = Packer(tokenizer.cls_token_id, tokenizer.sep_token_id, max_length, block_boundary)
    for text, ids, offsets in zip(documents, encoded["input_ids"], encoded["offset_mapping"]):
        if ids:
            words, tags, counts = segment_document(text, segmenter)
            packer.add(list(ids), *align_tokens(text, offsets, words, counts), words, tags)
    return packer.finish()
