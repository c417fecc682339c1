"""End-to-end runs of the three trainers on tiny subsets of the sample data (seconds each)."""

from __future__ import annotations

import errno
import json
import math
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import TrainerCallback

from workbench.models import build_sequence_classifier
from workbench.train import Result, finetune, pretrain_mlm, two_stage
from workbench.train.__main__ import main as cli_main
from workbench.vocab import load_tokenizer

pytestmark = pytest.mark.slow  # end-to-end training runs, seconds each

ROOT = Path(__file__).resolve().parents[1]
TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}


def tiny_config(output_dir, **sections) -> dict:
    config = {
        "output_dir": str(output_dir),
        "data": {"source": "sample_relevance", "max_train_samples": 64, "max_eval_samples": 32, "max_length": 32},
        "model": {"tiny": TINY},
        "training": {
            "num_train_epochs": 1,
            "per_device_train_batch_size": 16,
            "per_device_eval_batch_size": 32,
            "learning_rate": 1e-3,
            "quiet": True,
            "logging_steps": 2,
        },
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


def predictions(result: Result) -> pd.DataFrame:
    return pd.read_csv(result.output_dir / "predictions.csv")


def model_weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def test_finetune_writes_metrics_predictions_and_best_checkpoint(tmp_path):
    result = finetune(tiny_config(tmp_path / "run", loss={"name": "focal", "params": {"gamma": 2.0}}))
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    for key in (
        "macro_f1",
        "accuracy",
        "per_class",
        "confusion_matrix",
        "history",
        "train_runtime",
        "time",
        "parameters",
    ):
        assert key in metrics
    assert metrics["evaluated_split"] == "test" and metrics["num_examples"] == 32
    assert metrics["parameters"]["loss"] == {"name": "focal", "params": {"gamma": 2.0}}
    assert sum(map(sum, metrics["confusion_matrix"])) == 32
    assert any("eval_macro_f1" in entry for entry in metrics["history"])
    assert any("loss" in entry for entry in metrics["history"])
    table = predictions(result)
    assert list(table.columns[:2]) == ["gold", "pred"] and len(table) == 32
    probabilities = table[[c for c in table.columns if c.startswith("p_")]].to_numpy()
    assert probabilities.shape == (32, 3)
    assert probabilities.sum(axis=1) == pytest.approx(1.0)
    assert (probabilities.argmax(axis=1) == table["pred"].to_numpy()).all()
    assert result.best_checkpoint is not None and (tmp_path / "run").joinpath(result.best_checkpoint).exists()
    assert "macro_f1" in result._repr_html_()


def test_same_config_and_seed_give_the_same_run_and_ls_equals_pcl_reference(tmp_path):
    ls = finetune(tiny_config(tmp_path / "ls", loss={"name": "ls", "params": {"epsilon": 0.1}}))
    ls_again = finetune(tiny_config(tmp_path / "ls2", loss={"name": "ls", "params": {"epsilon": 0.1}}))
    pd.testing.assert_frame_equal(predictions(ls), predictions(ls_again))
    assert ls.metrics["macro_f1"] == ls_again.metrics["macro_f1"]
    # PCL "reference" adds a float with no gradient to LS: training is identical (the released code, docs/losses.md)
    reference = finetune(
        tiny_config(tmp_path / "ref", loss={"name": "pcl", "params": {"variant": "reference", "epsilon": 0.1}})
    )
    pd.testing.assert_frame_equal(predictions(ls), predictions(reference), rtol=1e-5)
    # expected_cost puts the correction on the probabilities: training changes
    expected = finetune(
        tiny_config(tmp_path / "ec", loss={"name": "pcl", "params": {"variant": "expected_cost", "epsilon": 0.5}})
    )
    assert not predictions(ls)["p_related"].equals(predictions(expected)["p_related"])


def test_finished_run_drops_its_checkpoints_unless_kept_and_is_never_overwritten(tmp_path):
    result = finetune(tiny_config(tmp_path / "run"))
    assert not list((tmp_path / "run").glob("checkpoint-*"))
    assert result.best_checkpoint == str(tmp_path / "run")
    reloaded = build_sequence_classifier(3, model_name_or_path=result.best_checkpoint)
    assert reloaded.config.num_labels == 3
    for resume in (False, True):
        with pytest.raises(ValueError, match=r"^output_dir:"):
            finetune(tiny_config(tmp_path / "run", training={"resume": resume}))
    kept = finetune(tiny_config(tmp_path / "kept", training={"keep_checkpoints": True}))
    assert [path.name for path in (tmp_path / "kept").glob("checkpoint-*")] == ["checkpoint-4"]
    assert kept.best_checkpoint.endswith("checkpoint-4")


class _StopAfterFirstCheckpoint(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise KeyboardInterrupt("simulated interruption after epoch 1's checkpoint")


def test_resume_after_interruption_equals_uninterrupted_run(tmp_path):
    two_epochs = {"num_train_epochs": 2, "save_total_limit": 2}
    uninterrupted = finetune(tiny_config(tmp_path / "full", training=two_epochs))
    with pytest.raises(KeyboardInterrupt):
        finetune(tiny_config(tmp_path / "cut", training=two_epochs), callbacks=[_StopAfterFirstCheckpoint()])
    with pytest.raises(ValueError, match=r"^output_dir:"):
        finetune(tiny_config(tmp_path / "cut", training=two_epochs))
    resumed = finetune(tiny_config(tmp_path / "cut", training={**two_epochs, "resume": True}))
    pd.testing.assert_frame_equal(predictions(uninterrupted), predictions(resumed))
    full, cut = model_weights(tmp_path / "full"), model_weights(tmp_path / "cut")
    assert full.keys() == cut.keys()
    for name in full:
        torch.testing.assert_close(full[name], cut[name], rtol=0, atol=0, msg=name)
    assert resumed.metrics["macro_f1"] == uninterrupted.metrics["macro_f1"]


def test_a_kill_during_a_save_leaves_no_half_checkpoint_and_resume_continues(tmp_path, monkeypatch):
    from workbench.train.trainer import LossTrainer

    two_epochs = {"num_train_epochs": 2, "save_total_limit": 2}
    uninterrupted = finetune(tiny_config(tmp_path / "full", training=two_epochs))
    original, saves = LossTrainer._save_rng_state, []

    def killed_on_the_second_save(self, output_dir):
        saves.append(output_dir)
        if len(saves) == 2:
            raise KeyboardInterrupt("simulated kill in the middle of the second checkpoint")
        original(self, output_dir)

    monkeypatch.setattr(LossTrainer, "_save_rng_state", killed_on_the_second_save)
    with pytest.raises(KeyboardInterrupt):
        finetune(tiny_config(tmp_path / "cut", training=two_epochs))
    monkeypatch.setattr(LossTrainer, "_save_rng_state", original)
    assert [path.name for path in (tmp_path / "cut").glob("checkpoint-*")] == ["checkpoint-4"]  # epoch 1 only
    assert (tmp_path / "cut" / ".staging" / "checkpoint-8").is_dir()  # the half-written one never got its name
    resumed = finetune(tiny_config(tmp_path / "cut", training={**two_epochs, "resume": True}))
    pd.testing.assert_frame_equal(predictions(uninterrupted), predictions(resumed))
    assert not (tmp_path / "cut" / ".staging").exists()


def test_a_full_disk_during_a_save_is_one_line_and_leaves_no_staging(tmp_path, monkeypatch, capsys):
    from workbench.train.trainer import LossTrainer

    def disk_full(self, output_dir):
        raise OSError(errno.ENOSPC, "No space left on device", output_dir)

    monkeypatch.setattr(LossTrainer, "_save_rng_state", disk_full)  # the first checkpoint finds the disk full
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "finetune", **tiny_config(tmp_path / "run")}), encoding="utf-8")
    assert cli_main([str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: output_dir:") and "No space left on device" in error and error.count("\n") == 1
    assert sorted(item.name for item in (tmp_path / "run").iterdir()) == [
        "classes.json",
        "run_config.yaml",
    ]  # no .staging


@pytest.mark.parametrize("broken", ["rng_state.pth", "model.safetensors"])  # the weights: a SafetensorError traceback
def test_resuming_from_a_checkpoint_holding_a_file_that_is_not_a_checkpoints_names_it(tmp_path, broken):
    two_epochs = {"num_train_epochs": 2, "save_total_limit": 2}
    with pytest.raises(KeyboardInterrupt):
        finetune(tiny_config(tmp_path / "cut", training=two_epochs), callbacks=[_StopAfterFirstCheckpoint()])
    (tmp_path / "cut" / "checkpoint-4" / broken).write_bytes(b"not a pickle at all")
    with pytest.raises(ValueError, match=r"^training.resume: .*checkpoint-4"):
        finetune(tiny_config(tmp_path / "cut", training={**two_epochs, "resume": True}))


@pytest.mark.parametrize("labels", [["a", "c", "x"], ["a", "b", "c", "d"]])  # another class; one more (a size mismatch)
def test_resuming_on_a_data_file_whose_classes_changed_in_place_names_training_resume(tmp_path, labels):
    # the config is the same (same path), the file was edited: ids shifted silently, or a size-mismatch traceback
    table = tmp_path / "d.tsv"
    table.write_text("text\tlabel\n" + "".join(f"句子{i}\t{'abc'[i % 3]}\n" for i in range(48)), encoding="utf-8")
    data = {"source": "table", "path": str(table), "text": "text", "label": "label", "max_train_samples": None}
    two_epochs = {"num_train_epochs": 2, "save_total_limit": 2}
    with pytest.raises(KeyboardInterrupt):
        finetune(tiny_config(tmp_path / "cut", data=data, training=two_epochs), callbacks=[_StopAfterFirstCheckpoint()])
    table.write_text(
        "text\tlabel\n" + "".join(f"句子{i}\t{labels[i % len(labels)]}\n" for i in range(48)), encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"^training.resume: .*\bcut\b"):
        finetune(tiny_config(tmp_path / "cut", data=data, training={**two_epochs, "resume": True}))


def test_report_to_tensorboard_writes_event_files_into_the_run_folder(tmp_path):
    pytest.importorskip("tensorboard")  # the project's tensorboard extra; make installs it
    finetune(tiny_config(tmp_path / "run", training={"report_to": "tensorboard", "num_train_epochs": 2}))
    events = list((tmp_path / "run" / "runs").glob("events.out.tfevents.*"))
    assert events and all(event.stat().st_size > 0 for event in events)
    assert not (tmp_path / "run" / ".staging").exists()


def test_a_diverging_run_stops_naming_the_step_and_writes_no_result(tmp_path):
    with pytest.raises(FloatingPointError, match=r"\bstep 2\b"):
        finetune(
            tiny_config(tmp_path / "run", training={"learning_rate": 1e30, "max_grad_norm": 0.0, "warmup_steps": 0.0})
        )
    assert not (tmp_path / "run" / "metrics.json").exists()


class _PoisonWeightsAt(TrainerCallback):
    """Sets one weight tensor to NaN at the end of optimizer step ``step`` (None: the last step)."""

    def __init__(self, step: int | None) -> None:
        self.step = step

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step == (state.max_steps if self.step is None else self.step):
            with torch.no_grad():
                next(model.parameters()).fill_(float("nan"))


@pytest.mark.parametrize(
    ("poisoned_at", "message"),
    [
        (5, r"\bstep 6\b.*\bloss is nan"),  # the next step's loss
        (8, r"\bstep 8\b.*\beval_loss is nan"),  # no later step: the evaluation
    ],
)
def test_a_run_diverging_after_a_checkpoint_keeps_the_last_good_one(tmp_path, poisoned_at, message):
    # 4 steps per epoch: checkpoint-4 holds finite weights; the weights go NaN in epoch 2. At step 8, the
    # last one, no later loss shows it: the epoch's evaluation does, before its checkpoint is written.
    with pytest.raises(FloatingPointError, match=message):
        finetune(
            tiny_config(tmp_path / "run", training={"num_train_epochs": 2}), callbacks=[_PoisonWeightsAt(poisoned_at)]
        )
    run = tmp_path / "run"
    assert sorted(path.name for path in run.iterdir()) == ["checkpoint-4", "classes.json", "run_config.yaml"]
    kept = load_file(str(run / "checkpoint-4" / "model.safetensors"))
    assert all(torch.isfinite(tensor).all() for tensor in kept.values())


def test_cli_exits_1_when_the_only_update_makes_the_weights_non_finite(tmp_path, capsys):
    # one step (64 examples, batch 64) at lr 1e30: the loss of that step is finite, the weights after it are not
    config = tiny_config(
        tmp_path / "run",
        training={"per_device_train_batch_size": 64, "learning_rate": 1e30, "max_grad_norm": 0.0, "warmup_steps": 0.0},
    )
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "finetune", **config}), encoding="utf-8")
    assert cli_main([str(path)]) == 1
    assert "error: training diverged at step 1 (epoch 1.00): the held-out eval_loss is nan" in capsys.readouterr().err
    assert not (tmp_path / "run" / "metrics.json").exists() and not (tmp_path / "run" / "predictions.csv").exists()


