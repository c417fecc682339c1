"""``load_splits`` / ``load_texts`` from a ``data`` section: one label vocabulary across split files,
rows shared with train, ordinal labels, broken corpus files, text the vocabulary cannot read."""

from __future__ import annotations

import gzip
import re
import warnings

import pytest
import torch
from datasets import DatasetDict

from workbench.config import DataConfig, LossSpec, ModelConfig, TrainingConfig, check_loss_fits_labels, load_config
from workbench.data import (
    label_names,
    load_splits,
    load_table,
    load_texts,
    sample_relevance_splits,
    shared_with_train,
)
from workbench.train import build_fitter, finetuning, tokenize_splits
from workbench.train.finetuning import classification_data, warn_unreadable
from workbench.vocab import load_tokenizer


def fitter_of(model: dict, training: dict, max_length: int):
    """``build_fitter`` on the validated sections of the ``model`` and ``training`` mappings (checked here, once)."""
    return build_fitter(ModelConfig.from_mapping(model), TrainingConfig.from_mapping(training), max_length)


def _csv(path, rows, header="text,label"):
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return str(path)


def _table(tmp_path, **data):
    return {"source": "table", "text": "text", "label": "label", **data}


def test_a_validation_file_without_a_class_keeps_train_s_label_ids(tmp_path):
    """Before: the validation file's labels were numbered on their own, "c" became id 1 there."""
    train = _csv(tmp_path / "train.csv", ["甲,a", "乙,b", "丙,c", "丁,a"])
    validation = _csv(tmp_path / "dev.csv", ["戊,a", "己,c", "庚,c"])
    test = _csv(tmp_path / "test.csv", ["辛,b"])
    splits = load_splits(_table(tmp_path, path=train, validation_path=validation, test_path=test))
    assert all(label_names(split) == ["a", "b", "c"] for split in splits.values())
    assert splits["validation"]["label"] == [0, 2, 2] and splits["test"]["label"] == [1]


def test_a_label_train_lacks_names_file_line_and_label(tmp_path):
    train = _csv(tmp_path / "train.csv", ["甲,a", "乙,b"])
    validation = _csv(tmp_path / "dev.csv", ["戊,a", "己,d"])
    with pytest.raises(ValueError, match=re.escape(f"{validation}:3:") + ".*'d'"):
        load_splits(_table(tmp_path, path=train, validation_path=validation))


def test_the_config_s_label_names_are_every_split_s_vocabulary(tmp_path):
    train = _csv(tmp_path / "train.csv", ["甲,b", "乙,a"])
    validation = _csv(tmp_path / "dev.csv", ["戊,a", "己,c"])
    splits = load_splits(_table(tmp_path, path=train, validation_path=validation, label_names=["c", "b", "a"]))
    assert label_names(splits["validation"]) == ["c", "b", "a"]
    assert splits["train"]["label"] == [1, 2] and splits["validation"]["label"] == [2, 0]


@pytest.mark.parametrize(
    "data, key",
    [
        ({"source": "qbqtc", "label_names": ["a", "b"]}, "data.label_names"),
        ({"source": "table", "label_names": ["a", "a"]}, "data.label_names"),
        ({"source": "table", "label_names": ["a"]}, "data.label_names"),
        ({"source": "table", "test_path": "t.csv"}, "data.test_path"),
        ({"source": "table", "ordinal": "yes"}, "data.ordinal"),
    ],
)
def test_bad_data_keys_are_named(data, key):
    with pytest.raises(ValueError, match=f"^{re.escape(key)}:"):
        DataConfig.from_mapping(data)


@pytest.fixture
def unwarned(monkeypatch):
    """No warning given yet in this process (it is given once per process)."""
    monkeypatch.setattr(finetuning, "_WARNED", set())


def test_rows_shared_with_train_are_counted_and_reported(tmp_path, unwarned):
    """load_splits removes them (tests/test_data_duplicates.py); splits given to a trainer as they are may share."""
    train = load_table(_csv(tmp_path / "train.csv", ["甲,a", "乙,b", "丙,a"]))
    validation = load_table(_csv(tmp_path / "dev.csv", ["甲,a", "乙,a", "丁,b"]))  # 乙, another label: shared text
    splits = DatasetDict(train=train, validation=validation)
    config = load_config({"data": _table(tmp_path, path=str(tmp_path / "train.csv"))})
    assert shared_with_train(splits) == {"validation": 2}
    with pytest.warns(UserWarning, match="validation 2 of 3"):
        data = classification_data(config, splits)
    assert data.shared_with_train == {"validation": 2}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per process, however many models a study fits
        assert classification_data(config, splits).shared_with_train == {"validation": 2}
    assert shared_with_train(sample_relevance_splits(seed=0, n_train=50, n_validation=10, n_test=10)) == {
        "validation": 0,
        "test": 0,
    }


@pytest.mark.parametrize(
    "source, ordinal, expected",
    [
        ("qbqtc", None, True),
        ("sample_relevance", None, True),
        ("table", None, False),
        ("tnews", None, False),
        ("table", True, True),
    ],
)
def test_ordinal_defaults_by_source(source, ordinal, expected):
    assert DataConfig(source=source, ordinal=ordinal).is_ordinal is expected


