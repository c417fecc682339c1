"""Synonym tables: Cilin, WordNet TSV, embedding neighbours, the shipped tiny lexicon."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.lexicon import SynonymTable
from workbench.vocab import load_tokenizer


@pytest.fixture
def cilin_file(tmp_path):
    path = tmp_path / "cilin.txt"
    path.write_text(
        "Aa01A01= 人 士 人物\n"
        "Aa01A02# 良民 顺民\n"
        "Aa01A03@ 众学生\n"
        "\n"
        "Ee01A01= 美丽 漂亮 好看\n"
        "Ee01A02= 好看 中看\n",
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
    with pytest.raises(ValueError, match="line 2"):
        SynonymTable.from_cilin(bad)
    with pytest.raises(ValueError, match="path"):
        SynonymTable.from_cilin(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="path"):
        SynonymTable.from_wordnet_tsv(tmp_path / "missing.tsv")


def test_wordnet_tsv_members_and_multiwords(tmp_path):
    path = tmp_path / "synsets.tsv"
    path.write_text(
        "# synset_id\tpos\tmembers\n"
        "00019769-s\ts\thandy\tready to hand\n"
        "00001-n\tn\tcar\tauto\tmotor_car\n",
        encoding="utf-8",
    )
    table = SynonymTable.from_wordnet_tsv(path)
    assert table.synonyms("handy") == {"ready to hand"}
    assert table.synonyms("car") == {"auto", "motor car"}
    assert table.are_synonyms("motor car", "auto")
    bad = tmp_path / "bad.tsv"
    bad.write_text("00001-n\tn\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 1"):
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


def test_embedding_arguments_validated():
    with pytest.raises(ValueError, match="matrix"):
        SynonymTable.from_embeddings(np.zeros((3, 2)), ["a", "b"])
    with pytest.raises(ValueError, match="k"):
        SynonymTable.from_embeddings(np.ones((2, 2)), ["a", "b"], k=0)
    with pytest.raises(ValueError, match="threshold"):
        SynonymTable.from_embeddings(np.ones((2, 2)), ["a", "b"], threshold=1.5)


def test_default_lexicon_has_words_and_characters_in_vocab():
    table = SynonymTable.default()
    assert 50 <= len(table) <= 150
    assert table.are_synonyms("美丽", "漂亮") and table.are_synonyms("开心", "高兴") and table.are_synonyms("大", "巨")
    assert {"瞧", "望"} <= table.synonyms("看")
    vocab = load_tokenizer().get_vocab()
    words = set().union(*(table.synonyms(w) | {w} for w in ["美丽", "看", "大", "高兴"]))
    assert all(character in vocab for word in words for character in word)
