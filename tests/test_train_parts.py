"""Pieces of the trainers: data inputs, loss construction, FGM, output folders, example configs."""

from __future__ import annotations

import os
import pickle
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from torch import nn

from workbench.config import Config, DataConfig, LossSpec, ProbeConfig, TrainingConfig, load_config
from workbench.data import label_counts, load_splits, load_texts, sample_corpus, sample_relevance_splits
from workbench.data.features import build_dataset
from workbench.losses import build_loss, pcl_constants
from workbench.metrics_file import write_json
from workbench.synonyms import token_text
from workbench.train import loss_from_spec, tokenize_splits
from workbench.train.__main__ import main as cli_main
from workbench.train.pretraining import prepare_pretraining, pretraining_trainer_kwargs
from workbench.train.probes import EncodedSplit, fit_probe
from workbench.train.run_folder import (
    check_classes,
    checkpoint_to_resume,
    claim_output_dir,
    drop_weights,
    remove_checkpoints,
)
from workbench.train.trainer import LossTrainer, training_arguments
from workbench.train.two_stage_training import FGM
from workbench.vocab import load_tokenizer

EXAMPLES = Path(__file__).resolve().parents[1] / "params" / "examples"


def _data(**values) -> DataConfig:
    return DataConfig(**values)


def _write_table(path: Path, rows: int, prefix: str = "句子") -> Path:
    lines = ["sentence,tag"] + [f"{prefix}{i},{'好' if i % 3 == 0 else '坏'}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_table_file_is_split_stratified_and_limited(tmp_path):
    path = _write_table(tmp_path / "t.csv", 60)
    splits = load_splits(_data(source="table", path=str(path), text="sentence", label="tag", split=(0.5, 0.5, 0.0)))
    assert set(splits) == {"train", "validation"}
    assert len(splits["train"]) == len(splits["validation"]) == 30
    assert label_counts(splits["train"]) == label_counts(splits["validation"])
    limited = load_splits(
        _data(source="table", path=str(path), text="sentence", label="tag", max_train_samples=7, max_eval_samples=3)
    )
    assert [len(limited[name]) for name in ("train", "validation", "test")] == [7, 3, 3]


def test_separate_validation_file(tmp_path):
    train, validation = _write_table(tmp_path / "a.csv", 12), _write_table(tmp_path / "b.csv", 6, "验证")
    splits = load_splits(
        _data(source="table", path=str(train), validation_path=str(validation), text="sentence", label="tag")
    )
    assert {name: len(split) for name, split in splits.items()} == {"train": 12, "validation": 6}


@pytest.mark.parametrize(
    "values, match",
    [
        # no path and no file in the data root: the files, the root and the fetch command are named
        ({"source": "qbqtc"}, r"^qbqtc: .*dev\.json.*data root.*workbench data fetch qbqtc"),
        ({"source": "qbqtc", "path": "/no/such/file.json"}, r"^data\.path: .*'/no/such/file\.json'"),
        ({"source": "sample_corpus"}, r"^data\.source: 'sample_corpus'"),
    ],
)
def test_bad_data_sections(values, match, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path))
    with pytest.raises(ValueError, match=match):
        load_splits(_data(**values))


def test_a_file_too_small_for_the_split_names_the_file_and_data_split(tmp_path):
    path = _write_table(tmp_path / "t.csv", 4)
    with pytest.raises(ValueError, match=rf"^data\.split: .*{re.escape(repr(str(path)))}.*'validation'"):
        load_splits(_data(source="table", path=str(path), text="sentence", label="tag"))
    assert set(
        load_splits(_data(source="table", path=str(path), text="sentence", label="tag", split=(0.5, 0.5, 0.0)))
    ) == {
        "train",
        "validation",
    }


def test_table_needs_column_names(tmp_path):
    path = _write_table(tmp_path / "t.csv", 10)
    with pytest.raises(ValueError, match="data.text / data.label"):
        load_splits(_data(source="table", path=str(path)))


