from __future__ import annotations

from collections import Counter
from itertools import product

import pytest

from workbench.data import downsample, label_counts, rebalance, upsample
from workbench.data.features import build_dataset
from workbench.data.imbalance import (
    TABLE8_SETTINGS,
    SynonymAugmenter,
    synonym_replace,
    table8_class_counts,
    table8_training_sets,
)
from workbench.masking.segment import JiebaSegmenter
from workbench.synonyms import SynonymTable


def _toy():
    # 12 negatives (label 0), 3 positives (label 1), every text distinct
    texts = [f"负{i}" for i in range(12)] + [f"正{i}" for i in range(3)]
    return build_dataset({"text": texts, "label": [0] * 12 + [1] * 3}, ["negative", "positive"])


def test_downsample_by_target_and_ratio():
    ds = _toy()
    small = downsample(ds, label=0, target=5, seed=0)
    assert label_counts(small) == [5, 3]
    assert set(small["text"]) <= set(ds["text"]) and len(set(small["text"])) == 8
    assert [t for t in small["text"] if t.startswith("正")] == ["正0", "正1", "正2"]
    assert label_counts(downsample(ds, label=0, ratio=0.5, seed=0)) == [6, 3]
    assert downsample(ds, 0, target=5, seed=1)["text"] == downsample(ds, 0, target=5, seed=1)["text"]
    assert downsample(ds, 0, target=5, seed=1)["text"] != downsample(ds, 0, target=5, seed=2)["text"]


def test_upsample_duplicates_in_whole_passes():
    ds = _toy()
    big = upsample(ds, label=1, target=8, seed=0)
    assert label_counts(big) == [12, 8]
    assert big.select(range(15))["text"] == ds["text"]  # originals kept in order, copies appended
    copies = Counter(big["text"][15:])
    assert sorted(copies.values()) == [1, 2, 2]  # 5 copies of 3 examples: one full pass, then 2 more


def test_upsample_with_augmenter():
    big = upsample(_toy(), label=1, target=5, seed=0, augmenter=lambda text: text + "！")
    assert all(t.endswith("！") and t[:-1] in {"正0", "正1", "正2"} for t in big["text"][15:])
    assert big["label"][15:] == [1, 1]
    with pytest.raises(ValueError, match=r"^augmenter:"):
        upsample(_toy(), label=1, target=5, augmenter=lambda text: None)


@pytest.mark.parametrize(
    "method, ratio, expected",
    [
        ("downsample", 1.0, [3, 3]),
        ("downsample", 0.5, [6, 3]),
        ("upsample", 1.0, [12, 12]),
        ("upsample", 0.5, [12, 6]),
        ("downsample", 1 / 8, [12, 2]),
        ("upsample", 1 / 8, [24, 3]),
    ],
)
def test_rebalance_reaches_target_ratio(method, ratio, expected):
    assert label_counts(rebalance(_toy(), ratio, method=method, seed=0)) == expected


