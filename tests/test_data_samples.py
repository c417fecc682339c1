from __future__ import annotations

import re
from collections import Counter

import jieba
import jieba.posseg
import numpy as np
import pytest

from workbench.data import (
    RELEVANCE_LABEL_NAMES,
    SENTIMENT_LABEL_NAMES,
    SYNONYM_GROUPS,
    label_names,
    sample_corpus,
    sample_relevance_pairs,
    sample_relevance_splits,
    sample_sentence_splits,
    sample_sentences,
)
from workbench.data.samples import QBQTC_LABEL_PROPORTIONS
from workbench.vocab import load_tokenizer


def all_sample_texts(seed: int = 0) -> list[str]:
    """Every text of the default sample data."""
    texts: list[str] = []
    for split in sample_relevance_splits(seed=seed).values():
        texts += list(split["text"]) + list(split["text_pair"])
    for split in sample_sentence_splits(seed=seed).values():
        texts += list(split["text"])
    return texts + sample_corpus(seed=seed)


def test_all_sample_text_is_in_the_shipped_vocab():
    tok = load_tokenizer()
    ids = tok(all_sample_texts(), add_special_tokens=False)["input_ids"]
    assert tok.unk_token_id == 1
    assert sum(seq.count(1) for seq in ids) == 0


def test_relevance_splits_sizes_columns_and_names():
    dsd = sample_relevance_splits(seed=0)
    assert {k: len(v) for k, v in dsd.items()} == {"train": 8000, "validation": 400, "test": 400}
    assert dsd["train"].column_names == ["text", "text_pair", "label"]
    assert label_names(dsd["train"]) == list(RELEVANCE_LABEL_NAMES)
    assert max(len(t) for split in dsd.values() for col in ("text", "text_pair") for t in split[col]) <= 32


def test_relevance_label_proportions_follow_qbqtc():
    labels = sample_relevance_pairs(n=4000, seed=1)["label"]
    counts = Counter(labels)
    for k, share in enumerate(QBQTC_LABEL_PROPORTIONS):
        assert abs(counts[k] / 4000 - share) < 0.03


def test_relevance_label_follows_content_without_noise():
    ds = sample_relevance_pairs(n=300, seed=2, near_noise=0.0, far_noise=0.0)
    for query, title, label in zip(ds["text"], ds["text_pair"], ds["label"]):
        if label == 2:  # same entity and intent: the query's entity is in the title
            assert any(query.startswith(e) and e in title for e in _entities())
        if label == 0:  # other topic: no entity of the query's topic appears in the title
            topic = _topic_of(query)
            assert not any(e in title for e in _entities(topic))


def test_relevance_label_follows_character_overlap_without_noise():
    """2: the title contains the whole query; 1: it shares the topic word but not the whole query;
    0: it shares no character with the query."""
    ds = sample_relevance_pairs(n=600, seed=3, near_noise=0.0, far_noise=0.0)
    assert set(ds["label"]) == {0, 1, 2}
    for query, title, label in zip(ds["text"], ds["text_pair"], ds["label"]):
        shared = set(query) & set(title)
        if label == 2:
            assert query in title
        elif label == 1:
            assert query not in title and shared
            assert _topic_of(query) == _topic_of_title(title)
        else:
            assert not shared, (query, title)


def test_relevance_noise_moves_content_to_adjacent_labels():
    """With near noise only, no label-0 pair carries a label-2 pair's content, and vice versa."""
    ds = sample_relevance_pairs(n=1000, seed=4, near_noise=0.3, far_noise=0.0)
    content = [_content_label(q, t) for q, t in zip(ds["text"], ds["text_pair"])]
    moved = [(label, c) for label, c in zip(ds["label"], content) if label != c]
    assert 0.2 * len(ds) < len(moved) < 0.4 * len(ds)
    assert all(abs(label - c) == 1 for label, c in moved)
    far = sample_relevance_pairs(n=1000, seed=4, near_noise=0.0, far_noise=0.2)
    far_content = [_content_label(q, t) for q, t in zip(far["text"], far["text_pair"])]
    assert {(label, c) for label, c in zip(far["label"], far_content) if label != c} == {(0, 2), (2, 0)}