def test_texts_for_pretraining(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("第一句。\n\n第二句。\n第三句。\n", encoding="utf-8")
    assert load_texts(_data(source="corpus", path=str(corpus), max_train_samples=2)) == (["第一句。", "第二句。"], None)
    texts, pairs = load_texts(_data(source="sample_relevance", max_train_samples=5))
    train = sample_relevance_splits(seed=0)["train"]
    order = np.random.default_rng(0).permutation(len(train))[:5]  # the training split shuffled by data.seed
    assert texts == [train["text"][i] for i in order] and pairs == [train["text_pair"][i] for i in order]
    distinct = list(dict.fromkeys(sample_corpus(n_sentences=9, seed=0)))  # each text once
    assert load_texts(_data(source="sample_corpus", n_sentences=9))[0] == distinct and len(distinct) == 8


def test_tokenize_splits_keeps_model_inputs_and_labels():
    splits = load_splits(_data(max_train_samples=4, max_eval_samples=2))
    encoded = tokenize_splits(splits, load_tokenizer(), max_length=16)
    assert set(encoded["train"].column_names) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    assert encoded["train"]["labels"] == splits["train"]["label"]
    assert max(len(ids) for ids in encoded["train"]["input_ids"]) <= 16


def test_loss_label_counts_come_from_the_training_split():
    train = load_splits(_data(max_train_samples=200))["train"]
    counts = label_counts(train, 3)
    pcl = loss_from_spec(LossSpec("pcl", {"variant": "weighted"}), train)
    assert (pcl.pcl_plus, pcl.pcl_minus) == pytest.approx(pcl_constants(counts, "code"))
    given = loss_from_spec({"name": "pcl", "params": {"variant": "weighted", "label_counts": [1, 8, 1]}}, train)
    assert given.pcl_plus == pytest.approx(pcl_constants([1, 8, 1], "code")[0])
    batch = loss_from_spec(LossSpec("pcl", {"counts": "batch"}), train)
    assert batch.is_batch_level
    assert loss_from_spec(LossSpec("wce"), train).weight is not None


def test_a_training_split_without_a_class_is_named_for_count_based_losses():
    train = build_dataset({"text": ["a", "b", "c"], "label": [0, 0, 2]}, ("low", "mid", "high"))
    with pytest.raises(ValueError, match=r"^train split: .*\['mid'\]"):
        loss_from_spec(LossSpec("wce"), train)
    assert loss_from_spec(LossSpec("wce", {"label_counts": [2, 1, 1]}), train).weight is not None
    assert loss_from_spec(LossSpec("pcl", {"counts": "batch"}), train).is_batch_level
    with pytest.raises(ValueError, match=r"^train_split: .*'pcl'"):
        loss_from_spec(LossSpec("pcl"))


def _embedding_model() -> nn.Module:
    torch.manual_seed(0)
    model = nn.Module()
    model.word_embeddings = nn.Embedding(6, 4)
    model.other = nn.Linear(4, 1)
    return model


def test_fgm_moves_embeddings_by_epsilon_along_the_normalised_gradient_and_restores():
    model = _embedding_model()
    model.other(model.word_embeddings(torch.tensor([1, 3, 3]))).sum().backward()
    before = model.word_embeddings.weight.detach().clone()
    gradient = model.word_embeddings.weight.grad.clone()
    fgm = FGM(model, epsilon=0.5)
    fgm.attack()
    step = model.word_embeddings.weight.detach() - before
    torch.testing.assert_close(step, 0.5 * gradient / gradient.norm())
    assert torch.linalg.vector_norm(step).item() == pytest.approx(0.5)
    assert torch.equal(step[[0, 2, 4, 5]], torch.zeros(4, 4))  # rows of unused tokens stay
    fgm.restore()
    assert torch.equal(model.word_embeddings.weight.detach(), before)


def test_fgm_bad_inputs():
    with pytest.raises(ValueError, match=r"^epsilon:"):
        FGM(_embedding_model(), epsilon=0.0)
    with pytest.raises(ValueError, match=r"^model:"):
        FGM(nn.Linear(2, 2), epsilon=1.0)


def _checkpoint(folder: Path, step: int, state: str = "{}", weights: bool = True) -> Path:
    path = folder / f"checkpoint-{step}"
    path.mkdir()
    (path / "trainer_state.json").write_text(state)
    if weights:
        (path / "model.safetensors").write_bytes(b"weights")
    for name in ("optimizer.pt", "scheduler.pt"):  # without them a resume is refused (issue 30)
        (path / name).write_bytes(b"state")
    return path


def test_checkpoint_to_resume(tmp_path):
    assert checkpoint_to_resume(tmp_path / "absent", resume=False) is None
    assert checkpoint_to_resume(tmp_path, resume=True) is None
    _checkpoint(tmp_path, 4)
    _checkpoint(tmp_path, 12)
    _checkpoint(tmp_path, 9)
    assert checkpoint_to_resume(tmp_path, resume=True).endswith("checkpoint-12")
    with pytest.raises(ValueError, match=r"^output_dir:"):
        checkpoint_to_resume(tmp_path, resume=False)


def test_resume_skips_an_incomplete_checkpoint_with_a_warning_naming_it(tmp_path):
    _checkpoint(tmp_path, 4)
    _checkpoint(tmp_path, 8, state='{"global_st')  # killed while writing the trainer state
    _checkpoint(tmp_path, 12, weights=False)  # killed before the weights
    (tmp_path / ".staging" / "checkpoint-16").mkdir(parents=True)  # an interrupted atomic save
    with pytest.warns(UserWarning, match=r"^output_dir: .*checkpoint-12"):
        assert checkpoint_to_resume(tmp_path, resume=True).endswith("checkpoint-4")
    assert not (tmp_path / ".staging").exists()
    for path in (tmp_path / "checkpoint-4", tmp_path / "checkpoint-8"):
        shutil.rmtree(path)
    with pytest.raises(ValueError, match=r"^output_dir:"), pytest.warns(UserWarning):
        checkpoint_to_resume(tmp_path, resume=True)


def test_removing_checkpoints_leaves_other_runs_nested_inside_alone(tmp_path):
    (tmp_path / "checkpoint-3").mkdir()
    nested = tmp_path / "old_run" / "checkpoint-250"
    nested.mkdir(parents=True)
    (nested / "optimizer.pt").write_text("state of an interrupted run")
    remove_checkpoints(tmp_path)
    assert not (tmp_path / "checkpoint-3").exists()
    assert (nested / "optimizer.pt").read_text() == "state of an interrupted run"


def test_drop_weights_keeps_results_and_checkpoints_and_the_refusal(tmp_path):
    runs = tmp_path / "runs"
    for run in ("pretrain/a", "finetune/a-seed0"):
        folder = runs / run
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"w" * 1000)
        for name in ("config.json", "metrics.json", "tokenizer.json"):
            (folder / name).write_text("{}")
    (runs / "finetune" / "a-seed0" / "predictions.csv").write_text("gold,pred\n")
    sharded = runs / "big"
    sharded.mkdir()
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "pytorch_model.bin"):
        (sharded / name).write_bytes(b"w" * 10)
    interrupted = runs / "resumable" / "checkpoint-4"
    interrupted.mkdir(parents=True)
    (interrupted / "model.safetensors").write_bytes(b"w" * 7)
    assert drop_weights(runs) == 2 * 1000 + 3 * 10
    assert sorted(path.relative_to(runs).as_posix() for path in runs.rglob("*.safetensors")) == [
        "resumable/checkpoint-4/model.safetensors"
    ]
    assert (runs / "finetune" / "a-seed0" / "predictions.csv").is_file()
    assert (runs / "pretrain" / "a" / "metrics.json").is_file() and (
        runs / "pretrain" / "a" / "tokenizer.json"
    ).is_file()
    with pytest.raises(ValueError, match=r"^output_dir:"):
        checkpoint_to_resume(runs / "pretrain" / "a", resume=False)
    assert drop_weights(runs) == 0 and drop_weights(tmp_path / "missing") == 0