def test_pretrain_with_kdm_and_hc_logs_corrections_and_finetune_loads_it(tmp_path):
    pretrained = pretrain_mlm(
        tiny_config(
            tmp_path / "pre",
            data={"source": "sample_corpus", "n_sentences": 64, "cache_dir": str(tmp_path / "cache")},
            masking={"strategy": "kdm"},
            objective={"name": "hc"},
        )
    )
    train_blocks = pretrained.metrics["blocks"]["train"]
    steps = -(-train_blocks // 16)  # the packed blocks in batches of 16
    logged = [entry for entry in pretrained.history if "loss" in entry]
    assert len(logged) == steps // 2  # logging every 2 steps
    for entry in logged:
        assert 0.0 <= entry["hc_prediction_rate"] <= 1.0 and entry["hc_sequences"] <= 32  # two batches of 16 blocks
    assert sum(entry["hc_sequences"] for entry in logged) == min(train_blocks, 32 * len(logged))
    assert pretrained.metrics["correction"]["sequences"] == train_blocks
    recorded = json.loads((tmp_path / "pre" / "metrics.json").read_text())
    assert recorded["objective"] == "hc"
    assert recorded["epochs"][0]["train_hc_sequences"] == train_blocks  # Table 2 per epoch
    assert recorded["perplexity"] == pytest.approx(math.exp(recorded["eval_loss"]))
    # issue 9: the corpus, timing and held-out keys, and the HC rates on train and eval blocks per epoch
    assert {
        "corpus_characters",
        "tokens_per_epoch",
        "preprocess_seconds",
        "cache_hit",
        "train_runtime",
        "eval_loss",
        "perplexity",
        "share_before_first_step",
    } <= set(recorded)
    assert (
        recorded["cache_hit"] is False and 0 < recorded["tokens_per_epoch"] <= recorded["corpus_characters"]
    )  # no [CLS]/[SEP]
    assert all(
        {"eval_loss", "perplexity", "eval_hc_prediction_rate", "train_hc_prediction_rate"} <= set(epoch)
        for epoch in recorded["epochs"]
    )
    # the saved checkpoint loads through from_pretrained with its tokenizer
    encoder = build_sequence_classifier(3, model_name_or_path=tmp_path / "pre").bert
    saved = model_weights(tmp_path / "pre")
    torch.testing.assert_close(
        encoder.embeddings.word_embeddings.weight.detach(), saved["bert.embeddings.word_embeddings.weight"]
    )
    assert len(load_tokenizer(tmp_path / "pre")) == encoder.embeddings.word_embeddings.num_embeddings
    tuned = finetune(tiny_config(tmp_path / "ft", model={"model_name_or_path": str(tmp_path / "pre")}))
    assert 0.0 <= tuned.metrics["macro_f1"] <= 1.0


def test_pretraining_stops_when_the_held_out_loss_is_not_finite(tmp_path):
    config = tiny_config(
        tmp_path / "pre",
        data={"source": "sample_corpus", "n_sentences": 200},
        training={"num_train_epochs": 1, "dataloader_num_workers": 0},
    )
    with pytest.raises(FloatingPointError, match=r"step \d+ .*eval_loss"):
        pretrain_mlm(config, callbacks=[_PoisonWeightsAt(None)])
    assert not list((tmp_path / "pre").glob("checkpoint-*")) and not (tmp_path / "pre" / "metrics.json").exists()


@pytest.mark.parametrize("objective", [{"name": "plain"}, {"name": "sr", "weight": 0.5, "level": "token"}])
def test_pretrain_plain_and_sr_with_wwm(tmp_path, objective):
    result = pretrain_mlm(
        tiny_config(
            tmp_path / "pre",
            data={"source": "sample_corpus", "n_sentences": 32},
            masking={"strategy": "wwm", "max_ngram": 2},
            objective=objective,
        )
    )
    assert result.metrics["objective"] == objective["name"] and result.metrics["train_loss"] > 0
    assert "correction" not in result.metrics


@pytest.mark.parametrize("aux", [{"num_aux": 2}, {"num_aux": 1, "fusion": True, "fgm_epsilon": 0.5}])
def test_two_stage_freezes_the_encoder_in_stage_two(tmp_path, aux):
    result = two_stage(tiny_config(tmp_path / "two", aux=aux))
    stage_one, stage_two = model_weights(tmp_path / "two" / "stage1"), model_weights(tmp_path / "two" / "stage2")
    head = "classifier."
    encoder_keys = [name for name in stage_one if not name.startswith(head)]
    assert encoder_keys and set(encoder_keys) == {name for name in stage_two if not name.startswith(head)}
    for name in encoder_keys:
        assert torch.equal(stage_one[name], stage_two[name]), name
    assert stage_one["classifier.weight"].shape[0] == 3 + aux["num_aux"]
    assert stage_two["classifier.weight"].shape[0] == 3
    assert set(result.metrics) >= {"stage1", "stage2", "macro_f1"}
    assert result.metrics["macro_f1"] == result.metrics["stage2"]["macro_f1"]
    assert {entry["stage"] for entry in result.history} == {1, 2}


def test_task_mismatch_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"^task:"):
        finetune({**tiny_config(tmp_path / "x"), "task": "two_stage"})