def test_relevance_splits_are_disjoint_and_keep_proportions():
    dsd = sample_relevance_splits(seed=0)
    pairs = {name: set(zip(split["text"], split["text_pair"])) for name, split in dsd.items()}
    assert not pairs["train"] & pairs["validation"]
    assert not pairs["train"] & pairs["test"]
    assert not pairs["validation"] & pairs["test"]
    for split in dsd.values():
        counts = Counter(split["label"])
        for k, share in enumerate(QBQTC_LABEL_PROPORTIONS):
            assert abs(counts[k] / len(split) - share) < 0.05
    again = sample_relevance_splits(seed=0)
    assert all(again[name].to_dict() == dsd[name].to_dict() for name in dsd)


def test_sentence_splits_are_disjoint_and_keep_the_minority_share():
    dsd = sample_sentence_splits(seed=0)
    texts = {name: set(split["text"]) for name, split in dsd.items()}
    assert not texts["train"] & texts["validation"]
    assert not texts["train"] & texts["test"]
    assert not texts["validation"] & texts["test"]
    for split in dsd.values():
        assert abs(sum(split["label"]) / len(split) - 0.18) < 0.05
    again = sample_sentence_splits(seed=0)
    assert all(again[name].to_dict() == dsd[name].to_dict() for name in dsd)


def test_sentence_splits_raise_when_no_unseen_sentence_is_left(monkeypatch):
    from workbench.data import samples

    for name, words in [
        ("_NEUTRAL_CLAUSES", ("",)),
        ("_REVIEW_SUBJECTS", ("房间",)),
        ("_ENDINGS", ("。",)),
        ("_POSITIVE_PHRASES", ("很好", "不错")),
        ("_NEGATIVE_PHRASES", ("很差", "糟糕")),
    ]:
        monkeypatch.setattr(samples, name, words)
    # 4 distinct sentences: 500 training sentences hold them all, so validation has none left.
    with pytest.raises(ValueError, match=r"^n_validation:"):
        sample_sentence_splits(seed=0, n_train=500, n_validation=50, n_test=50, positive_share=0.5)


def test_relevance_splits_raise_when_no_unseen_pair_is_left(monkeypatch):
    from workbench.data import samples

    monkeypatch.setattr(samples, "_TITLE_PREFIXES", ("",))
    monkeypatch.setattr(samples, "_TITLE_SUFFIXES", ("",))
    monkeypatch.setattr(
        samples, "_TOPIC_ENTITIES", {"phone": ("华为手机", "小米手机"), "car": ("大众汽车", "丰田汽车")}
    )
    monkeypatch.setattr(
        samples,
        "_TOPIC_INTENTS",
        {"phone": (("多少钱", "价格"), ("拍照效果", "样张")), "car": (("油耗", "实测"), ("口碑如何", "评价"))},
    )
    # 8 distinct label-2 pairs: 500 training pairs hold them all, so validation has none left.
    with pytest.raises(ValueError, match=r"^n_validation:"):
        sample_relevance_splits(seed=0, n_train=500, n_validation=50, n_test=50)


def _content_label(query: str, title: str) -> int:
    if query in title:
        return 2
    return 1 if _topic_of(query) == _topic_of_title(title) else 0


def _topic_of_title(title: str) -> str:
    from workbench.data.samples import _TOPIC_ENTITIES

    return next(t for t, es in _TOPIC_ENTITIES.items() if any(e in title for e in es))


def _entities(topic: str | None = None) -> list[str]:
    from workbench.data.samples import _TOPIC_ENTITIES

    if topic is None:
        return [e for es in _TOPIC_ENTITIES.values() for e in es]
    return list(_TOPIC_ENTITIES[topic])