@pytest.mark.parametrize(
    "name, task",
    [
        ("finetune_qbqtc_sample_pcl.yaml", "finetune"),
        ("pretrain_kdm_hc.yaml", "pretrain_mlm"),
        ("two_stage_aux.yaml", "two_stage"),
    ],
)
def test_example_configs_load(name, task):
    assert load_config(EXAMPLES / name).task == task


def test_pretraining_packs_labelled_pairs_and_reports_text_characters_and_tokens(tmp_path):
    # issue 9: a labelled source used as MLM text is packed like a corpus (text and pair joined, no
    # text dropped); corpus_characters counts non-space characters, tokens_per_epoch non-special tokens
    config = load_config(
        {
            "task": "pretrain_mlm",
            "data": {
                "source": "sample_relevance",
                "max_train_samples": 40,
                "max_length": 128,
                "num_proc": 1,
                "eval_fraction": 0.2,
                "cache_dir": str(tmp_path / "cache"),
            },
        }
    )
    data = prepare_pretraining(config)
    texts, pairs = load_texts(config.data)
    text = "".join("".join(f"{first} {second}".split()) for first, second in zip(texts, pairs))
    tokenizer = data.tokenizer
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id}
    blocks = data.corpus.dataset
    assert len(blocks) < len(texts)  # several pairs share a block
    assert (
        "".join(
            token_text(tokenizer.convert_ids_to_tokens([i for i in ids if i not in special]))
            for ids in blocks["input_ids"]
        )
        == text.lower()
    )
    metrics = data.metrics()
    assert metrics["corpus_characters"] == len(text)
    assert metrics["tokens_per_epoch"] == sum(i not in special for ids in data.train_blocks["input_ids"] for i in ids)
    assert metrics["blocks"] == {"train": len(blocks) - len(data.eval_blocks), "eval": len(data.eval_blocks)}
    assert metrics["cache_hit"] is False and prepare_pretraining(config).metrics()["cache_hit"] is True


