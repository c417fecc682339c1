"""Segmentation, word-aligned encoding and the three masking collators."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from workbench.masking import (
    JiebaSegmenter,
    KnowledgeMaskCollator,
    RandomMaskCollator,
    WholeWordMaskCollator,
    compute_idf,
    encode_words,
)
from workbench.masking.collators import _fill_budget
from workbench.vocab import load_tokenizer

SENTENCES = [
    "习近平主席在北京会见了美国总统，双方就经济合作交换了意见。",
    "今天天气很好，我们一起去公园散步吧。",
    "中国科学院的研究人员发现了一种新的治疗方法。",
    "上海市政府宣布将加快建设国际金融中心。",
    "他高兴地告诉记者，这个城市的发展非常快。",
    "李明在北京大学学习经济学，明年将去英国留学。",
]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def segmenter():
    return JiebaSegmenter()


@pytest.fixture(scope="module")
def features(tokenizer, segmenter):
    return encode_words(tokenizer, SENTENCES, segmenter)


@pytest.fixture(scope="module")
def pair_features(tokenizer, segmenter):
    return encode_words(tokenizer, SENTENCES[:3], segmenter, text_pairs=SENTENCES[3:])


def collate(collator, features):
    batch = collator(features)
    return {key: value.numpy() for key, value in batch.items()}


# --- segmentation ---------------------------------------------------------------------------


def test_segment_covers_text_and_is_cached(segmenter):
    text = SENTENCES[0]
    before = segmenter.cache_info().hits
    pairs = segmenter.segment(text)
    assert "".join(word for word, _ in pairs) == text
    assert ("北京", "ns") in pairs and ("习近平", "nrfg") in pairs
    assert segmenter.words(text) == [word for word, _ in pairs]
    assert segmenter.cache_info().hits >= before + 1


def test_segment_without_pos_has_empty_tags():
    pairs = JiebaSegmenter(pos=False).segment(SENTENCES[1])
    assert "".join(word for word, _ in pairs) == SENTENCES[1]
    assert {tag for _, tag in pairs} == {""}


def test_user_dict_adds_words(tmp_path):
    user_dict = tmp_path / "user.txt"
    user_dict.write_text("发现了一种 10 nz\n", encoding="utf-8")
    pairs = JiebaSegmenter(user_dict=user_dict).segment(SENTENCES[2])
    assert ("发现了一种", "nz") in pairs
    assert ("发现了一种", "nz") not in JiebaSegmenter().segment(SENTENCES[2])


def test_missing_user_dict_raises(tmp_path):
    with pytest.raises(ValueError, match=r"^user_dict:"):
        JiebaSegmenter(user_dict=tmp_path / "missing.txt")


def test_a_user_dict_that_is_not_utf8_names_the_file_and_line(tmp_path):
    user_dict = tmp_path / "user.txt"
    user_dict.write_bytes("中国移动 10 nt\n发现了一种 10 nz\n".encode("gbk"))
    with pytest.raises(ValueError, match=r"user\.txt:1: "):
        JiebaSegmenter(user_dict=user_dict)


# --- encoding -------------------------------------------------------------------------------


def test_sample_sentences_have_no_unknown_tokens(tokenizer, features):
    for feature in features:
        assert tokenizer.unk_token_id not in feature["input_ids"]


def test_word_ids_align_tokens_with_jieba_words(tokenizer, segmenter, features):
    for text, feature in zip(SENTENCES, features):
        word_ids = np.array(feature["word_ids"])
        tokens = tokenizer.convert_ids_to_tokens(feature["input_ids"])
        assert word_ids[0] == -1 and word_ids[-1] == -1 and (word_ids[1:-1] >= 0).all()
        spelled = ["".join(t for t, w in zip(tokens, word_ids) if w == index) for index in range(word_ids.max() + 1)]
        assert spelled == feature["words"] == segmenter.words(text)
        assert feature["word_tags"] == [tag for _, tag in segmenter.segment(text)]
        assert feature["word_pos"][1:-1] == [feature["word_tags"][w] for w in word_ids[1:-1]]
        assert feature["word_pos"][0] == feature["word_pos"][-1] == ""


def test_pair_word_ids_continue_after_first_segment(segmenter, pair_features):
    for first, second, feature in zip(SENTENCES[:3], SENTENCES[3:], pair_features):
        word_ids = np.array(feature["word_ids"])
        token_types = np.array(feature["token_type_ids"])
        n_first = len(segmenter.words(first))
        assert set(word_ids[(token_types == 0) & (word_ids >= 0)]) == set(range(n_first))
        second_ids = word_ids[(token_types == 1) & (word_ids >= 0)]
        assert set(second_ids) == set(range(n_first, n_first + len(segmenter.words(second))))
        assert feature["words"] == segmenter.words(first) + segmenter.words(second)
        assert (word_ids == -1).sum() == 3  # [CLS], [SEP], [SEP]


def test_truncation_keeps_word_numbering_dense(tokenizer, segmenter):
    feature = encode_words(tokenizer, [SENTENCES[0]], segmenter, max_length=8)[0]
    word_ids = [w for w in feature["word_ids"] if w >= 0]
    assert len(feature["input_ids"]) == 8
    assert sorted(set(word_ids)) == list(range(len(feature["words"])))


def test_encode_rejects_bad_arguments(tokenizer, segmenter):
    with pytest.raises(ValueError, match=r"^max_length:"):
        encode_words(tokenizer, SENTENCES, segmenter, max_length=1)
    with pytest.raises(ValueError, match=r"^text_pairs:"):
        encode_words(tokenizer, SENTENCES, segmenter, text_pairs=SENTENCES[:2])


# --- collators: shared behaviour ------------------------------------------------------------

ALL_COLLATORS = [RandomMaskCollator, WholeWordMaskCollator, KnowledgeMaskCollator]


@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
def test_output_keys_shapes_and_padding(collator_class, tokenizer, features):
    batch = collate(collator_class(tokenizer), features)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    width = max(len(f["input_ids"]) for f in features)
    assert all(value.shape == (len(features), width) and value.dtype == np.int64 for value in batch.values())
    with_words = collate(collator_class(tokenizer, return_word_ids=True), features)
    for row, feature in enumerate(features):
        length = len(feature["input_ids"])
        assert (with_words["word_ids"][row, :length] == feature["word_ids"]).all()
        assert (with_words["word_ids"][row, length:] == -1).all()
        assert (batch["attention_mask"][row, length:] == 0).all()
        assert (batch["input_ids"][row, length:] == tokenizer.pad_token_id).all()


@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
def test_special_tokens_and_padding_never_masked(collator_class, tokenizer, pair_features):
    collator = collator_class(tokenizer, mlm_probability=0.5, return_word_ids=True)
    for _ in range(30):
        batch = collate(collator, pair_features)
        special = batch["word_ids"] == -1
        assert (batch["labels"][special] == -100).all()
        original = np.array(
            [f["input_ids"] + [0] * (batch["input_ids"].shape[1] - len(f["input_ids"])) for f in pair_features]
        )
        assert (batch["input_ids"][special] == original[special]).all()


@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
def test_labels_hold_original_ids(collator_class, tokenizer, features):
    batch = collate(collator_class(tokenizer, mlm_probability=0.3), features)
    for row, feature in enumerate(features):
        labels = batch["labels"][row, : len(feature["input_ids"])]
        masked = labels != -100
        assert masked.any()
        assert (labels[masked] == np.array(feature["input_ids"])[masked]).all()


@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
def test_same_seed_same_masks_different_seed_different_masks(collator_class, tokenizer, features):
    first, second, other = (
        collator_class(tokenizer, seed=3),
        collator_class(tokenizer, seed=3),
        collator_class(tokenizer, seed=4),
    )
    runs = [[collate(c, features) for _ in range(3)] for c in (first, second, other)]
    for a, b in zip(runs[0], runs[1]):
        assert all((a[key] == b[key]).all() for key in a)
    assert any((a["labels"] != c["labels"]).any() for a, c in zip(runs[0], runs[2]))
    # dynamic: the generator advances, so consecutive batches differ
    assert (runs[0][0]["labels"] != runs[0][1]["labels"]).any()


@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
@pytest.mark.parametrize("probability", [0.0, 1.0, -0.1, 1.5])
def test_mlm_probability_outside_open_unit_interval_raises(collator_class, tokenizer, probability):
    with pytest.raises(ValueError, match=r"^mlm_probability:"):
        collator_class(tokenizer, mlm_probability=probability)


@pytest.mark.parametrize("max_ngram", [0, -1, 1.5])
def test_max_ngram_below_one_raises(tokenizer, max_ngram):
    with pytest.raises(ValueError, match=r"^max_ngram:"):
        WholeWordMaskCollator(tokenizer, max_ngram=max_ngram)


def test_word_collators_need_word_ids(tokenizer):
    plain = [dict(tokenizer(text)) for text in SENTENCES[:2]]
    with pytest.raises(ValueError, match=r"^features: .*'word_ids'"):
        WholeWordMaskCollator(tokenizer)(plain)


# --- budget and 80/10/10 --------------------------------------------------------------------


def test_random_collator_masks_exact_budget_on_plain_features(tokenizer):
    plain = [dict(tokenizer(text)) for text in SENTENCES]
    batch = collate(RandomMaskCollator(tokenizer), plain)
    for row, feature in enumerate(plain):
        n_tokens = len(feature["input_ids"]) - 2
        assert (batch["labels"][row] != -100).sum() == round(0.15 * n_tokens)
        assert batch["labels"][row, 0] == -100 and batch["labels"][row, n_tokens + 1] == -100


@pytest.mark.parametrize("collator_class", [WholeWordMaskCollator, KnowledgeMaskCollator])
def test_word_collators_never_exceed_budget_and_fill_it_on_average(collator_class, tokenizer, features):
    collator = collator_class(tokenizer, seed=1)
    budgets = np.array([round(0.15 * (len(f["input_ids"]) - 2)) for f in features])
    counts = np.array([(collate(collator, features)["labels"] != -100).sum(axis=1) for _ in range(200)])
    assert (counts <= budgets).all()
    assert counts.mean() >= 0.9 * budgets.mean()


def test_replacement_proportions_80_10_10(tokenizer, features):
    collator = RandomMaskCollator(tokenizer, mlm_probability=0.5, seed=7)
    special_ids = set(tokenizer.all_special_ids)
    mask, kept, replaced = 0, 0, 0
    for _ in range(300):
        batch = collate(collator, features)
        masked = batch["labels"] != -100
        corrupted, gold = batch["input_ids"][masked], batch["labels"][masked]
        mask += (corrupted == tokenizer.mask_token_id).sum()
        kept += (corrupted == gold).sum()
        random_tokens = corrupted[(corrupted != tokenizer.mask_token_id) & (corrupted != gold)]
        replaced += random_tokens.size
        assert not special_ids & set(random_tokens.tolist())
    total = mask + kept + replaced
    assert abs(mask / total - 0.8) < 0.02
    assert abs(kept / total - 0.1) < 0.015
    assert abs(replaced / total - 0.1) < 0.015


# --- whole-word property --------------------------------------------------------------------


def masked_word_fractions(batch):
    """(row, word) -> fraction of the word's tokens that are masked."""
    fractions = {}
    for row in range(batch["labels"].shape[0]):
        word_ids, masked = batch["word_ids"][row], batch["labels"][row] != -100
        for word in set(word_ids[word_ids >= 0].tolist()):
            fractions[row, word] = masked[word_ids == word].mean()
    return fractions