def test_cli_runs_a_yaml_config_with_overrides(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "finetune", **tiny_config(tmp_path / "cli")}), encoding="utf-8")
    assert cli_main([str(path), "loss.name=dice", "data.source=sample_sentences"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["output_dir"] == str(tmp_path / "cli") and 0.0 <= printed["macro_f1"] <= 1.0
    assert json.loads((tmp_path / "cli" / "metrics.json").read_text())["parameters"]["loss"]["name"] == "dice"
    assert cli_main([str(path), "training.lrate=1"]) == 2
    assert "error: training.lrate:" in capsys.readouterr().err


def test_cli_refuses_a_finished_output_dir_in_one_line(tmp_path, capfd):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "finetune", **tiny_config(tmp_path / "done")}), encoding="utf-8")
    assert cli_main([str(path)]) == 0
    capfd.readouterr()
    assert cli_main([str(path), "training.quiet=false"]) == 2  # not even a data-loading bar before the refusal
    captured = capfd.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: output_dir: ") and "finished run" in lines[0]
    assert "Traceback" not in captured.err


def test_a_verbose_run_shows_a_bar_and_one_line_per_evaluation_not_one_per_logging_step(tmp_path, capfd):
    # before: a "{'loss': ...}" line every logging step, mixed into the bar (117 lines for 3 epochs)
    finetune(tiny_config(tmp_path / "verbose", training={"num_train_epochs": 2, "quiet": False, "logging_steps": 1}))
    captured = capfd.readouterr()
    text = captured.out + captured.err
    assert "{'loss'" not in text and "'loss':" not in text
    assert "{'" not in text  # no dict of logs printed at all (train_runtime, eval_*)
    assert len(re.findall(r"^epoch \d validation: ", text, flags=re.MULTILINE)) == 2  # one line per epoch
    assert "%|" in text  # the tqdm bar is there
    assert "Writing model shards" not in text and "Loading weights" not in text  # no per-file bars
    untitled_bars = re.findall(
        r"(?:^|[\r\n])\s*\d+%\|[^|\r\n]*\| *\d+/(\d+) \[", text
    )  # the Trainer's bars (datasets' are titled)
    assert len(set(untitled_bars)) == 1  # the training bar only: evaluations draw none
    assert "mtime may not be reliable" not in text  # two checkpoints within a second: no filesystem warning