def test_an_empty_corpus_file_is_named(tmp_path):
    empty, blank = tmp_path / "empty.txt", tmp_path / "blank.txt"
    empty.write_text("", encoding="utf-8")
    blank.write_text(" \n\n\t\n", encoding="utf-8")
    for paths in (str(empty), [str(empty), str(blank)]):
        with pytest.raises(ValueError, match=r"^data\.path: .*empty\.txt"):
            load_texts(_data(source="corpus", path=paths))
    blank.write_text("\n第一句。\n", encoding="utf-8")
    assert load_texts(_data(source="corpus", path=[str(empty), str(blank)])) == (["第一句。"], None)


@pytest.mark.parametrize("workers, expected", [(None, min(4, os.cpu_count() or 1)), (0, 0), (3, 3)])
def test_pretraining_draws_masks_in_persistent_dataloader_workers(tmp_path, workers, expected):
    config = load_config(
        {
            "task": "pretrain_mlm",
            "output_dir": str(tmp_path / "run"),
            "training": {"dataloader_num_workers": workers},
            "data": {
                "source": "sample_corpus",
                "n_sentences": 20,
                "max_length": 32,
                "num_proc": 1,
                "cache_dir": str(tmp_path / "cache"),
            },
        }
    )
    data = prepare_pretraining(config)
    kwargs = pretraining_trainer_kwargs(config, data, [])
    assert kwargs["args"].dataloader_num_workers == expected
    assert kwargs["args"].dataloader_persistent_workers == (expected > 0)  # one generator per worker for the whole run
    assert kwargs["data_collator"] is data.collator and kwargs["train_dataset"] is data.train_blocks


