"""The config format: defaults, merging, typed overrides, and every kind of bad input."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest
import yaml

from workbench.config import Config, LossSpec, TrainingConfig, load_config, parse_override


def test_defaults_are_complete_and_valid():
    config = load_config()
    assert config == Config()
    assert {field.name for field in dataclasses.fields(Config)} == {
        "task",
        "output_dir",
        "data",
        "model",
        "loss",
        "masking",
        "objective",
        "electra",
        "aux",
        "training",
    }
    assert load_config(config.to_dict()) == config  # the plain dict round-trips


def test_partial_mapping_is_merged_over_defaults():
    config = load_config({"training": {"lr": 1e-3}, "loss": {"name": "pcl", "params": {"variant": "reference"}}})
    assert config.training.lr == 1e-3
    assert config.training.batch_size == TrainingConfig().batch_size
    assert config.loss == LossSpec("pcl", {"variant": "reference"})


def test_yaml_file_and_typed_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "pretrain_mlm", "masking": {"strategy": "kdm"}}), encoding="utf-8")
    config = load_config(
        path,
        overrides=[
            "training.lr=1e-4",
            "training.quiet=true",
            "data.split=[0.6, 0.2, 0.2]",
            "loss.params.gamma=2",
            "model.model_name_or_path=out/pre",
        ],
    )
    assert config.task == "pretrain_mlm" and config.masking.strategy == "kdm"
    assert config.training.lr == 1e-4 and isinstance(config.training.lr, float)
    assert config.training.quiet is True
    assert config.data.split == (0.6, 0.2, 0.2)
    assert config.loss.params == {"gamma": 2}
    assert config.model.model_name_or_path == "out/pre"


def test_an_override_replaces_the_mapping_it_names():
    base = {"loss": {"name": "pcl", "params": {"variant": "expected_cost", "epsilon": 0.1}}}
    assert load_config(base, ["loss.name=wce", "loss.params={}"]).loss == LossSpec("wce", {})
    assert load_config(base, ["loss.params=null"]).loss.params == {}
    assert load_config(base, ["loss.params.epsilon=0.2"]).loss.params == {"variant": "expected_cost", "epsilon": 0.2}
    replaced = load_config({"training": {"lr": 1e-3, "epochs": 5}}, ["training={epochs: 2}"]).training
    assert (replaced.epochs, replaced.lr) == (2, TrainingConfig().lr)


def test_parse_override_types():
    assert parse_override("a.b=3") == (["a", "b"], 3)
    assert parse_override("a=null") == (["a"], None)
    assert parse_override("a=x=y") == (["a"], "x=y")


@pytest.mark.parametrize(
    "config, match",
    [
        ({"trainig": {}}, r"unknown config key 'trainig'.*allowed keys: aux, data"),
        (
            {"training": {"learning_rate": 1}},
            r"unknown config key 'training.learning_rate'.*allowed keys in training: batch_size",
        ),
        ({"model": {"tiny": {"layers": 1}}}, r"'model.tiny.layers'.*hidden_size, num_heads, num_layers"),
        ({"training": 3}, r"training: must be a mapping"),
        ({"loss": {"params": [1]}}, r"loss.params: must be a mapping"),
        ({"task": "train"}, r"task: must be one of finetune, pretrain_mlm, two_stage"),
        ({"data": {"source": "imdb"}}, r"data.source: must be one of"),
        ({"data": {"split": [0.5, 0.5, 0.5]}}, r"data.split"),
        ({"data": {"max_length": 4}}, r"data.max_length: must be an int in \[8, 512\]"),
        ({"training": {"lr": 0}}, r"training.lr: must be a number > 0"),
        ({"training": {"batch_size": 2.5}}, r"training.batch_size: must be an int >= 1"),
        ({"training": {"precision": "fp8"}}, r"training.precision: must be one of auto, fp32, bf16, fp16"),
        ({"training": {"quiet": "yes"}}, r"training.quiet: must be true or false"),
        ({"training": {"warmup_ratio": 1.0}}, r"training.warmup_ratio: must be in \[0, 1\)"),
        ({"training": {"lr": float("inf")}}, r"training.lr: must be a number > 0, got inf"),
        ({"training": {"epochs": float("nan")}}, r"training.epochs: must be a number > 0, got nan"),
        ({"data": {"seed": -1}}, r"data.seed: must be an int >= 0, got -1"),
        (
            {"model": {"kind": "probe", "model_name_or_path": "x"}},
            r"model.model_name_or_path: must be null with model.kind=probe",
        ),
        ({"masking": {"strategy": "span"}}, r"masking.strategy: must be one of random, wwm, kdm"),
        ({"masking": {"mlm_probability": 1.5}}, r"masking.mlm_probability: must be in \(0, 1\)"),
        ({"objective": {"name": "hard"}}, r"objective.name: must be one of plain, hc, sr"),
        ({"objective": {"level": "word"}}, r"objective.level: must be one of token, sentence"),
        ({"aux": {"num_aux": -1}}, r"aux.num_aux: must be an int >= 0"),
        ({"aux": {"fgm_epsilon": -0.1}}, r"aux.fgm_epsilon: must be a number >= 0"),
        (
            {"model": {"tiny": {"num_layers": 1, "hidden_size": 30, "num_heads": 4}}},
            r"model.tiny.hidden_size: must be a multiple",
        ),
        ({"data": {"num_proc": 0}}, r"data.num_proc: must be null or an int >= 1, got 0"),
        ({"data": {"eval_fraction": 0}}, r"data.eval_fraction: must be in \(0, 0.5\], got 0"),
        ({"data": {"eval_fraction": 0.6}}, r"data.eval_fraction: must be in \(0, 0.5\], got 0.6"),
        ({"data": {"cache_dir": ""}}, r"data.cache_dir: must be null or a non-empty string"),
        ({"data": {"block_boundary": "paragraph"}}, r"data.block_boundary: must be one of sentence, word"),
        ({"training": {"dataloader_workers": -1}}, r"training.dataloader_workers: must be null or an int >= 0, got -1"),
    ],
)
def test_bad_config_raises_naming_the_key(config, match):
    with pytest.raises(ValueError, match=match):
        load_config(config)


@pytest.mark.parametrize(
    "override, match",
    [
        ("training.lr", r"overrides: expected 'section.key=value'"),
        ("=3", r"overrides: expected"),
        ("training.lrate=1e-4", r"unknown config key 'training.lrate'"),
        ("training.lr=[1", r"overrides: cannot parse"),
        ("training.epochs=-1", r"training.epochs: must be a number > 0"),
        ("training.lr=.inf", r"training.lr: must be a number > 0, got inf"),
        ("training.lr.x=1", r"unknown config key 'training.lr.x'"),
    ],
)
def test_bad_override_raises(override, match):
    with pytest.raises(ValueError, match=match):
        load_config({}, overrides=[override])


def test_missing_file_and_non_mapping_file(tmp_path):
    with pytest.raises(ValueError, match="config: no such file"):
        load_config(tmp_path / "absent.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="must hold a mapping"):
        load_config(path)


def test_bad_yaml_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("task: finetune\ntraining:\n  lr: [1e-3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path}:\d+: invalid YAML"):
        load_config(path)
    with pytest.raises(ValueError, match=rf"^{path}:3: invalid YAML \(expected ',' or '\]', but got '<stream end>'\)$"):
        load_config(path)  # the parser stops after the last line; the error names the last line


def test_a_config_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "gbk.yaml"
    path.write_bytes("task: finetune\noutput_dir: 结果\n".encode("gbk"))
    with pytest.raises(
        ValueError, match=rf"^{path}:2: config is not UTF-8 text \(invalid start byte at byte 12 of the line\); save it as UTF-8$"
    ):
        load_config(path)


def test_task_is_filled_in_or_checked():
    assert load_config({}, task="two_stage").task == "two_stage"
    with pytest.raises(ValueError, match=r"task: finetune\(\) cannot run a config whose task is 'two_stage'"):
        load_config({"task": "two_stage"}, task="finetune")


def test_sections_take_mappings_and_refuse_unknown_keys():
    assert TrainingConfig.from_mapping({"epochs": 2}).replace(seed=3) == TrainingConfig(epochs=2, seed=3)
    with pytest.raises(ValueError, match="unknown config key 'training.epoch'"):
        TrainingConfig.from_mapping({"epoch": 2})
    assert Config().replace(training={"lr": 0.5}).training == TrainingConfig(lr=0.5)


@pytest.mark.parametrize(
    ("text", "override", "message"),
    [
        ("task: finetune\ntraining:\n  lr: [1e-3\n", [], r"{path}:\d+: invalid YAML"),
        ("task: finetune\n", ["training.lr=[1"], r"overrides: cannot parse the value of 'training.lr=\[1'"),
        ("task: finetune\n", ["training.lr=.inf"], r"training.lr: must be a number > 0, got inf"),
    ],
)
def test_the_train_command_exits_2_with_one_line_for_bad_input(tmp_path, capsys, text, override, message):
    from workbench.train.__main__ import main

    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        main([str(path), *override])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert re.search(message.format(path=re.escape(str(path))), error) and "Traceback" not in error


def _numeric_keys(section: type = Config, prefix: str = "") -> list[str]:
    """Every config key typed as a number (or numbers), walking the nested sections."""
    keys = []
    hints = typing.get_type_hints(section)
    for item in dataclasses.fields(section):
        kind = hints[item.name]
        if dataclasses.is_dataclass(kind):
            keys += _numeric_keys(kind, f"{prefix}{item.name}.")
        elif re.search(r"\b(int|float)\b", str(kind)):
            keys.append(prefix + item.name)
    return keys


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_every_numeric_key_refuses_non_finite_values_naming_the_key(value):
    keys = _numeric_keys()
    assert len(keys) >= 30 and {"training.lr", "data.split", "model.tiny.num_layers", "aux.fgm_epsilon"} <= set(keys)
    for key in keys:
        override = f"{key}=[{value}, 0.5, 0.5]" if key == "data.split" else f"{key}={value}"
        with pytest.raises(ValueError, match=rf"^{re.escape(key)}: must .*got .*(inf|nan)"):
            load_config({}, overrides=[override])


def test_defaults_follow_the_papers_readings():
    """Issue 10: every paper-specific default is the paper's reading; extensions are named options."""
    config = Config()
    # plain whole-word masking (max_ngram = 1), not MacBERT/ALBERT-style n-grams; BERT's 15%
    assert (config.masking.strategy, config.masking.max_ngram, config.masking.mlm_probability) == ("wwm", 1, 0.15)
    objective = config.objective
    # true negatives: SR on the embedding of the predicted token r_k (eq. 3), KL(H_p || H_s) at sentence
    # level (sec. 5), HC by the token rule of footnote 5; sentence-order prediction is optional
    assert (objective.prediction, objective.kl_direction, objective.hc_level) == ("argmax", "filled||original", "token")
    assert (objective.level, objective.weight, objective.sop) == ("token", 1.0, False)
    # ELECTRA (the true-negatives paper's backbone): generator 1/4 of the discriminator, lambda = 50
    assert (config.electra.generator_size, config.electra.discriminator_weight) == (0.25, 50.0)
    # auxiliary labels: n = Na - Nt = 4 - 2 (Table 1, ChnSentiCorp), no fusion second encoder unless named
    assert (config.aux.num_aux, config.aux.fusion_model, config.aux.fgm_epsilon) == (2, None, 0.0)
