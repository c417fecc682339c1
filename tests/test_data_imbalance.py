from __future__ import annotations

from collections import Counter

import pytest

from workbench.data import downsample, label_counts, rebalance, upsample
from workbench.data.features import build_dataset


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
    with pytest.raises(ValueError, match="augmenter"):
        upsample(_toy(), label=1, target=5, augmenter=lambda text: None)


@pytest.mark.parametrize(
    "method, ratio, expected",
    [("downsample", 1.0, [3, 3]), ("downsample", 0.5, [6, 3]), ("upsample", 1.0, [12, 12]),
     ("upsample", 0.5, [12, 6]), ("downsample", 1 / 8, [12, 2]), ("upsample", 1 / 8, [24, 3])],
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
    with pytest.raises(ValueError, match=name):
        call(_toy())
