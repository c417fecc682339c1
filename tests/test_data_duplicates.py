"""No text in two splits (issue 36, item 1): ``load_splits`` removes from each split what a split of higher priority
holds (test, then validation, then train; ``text`` and ``text_pair``) and the repeats within validation and test,
before any sampling, on every path: files read or cut, the data root, the generated sources, the probe studies'
down-sampling, the trainers (one stage and two), ``load_texts`` and notebook 03's held-out texts. Small fixtures
only; the counts are in the provenance's ``duplicates``."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
from datasets import DatasetDict

from workbench.data import (
    NORMALISATION,
    deduplicate_splits,
    load_splits,
    load_texts,
    shared_with_train,
    text_key,
    unique_texts,
)
from workbench.data.features import build_dataset
from workbench.data_root import DATA_ROOT_ENV

PRIORITY = ("test", "validation", "train")


def _keys(split) -> list[tuple[str, ...]]:
    columns = [column for column in ("text", "text_pair") if column in split.column_names]
    return [text_key(*row) for row in zip(*(split[column] for column in columns))]


def assert_no_shared_text(splits) -> None:
    """No (normalised) text (pair) in two splits, and none twice in validation or test."""
    seen: set[tuple[str, ...]] = set()
    for name in (name for name in PRIORITY if name in splits):
        keys = _keys(splits[name])
        assert not seen & set(keys), f"{name} shares {sorted(seen & set(keys))[:3]}"
        if name != "train":
            assert len(keys) == len(set(keys)), f"{name} repeats a text"
        seen.update(keys)


def _pairs(rows, names=("a", "b")):
    return build_dataset(
        {"text": [r[0] for r in rows], "text_pair": [r[1] for r in rows], "label": [r[2] for r in rows]}, list(names)
    )


def _texts(rows, names=("a", "b")):
    return build_dataset({"text": [r[0] for r in rows], "label": [r[1] for r in rows]}, list(names))


# ----------------------------------------------------------------------------- the rule


def test_text_key_is_nfkc_with_whitespace_runs_collapsed():
    assert text_key("  好 \t 看\n") == text_key("好 看") == ("好 看",)
    assert text_key("ＡＢＣ，１２") == text_key("ABC,12")  # full-width forms are the half-width characters
    assert text_key("好看") != text_key("好 看")  # a space inside a text is kept (collapsed, not removed)
    assert text_key("q", "t") == ("q", "t")


def test_a_split_loses_what_a_split_of_higher_priority_holds_compared_on_text_and_text_pair():
    dsd = DatasetDict(
        {
            "train": _pairs([("q1", "t1", 0), ("q2", "t2", 1), ("q3", "t3", 0), ("q3", "t3", 0), ("q1", "tX", 0)]),
            "validation": _pairs([("q2", "t2", 1), ("q4", "t4", 1), ("q4 ", "t4", 0)]),
            "test": _pairs([("q1", "t1", 0), ("q4", "t4", 1), ("q5", "t5", 0), ("q5", "t5", 1)]),
        }
    )
    cleaned, removed = deduplicate_splits(dsd)
    assert removed == {
        "test": {"shared": 0, "repeated": 1, "of": 4},  # the second q5/t5
        "validation": {"shared": 2, "repeated": 0, "of": 3},  # q4/t4 (twice, one with a trailing space) is in test
        "train": {"shared": 2, "repeated": 0, "of": 5},  # q1/t1 is in test, q2/t2 in validation
    }
    assert list(zip(cleaned["test"]["text"], cleaned["test"]["label"])) == [("q1", 0), ("q4", 1), ("q5", 0)]
    assert cleaned["validation"]["text"] == ["q2"]
    # the training split keeps its repeats; the same query with another title is another pair
    assert list(zip(cleaned["train"]["text"], cleaned["train"]["text_pair"])) == [
        ("q3", "t3"),
        ("q3", "t3"),
        ("q1", "tX"),
    ]
    assert list(cleaned) == ["train", "validation", "test"]
    assert_no_shared_text(cleaned)


def test_the_priority_decides_which_split_keeps_a_shared_text():
    dsd = DatasetDict({"train": _texts([("a", 0), ("b", 1)]), "test": _texts([("a", 1), ("c", 0)])})
    kept_by_test, removed = deduplicate_splits(dsd, priority=("test", "train"))
    assert kept_by_test["train"]["text"] == ["b"] and kept_by_test["test"]["text"] == ["a", "c"]
    assert removed["train"] == {"shared": 1, "repeated": 0, "of": 2}
    kept_by_train, _ = deduplicate_splits(dsd, priority=("train", "test"))
    assert kept_by_train["train"]["text"] == ["a", "b"] and kept_by_train["test"]["text"] == ["c"]


def test_bad_priority_and_keys_are_named():
    single = DatasetDict({"train": _texts([("a", 0), ("b", 1)]), "test": _texts([("b", 1)])})
    with pytest.raises(ValueError, match=r"^priority:"):
        deduplicate_splits(single)  # no validation split
    with pytest.raises(ValueError, match=r"^priority:"):
        deduplicate_splits(single, priority=("test", "test"))
    with pytest.raises(ValueError, match=r"^keys:"):
        deduplicate_splits(single, keys=("title",), priority=("test", "train"))


def test_shared_with_train_counts_by_the_same_normalisation():
    dsd = DatasetDict(
        {
            "train": _texts([("甲 乙", 0), ("丙", 1)]),
            "validation": _texts([("甲  乙", 1), ("丁", 0)]),
            "test": _texts([("丙", 1), ("丙", 1)]),
        }
    )
    assert shared_with_train(dsd) == {"validation": 1, "test": 2}


def test_unique_texts_keeps_first_occurrences_of_texts_or_pairs():
    assert unique_texts(["a", "b", " a", "c", "b"]) == (["a", "b", "c"], None, 2)
    texts, pairs, removed = unique_texts(["q", "q", "q"], ["t", "u", "t"])
    assert (texts, pairs, removed) == (["q", "q"], ["t", "u"], 1)


# ----------------------------------------------------------------------------- load_splits: every source


def _csv(path: Path, rows, header="text,label") -> str:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return str(path)


def _table(**data):
    return {"source": "table", "text": "text", "label": "label", **data}


def test_files_read_as_splits_share_no_text_and_the_provenance_counts_what_left(tmp_path):
    train = _csv(tmp_path / "train.csv", ["甲,a", "乙,b", "丙,a", "丁,b", "戊,a", "己,b", "乙,b"])
    validation = _csv(tmp_path / "dev.csv", ["乙,a", "庚,b", "庚,b", "辛,a"])
    test = _csv(tmp_path / "test.csv", ["甲,a", "辛,a", "壬,b"])
    splits = load_splits(_table(path=train, validation_path=validation, test_path=test))
    assert splits["train"]["text"] == ["丙", "丁", "戊", "己"]  # 甲 (test), 乙 twice (validation) left
    assert splits["validation"]["text"] == ["乙", "庚"]  # 辛 (test) and the second 庚 left
    assert splits["test"]["text"] == ["甲", "辛", "壬"]
    duplicates = splits.provenance["duplicates"]
    assert duplicates["removed"] == {
        "test": {"shared": 0, "repeated": 0, "of": 3},
        "validation": {"shared": 1, "repeated": 1, "of": 4},
        "train": {"shared": 3, "repeated": 0, "of": 7},
    }
    assert duplicates["compared"] == ["text"] and duplicates["priority"] == list(PRIORITY)
    assert duplicates["normalisation"] == NORMALISATION and duplicates["once_in"] == ["validation", "test"]
    assert {name: entry["examples"] for name, entry in splits.provenance["splits"].items()} == {
        "train": 4,
        "validation": 2,
        "test": 3,
    }
    json.dumps(splits.provenance)  # JSON-ready


def test_a_file_cut_into_splits_shares_no_text_between_them(tmp_path):
    rows = [f"文{i % 23},{'ab'[i % 2]}" for i in range(120)]  # 23 texts (one with both labels), each repeated
    splits = load_splits(_table(path=_csv(tmp_path / "all.csv", rows), split=[0.6, 0.2, 0.2], seed=1))
    assert_no_shared_text(splits)
    removed = splits.provenance["duplicates"]["removed"]
    assert sum(entry["of"] for entry in removed.values()) == 120
    for name, entry in removed.items():
        assert entry["of"] - entry["shared"] - entry["repeated"] == len(splits[name])
    assert removed["train"]["shared"] > 0 and removed["test"]["repeated"] > 0


def test_pairs_are_compared_as_pairs_on_the_lcqmc_reader(tmp_path):
    train = tmp_path / "train.txt"
    train.write_text("问一\t答一\t1\n问一\t答二\t0\n问二\t答二\t1\n问三\t答三\t0\n", encoding="utf-8")
    dev = tmp_path / "dev.txt"
    dev.write_text("问一\t答一\t1\n问四\t答四\t0\n", encoding="utf-8")
    splits = load_splits({"source": "lcqmc", "path": str(train), "validation_path": str(dev)})
    assert list(zip(splits["train"]["text"], splits["train"]["text_pair"])) == [
        ("问一", "答二"),
        ("问二", "答二"),
        ("问三", "答三"),
    ]
    assert splits.provenance["duplicates"]["compared"] == ["text", "text_pair"]
    assert splits.provenance["duplicates"]["removed"]["train"]["shared"] == 1


@pytest.fixture
def root(tmp_path, monkeypatch):
    folder = tmp_path / "data-root"
    monkeypatch.setenv(DATA_ROOT_ENV, str(folder))
    return folder


def _place(root: Path, relative: str, lines) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def test_a_named_data_set_from_the_root_read_and_cut_shares_no_text(root):
    """ChnSentiCorp as the data root holds it here: train.txt and dev.txt, the test cut from train.txt; dev.txt
    repeats training texts, train.txt repeats its own."""
    train = [f"评论{i % 150}\t{i % 2}" for i in range(200)]  # 150 texts, 50 of them twice
    dev = [f"评论{i}\t{i % 2}" for i in range(0, 40, 2)] + [f"新评论{i}\t{i % 2}" for i in range(20)]
    _place(root, "chnsenticorp/train.txt", train)
    _place(root, "chnsenticorp/dev.txt", dev)
    with pytest.warns(UserWarning, match="test.txt"):
        splits = load_splits({"source": "chnsenticorp", "seed": 0})
    assert_no_shared_text(splits)
    removed = splits.provenance["duplicates"]["removed"]
    assert removed["validation"]["of"] == 40 and removed["train"]["shared"] >= 20  # dev's 20 old texts leave train
    assert set(splits["validation"]["text"]) >= {f"新评论{i}" for i in range(20)}


def test_sampling_comes_after_the_duplicates_are_gone(tmp_path):
    """max_train_samples draws N examples from what is left: drawn before, some of the N would then be removed."""
    train = _csv(tmp_path / "train.csv", [f"共{i},{'ab'[i % 2]}" for i in range(30)] + ["独一,a", "独二,b"] * 1)
    test = _csv(tmp_path / "test.csv", [f"共{i},{'ab'[i % 2]}" for i in range(30)] + ["测,a"])
    validation = _csv(tmp_path / "dev.csv", [f"验{i},{'ab'[i % 2]}" for i in range(6)])
    data = _table(path=train, validation_path=validation, test_path=test, max_train_samples=2, max_eval_samples=4)
    splits = load_splits(data)
    assert sorted(splits["train"]["text"]) == ["独一", "独二"]  # the only two texts test does not hold
    assert len(splits["test"]) == 4 and len(splits["validation"]) == 4
    assert splits.provenance["splits"]["train"]["examples"] == 2
    assert splits.provenance["duplicates"]["removed"]["train"] == {"shared": 30, "repeated": 0, "of": 32}


def test_a_split_nothing_is_left_of_is_an_error_naming_it(tmp_path):
    train = _csv(tmp_path / "train.csv", ["甲,a", "乙,b"])
    validation = _csv(tmp_path / "dev.csv", ["乙,b", "甲,a"])
    with pytest.raises(ValueError, match=r"^data: every example of the train split \(2\) is also in the validation"):
        load_splits(_table(path=train, validation_path=validation))


@pytest.mark.parametrize("source", ["sample_relevance", "sample_sentences"])
def test_generated_sources_follow_the_same_rule(source):
    splits = load_splits({"source": source, "seed": 0})
    assert_no_shared_text(splits)
    removed = splits.provenance["duplicates"]["removed"]
    assert {name: entry["of"] - entry["shared"] - entry["repeated"] for name, entry in removed.items()} == {
        name: len(split) for name, split in splits.items()
    }


# ----------------------------------------------------------------------------- the paths that use the splits


def test_the_probe_studies_down_sample_after_the_duplicates_are_gone(tmp_path):
    from workbench.studies.dice import study_splits

    rows = [f"评{i % 60},{int(i % 3 == 0)}" for i in range(240)]
    data = _table(path=_csv(tmp_path / "all.csv", rows), seed=2)
    splits = study_splits(data, positive_share=0.25, thin_evaluation=True)
    assert_no_shared_text(splits)
    assert "duplicates" in splits.provenance and splits.provenance["splits"]["test"]["downsampled"]


def test_the_probe_warns_about_splits_a_caller_built_that_share_text(monkeypatch):
    """Before: the probe path fitted splits that shared texts in silence (the transformer path warned)."""
    import torch

    from workbench.config import ModelConfig, TrainingConfig
    from workbench.train import build_fitter, finetuning

    monkeypatch.setattr(finetuning, "_WARNED", set())
    train = _texts([("好看的电影", 1), ("难看的电影", 0), ("很好", 1), ("很差", 0)])
    shared = DatasetDict(train=train, validation=_texts([("很好", 1), ("不错", 1)]), test=_texts([("太差", 0)]))
    fitter = build_fitter(
        ModelConfig.from_mapping({"kind": "probe"}), TrainingConfig.from_mapping({"num_train_epochs": 1}), 16
    )
    with pytest.warns(UserWarning, match="validation 1 of 2"):
        fitter.fit(shared, torch.nn.CrossEntropyLoss(), 0)
    apart = DatasetDict(train=train, validation=_texts([("不错", 1), ("一般", 0)]), test=_texts([("太差", 0)]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fitter.fit(apart, torch.nn.CrossEntropyLoss(), 0)
    assert not [warning for warning in caught if "shared with train" in str(warning.message)]


TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}


def _trainer_config(tmp_path: Path, name: str, **sections) -> dict:
    rows = [f"{'好看' if i % 2 else '难看'}{i % 40},{i % 2}" for i in range(160)]
    return {
        "output_dir": str(tmp_path / name),
        "data": _table(path=_csv(tmp_path / "all.csv", rows), max_length=16),
        "model": {"tiny": TINY},
        "training": {"num_train_epochs": 1, "per_device_train_batch_size": 16, "learning_rate": 1e-3, "quiet": True},
        **sections,
    }


@pytest.mark.slow  # two tiny training runs
def test_the_trainers_one_stage_and_two_fit_on_splits_that_share_no_text(tmp_path, monkeypatch):
    from workbench.train import finetune, finetuning, two_stage

    monkeypatch.setattr(finetuning, "_WARNED", set())  # its warnings are given once per process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        one = finetune(_trainer_config(tmp_path, "one")).metrics
        two = two_stage(_trainer_config(tmp_path, "two", aux={"num_aux": 2, "stage2_epochs": 1})).metrics
    assert not [warning for warning in caught if "shared with train" in str(warning.message)]
    for metrics in (one, two["stage1"], two["stage2"]):
        assert metrics["shared_with_train"] == {"validation": 0, "test": 0}
        removed = metrics["data_provenance"]["duplicates"]["removed"]
        assert removed["train"]["shared"] > 0 and removed["test"]["repeated"] > 0  # 40 texts in 160 rows
        examples = {name: entry["examples"] for name, entry in metrics["data_provenance"]["splits"].items()}
        assert examples == {name: entry["of"] - entry["shared"] - entry["repeated"] for name, entry in removed.items()}


# ----------------------------------------------------------------------------- load_texts, notebook 03's held-out


def test_load_texts_gives_each_text_once_with_the_count_removed(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("一句\n二句\n 一句 \n\n三句\n二句\n", encoding="utf-8")
    loaded = load_texts({"source": "corpus", "path": str(corpus)})
    texts, pairs = loaded
    assert texts == ["一句", "二句", "三句"] and pairs is None
    assert loaded.provenance["duplicates"]["removed"] == {"texts": {"shared": 0, "repeated": 2, "of": 5}}
    assert loaded.provenance["texts"] == 3


def test_load_texts_of_a_labelled_source_reads_train_without_the_evaluation_texts(tmp_path):
    train = _csv(tmp_path / "train.csv", ["甲,a", "乙,b", "丙,a", "丁,b", "甲,a"])
    validation = _csv(tmp_path / "dev.csv", ["乙,b", "戊,a"])
    loaded = load_texts(_table(path=train, validation_path=validation))
    assert sorted(loaded[0]) == ["丁", "丙", "甲"]
    assert loaded.provenance["splits"]["duplicates"]["removed"]["train"]["shared"] == 1
    assert loaded.provenance["duplicates"]["removed"]["texts"]["repeated"] == 1


def test_notebook_03_s_held_out_texts_are_never_pre_training_texts(tmp_path):
    from workbench.studies.true_negatives import hard_correction

    corpus = tmp_path / "corpus.txt"
    lines = ["甲", "乙", "丙", "甲", "乙", "丁", "丙", "戊", "己"]  # the texts after the first 3 repeat them
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = {"source": "corpus", "path": str(corpus), "max_train_samples": 3}
    pretraining, _ = load_texts(data)
    heldout = hard_correction.heldout_texts(data, 3)
    assert pretraining == ["甲", "乙", "丙"] and heldout == ["丁", "戊", "己"]
    with pytest.raises(ValueError, match=re.escape("n_texts: must be at most 3")):
        hard_correction.heldout_texts(data, 4)  # nine lines, six texts


def test_the_sample_corpus_of_the_default_parameters_holds_enough_unseen_texts():
    """params/default and notebook 03's parameters cell: 1,500 pre-training texts and 200 held out, all distinct."""
    from workbench.studies.true_negatives import hard_correction

    data = {"source": "sample_corpus", "n_sentences": 2400, "max_train_samples": 1500}
    heldout = hard_correction.heldout_texts(data, 200)
    assert not set(heldout) & set(load_texts(data)[0]) and len(set(heldout)) == 200


