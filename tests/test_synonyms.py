"""Synonym tables: Cilin, WordNet TSV, embedding neighbours, the shipped tiny lexicon."""

from __future__ import annotations

import gzip
import pickle
import re

import numpy as np
import pytest
import torch

from workbench.synonyms import HASH_BASES, HASH_MODULI, SynonymTable, text_hashes, text_key
from workbench.vocab import load_tokenizer


@pytest.fixture
def cilin_file(tmp_path):
    path = tmp_path / "cilin.txt"
    path.write_text(
        "Aa01A01= 人 士 人物\nAa01A02# 良民 顺民\nAa01A03@ 众学生\n\nEe01A01= 美丽 漂亮 好看\nEe01A02= 好看 中看\n",
        encoding="utf-8",
    )
    return path


def test_cilin_uses_only_equals_groups(cilin_file):
    table = SynonymTable.from_cilin(cilin_file)
    assert len(table) == 3
    assert table.synonyms("人") == {"士", "人物"}
    assert table.synonyms("良民") == set() and not table.are_synonyms("良民", "顺民")
    assert "众学生" not in table


def test_synonyms_union_over_groups_exclude_self_and_are_symmetric(cilin_file):
    table = SynonymTable.from_cilin(cilin_file)
    assert table.synonyms("好看") == {"美丽", "漂亮", "中看"}
    assert table.are_synonyms("美丽", "漂亮") and table.are_synonyms("漂亮", "美丽")
    assert table.are_synonyms("中看", "好看") and not table.are_synonyms("中看", "美丽")
    assert not table.are_synonyms("美丽", "美丽")
    assert table.synonyms("不存在") == set()