def test_rebalance_multiclass_negatives():
    ds = build_dataset({"text": list("abcdefgh"), "label": [0, 0, 0, 2, 2, 2, 1, 1]}, ["x", "y", "z"])
    out = rebalance(ds, 1.0, positive_label=1, method="downsample", seed=0)
    counts = label_counts(out)
    assert counts[1] == 2 and counts[0] + counts[2] == 2


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda ds: downsample(ds, 0), "ratio"),
        (lambda ds: downsample(ds, 0, ratio=0.5, target=3), "ratio"),
        (lambda ds: downsample(ds, 0, ratio=1.5), "ratio"),
        (lambda ds: downsample(ds, 0, target=13), "target"),
        (lambda ds: downsample(ds, 2, target=1), "label"),
        (lambda ds: upsample(ds, 1, target=2), "target"),
        (lambda ds: upsample(ds, -1, target=5), "label"),
        (lambda ds: rebalance(ds, 0.0), "target_ratio"),
        (lambda ds: rebalance(ds, 1.0, method="smote"), "method"),
        (lambda ds: rebalance(downsample(ds, 1, target=0), 1.0), "positive_label"),
    ],
)
def test_bad_arguments(call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call(_toy())


@pytest.mark.parametrize(
    "call",
    [
        lambda ds, seed: downsample(ds, 0, target=5, seed=seed),
        lambda ds, seed: upsample(ds, 1, target=5, seed=seed),
        lambda ds, seed: rebalance(ds, 1.0, seed=seed),
        lambda ds, seed: rebalance(ds, 1.0, method="upsample", seed=seed),
        lambda ds, seed: table8_training_sets(ds, seed),
    ],
)
@pytest.mark.parametrize("seed", [-1, 0.5, None])
def test_seed_must_be_a_non_negative_integer(call, seed):
    with pytest.raises(ValueError, match=r"^seed:"):
        call(_toy(), seed)


# ----------------------------------------------------------------------------- synonym replacement

TABLE = SynonymTable([["很", "非常"], ["好", "棒", "优秀"]])


@pytest.fixture(scope="module")
def segmenter():
    return JiebaSegmenter(pos=False)


def _variants(words, replaceable, n):
    """Every text with exactly n of the replaceable positions swapped for one of their synonyms."""
    texts = set()
    for positions in {tuple(sorted(p)) for p in product(replaceable, repeat=n) if len(set(p)) == n}:
        for choices in product(*(sorted(TABLE.synonyms(words[i])) for i in positions)):
            replaced = list(words)
            for i, word in zip(positions, choices):
                replaced[i] = word
            texts.add("".join(replaced))
    return texts


def test_synonym_replace_swaps_words_for_synonyms(segmenter):
    text = "这家酒店很好很干净"  # jieba: 这家 酒店 很 好 很 干净
    words = segmenter.words(text)
    assert words == ["这家", "酒店", "很", "好", "很", "干净"]
    one = {synonym_replace(text, TABLE, segmenter, seed) for seed in range(60)}
    assert one == _variants(words, [2, 3, 4], 1)  # 很->非常 (twice) or 好->棒/优秀: 4 texts, all reached
    assert synonym_replace(text, TABLE, segmenter, 7) == synonym_replace(text, TABLE, segmenter, 7)
    two = {synonym_replace(text, TABLE, segmenter, seed, n_words=2) for seed in range(80)}
    assert two <= _variants(words, [2, 3, 4], 2) and len(two) > 1
    assert synonym_replace(text, TABLE, segmenter, 0, n_words=9) in _variants(words, [2, 3, 4], 3)
    # no word in the lexicon: kept unchanged
    assert synonym_replace("价格态度恶劣。", TABLE, segmenter, 0) == "价格态度恶劣。"


def test_synonym_augmenter_draws_fresh_per_call_and_replays_per_seed(segmenter):
    augmenter = SynonymAugmenter(TABLE, segmenter, seed=3)
    outputs = [augmenter("房间很好。") for _ in range(30)]
    assert set(outputs) == {"房间非常好。", "房间很棒。", "房间很优秀。"}
    assert outputs == list(map(SynonymAugmenter(TABLE, segmenter, seed=3), ["房间很好。"] * 30))  # replayed
    assert outputs != list(map(SynonymAugmenter(TABLE, segmenter, seed=4), ["房间很好。"] * 30))
    assert augmenter("价格态度恶劣。") == "价格态度恶劣。"
    assert (augmenter.calls, augmenter.unchanged) == (31, 1)


def test_synonym_augmenter_as_upsample_augmenter(segmenter):
    texts = [f"差评{i}。" for i in range(8)] + ["房间很好。", "早餐很好。"]
    ds = build_dataset({"text": texts, "label": [0] * 8 + [1] * 2}, ["negative", "positive"])
    big = upsample(ds, label=1, target=6, seed=0, augmenter=SynonymAugmenter(TABLE, segmenter, seed=0))
    added = big["text"][10:]
    assert big["label"][10:] == [1, 1, 1, 1]
    for text in added:
        template = "房间很好。" if text.startswith("房间") else "早餐很好。"
        assert text in _variants(segmenter.words(template), [1, 2], 1)  # a new sentence, never the template


def test_default_synonym_augmenter_uses_the_shipped_lexicon():
    augmenter = SynonymAugmenter()
    assert augmenter("房间很好。") != "房间很好。"
    assert "很" in SynonymTable.default() and augmenter.unchanged == 0


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda seg: synonym_replace("很好", TABLE, seg, 0, n_words=0), "n_words"),
        (lambda seg: SynonymAugmenter(TABLE, seg, n_words=1.5), "n_words"),
        (lambda seg: SynonymAugmenter(TABLE, seg, seed=-2), "seed"),
        (lambda seg: synonym_replace("很好", TABLE, seg, -1), "seed"),
    ],
)
def test_synonym_bad_arguments(segmenter, call, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        call(segmenter)


# ----------------------------------------------------------------------------- Table 8


def test_table8_class_counts_by_hand():
    # toy: 3 positives, 12 negatives; +positive & +negative keeps the 3 : 12 share at the +positive size 24:
    # round(24 * 3 / 15) = round(4.8) = 5 positives
    assert table8_class_counts(3, 12) == {
        "original": (3, 12),
        "+positive": (12, 12),
        "+negative": (3, 21),
        "-negative": (3, 3),
        "+positive & +negative": (5, 19),
    }
    # QQP (363,871 examples, 37% positive): +positive 458,478 (paper: 458,477), -negative 269,264 (paper: 269,165)
    qqp = table8_class_counts(134_632, 229_239)
    assert sum(qqp["+positive"]) == sum(qqp["+negative"]) == sum(qqp["+positive & +negative"]) == 458_478
    assert sum(qqp["-negative"]) == 269_264
    mixed_positives = qqp["+positive & +negative"][0]
    assert mixed_positives == round(458_478 * 134_632 / 363_871) == 169_637
    assert abs(mixed_positives / 458_478 - 134_632 / 363_871) < 1e-5


def test_table8_training_sets_follow_the_counts_and_keep_the_originals():
    ds = _toy()
    sets = table8_training_sets(ds, seed=0)
    assert list(sets) == list(TABLE8_SETTINGS)
    expected = table8_class_counts(3, 12)
    for name, split in sets.items():
        positives, negatives = expected[name]
        assert label_counts(split) == [negatives, positives], name
    assert sets["original"] is ds
    for name in ("+positive", "+negative", "+positive & +negative"):
        assert sets[name].select(range(15))["text"] == ds["text"], name  # originals first, in order
        added = sets[name].select(range(15, len(sets[name])))
        for text, label in zip(added["text"], added["label"]):  # copies of templates of the same class
            assert text.startswith("正" if label == 1 else "负") and text in ds["text"]
    kept = sets["-negative"]["text"]
    assert [t for t in kept if t.startswith("正")] == ["正0", "正1", "正2"] and len(set(kept)) == 6
    again = table8_training_sets(ds, seed=0)
    assert all(again[name]["text"] == sets[name]["text"] for name in TABLE8_SETTINGS)
    other = table8_training_sets(ds, seed=1)
    assert other["-negative"]["text"] != sets["-negative"]["text"]


def test_table8_training_sets_with_an_augmenter_add_new_sentences(segmenter):
    texts = [f"差评{i}很差。" for i in range(6)] + ["房间很好。", "早餐很好。"]
    ds = build_dataset({"text": texts, "label": [0] * 6 + [1] * 2}, ["negative", "positive"])
    table = SynonymTable([["很", "非常"], ["好", "棒", "优秀"], ["很差", "极差", "太差"]])  # jieba: 差评 3 很差 。
    sets = table8_training_sets(ds, seed=0, augmenter=SynonymAugmenter(table, segmenter, seed=0))
    for name in ("+positive", "+negative", "+positive & +negative"):
        added = sets[name]["text"][len(ds) :]
        assert added and not set(added) & set(texts), name  # every added row is a new sentence
    assert label_counts(sets["+positive & +negative"]) == [12 - 3, 3]  # round(12 * 2 / 8) = 3 positives


@pytest.mark.parametrize(
    "train",
    [
        build_dataset({"text": list("abcd"), "label": [1, 1, 0, 0]}, ["n", "p"]),
        build_dataset({"text": list("abc"), "label": [0, 0, 0]}, ["n", "p"]),
    ],
)
def test_table8_needs_a_positive_minority(train):
    with pytest.raises(ValueError, match=r"^train:"):
        table8_training_sets(train, seed=0)
    with pytest.raises(ValueError, match=r"^positive_label:"):
        table8_training_sets(_toy(), seed=0, positive_label=2)
