from __future__ import annotations

import pytest

from workbench.data import (
    label_counts,
    sample_relevance_pairs,
    sample_sentences,
    stratified_split,
)
from workbench.data.features import build_dataset


def test_stratified_split_sizes_proportions_and_partition():
    ds = sample_relevance_pairs(n=1000, seed=0)
    counts = label_counts(ds)
    parts = stratified_split(ds, seed=0)
    assert list(parts) == ["train", "validation", "test"]
    assert sum(len(split) for split in parts.values()) == len(ds)
    for name, fraction in (("train", 0.8), ("validation", 0.1), ("test", 0.1)):
        for k, n_k in enumerate(label_counts(parts[name], 3)):
            assert abs(n_k - fraction * counts[k]) < 1

    # a partition: the text+title pairs of all splits together are the original multiset
    def rows(d):
        return sorted(zip(d["text"], d["text_pair"], d["label"]))

    assert sorted(sum((rows(split) for split in parts.values()), [])) == rows(ds)


def test_stratified_split_is_seeded():
    ds = sample_sentences(n=300, seed=0)
    a = stratified_split(ds, {"train": 0.5, "test": 0.5}, seed=1)
    b = stratified_split(ds, {"train": 0.5, "test": 0.5}, seed=1)
    c = stratified_split(ds, {"train": 0.5, "test": 0.5}, seed=2)
    assert a["test"].to_dict() == b["test"].to_dict()
    assert a["test"].to_dict() != c["test"].to_dict()


@pytest.mark.parametrize("fractions", [{"train": 0.7, "test": 0.2}, {"train": 1.2, "test": -0.2}, {}])
def test_stratified_split_bad_fractions(fractions):
    with pytest.raises(ValueError, match=r"^fractions:"):
        stratified_split(sample_sentences(n=20), fractions)


def test_stratified_split_too_small_for_the_fractions():
    ds = sample_sentences(n=5, seed=0)
    with pytest.raises(ValueError, match=r"^fractions: split 'validation'"):
        stratified_split(ds)
    with pytest.raises(ValueError, match=r"^ds:"):
        stratified_split(ds.select([]))
    # just enough: every split gets at least one example
    parts = stratified_split(sample_sentences(n=40, seed=0), {"train": 0.5, "test": 0.5})
    assert all(len(split) > 0 for split in parts.values())


@pytest.mark.parametrize("seed", [-1, 2.0, None])
def test_stratified_split_seed_must_be_a_non_negative_integer(seed):
    with pytest.raises(ValueError, match=r"^seed:"):
        stratified_split(sample_sentences(n=50), seed=seed)


def test_label_counts():
    ds = build_dataset({"text": ["a", "b", "c"], "label": [2, 0, 2]}, ["x", "y", "z"])
    assert label_counts(ds) == [1, 0, 2]
    assert label_counts(ds, 4) == [1, 0, 2, 0]
    with pytest.raises(ValueError, match=r"^num_labels:"):
        label_counts(ds, 2)
    with pytest.raises(ValueError, match=r"^num_labels:"):
        label_counts(ds, 0)