def test_cilin_malformed_line_and_missing_file_raise(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("Aa01A01= 人 士\nno flag here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.txt:2: "):
        SynonymTable.from_cilin(bad)
    with pytest.raises(ValueError, match=r"^path: .*missing\.txt"):
        SynonymTable.from_cilin(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match=r"^path: .*missing\.tsv"):
        SynonymTable.from_wordnet_tsv(tmp_path / "missing.tsv")


def test_wordnet_tsv_members_and_multiwords(tmp_path):
    path = tmp_path / "synsets.tsv"
    path.write_text(
        "# synset_id\tpos\tmembers\n00019769-s\ts\thandy\tready to hand\n00001-n\tn\tcar\tauto\tmotor_car\n",
        encoding="utf-8",
    )
    table = SynonymTable.from_wordnet_tsv(path)
    assert table.synonyms("handy") == {"ready to hand"}
    assert table.synonyms("car") == {"auto", "motor car"}
    assert table.are_synonyms("motor car", "auto")
    bad = tmp_path / "bad.tsv"
    bad.write_text("00001-n\tn\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.tsv:1: "):
        SynonymTable.from_wordnet_tsv(bad)


def test_embedding_neighbours_by_hand():
    # angles 0, 10, 80, 90, 180 degrees: cos(a,b)=cos(10)=0.985, cos(c,d)=cos(10), cos(a,c)=cos(80)=0.17
    angles = np.deg2rad([0.0, 10.0, 80.0, 90.0, 180.0])
    matrix = np.stack([np.cos(angles), np.sin(angles)], axis=1) * np.array([[1.0], [3.0], [0.5], [2.0], [1.0]])
    vocab = ["a", "b", "c", "d", "e"]
    table = SynonymTable.from_embeddings(matrix, vocab, k=1, threshold=0.9)
    assert table.synonyms("a") == {"b"} and table.synonyms("c") == {"d"}
    assert table.synonyms("e") == set()  # its nearest neighbour (d, cos 0) is below the threshold
    loose = SynonymTable.from_embeddings(matrix, vocab, k=2, threshold=0.1, chunk_size=2)
    # a: b (0.985), c (0.17); b: a, c (cos 70 = 0.34); c: d, b; d: c, b (cos 80); e: none above 0.1
    assert loose.synonyms("a") == {"b", "c"}
    assert loose.synonyms("c") == {"a", "b", "d"}  # symmetric: a lists c
    assert loose.synonyms("e") == set()


def test_embedding_defaults_are_the_papers_top_10_without_a_threshold():
    # true-negatives paper, footnote 11: "we only take the top 10 most similar words for each retrieval"
    angles = np.deg2rad([0.0, 10.0, 80.0, 90.0, 180.0])
    matrix = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    vocab = ["a", "b", "c", "d", "e"]
    table = SynonymTable.from_embeddings(matrix, vocab, k=1)
    # e's nearest word is d (cos 90 degrees = 0), listed although it is far: no threshold by default
    assert table.are_synonyms("e", "d")
    assert table.synonyms("e") == {"d"} and table.synonyms("a") == {"b"}
    assert {frozenset(g) for g in table.groups} == {
        frozenset(g) for g in SynonymTable.from_embeddings(matrix, vocab, k=1, threshold=None).groups
    }
    # with 5 words, k = 10 (the default) lists every other word for every word
    assert all(SynonymTable.from_embeddings(matrix, vocab).synonyms(word) == set(vocab) - {word} for word in vocab)


def test_embedding_arguments_validated():
    with pytest.raises(ValueError, match=r"^matrix:"):
        SynonymTable.from_embeddings(np.zeros((3, 2)), ["a", "b"])
    with pytest.raises(ValueError, match=r"^k:"):
        SynonymTable.from_embeddings(np.ones((2, 2)), ["a", "b"], k=0)
    for bad in (1.5, float("nan")):
        with pytest.raises(ValueError, match=r"^threshold:"):
            SynonymTable.from_embeddings(np.ones((2, 2)), ["a", "b"], threshold=bad)


def test_default_lexicon_has_words_and_characters_in_vocab():
    table = SynonymTable.default()
    assert 50 <= len(table) <= 150
    assert table.are_synonyms("美丽", "漂亮") and table.are_synonyms("开心", "高兴") and table.are_synonyms("大", "巨")
    assert {"瞧", "望"} <= table.synonyms("看")
    vocab = load_tokenizer().get_vocab()
    words = set().union(*(table.synonyms(w) | {w} for w in ["美丽", "看", "大", "高兴"]))
    assert all(character in vocab for word in words for character in word)


def test_from_path_picks_the_format_by_suffix(cilin_file, tmp_path):
    tsv = tmp_path / "synsets.tsv"
    tsv.write_text("00001-n\tn\tcar\tauto\n", encoding="utf-8")
    assert SynonymTable.from_path(tsv).are_synonyms("car", "auto")
    assert SynonymTable.from_path(str(cilin_file)).are_synonyms("美丽", "漂亮")
    assert len(SynonymTable.from_path(None)) == len(SynonymTable.default())
    with pytest.raises(ValueError, match=r"^path: .*missing\.tsv"):
        SynonymTable.from_path(tmp_path / "missing.tsv")
    gzipped = tmp_path / "synsets.tsv.gz"
    gzipped.write_bytes(gzip.compress(tsv.read_bytes()))
    assert SynonymTable.from_path(gzipped).are_synonyms("auto", "car")


def test_text_key_is_a_62_bit_polynomial_hash():
    first, second = text_hashes("美丽")
    for value, base, modulus in zip((first, second), HASH_BASES, HASH_MODULI):
        assert value == ((ord("美") + 1) * base + ord("丽") + 1) % modulus
    assert text_key("美丽") == (first << 31) | second < 2**62
    assert text_key("") == 0 and text_key("ab") != text_key("ba")


def test_id_index_spans_spell_table_words(cilin_file):
    tokenizer = load_tokenizer()
    table = SynonymTable.from_cilin(cilin_file)
    index = table.id_index(tokenizer)
    assert table.id_index(tokenizer) is index  # built once per tokenizer
    copy = pickle.loads(pickle.dumps(table))
    assert copy.are_synonyms("美丽", "漂亮") and copy.id_index(tokenizer).num_pairs == index.num_pairs
    assert (index.num_words, index.num_pairs, index.max_chars) == (7, 6 + 6 + 2, 2)
    assert (index.num_memberships, index.max_groups) == (3 + 3 + 2, 2)  # 好看 is in two groups
    text = "美丽人物好看中看人"
    token_ids = torch.tensor(tokenizer.convert_tokens_to_ids(list(text)))
    spans = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3, 4])
    words = index.span_words(token_ids, spans, num_spans=7)
    assert (words[5:] == -1).all() and (words[:5] >= 0).all()
    pairs = [(0, 2), (1, 4), (2, 3), (0, 0), (0, 3), (0, 5)]  # 美丽~中看 only through 好看: not synonyms
    first = words[torch.tensor([a for a, _ in pairs])]
    second = words[torch.tensor([b for _, b in pairs])]
    spelled = ["美丽", "人物", "好看", "中看", "人"]
    expected = [table.are_synonyms(spelled[a], spelled[b]) if b < 5 else False for a, b in pairs]
    assert index.are_synonyms(first, second).tolist() == expected == [True, True, True, False, False, False]