@pytest.mark.parametrize(
    "collator_class, kwargs",
    [
        (WholeWordMaskCollator, {}),
        (WholeWordMaskCollator, {"max_ngram": 3}),
        (KnowledgeMaskCollator, {}),
    ],
)
def test_every_masked_word_is_fully_masked(collator_class, kwargs, tokenizer, features, pair_features):
    collator = collator_class(tokenizer, mlm_probability=0.3, return_word_ids=True, **kwargs)
    multi_token_masked = 0
    for _ in range(50):
        for feats in (features, pair_features):
            batch = collate(collator, feats)
            fractions = masked_word_fractions(batch)
            assert set(fractions.values()) <= {0.0, 1.0}
            multi_token_masked += sum(
                1 for (row, word), f in fractions.items() if f == 1.0 and (batch["word_ids"][row] == word).sum() > 1
            )
    assert multi_token_masked > 0


def test_random_collator_splits_words(tokenizer, features):
    collator = RandomMaskCollator(tokenizer, mlm_probability=0.3, return_word_ids=True)
    partial = sum(
        sum(0.0 < f < 1.0 for f in masked_word_fractions(collate(collator, features)).values()) for _ in range(20)
    )
    assert partial > 0


def test_fill_budget_by_hand():
    # one row of 5 words with lengths 2, 1, 3, 1, 2; budget 4; visit order 2, 0, 1, 4, 3
    lengths, segments = [2, 1, 3, 1, 2], [0, 0, 0, 0, 0]
    chosen = bytearray(5)
    _fill_budget([2, 0, 1, 4, 3], 5, 4, lengths, segments, [1] * 5, chosen)
    assert list(chosen) == [0, 1, 1, 0, 0]  # word 2 (3 tokens), word 0 does not fit, word 1 fits (1)
    # spans: starting at word 0 with a 3-gram takes words 0, 1 then stops at word 2 (3 > remaining 1)
    chosen = bytearray(5)
    _fill_budget([0, 3], 5, 4, lengths, segments, [3, 1, 1, 1, 1], chosen)
    assert list(chosen) == [1, 1, 0, 1, 0]
    # spans stop at a segment boundary
    chosen = bytearray(5)
    _fill_budget([3], 5, 10, lengths, [0, 0, 0, 0, 1], [3, 3, 3, 3, 3], chosen)
    assert list(chosen) == [0, 0, 0, 1, 0]