def test_pcl_on_nominal_labels_needs_a_cost_matrix(tmp_path):
    nominal = {"task": "finetune", "data": {"source": "table"}, "loss": {"name": "pcl"}}
    with pytest.raises(ValueError, match=r"^loss\.params\.cost_matrix: .*data\.ordinal"):
        load_config(nominal)
    with pytest.raises(ValueError, match=r"^loss\.params\.cost_matrix: .*data\.ordinal"):
        load_config({"task": "finetune", "data": {"source": "sample_sentences"}}, ["loss.name=pcl"])
    assert load_config(nominal, ["data.ordinal=true"]).data.is_ordinal
    assert load_config(nominal, ["loss.params.cost_matrix=[[0, 1], [1, 0]]"]).loss.name == "pcl"
    assert load_config({"task": "finetune", "data": {"source": "qbqtc"}, "loss": {"name": "pcl"}}).data.is_ordinal
    with pytest.raises(ValueError, match=r"^loss\.params\.cost_matrix: .*data\.ordinal"):  # what a notebook calls
        check_loss_fits_labels(DataConfig(source="tnews"), LossSpec("pcl", {"variant": "weighted"}))


def test_a_broken_corpus_file_names_the_file(tmp_path):
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes("第一句。\n".encode() + "第二句。\n".encode("gbk"))
    with pytest.raises(ValueError, match=re.escape(f"{gbk}:2:")):
        load_texts({"source": "corpus", "path": str(gbk)})
    not_gzip = tmp_path / "plain.txt.gz"
    not_gzip.write_text("第一句。\n", encoding="utf-8")
    with pytest.raises(ValueError, match=re.escape(f"{not_gzip}:")):
        load_texts({"source": "corpus", "path": str(not_gzip)})
    truncated = tmp_path / "cut.txt.gz"
    truncated.write_bytes(gzip.compress("".join(f"第{i}句。\n" for i in range(2000)).encode())[:-40])
    with pytest.raises(ValueError, match=re.escape(f"{truncated}:")):
        load_texts({"source": "corpus", "path": str(truncated)})
    whole = tmp_path / "whole.txt.gz"
    whole.write_bytes(gzip.compress("第一句。\n\n第二句。\n".encode()))
    assert load_texts({"source": "corpus", "path": str(whole)}) == (["第一句。", "第二句。"], None)


def test_text_the_vocabulary_cannot_read_gets_one_warning(tmp_path, unwarned):
    """An English file under the Chinese character vocabulary: letters and [UNK], said once."""
    english = ["the hotel room was clean and quiet", "terrible service and a dirty bathroom"] * 5
    english = [text + " and so on" * i for i, text in enumerate(english)]  # ten texts: load_splits keeps each once
    path = _csv(tmp_path / "en.tsv", [f"{t}\t{i % 2}" for i, t in enumerate(english)], header="text\tlabel")
    splits = load_splits(_table(tmp_path, path=path, split=(0.6, 0.4, 0.0)))
    tokenizer = load_tokenizer()
    with pytest.warns(UserWarning, match=r"100% of train.*model_name_or_path") as caught:
        encoded = tokenize_splits(splits, tokenizer, 32)
    assert len([w for w in caught if "cannot read" in str(w.message)]) == 1
    with pytest.warns(UserWarning, match=r"cannot read: 100% of train samples"):
        warn_unreadable({"train": encoded["train"]["input_ids"]}, tokenizer)
    chinese = sample_relevance_splits(seed=0, n_train=50, n_validation=10, n_test=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tokenize_splits(chinese, tokenizer, 32)
    unk, han, cls = tokenizer.unk_token_id, tokenizer.convert_tokens_to_ids("中"), tokenizer.cls_token_id
    with pytest.warns(
        UserWarning, match=r"cannot read: 33% of a samples"
    ):  # mostly [UNK] once [CLS] is set aside: the first
        warn_unreadable({"a": [[cls, unk, unk, han], [han, han], [cls, unk, han, han]]}, tokenizer)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once per process
        warn_unreadable({"a": [[cls, unk, unk, han], [han, han], [cls, unk, han, han]]}, tokenizer)


def test_the_probe_of_notebooks_01_02_05_warns_once_about_text_it_cannot_read(tmp_path, unwarned):
    """Before: only the transformer path warned; the character probe fitted an English file in silence."""
    english = [
        f"the hotel room was {w} and {v}" for w in ("clean", "dirty", "quiet", "noisy") for v in ("new", "old", "ok")
    ]
    path = _csv(
        tmp_path / "en.tsv",
        [f"{t}\t{t[::-1]}\t{i % 2}" for i, t in enumerate(english * 2)],
        header="text\ttext_pair\tlabel",
    )
    splits = load_splits(_table(tmp_path, path=path, text_pair="text_pair", split=(0.5, 0.25, 0.25)))
    fitter = fitter_of({"kind": "probe"}, {"num_train_epochs": 1}, 32)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # as a notebook kernel shows them (sklearn resets its once-per-place memory)
        for seed in (0, 1):
            fitter.fit(splits, torch.nn.CrossEntropyLoss(), seed)
    messages = [str(w.message) for w in caught if "cannot read" in str(w.message)]
    assert len(messages) == 1 and "100% of train" in messages[0] and "model.vocab_file" in messages[0]
    chinese = sample_relevance_splits(seed=0, n_train=50, n_validation=10, n_test=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitter.fit(chinese, torch.nn.CrossEntropyLoss(), 0)