def test_the_results_page_prints_the_counts_removed_per_split_and_notebook_03_s_texts(tmp_path):
    """The page (``runs.page_section``) prints what ``load_splits`` removed, per split, from the record of the splits
    above, and notebook 03's pre-training repeats and the held-out texts shared with pre-training (0)."""
    from workbench.evidence import record
    from workbench.runs.page_section import notebook_section
    from workbench.studies.true_negatives import claims as tn_claims

    train = _csv(tmp_path / "train.csv", ["甲,a", "乙,b", "丙,a", "丁,b", "戊,a", "己,b", "乙,b"])
    validation = _csv(tmp_path / "dev.csv", ["乙,a", "庚,b", "庚,b", "辛,a"])
    test = _csv(tmp_path / "test.csv", ["甲,a", "辛,a", "壬,b"])
    splits = load_splits(_table(path=train, validation_path=validation, test_path=test))
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("一句\n二句\n 一句 \n三句\n四句\n", encoding="utf-8")
    data = {"source": "corpus", "path": str(corpus), "max_train_samples": 2}
    entry = {
        **record("T", "s.", [0], [], splits.provenance),
        "pretraining": tn_claims.heldout_record(data, ["三句", "四句"]),
    }
    text = " ".join(notebook_section("03_x", entry, [], ["03_x"], {}))
    for split, (removed, of, shared, repeated) in {
        "test": (0, 3, 0, 0),
        "validation": (2, 4, 1, 1),
        "train": (3, 7, 3, 0),
    }.items():
        assert re.search(rf"{split} {removed} of {of} removed \({shared} [^,]*, {repeated} repeats?\)", text), split
    assert re.search(r"texts 1 of 5 removed \(0 [^,]*, 1 repeat\)", text)  # 一句 twice
    assert entry["pretraining"]["shared_with_pretraining"] == 0
    assert re.search(r"Held-out texts: 2, shared with the pre-training texts: 0", text)