def test_ngram_spans_cover_adjacent_words(tokenizer, features):
    adjacent = {}
    for max_ngram in (1, 3):
        collator = WholeWordMaskCollator(tokenizer, mlm_probability=0.3, max_ngram=max_ngram, return_word_ids=True)
        count = 0
        for _ in range(100):
            fractions = masked_word_fractions(collate(collator, features))
            count += sum(
                1 for (row, word), f in fractions.items() if f == 1.0 and fractions.get((row, word + 1)) == 1.0
            )
        adjacent[max_ngram] = count
    assert adjacent[3] > 1.3 * adjacent[1]


# --- knowledge-based masking ----------------------------------------------------------------


def is_entity_or_event(tag: str) -> bool:
    return tag.startswith("nr") or tag in {"ns", "nt", "nz", "v", "vn"}


def knowledge_word_rate(collator, features, draws=100):
    hit = total = 0
    for _ in range(draws):
        batch = collate(collator, features)
        for (row, word), fraction in masked_word_fractions(batch).items():
            if is_entity_or_event(features[row]["word_tags"][word]):
                total += 1
                hit += fraction == 1.0
    return hit / total


# weights far apart: the weighted draw approaches the former fixed ranking entity > event > other (by idf within)
RANKING_WEIGHTS = {"entity_weight": 1e9, "event_weight": 1e4, "other_weight": 1.0}


