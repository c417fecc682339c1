"""Word-aligned encoding: each token belongs to the jieba word holding its first character. :func:`encode_words`
encodes texts (once per dataset; the collators then mask stored word indices); :func:`pack_documents` packs
documents into MLM blocks that keep sentences and words whole (RoBERTa's FULL-SENTENCES inputs; ``run_mlm``'s
``group_texts`` cuts every ``block_size`` tokens wherever that falls), in three steps:

1. :func:`segment_document`: sentences end after 。！？ (closing quotes and brackets stay with them) and at
   whitespace (no token); each sentence is segmented by jieba;
2. :func:`align_tokens`: each token's word, and where the sentences start;
3. :class:`Packer`: sentences fill the open block up to ``max_length`` tokens with [CLS] and [SEP];
   ``block_boundary="sentence"``: a sentence that does not fit opens the next block, ``"word"``: its longest
   prefix of whole words fills the block first. A longer sentence is cut at word boundaries (a longer word,
   between tokens). Consecutive documents share a block, separated by one [SEP] (word id -1).

No text is dropped; a block carries the features of ``encode_words``, words numbered from 0 per block.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from workbench.checks import check_choice, check_int
from workbench.config import BLOCK_BOUNDARIES  # the choices, defined once

from .segment import JiebaSegmenter

NO_WORD = -1
BLOCK_COLUMNS = ("input_ids", "attention_mask", "token_type_ids", "word_ids", "word_pos", "words", "word_tags")
"""The features of a block, as :func:`~workbench.masking.encode_words` gives them for a text."""
_SENTENCE = re.compile(r"[^\s。！？]*[。！？]+[”’」』）》〉】)\]\"']*|[^\s。！？]+")


def encode_words(
    tokenizer,
    texts: Sequence[str],
    segmenter: JiebaSegmenter,
    max_length: int = 128,
    text_pairs: Sequence[str] | None = None,
) -> list[dict]:
    """Encode ``texts`` (and ``text_pairs``, truncated to ``max_length``); a token belongs to the jieba word holding its
    first character. Per text: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``word_ids`` (-1: special), each
    token's ``word_pos`` ("" for special tokens), and the ``words`` and ``word_tags`` numbered 0, 1, ... in the order of
    their first token (a pair's second segment continues; a word without a token, e.g. a space, gets no number)."""
    check_int("max_length", max_length, 2)  # room for [CLS] and [SEP]
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer: must be a fast tokenizer (offset mappings are needed), got {type(tokenizer).__name__}"
        )
    texts = list(texts)
    text_pairs = None if text_pairs is None else list(text_pairs)
    if text_pairs is not None and len(text_pairs) != len(texts):
        raise ValueError(f"text_pairs: must have one entry per text ({len(texts)}), got {len(text_pairs)}")
    encoded = tokenizer(
        texts,
        text_pairs,
        truncation=True,
        max_length=max_length,
        return_offsets_mapping=True,
        return_token_type_ids=True,
    )
    features = []
    for row, text in enumerate(texts):
        segments = [segmenter.segment(part) for part in ([text] if text_pairs is None else [text, text_pairs[row]])]
        char_words = [[number for number, (word, _) in enumerate(pairs) for _ in word] for pairs in segments]
        offsets = zip(encoded.sequence_ids(row), encoded["offset_mapping"][row])
        keys = [
            None if part is None or end <= start else (part, char_words[part][start]) for part, (start, end) in offsets
        ]
        number = {key: index for index, key in enumerate(dict.fromkeys(key for key in keys if key is not None))}
        columns = {name: list(encoded[name][row]) for name in ("input_ids", "attention_mask", "token_type_ids")}
        columns["word_ids"] = [NO_WORD if key is None else number[key] for key in keys]
        columns["word_pos"] = ["" if key is None else segments[key[0]][key[1]][1] for key in keys]
        columns["words"] = [segments[part][word][0] for part, word in number]
        columns["word_tags"] = [segments[part][word][1] for part, word in number]
        features.append(columns)
    return features


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of the sentences of ``text``, in order, covering every non-whitespace character
    once: a sentence ends after a run of 。！？ (with the closing quotes and brackets that follow) and at whitespace."""
    return [match.span() for match in _SENTENCE.finditer(text)]


def segment_document(text: str, segmenter: JiebaSegmenter) -> tuple[list[str], list[str], list[int]]:
    """Step 1: the jieba words and POS tags of the sentences of ``text``, and the number of words of each sentence."""
    words = []
    tags = []
    counts = []
    for start, end in split_sentences(text):
        pairs = segmenter.segment(text[start:end])
        words += [word for word, _ in pairs]
        tags += [tag for _, tag in pairs]
        counts.append(len(pairs))
    return words, tags, counts


def align_tokens(
    text: str, offsets: Sequence, words: Sequence[str], sentence_words: Sequence[int]
) -> tuple[list, list]:
    """Step 2: per token (character ``offsets``), the word holding its first character (-1: none), and
    the token where each sentence with a token starts."""
    char_word = [NO_WORD] * len(text)
    char_sentence = [0] * len(text)
    lengths = iter(map(len, words))
    word = 0
    for sentence, ((start, _), count) in enumerate(zip(split_sentences(text), sentence_words)):
        for _ in range(count):
            end = start + next(lengths)
            char_word[start:end] = [word] * (end - start)
            char_sentence[start:end] = [sentence] * (end - start)
            start = end
            word += 1
    token_word = [char_word[start] if end > start else NO_WORD for start, end in offsets]
    token_sentence = [char_sentence[min(start, len(text) - 1)] for start, _ in offsets]
    return token_word, [i for i, sentence in enumerate(token_sentence) if i == 0 or sentence != token_sentence[i - 1]]


class Packer:
    """Step 3: greedy packing of documents' sentences into blocks of at most ``max_length`` tokens."""

    def __init__(self, cls_id: int, sep_id: int, max_length: int, block_boundary: str):
        self.cls_id = cls_id
        self.sep_id = sep_id
        self.capacity = max_length - 2
        self.fill_with_words = block_boundary == "word"
        self.blocks: list[dict] = []
        self.tokens: list[tuple] = []  # the open block: (token id, (document, word, text, tag) or None)
        self.documents = self.last = 0  # documents added; the document of the open block's last token

    def add(self, ids: list[int], token_word: list[int], sentence_starts: list[int], words: list[str], tags: list[str]):
        """Append a document (a document without tokens adds nothing): its token ids, token words, sentence starts
        (step 2), words and tags (step 1)."""
        if not ids:
            return
        self.documents += 1
        tokens = [(i, None if w < 0 else (self.documents, w, words[w], tags[w])) for i, w in zip(ids, token_word)]
        starts = set(sentence_starts)
        word_starts = [i in starts or w < 0 or w != token_word[i - 1] for i, w in enumerate(token_word)] + [True]

        def last_word_start(start: int, limit: int) -> int | None:  # the last token in (start, limit] starting a word
            return next((cut for cut in range(limit, start, -1) if word_starts[cut]), None)

        bounds = [*sentence_starts, len(ids)]
        for start, end in zip(bounds, bounds[1:]):
            separator = int(bool(self.tokens) and self.last != self.documents)
            room = self.capacity - len(self.tokens) - separator
            if end - start <= room:
                self._append(tokens[start:end], separator)
                continue
            cut = last_word_start(start, start + room) if self.fill_with_words and room > 0 else None
            if cut is not None:
                self._append(tokens[start:cut], separator)
                start = cut
            self._close()
            while end - start > self.capacity:
                cut = last_word_start(start, start + self.capacity) or start + self.capacity
                self._append(tokens[start:cut], 0)
                self._close()
                start = cut
            self._append(tokens[start:end], 0)

    def finish(self) -> list[dict]:
        """The blocks, the open one closed."""
        self._close()
        return self.blocks

    def _append(self, tokens: list[tuple], separator: int) -> None:
        self.tokens += [(self.sep_id, None)] * separator + tokens
        self.last = self.documents

    def _close(self) -> None:
        if self.tokens:
            numbered: dict[tuple, tuple] = {}  # (document, word) -> (text, tag), numbered in order of appearance
            for _, word in self.tokens:
                if word is not None:
                    numbered.setdefault(word[:2], word[2:])
            number = {key: index for index, key in enumerate(numbered)}
            input_ids = [self.cls_id, *(token for token, _ in self.tokens), self.sep_id]
            word_ids = [NO_WORD, *(NO_WORD if w is None else number[w[:2]] for _, w in self.tokens), NO_WORD]
            word_pos = ["", *("" if w is None else w[3] for _, w in self.tokens), ""]
            words = [text for text, _ in numbered.values()]
            tags = [tag for _, tag in numbered.values()]
            ones = [1] * len(input_ids)
            zeros = [0] * len(input_ids)
            self.blocks.append(dict(zip(BLOCK_COLUMNS, (input_ids, ones, zeros, word_ids, word_pos, words, tags))))
        self.tokens = []


def check_packing(tokenizer, max_length: int, block_boundary: str) -> None:
    """ValueError naming ``max_length`` (room for [CLS], a token, [SEP]), ``block_boundary`` or ``tokenizer`` (fast)."""
    check_int("max_length", max_length, 3)
    check_choice("block_boundary", block_boundary, BLOCK_BOUNDARIES)
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"tokenizer: must be a fast tokenizer (offset mappings are needed), got {type(tokenizer).__name__}"
        )


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
        words, tags, counts = segment_document(text, segmenter)
        packer.add(list(ids), *align_tokens(text, offsets, words, counts), words, tags)
    return packer.finish()