def test_a_time_budget_stops_pretraining_and_evaluates_where_it_stopped(tmp_path):
    result = pretrain_mlm(
        tiny_config(
            tmp_path / "pre",
            data={"source": "sample_corpus", "n_sentences": 400},
            training={"num_train_epochs": 200, "time_budget_s": 1.0, "dataloader_num_workers": 0},
        )
    )
    last = result.metrics["epochs"][-1]
    assert last["epoch"] < 200 and last["step"] == result.history[-1]["step"]
    assert result.metrics["train_runtime"] < 30
    assert result.metrics["perplexity"] == pytest.approx(math.exp(result.metrics["eval_loss"]))


def test_the_readme_trainer_example_runs_as_written_and_learns_more_than_the_majority_class(tmp_path, capsys):
    # the README named a missing file, and with training.num_train_epochs=3 the run learnt only the majority class
    # (macro-F1 0.256)
    from workbench.train.__main__ import EXAMPLE

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"    .venv/bin/{EXAMPLE}\n" in readme  # the --help example is the README's command
    arguments = shlex.split(EXAMPLE)[3:]
    assert (ROOT / arguments[0]).is_file()
    assert (
        cli_main(
            [str(ROOT / arguments[0]), *arguments[1:], f"output_dir={tmp_path / 'example'}", "training.quiet=true"]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    majority = 2 * 0.62 / (1 + 0.62) / 3  # always the majority class (62% of the test pairs): its F1 over 3 classes
    assert result["macro_f1"] > majority + 0.2, result
    assert result["macro_f1"] > 0.5 and result["accuracy"] > 0.7, result


def test_the_pretraining_recipe_on_a_cpu_is_refused_before_its_corpus_is_read_and_writes_nothing(
    tmp_path, monkeypatch, capsys
):
    # on a fresh CPU machine the recipe prepared its corpus for 4 minutes, then failed on bf16, leaving run_config.yaml
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("WORKBENCH_DATA", str(tmp_path / "empty-data-root"))  # a corpus read would fail otherwise
    recipe = Path(__file__).resolve().parents[1] / "params" / "pretrain" / "workbench-zh-mini.yaml"
    assert cli_main([str(recipe), f"output_dir={tmp_path / 'run'}"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: training.precision: bf16 needs a CUDA device") and error.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_a_finetune_config_whose_loss_refuses_a_value_is_refused_before_any_data_is_read(tmp_path, capsys):
    config = Path(__file__).resolve().parents[1] / "params" / "examples" / "finetune_qbqtc_sample_pcl.yaml"
    missing = tmp_path / "missing.json"  # reading the data would fail naming it: the loss is refused first
    overrides = [
        f"output_dir={tmp_path / 'run'}",
        "loss.params.epsilon=1.5",
        "data.source=qbqtc",
        f"data.path={missing}",
    ]
    assert cli_main([str(config), *overrides]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: epsilon: must be a number in [0, 1), got 1.5"), error
    assert not (tmp_path / "run").exists()