def test_kdm_masks_entities_and_events_more_often_than_wwm(tokenizer, features):
    kdm = knowledge_word_rate(KnowledgeMaskCollator(tokenizer, return_word_ids=True, **RANKING_WEIGHTS), features)
    wwm = knowledge_word_rate(WholeWordMaskCollator(tokenizer, return_word_ids=True), features)
    assert kdm > 2 * wwm
    # the default weights (10 : 5 : 1) keep a clear preference while the draw stays random
    default = knowledge_word_rate(KnowledgeMaskCollator(tokenizer, return_word_ids=True), features)
    assert default > 1.5 * wwm


def test_kdm_entity_lexicon_and_idf_order(tokenizer, segmenter):
    text = "今天天气很好，我们一起去公园散步吧。"
    feature = encode_words(tokenizer, [text], segmenter)[0]
    # budget round(0.15 * 18) = 3: the listed entity "公园" (2 tokens) comes first, then the highest-IDF word
    idf = {"很": 9.0, "散步": 5.0}
    collator = KnowledgeMaskCollator(tokenizer, entities={"公园"}, idf=idf, return_word_ids=True, **RANKING_WEIGHTS)
    for _ in range(5):
        batch = collate(collator, [feature])
        masked_words = {feature["words"][w] for w in set(batch["word_ids"][0][batch["labels"][0] != -100].tolist())}
        # events (去, 散步) outrank other words; 散步 does not fit the remaining budget of 1, so 去 does
        assert masked_words == {"公园", "去"}


