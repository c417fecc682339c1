"""Sentence splitting and block packing: coverage, order, sizes, word integrity, collator compatibility."""

from __future__ import annotations

import random

import numpy as np
import pytest

from workbench.data import sample_corpus
from workbench.masking import (
    JiebaSegmenter,
    KnowledgeMaskCollator,
    WholeWordMaskCollator,
    encode_words,
)
from workbench.masking.packing import pack_documents, split_sentences
from workbench.synonyms import token_text
from workbench.vocab import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def segmenter():
    return JiebaSegmenter()


def make_documents(count: int = 12, seed: int = 0) -> list[str]:
    """News-like stories: paragraphs of generated sentences joined by a space, one long
    unpunctuated paragraph, an empty and a whitespace-only document."""
    rng = random.Random(seed)
    sentences = sample_corpus(n_sentences=count * 6, seed=seed)
    documents = []
    for index in range(count):
        paragraphs = ["".join(sentences[index * 6 + p * 2 : index * 6 + p * 2 + 2]) for p in range(rng.randint(1, 3))]
        documents.append(" ".join(paragraphs))
    documents[3] = documents[3].replace("。", "，") * 3  # one sentence longer than small blocks
    return documents[:5] + ["", "  \n "] + documents[5:]


def block_texts(tokenizer, block) -> list[str]:
    """The documents' texts in a block, split at the inner [SEP] separators."""
    tokens = tokenizer.convert_ids_to_tokens(block["input_ids"])
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    return token_text(["|" if token == "[SEP]" else token for token in tokens[1:-1]]).split("|")


def word_boundaries(segmenter, document: str) -> set[int]:
    """Character offsets (whitespace removed) where a jieba word of ``document`` starts."""
    starts, position = set(), 0
    for start, end in split_sentences(document):
        for word in segmenter.words(document[start:end]):
            starts.add(position)
            position += len(word)
    return starts | {position}


def sentence_starts(document: str) -> set[int]:
    starts, position = set(), 0
    for start, end in split_sentences(document):
        starts.add(position)
        position += end - start
    return starts | {position}


def test_split_sentences_covers_every_non_space_character():
    text = "他说：“好。”然后走了！！ 再见？\n第二段 没有句号"
    spans = split_sentences(text)
    assert [text[a:b] for a, b in spans] == ["他说：“好。”", "然后走了！！", "再见？", "第二段", "没有句号"]
    assert "".join(text[a:b] for a, b in spans) == "".join(text.split())
    assert split_sentences("") == [] and split_sentences(" \n ") == []


@pytest.mark.parametrize("block_boundary", ["sentence", "word"])
@pytest.mark.parametrize("max_length", [8, 24, 128])
def test_every_character_in_exactly_one_block_in_order(tokenizer, segmenter, max_length, block_boundary):
    documents = [document for document in make_documents() if document.strip()]
    blocks = pack_documents(tokenizer, documents, segmenter, max_length, block_boundary)
    assert all(len(block["input_ids"]) <= max_length for block in blocks)
    texts = ["".join(document.split()) for document in documents]
    document_starts = list(np.cumsum([0] + [len(text) for text in texts]))
    stream, block_starts = "", []
    for block in blocks:
        block_starts.append(len(stream))
        for number, piece in enumerate(block_texts(tokenizer, block)):
            assert number == 0 or len(stream) in document_starts  # inner [SEP]s sit at document boundaries
            stream += piece
    assert stream == "".join(texts)  # every character once, in order
    for offset in block_starts:  # a block starting inside a document starts at a word (and sentence) boundary
        if offset in document_starts:
            continue
        document = int(np.searchsorted(document_starts, offset, side="right")) - 1
        inside = offset - document_starts[document]
        assert inside in word_boundaries(segmenter, documents[document])
        if block_boundary == "sentence":
            spans = split_sentences(documents[document])
            starts = sorted(sentence_starts(documents[document]))
            in_long_sentence = any(
                s < inside < s + (b - a) for s, (a, b) in zip(starts, spans) if b - a > max_length - 2
            )
            assert inside in starts or in_long_sentence