def test_id_index_ignores_unknown_and_out_of_vocabulary_ids():
    tokenizer = load_tokenizer()
    index = SynonymTable.default().id_index(tokenizer)
    beyond = torch.tensor([*tokenizer.convert_tokens_to_ids(["美"]), len(tokenizer) + 3])
    assert index.span_words(beyond, torch.tensor([0, 0]), 1).tolist() == [-1]  # "美" + an id beyond the vocabulary
    continuation = torch.tensor(tokenizer.convert_tokens_to_ids(["大"]))
    assert index.span_words(continuation, torch.tensor([0]), 1) >= 0
    empty = SynonymTable([]).id_index(tokenizer)
    assert empty.span_words(continuation, torch.tensor([0]), 1).tolist() == [-1]
    assert not empty.are_synonyms(torch.tensor([0]), torch.tensor([1])).any()


def test_lexicon_files_that_are_not_utf8_text_name_the_file_and_line(tmp_path):
    good = "Aa01A01= 人 士\nEe01A01= 美丽 漂亮\n"
    cases = {
        "gbk.txt": (good.encode("gbk"), r"gbk\.txt:1: "),  # GBK bytes are not UTF-8
        "surrogate.txt": (good.encode() + "Ee01A02= 好看 ".encode() + b"\xed\xa0\x80\n", r"surrogate\.txt:3: "),
        "plain.txt.gz": (good.encode(), r"plain\.txt\.gz:"),  # a .gz that is not gzip
        "cut.txt.gz": (gzip.compress(good.encode() * 50)[:-30], r"cut\.txt\.gz:"),  # truncated
    }
    for name, (data, named) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=named):
            SynonymTable.from_path(tmp_path / name)
    (tmp_path / "ok.txt.gz").write_bytes(gzip.compress(("\ufeff" + good).encode()))  # gzip and a BOM are fine
    assert SynonymTable.from_path(tmp_path / "ok.txt.gz").are_synonyms("美丽", "漂亮")


@pytest.mark.parametrize(
    ("name", "text"), [("empty.txt", ""), ("comments.txt", "Aa01A02# 人\nAa01A03@ 士\n"), ("one.tsv", "s1\tn\t人\n")]
)
def test_a_lexicon_of_no_synonym_group_names_the_file(tmp_path, name, text):
    # hard correction with it was plain MLM, silently
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^lexicon: .*{re.escape(name)}"):
        SynonymTable.from_path(tmp_path / name)


def test_the_id_index_grows_linearly_with_a_huge_group():
    """A group of 40,000 words once asked for 1.6e9 pair codes (11.9 GiB): the index holds one entry per membership."""
    tokenizer = load_tokenizer()
    vocab = [token for token in tokenizer.get_vocab() if len(token) == 1 and "\u4e00" <= token <= "\u9fff"]
    words = [a + b + c for a in vocab[:40] for b in vocab[40:80] for c in vocab[80:105]]  # 40,000 three-character words
    table = SynonymTable([words, ["美丽", "漂亮"], ["漂亮", words[7]]])
    index = table.id_index(tokenizer)
    assert index.num_memberships == 40_000 + 2 + 2 and index.max_groups == 2
    spelled = [words[0], words[39_999], "美丽", "漂亮", words[7], "好看"]
    ids = torch.tensor([i for word in spelled for i in tokenizer.convert_tokens_to_ids(list(word))])
    spans = torch.repeat_interleave(torch.arange(len(spelled)), torch.tensor([len(word) for word in spelled]))
    numbers = index.span_words(ids, spans, len(spelled))
    assert (numbers[:5] >= 0).all() and numbers[5] == -1
    pairs = [(0, 1), (1, 0), (0, 0), (2, 3), (3, 4), (2, 4), (0, 3), (4, 0), (0, 5)]
    found = index.are_synonyms(numbers[[a for a, _ in pairs]], numbers[[b for _, b in pairs]]).tolist()
    assert found == [table.are_synonyms(spelled[a], spelled[b]) for a, b in pairs]
    assert found == [True, True, False, True, True, False, False, True, False]