def hand_feature(tokenizer, words, tags):
    """A word-aligned feature (as encode_words builds it) with one token per character of each word."""
    ids = [tokenizer.convert_tokens_to_ids(list(word)) for word in words]
    word_ids = [index for index, word in enumerate(words) for _ in word]
    n = len(word_ids)
    return {
        "input_ids": [tokenizer.cls_token_id, *(i for word in ids for i in word), tokenizer.sep_token_id],
        "attention_mask": [1] * (n + 2),
        "token_type_ids": [0] * (n + 2),
        "word_ids": [-1, *word_ids, -1],
        "word_pos": ["", *(tags[w] for w in word_ids), ""],
        "words": list(words),
        "word_tags": list(tags),
    }


def first_pick_frequencies(collator, feature, copies=4000, calls=5):
    """Share of rows in which each word is the masked one (the budget must be one single-token word)."""
    hits = np.zeros(len(feature["words"]))
    for _ in range(calls):
        labels = collate(collator, [feature] * copies)["labels"][:, 1:-1] != -100
        assert (labels.sum(axis=1) == 1).all()
        hits += labels.sum(axis=0)
    return hits / (copies * calls)


def test_kdm_draws_words_with_probability_proportional_to_their_weight(tokenizer):
    # 5 one-token words, budget round(0.15 * 5) = 1: the masked word is the first of the weighted draw,
    # P(i) = w_i / sum_j w_j with w = type weight * idf
    feature = hand_feature(tokenizer, "京去的了走", ["ns", "v", "uj", "ul", "v"])
    frequencies = first_pick_frequencies(KnowledgeMaskCollator(tokenizer, seed=11), feature)
    weights = np.array([10.0, 5.0, 1.0, 1.0, 5.0])  # defaults entity 10, event 5, other 1
    expected = weights / weights.sum()
    np.testing.assert_allclose(frequencies, expected, atol=4.5 * np.sqrt(expected * (1 - expected) / 20000).max())
    # with idf (missing words count as the rarest: the largest idf, 3.0) and chosen type weights
    idf = {"京": 1.0, "去": 3.0, "的": 2.0}
    collator = KnowledgeMaskCollator(tokenizer, seed=12, idf=idf, entity_weight=6.0, event_weight=2.0, other_weight=0.5)
    weights = np.array([6.0 * 1.0, 2.0 * 3.0, 0.5 * 2.0, 0.5 * 3.0, 2.0 * 3.0])
    expected = weights / weights.sum()
    np.testing.assert_allclose(
        first_pick_frequencies(collator, feature), expected, atol=4.5 * np.sqrt(expected * (1 - expected) / 20000).max()
    )


def test_kdm_same_seed_same_masks_and_fresh_masks_every_batch(tokenizer, segmenter, features):
    # with an idf table every word has its own priority: a fixed ranking would mask the same words every epoch
    idf = compute_idf(segmenter.words(text) for text in SENTENCES)
    first, second = (KnowledgeMaskCollator(tokenizer, seed=5, idf=idf) for _ in range(2))
    runs = [[collate(collator, features)["labels"] for _ in range(20)] for collator in (first, second)]
    assert all((a == b).all() for a, b in zip(*runs))
    for row in range(len(features)):
        masks = [tuple(np.flatnonzero(labels[row] != -100)) for labels in runs[0]]
        assert len(set(masks)) >= 5, row
        assert sum(a != b for a, b in zip(masks, masks[1:])) >= 12, row


def test_kdm_masks_entities_and_events_more_often_than_other_words(tokenizer, features):
    collator = KnowledgeMaskCollator(tokenizer, return_word_ids=True, seed=2)
    masked = {0: [0, 0], 1: [0, 0], 2: [0, 0]}  # type -> [masked, seen]
    for _ in range(200):
        for (row, word), fraction in masked_word_fractions(collate(collator, features)).items():
            tag = features[row]["word_tags"][word]
            kind = 0 if (tag.startswith("nr") or tag in {"ns", "nt", "nz"}) else 1 if tag in {"v", "vn"} else 2
            masked[kind][0] += fraction == 1.0
            masked[kind][1] += 1
    entity, event, other = (hit / seen for hit, seen in masked.values())
    # (entities here are long words, 3-5 tokens, that often do not fit a budget of 3-4: they need not beat events)
    assert entity > 1.5 * other and event > 1.5 * other
    assert other > 0  # the draw is random: other words are masked now and then