def _topic_of(query: str) -> str:
    from workbench.data.samples import _TOPIC_ENTITIES

    return next(t for t, es in _TOPIC_ENTITIES.items() if any(query.startswith(e) for e in es))


def test_samples_are_deterministic_and_seed_dependent():
    assert sample_relevance_pairs(n=50, seed=3).to_dict() == sample_relevance_pairs(n=50, seed=3).to_dict()
    assert sample_relevance_pairs(n=50, seed=3).to_dict() != sample_relevance_pairs(n=50, seed=4).to_dict()
    assert sample_corpus(20, seed=5) == sample_corpus(20, seed=5)
    assert sample_sentences(30, seed=5).to_dict() == sample_sentences(30, seed=5).to_dict()


def test_sentences_minority_positive_with_signal():
    ds = sample_sentences(n=3000, seed=0, noise=0.0)
    assert label_names(ds) == list(SENTIMENT_LABEL_NAMES)
    share = sum(ds["label"]) / len(ds)
    assert 0.15 <= share <= 0.21
    from workbench.data.samples import _NEGATIVE_PHRASES, _POSITIVE_PHRASES

    for text, label in zip(ds["text"], ds["label"]):
        phrases = _POSITIVE_PHRASES if label else _NEGATIVE_PHRASES
        assert any(p in text for p in phrases)
    splits = sample_sentence_splits(seed=0, n_train=100, n_validation=20, n_test=30)
    assert {k: len(v) for k, v in splits.items()} == {"train": 100, "validation": 20, "test": 30}


def test_corpus_has_entities_verbs_and_synonyms():
    corpus = sample_corpus(n_sentences=200, seed=0)
    assert len(corpus) == 200
    tags = Counter(flag for sentence in corpus for _, flag in jieba.posseg.cut(sentence))
    for tag in ("nr", "ns", "nt", "v"):
        assert tags[tag] > 0, tag
    text = "".join(corpus)
    for group in SYNONYM_GROUPS:
        assert sum(word in text for word in group) >= 2, group


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda: sample_relevance_pairs(n=0), "n"),
        (lambda: sample_relevance_pairs(n=10, near_noise=1.5), "near_noise"),
        (lambda: sample_relevance_pairs(n=10, near_noise=0.6, far_noise=0.5), "near_noise + far_noise"),
        (lambda: sample_sentences(n=10, positive_share=0.0), "positive_share"),
        (lambda: sample_sentences(n=10, noise=-0.1), "noise"),
        (lambda: sample_corpus(n_sentences=0), "n_sentences"),
        (lambda: sample_relevance_splits(n_test=0), "n_test"),
        (lambda: sample_relevance_splits(far_noise=1.0), "far_noise"),
    ],
)
def test_bad_arguments_raise(call, name):
    with pytest.raises(ValueError, match="^" + re.escape(name) + ":"):
        call()


def test_label_names_requires_classlabel():
    from datasets import Dataset

    with pytest.raises(ValueError, match=r"^ds:"):
        label_names(Dataset.from_dict({"text": ["a"], "label": [0]}))


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0", None])
@pytest.mark.parametrize(
    "generator",
    [
        lambda seed: sample_relevance_pairs(n=5, seed=seed),
        lambda seed: sample_relevance_splits(seed=seed, n_train=5, n_validation=2, n_test=2),
        lambda seed: sample_sentences(n=5, seed=seed),
        lambda seed: sample_sentence_splits(seed=seed, n_train=5, n_validation=2, n_test=2),
        lambda seed: sample_corpus(5, seed=seed),
    ],
)
def test_seed_must_be_a_non_negative_integer(generator, seed):
    # before: random.Random(-1) silently replayed seed 1
    with pytest.raises(ValueError, match=r"^seed:"):
        generator(seed)


def test_numpy_integer_seeds_are_accepted():
    assert sample_sentences(n=5, seed=np.int64(3)).to_dict() == sample_sentences(n=5, seed=3).to_dict()