def test_kdm_counts_its_idf_streaming_over_the_training_blocks(tmp_path, monkeypatch):
    # issue 21 item 5: the IDF table reads the training blocks' words one block at a time (a datasets Column),
    # never a Python list of every word of the corpus
    from workbench.masking import collators

    seen, counted = [], collators.compute_idf
    monkeypatch.setattr(collators, "compute_idf", lambda texts: seen.append(type(texts)) or counted(texts))
    data = {
        "source": "sample_corpus",
        "n_sentences": 40,
        "max_length": 32,
        "num_proc": 1,
        "cache_dir": str(tmp_path / "c"),
    }
    prepared = prepare_pretraining(load_config({"task": "pretrain_mlm", "masking": {"strategy": "kdm"}, "data": data}))
    assert seen == [datasets.Column]
    assert prepared.collator.idf == counted([list(words) for words in prepared.train_blocks["words"]])


# ----------------------------------------------------------------------------- run folders (issue 19, round 2)


def _run_config(folder: Path, **sections) -> Config:
    return load_config({"output_dir": str(folder), "training": {"quiet": True}, **sections})


def test_a_folder_holding_files_of_no_run_is_refused_and_left_alone(tmp_path, capsys):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "predictions.csv").write_text("gold,pred\n1,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^output_dir: .*'predictions.csv'"):
        claim_output_dir(_run_config(folder))
    config = tmp_path / "run.yaml"
    config.write_text(f"task: finetune\noutput_dir: {folder}\n", encoding="utf-8")
    assert cli_main([str(config)]) == 2  # before any data is loaded
    assert capsys.readouterr().err.startswith("error: output_dir:")
    assert [path.name for path in folder.iterdir()] == ["predictions.csv"]
    assert (folder / "predictions.csv").read_text(encoding="utf-8") == "gold,pred\n1,1\n"


def test_an_output_dir_inside_another_run_is_refused(tmp_path):
    with claim_output_dir(_run_config(tmp_path / "outer")):
        pass
    (tmp_path / "outer" / "checkpoint-4").mkdir()  # the outer run removes its checkpoints when it finishes
    (tmp_path / "link").symlink_to(tmp_path / "outer" / "checkpoint-4")  # a link into it is inside it too
    for inner in (tmp_path / "outer" / "checkpoint-4" / "inner", tmp_path / "outer" / "inner", tmp_path / "link"):
        with pytest.raises(ValueError, match=rf"^output_dir: .*{re.escape(str(tmp_path / 'outer'))}"):
            claim_output_dir(_run_config(inner))
        assert not (tmp_path / "outer" / "checkpoint-4" / "inner").exists()
    with claim_output_dir(_run_config(tmp_path / "outer" / ".." / "beside")):  # ".." leads out of it
        pass


def test_a_second_run_into_a_live_runs_folder_is_refused_and_a_dead_runs_lock_is_gone(tmp_path):
    folder = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_A_RUN_FOLDER, str(folder)], stdout=subprocess.PIPE, text=True, env={**os.environ}
    )
    try:
        assert holder.stdout.readline().strip() == "claimed"
        with pytest.raises(ValueError, match=r"^output_dir: .*in use"):
            claim_output_dir(_run_config(folder, training={"quiet": True, "resume": True}))
    finally:
        holder.kill()  # a run that dies without cleaning up: the system releases its lock
        holder.wait()
    with claim_output_dir(_run_config(folder, training={"quiet": True, "resume": True})):
        assert (folder / "run_config.yaml").is_file()


HOLD_A_RUN_FOLDER = """
import sys, time
from workbench.config import load_config
from workbench.train.run_folder import claim_output_dir
claim_output_dir(load_config({"output_dir": sys.argv[1], "training": {"quiet": True}}))
print("claimed", flush=True)
time.sleep(600)
"""