def test_kdm_zero_weight_words_only_fill_what_the_others_cannot(tokenizer):
    collator = KnowledgeMaskCollator(tokenizer, mlm_probability=0.4, other_weight=0.0, return_word_ids=True)
    # 11 tokens, budget round(0.4 * 11) = 4: the five one-token candidates (entities 京, 沪; events 去, 走, 说)
    # fill it in any order
    feature = hand_feature(
        tokenizer,
        ["京", "的", "去", "了", "沪", "很", "走", "说", "我们", "吧"],
        ["ns", "uj", "v", "ul", "ns", "d", "v", "v", "r", "y"],
    )
    candidates = {0, 2, 4, 6, 7}
    seen = set()
    for _ in range(200):
        batch = collate(collator, [feature])
        masked_words = set(batch["word_ids"][0][batch["labels"][0] != -100].tolist())
        assert masked_words <= candidates and (batch["labels"][0] != -100).sum() == 4
        seen.add(frozenset(masked_words))
    assert len(seen) == 5  # which four of the five: still at random
    # words of "other" type only: the budget is still filled, from the zero-weight words at random
    only_others = hand_feature(tokenizer, "的了很说", ["uj", "ul", "d", "x"])
    picks = {tuple(collate(collator, [only_others])["labels"][0] != -100) for _ in range(50)}
    assert all(sum(pick) == 2 for pick in picks) and len(picks) > 1  # budget round(0.4 * 4) = 2


@pytest.mark.parametrize(
    "weights",
    [
        {},
        {"other_weight": 0.0},
        {"entity_weight": 0.0, "event_weight": 0.0},
        RANKING_WEIGHTS,
    ],
)
def test_kdm_never_exceeds_budget(tokenizer, segmenter, features, pair_features, weights):
    idf = compute_idf(segmenter.words(text) for text in SENTENCES)
    collator = KnowledgeMaskCollator(tokenizer, mlm_probability=0.3, idf=idf, seed=3, **weights)
    for feats in (features, pair_features):
        budgets = np.array([round(0.3 * sum(w >= 0 for w in f["word_ids"])) for f in feats])
        for _ in range(50):
            counts = (collate(collator, feats)["labels"] != -100).sum(axis=1)
            assert (counts <= budgets).all()


@pytest.mark.parametrize(
    ("weights", "named"),
    [
        ({"entity_weight": -1.0}, r"^entity_weight:"),
        ({"event_weight": float("nan")}, r"^event_weight: .*nan$"),
        ({"other_weight": float("inf")}, r"^other_weight: .*inf$"),
        ({"other_weight": "1"}, r"^other_weight:"),
        ({"entity_weight": 0, "event_weight": 0, "other_weight": 0}, r"^entity_weight, event_weight, other_weight:"),
    ],
)
def test_kdm_rejects_bad_weights(tokenizer, weights, named):
    with pytest.raises(ValueError, match=named):
        KnowledgeMaskCollator(tokenizer, **weights)


@pytest.mark.parametrize(
    "arguments",
    [
        {"idf": 1e308},  # x a type weight of 10: inf for every word, keys E / inf all 0 (a tie: fixed masks)
        {"idf": 1e-320},  # keys E / 1e-320 all inf
        {"idf": 10**300},  # an int
        {"entity_weight": 1e308, "event_weight": 1e308, "other_weight": 1e308},
        {"entity_weight": 1e-320, "event_weight": 1e-320, "other_weight": 1e-320},
    ],
)
def test_kdm_weights_at_the_extremes_still_draw_fresh_masks(tokenizer, segmenter, features, arguments):
    arguments = dict(arguments)
    if "idf" in arguments:
        words = {word for text in SENTENCES for word in segmenter.words(text)}
        arguments["idf"] = dict.fromkeys(words, arguments["idf"])
    runs = [collate(KnowledgeMaskCollator(tokenizer, seed=seed, **arguments), features)["labels"] for seed in range(8)]
    for row in range(len(features)):
        assert len({tuple(np.flatnonzero(labels[row] != -100)) for labels in runs}) >= 3, row


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), -1.0, "2.0", None, True, 10**400])
def test_kdm_rejects_an_idf_value_that_is_not_a_finite_number_naming_the_word(tokenizer, value):
    # a NaN or inf idf once gave NaN keys that froze the masks: a ValueError names the word and the value
    idf = {"北京": 2.0, "上海": value, "公园": 1.0}
    with pytest.raises(ValueError, match=r"^idf\['上海'\]:"):
        KnowledgeMaskCollator(tokenizer, idf=idf)


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        ({"seed": -1}, r"^seed:"),
        ({"seed": 1.5}, r"^seed:"),
        ({"mlm_probability": float("nan")}, r"^mlm_probability:"),
        ({"mlm_probability": float("inf")}, r"^mlm_probability:"),
    ],
)
@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
def test_numeric_arguments_that_are_not_finite_numbers_are_named(tokenizer, collator_class, arguments, named):
    with pytest.raises(ValueError, match=named):
        collator_class(tokenizer, **arguments)