def test_word_mode_fills_blocks_and_sentence_mode_keeps_sentences(tokenizer, segmenter):
    documents = make_documents(count=30, seed=1)
    by_sentence = pack_documents(tokenizer, documents, segmenter, 32, "sentence")
    by_word = pack_documents(tokenizer, documents, segmenter, 32, "word")
    assert sum(map(len, (b["input_ids"] for b in by_word))) <= sum(map(len, (b["input_ids"] for b in by_sentence)))
    assert len(by_word) < len(by_sentence)
    assert all(len(block["input_ids"]) >= 32 - 4 for block in by_word[:-1])  # full up to a word's length


def test_a_word_longer_than_a_block_is_cut_between_tokens(tokenizer, segmenter):
    assert segmenter.words("中华人民共和国成立") == ["中华人民共和国", "成立"]
    blocks = pack_documents(tokenizer, ["中华人民共和国成立"], segmenter, max_length=5)
    assert ["".join(block_texts(tokenizer, b)) for b in blocks] == ["中华人", "民共和", "国成立"]
    assert [b["words"] for b in blocks] == [["中华人民共和国"], ["中华人民共和国"], ["中华人民共和国", "成立"]]
    assert blocks[2]["word_ids"] == [-1, 0, 1, 1, -1]


def test_a_short_document_packs_to_its_encode_words_features(tokenizer, segmenter):
    # one block per document when nothing else fits beside it: the same features as encode_words
    documents = [
        "今天天气很好，我们一起去公园散步吧。中国科学院的研究人员发现了一种新的治疗方法。",
        "上海市政府宣布将加快建设国际金融中心。",
    ]
    blocks = pack_documents(tokenizer, documents, segmenter, max_length=42)
    assert blocks == encode_words(tokenizer, documents, segmenter, max_length=42)


def test_documents_share_blocks_with_a_separator_and_features_are_aligned(tokenizer, segmenter):
    documents = ["我们一起去公园散步吧。", "他高兴地告诉记者。"]
    [block] = pack_documents(tokenizer, documents, segmenter, max_length=64)
    tokens = tokenizer.convert_ids_to_tokens(block["input_ids"])
    separator = tokens.index("[SEP]")
    assert token_text(tokens[1:separator]) == "我们一起去公园散步吧。" and tokens[-1] == "[SEP]"
    assert block["word_ids"][separator] == -1 and block["word_pos"][separator] == ""
    assert block["words"] == segmenter.words(documents[0]) + segmenter.words(documents[1])
    for token, word, pos in zip(tokens, block["word_ids"], block["word_pos"]):
        if word >= 0:
            assert token in block["words"][word] and pos == block["word_tags"][word]
    numbered = [w for w in block["word_ids"] if w >= 0]
    assert numbered == sorted(numbered) and set(numbered) == set(range(len(block["words"])))
    assert set(block["attention_mask"]) == {1} and set(block["token_type_ids"]) == {0}


def test_collators_mask_whole_words_of_packed_blocks(tokenizer, segmenter):
    blocks = pack_documents(tokenizer, make_documents(), segmenter, max_length=32)
    for collator in (
        WholeWordMaskCollator(tokenizer, seed=1, return_word_ids=True),
        KnowledgeMaskCollator(tokenizer, seed=1, return_word_ids=True),
    ):
        batch = {key: value.numpy() for key, value in collator(blocks[:16]).items()}
        masked = batch["labels"] != -100
        assert masked.any()
        for row in range(len(masked)):
            for word in np.unique(batch["word_ids"][row][masked[row]]):
                assert word >= 0 and masked[row][batch["word_ids"][row] == word].all()


def test_bad_arguments_and_empty_documents(tokenizer, segmenter):
    assert pack_documents(tokenizer, ["", " \n"], segmenter) == []
    for bad in (2, 0, 3.5, True):
        with pytest.raises(ValueError, match=r"^max_length:"):
            pack_documents(tokenizer, ["好"], segmenter, max_length=bad)
    with pytest.raises(ValueError, match=r"^block_boundary:"):
        pack_documents(tokenizer, ["好"], segmenter, block_boundary="paragraph")