def test_resume_with_a_changed_config_names_the_keys_that_changed(tmp_path):
    folder = tmp_path / "run"
    first = _run_config(folder, loss={"name": "ce"}, training={"learning_rate": 5e-5, "quiet": True})
    with claim_output_dir(first):
        pass
    assert load_config(folder / "run_config.yaml") == first  # the resolved config, saved with the run
    resumed = {"resume": True, "num_train_epochs": 13, "quiet": False}  # how long it trains may change
    with claim_output_dir(_run_config(folder, loss={"name": "ce"}, training={"learning_rate": 5e-5, **resumed})):
        pass
    changed = _run_config(folder, loss={"name": "focal"}, training={"learning_rate": 1e-3, **resumed})
    with pytest.raises(ValueError, match=r"^training\.resume: .*loss\.name, training\.learning_rate"):
        claim_output_dir(changed)
    bigger = _run_config(folder, model={"tiny": {"hidden_size": 128}}, training={"learning_rate": 5e-5, **resumed})
    with pytest.raises(
        ValueError, match=r"^training.resume: .*model.tiny.hidden_size"
    ):  # not a size-mismatch traceback
        claim_output_dir(bigger)
    other_classes = _run_config(
        folder, data={"source": "sample_sentences"}, training={"learning_rate": 5e-5, **resumed}
    )
    with pytest.raises(ValueError, match=r"^training.resume: .*data.source"):
        claim_output_dir(other_classes)


def test_resume_on_data_of_other_classes_names_both(tmp_path):
    check_classes(tmp_path, ["a", "b", "c"], resume=False)
    check_classes(tmp_path, ["a", "b", "c"], resume=True)
    with pytest.raises(ValueError, match=r"^training.resume: .*\['a', 'b', 'c'\].*\['a', 'c', 'x'\]"):
        check_classes(tmp_path, ["a", "c", "x"], resume=True)  # same count: the ids would shift silently
    check_classes(tmp_path, ["a", "c", "x"], resume=False)  # a new run (its checkpoints refused elsewhere)


def test_an_output_dir_that_is_a_file_or_cannot_be_written_is_refused(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^output_dir: .*'[^']*file'"):
        claim_output_dir(_run_config(tmp_path / "file"))

    def read_only(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "mkdir", read_only)  # as a read-only folder does for any user but root
    with pytest.raises(ValueError, match=r"^output_dir: .*Permission denied"):
        claim_output_dir(_run_config(tmp_path / "read-only" / "run"))


def test_a_model_path_that_is_not_a_checkpoint_folder_is_refused_before_loading(tmp_path):
    pickled = tmp_path / "model.pkl"
    pickled.write_bytes(pickle.dumps({"weights": [1, 2, 3]}))
    for key in ("model.model_name_or_path", "aux.fusion_model"):
        for path in (pickled, tmp_path):  # a pickle file; a folder without config.json
            with pytest.raises(ValueError, match=rf"^{key}: .*{re.escape(str(path))}"):
                load_config({}, [f"{key}={path}"])


def test_a_loss_that_does_not_average_is_refused_by_every_trainer(tmp_path):
    with pytest.raises(ValueError, match=r"^loss.params.reduction:"):
        load_config({"loss": {"name": "ce", "params": {"reduction": "none"}}})
    loss = build_loss("ce", reduction="sum")
    with pytest.raises(ValueError, match=r"^loss.params.reduction:"):
        LossTrainer(
            model=torch.nn.Linear(2, 2),
            args=training_arguments(TrainingConfig(), str(tmp_path), evaluate=False),
            loss=loss,
        )
    encoded = {
        name: EncodedSplit((torch.tensor([[1, 2], [3, 0]]),), torch.tensor([0, 1]))
        for name in ("train", "validation", "test")
    }
    with pytest.raises(ValueError, match=r"^loss.params.reduction:"):
        fit_probe(encoded, build_loss("ce", reduction="none"), TrainingConfig(), ProbeConfig(), 10, 2)


def test_metrics_json_is_written_readable_like_the_rest_of_the_run_folder(tmp_path):
    umask = os.umask(0o022)
    try:
        path = write_json(tmp_path / "metrics.json", {"macro_f1": 0.5})
        other = tmp_path / "predictions.csv"
        other.write_text("gold\n", encoding="utf-8")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(other.stat().st_mode) == 0o644
    assert [item.name for item in tmp_path.iterdir() if item.name.startswith(".")] == []  # no temporary file left