# --- empty texts ----------------------------------------------------------------------------


@pytest.mark.parametrize("collator_class", ALL_COLLATORS)
def test_empty_texts_get_no_mask(collator_class, tokenizer, segmenter):
    all_empty = encode_words(tokenizer, ["", "   ", ""], segmenter)
    batch = collate(collator_class(tokenizer, mlm_probability=0.5), all_empty)
    assert (batch["labels"] == -100).all()
    assert (batch["input_ids"] == np.array([f["input_ids"] for f in all_empty])).all()
    mixed = encode_words(tokenizer, ["", SENTENCES[0]], segmenter)
    batch = collate(collator_class(tokenizer, mlm_probability=0.5), mixed)
    assert (batch["labels"][0] == -100).all() and (batch["labels"][1] != -100).any()


def test_compute_idf_by_hand():
    idf = compute_idf([["北京", "天气"], ["北京"], ["上海", "上海"]])
    assert idf["北京"] == pytest.approx(np.log(4 / 3) + 1)
    assert idf["上海"] == pytest.approx(np.log(4 / 2) + 1)
    with pytest.raises(ValueError, match=r"^segmented_texts:"):
        compute_idf([])


# --- transformers' whole-word masking on unspaced Chinese -----------------------------------


def test_transformers_wwm_masks_unspaced_chinese_sentences_all_or_nothing(tokenizer, segmenter):
    from transformers import DataCollatorForLanguageModeling

    texts = SENTENCES[:4]
    encoded = tokenizer(texts, padding=True, return_offsets_mapping=True, return_special_tokens_mask=True)
    hf_features = [{key: encoded[key][row] for key in encoded} for row in range(len(texts))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf = DataCollatorForLanguageModeling(tokenizer, whole_word_mask=True, mlm_probability=0.15, seed=0)
    special = np.array(encoded["special_tokens_mask"], dtype=bool)
    fully = 0
    for _ in range(200):
        masked = hf(hf_features)["labels"].numpy() != -100
        share = np.where(special, np.nan, masked).astype(float)
        share = np.nanmean(share, axis=1)
        assert set(share.tolist()) <= {0.0, 1.0}  # the whole sentence is one "word"
        fully += int((share == 1.0).sum())
    assert 0.08 < fully / (200 * len(texts)) < 0.25  # each sentence masked entirely with p = 0.15
    # ours masks jieba words inside each sentence, never a whole sentence
    ours = WholeWordMaskCollator(tokenizer, return_word_ids=True)
    features = encode_words(tokenizer, texts, segmenter)
    for _ in range(50):
        batch = collate(ours, features)
        per_sentence = ((batch["labels"] != -100) & (batch["word_ids"] >= 0)).sum(axis=1)
        assert ((per_sentence > 0) & (per_sentence < (batch["word_ids"] >= 0).sum(axis=1))).all()


def test_kdm_rejects_negative_idf(tokenizer):
    with pytest.raises(ValueError, match=r"^idf\['北京'\]:"):
        KnowledgeMaskCollator(tokenizer, idf={"北京": -1.0})


def test_whole_word_masking_defaults_to_plain_words(tokenizer, features):
    """max_ngram = 1 by default (plain WWM): every span is one word, in the collator and in build_collator."""
    from workbench.config import MaskingSpec
    from workbench.masking import build_collator

    assert WholeWordMaskCollator(tokenizer).max_ngram == 1
    collator = build_collator(MaskingSpec(), tokenizer, return_word_ids=True)
    assert isinstance(collator, WholeWordMaskCollator) and collator.max_ngram == 1
    rng = np.random.default_rng(0)
    _, spans = collator._word_order(features, np.array([3, 4]), rng)
    assert spans.tolist() == [1] * 7
    assert build_collator({"strategy": "wwm", "max_ngram": 3}, tokenizer).max_ngram == 3  # the n-gram option
