"""The config format: defaults, merging, typed overrides, and every kind of bad input."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest
import torch
import yaml

from workbench.config import (
    SET_BY_THE_WORKBENCH,
    Bounds,
    Config,
    LossSpec,
    TrainingConfig,
    check_field,
    load_config,
    parse_override,
)
from workbench.yaml_files import read_yaml, read_yaml_file


def test_defaults_are_complete_and_valid():
    config = load_config()
    assert config == Config()
    assert {field.name for field in dataclasses.fields(Config)} == {
        "task",
        "output_dir",
        "loss_modules",
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
    config = load_config(
        {"training": {"learning_rate": 1e-3}, "loss": {"name": "pcl", "params": {"variant": "reference"}}}
    )
    assert config.training.learning_rate == 1e-3
    assert config.training.per_device_train_batch_size == TrainingConfig().per_device_train_batch_size == 16
    assert config.loss == LossSpec("pcl", {"variant": "reference"})


def test_yaml_file_and_typed_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "pretrain_mlm", "masking": {"strategy": "kdm"}}), encoding="utf-8")
    config = load_config(
        path,
        overrides=[
            "training.learning_rate=1e-4",
            "training.quiet=true",
            "data.split=[0.6, 0.2, 0.2]",
            "loss.params.gamma=2",
            "model.model_name_or_path=out/pre",
        ],
    )
    assert config.task == "pretrain_mlm" and config.masking.strategy == "kdm"
    assert config.training.learning_rate == 1e-4 and isinstance(config.training.learning_rate, float)
    assert config.training.quiet is True
    assert config.data.split == (0.6, 0.2, 0.2)
    assert config.loss.params == {"gamma": 2}
    assert config.model.model_name_or_path == "out/pre"


def test_an_override_replaces_the_mapping_it_names():
    base = {"loss": {"name": "pcl", "params": {"variant": "expected_cost", "epsilon": 0.1}}}
    assert load_config(base, ["loss.name=wce", "loss.params={}"]).loss == LossSpec("wce", {})
    assert load_config(base, ["loss.params=null"]).loss.params == {}
    assert load_config(base, ["loss.params.epsilon=0.2"]).loss.params == {"variant": "expected_cost", "epsilon": 0.2}
    replaced = load_config(
        {"training": {"learning_rate": 1e-3, "num_train_epochs": 5}}, ["training={num_train_epochs: 2}"]
    ).training
    assert (replaced.num_train_epochs, replaced.learning_rate) == (2, TrainingConfig().learning_rate)


def test_parse_override_types():
    assert parse_override("a.b=3") == (["a", "b"], 3)
    assert parse_override("a=null") == (["a"], None)
    assert parse_override("a=x=y") == (["a"], "x=y")


@pytest.mark.parametrize(
    "config, key",
    [
        ({"trainig": {}}, "trainig"),
        ({"training": {"lr": 1}}, "training.lr"),  # the former name: "renamed to training.learning_rate"
        ({"training": {"learning_rat": 1}}, "training.learning_rat"),
        ({"training": {"bf16": True}}, "training.bf16"),  # set by training.precision
        ({"training": {"output_dir": "x"}}, "training.output_dir"),
        ({"training": {"lr_scheduler_type": "sawtooth"}}, "training.lr_scheduler_type"),  # TrainingArguments' own check
        ({"training": {"optim": "nope"}}, "training.optim"),
        ({"training": {"report_to": "nope"}}, "training.report_to"),
        ({"training": {"learning_rate": "fast"}}, "training.learning_rate"),
        ({"training": {"logging_steps": 0}}, "training.logging_steps"),
        ({"model": {"tiny": {"layers": 1}}}, "model.tiny.layers"),
        ({"training": 3}, "training"),
        ({"loss": {"params": [1]}}, "loss.params"),
        ({"task": "train"}, "task"),
        ({"data": {"source": "imdb"}}, "data.source"),
        ({"data": {"split": [0.5, 0.5, 0.5]}}, "data.split"),
        ({"data": {"max_length": 4}}, "data.max_length"),
        ({"training": {"learning_rate": 0}}, "training.learning_rate"),
        ({"training": {"per_device_train_batch_size": 2.5}}, "training.per_device_train_batch_size"),
        ({"training": {"per_device_train_batch_size": 10**30}}, "training.per_device_train_batch_size"),
        ({"training": {"num_train_epochs": 1e308}}, "training.num_train_epochs"),
        ({"training": {"precision": "fp8"}}, "training.precision"),
        ({"training": {"quiet": "yes"}}, "training.quiet"),
        ({"training": {"warmup_steps": -0.1}}, "training.warmup_steps"),
        ({"training": {"learning_rate": float("inf")}}, "training.learning_rate"),
        ({"training": {"num_train_epochs": float("nan")}}, "training.num_train_epochs"),
        ({"training": {"learning_rate": None}}, "training.learning_rate"),  # null only where the default is null
        ({"data": {"seed": -1}}, "data.seed"),
        ({"model": {"kind": "probe", "model_name_or_path": "x"}}, "model.model_name_or_path"),
        ({"masking": {"strategy": "span"}}, "masking.strategy"),
        ({"masking": {"mlm_probability": 1.5}}, "masking.mlm_probability"),
        ({"objective": {"name": "hard"}}, "objective.name"),
        ({"objective": {"level": "word"}}, "objective.level"),
        ({"aux": {"num_aux": -1}}, "aux.num_aux"),
        ({"aux": {"fgm_epsilon": -0.1}}, "aux.fgm_epsilon"),
        ({"aux": {"stage2_epochs": 1e308}}, "aux.stage2_epochs"),
        ({"model": {"tiny": {"num_layers": 1, "hidden_size": 30, "num_heads": 4}}}, "model.tiny.hidden_size"),
        ({"data": {"num_proc": 0}}, "data.num_proc"),
        ({"data": {"eval_fraction": 0}}, "data.eval_fraction"),
        ({"data": {"eval_fraction": 0.6}}, "data.eval_fraction"),
        ({"data": {"cache_dir": ""}}, "data.cache_dir"),
        ({"data": {"block_boundary": "paragraph"}}, "data.block_boundary"),
        ({"training": {"dataloader_num_workers": -1}}, "training.dataloader_num_workers"),
        ({"training": {"adam_epsilon": 0}}, "training.adam_epsilon"),  # 0 / 0 = NaN for a weight without gradient
        ({"training": {"adam_beta1": 2}}, "training.adam_beta1"),  # torch's own check: late, unnamed
        ({"training": {"label_smoothing_factor": 0.1}}, "training.label_smoothing_factor"),  # ignored by LossTrainer
        ({"training": {"save_steps": 5}}, "training.save_steps"),  # the workbench saves every epoch
        ({"training": {"eval_steps": 5}}, "training.eval_steps"),
        ({"objective": {"weight": 1e13}}, "objective.weight"),  # x the SR term overflows float32
        ({"electra": {"discriminator_weight": 1e39}}, "electra.discriminator_weight"),
        ({"aux": {"fgm_epsilon": 1e13}}, "aux.fgm_epsilon"),
        ({"output_dir": "out\ud800"}, "output_dir"),  # a lone surrogate (a YAML "\ud800" escape): no path
        ({"data": {"source": "corpus", "path": ["a.txt", "b\udc80.txt"]}}, "data.path"),
    ],
)
def test_bad_config_raises_naming_the_key(config, key):
    with pytest.raises(ValueError, match=rf"^(unknown config key ')?{re.escape(key)}[:']"):
        load_config(config)


def test_training_passes_any_training_arguments_field_through():
    training = load_config(
        {"training": {"lr_scheduler_type": "cosine", "adam_beta2": 0.98, "report_to": "none"}}
    ).training
    assert (training.lr_scheduler_type, training.adam_beta2, training.warmup_steps) == ("cosine", 0.98, 0.1)
    assert "max_steps" not in training.to_dict() and not hasattr(
        training, "max_steps"
    )  # not given: TrainingArguments' own


@pytest.mark.parametrize(
    "override, match",
    [
        ("training.learning_rate", r"^overrides:"),
        ("=3", r"^overrides:"),
        ("training.lrate=1e-4", r"^training.lrate:"),
        ("training.learning_rate=[1", r"^overrides:"),
        ("training.num_train_epochs=-1", r"^training.num_train_epochs:"),
        ("training.learning_rate=.inf", r"^training.learning_rate:"),
        ("training.learning_rate.x=1", r"^training.learning_rate:"),
        ("model.kind.x=1", r"^unknown config key 'model.kind.x'"),
    ],
)
def test_bad_override_raises(override, match):
    with pytest.raises(ValueError, match=match):
        load_config({}, overrides=[override])


def test_missing_file_and_non_mapping_file(tmp_path):
    with pytest.raises(ValueError, match=r"^config: .*absent\.yaml"):
        load_config(tmp_path / "absent.yaml")
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"list\.yaml"):
        load_config(path)


def test_bad_yaml_names_the_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("task: finetune\ntraining:\n  learning_rate: [1e-3\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{path}:\d+: invalid YAML"):
        load_config(path)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:3: "):
        load_config(path)  # the parser stops after the last line; the error names the last line


def test_a_config_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / "gbk.yaml"
    path.write_bytes("task: finetune\noutput_dir: 结果\n".encode("gbk"))
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:2: .*UTF-8"):
        load_config(path)


def test_task_is_filled_in_or_checked():
    assert load_config({}, task="two_stage").task == "two_stage"
    with pytest.raises(ValueError, match=r"^task: .*'two_stage'"):
        load_config({"task": "two_stage"}, task="finetune")


def test_sections_take_mappings_and_refuse_unknown_keys():
    training = TrainingConfig.from_mapping({"num_train_epochs": 2}).replace(seed=3)
    assert training == TrainingConfig.from_mapping({"seed": 3, "num_train_epochs": 2})
    assert training.to_dict()["seed"] == 3 and load_config({"training": training.to_dict()}).training == training
    with pytest.raises(ValueError, match=r"^training.epoch:"):
        TrainingConfig.from_mapping({"epoch": 2})
    assert Config().replace(training={"learning_rate": 0.5}).training == TrainingConfig.from_mapping(
        {"learning_rate": 0.5}
    )


@pytest.mark.parametrize(
    ("text", "override", "message"),
    [
        ("task: finetune\ntraining:\n  learning_rate: [1e-3\n", [], r"{path}:\d+: invalid YAML"),
        ("task: finetune\n", ["training.learning_rate=[1"], r"overrides: .*'training\.learning_rate=\[1'"),
        ("task: finetune\n", ["training.learning_rate=.inf"], r"training\.learning_rate: .*\binf\b"),
    ],
)
def test_the_train_command_exits_2_with_one_line_for_bad_input(tmp_path, capsys, text, override, message):
    from workbench.train.__main__ import main

    path = tmp_path / "broken.yaml"
    path.write_text(text, encoding="utf-8")
    assert main([str(path), *override]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1 and error.startswith("error: "), error
    assert re.search(message.format(path=re.escape(str(path))), error) and "Traceback" not in error


def _numeric_keys(section: type = Config, prefix: str = "") -> list[str]:
    """Every config key typed as a number (or numbers), walking the nested sections; in training, every
    numeric TrainingArguments field too."""
    keys = []
    if section is TrainingConfig:
        from transformers import TrainingArguments

        arguments = [
            item
            for item in dataclasses.fields(TrainingArguments)
            if item.init and item.name not in SET_BY_THE_WORKBENCH
        ]
        keys += [
            prefix + item.name
            for item in arguments
            if re.fullmatch(r"<class '(int|float)'>|(int|float) \| None", str(item.type))
        ]
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
    assert len(keys) >= 30 and {
        "training.learning_rate",
        "data.split",
        "model.tiny.num_layers",
        "aux.fgm_epsilon",
    } <= set(keys)
    for key in keys:
        override = f"{key}=[{value}, 0.5, 0.5]" if key == "data.split" else f"{key}={value}"
        with pytest.raises(ValueError, match=rf"^{re.escape(key)}: must .*got .*(inf|nan)"):
            load_config({}, overrides=[override])


@pytest.mark.parametrize(
    ("bounds", "inside", "outside", "allowed"),
    [
        (Bounds(gt=0, le=1), [1e-12, 1], [0, 1.5], "a number in (0, 1]"),
        (Bounds(ge=0, lt=1), [0, 0.999], [-1e-12, 1], "a number in [0, 1)"),
        (Bounds(gt=0), [1e-300, 1e300], [0, -1], "a number > 0"),
        (Bounds(), [-1e300, 1e300], [float("inf"), float("nan")], "a finite number"),
    ],
)
def test_a_fields_bounds_decide_each_end_open_or_closed_naming_the_key(bounds, inside, outside, allowed):
    for value in inside:
        assert check_field("section.key", value, float, bounds) == value
    for value in outside:
        with pytest.raises(ValueError, match=rf"^section\.key: must be {re.escape(allowed)}, got "):
            check_field("section.key", value, float, bounds)


def test_an_int_fields_open_end_is_the_next_int_and_bounds_take_one_of_each_kind_of_end():
    assert check_field("section.key", 1, int, Bounds(gt=0, lt=3)) == 1
    assert check_field("section.key", 2, int, Bounds(gt=0, lt=3)) == 2
    for value in (0, 3):
        with pytest.raises(ValueError, match=r"^section\.key: must be an int in \[1, 2\], got "):
            check_field("section.key", value, int, Bounds(gt=0, lt=3))
    with pytest.raises(ValueError, match=r"^section\.size: must be an int in \[0, 2147483647\], got 2147483648"):
        check_field("section.size", 2**31, int, Bounds(ge=0))  # an int's upper end: INT_MAX
    with pytest.raises(TypeError, match="gt or ge"):
        Bounds(gt=0, ge=1)
    with pytest.raises(TypeError, match="lt or le"):
        Bounds(lt=0, le=1)


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


# ----------------------------------------------------------------------------- YAML as written (issue 19, item 4)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("False", False),
        ("yes", "yes"),  # YAML 1.1 reads yes / no / on / off / y / n as booleans; here they are strings
        ("off", "off"),
        ("n", "n"),
        ("1:30", "1:30"),  # YAML 1.1: sexagesimal 90
        ("0777", "0777"),  # YAML 1.1: octal 511
        ("0x1F", "0x1F"),
        ("2024-01-01", "2024-01-01"),  # YAML 1.1: a date
        ("1e-4", 1e-4),  # YAML 1.1: a string
        ("5.0e-3", 5e-3),
        (".5", 0.5),
        ("-3", -3),
        ("0", 0),
        ("~", None),
        ("null", None),
        ("", None),
        ("[1, 2.5, x]", [1, 2.5, "x"]),
    ],
)
def test_yaml_values_are_read_as_written(text, value):
    assert read_yaml(text, "test") == value and type(read_yaml(text, "test")) is type(value)


def test_a_yaml_merge_reads_as_written_and_its_keys_may_be_given_again():
    # a merge once failed with "could not determine a constructor for the tag ...merge"
    assert read_yaml("base: &b {seed: 1, quiet: true}\ntraining:\n  <<: *b\n  seed: 2\n", "t")["training"] == {
        "seed": 2,
        "quiet": True,
    }


def test_yaml_infinities_are_floats_that_every_numeric_key_refuses():
    assert read_yaml(".inf", "t") == float("inf") and read_yaml(".nan", "t") != read_yaml(".nan", "t")
    with pytest.raises(ValueError, match=r"^training.quiet:"):
        load_config({}, ["training.quiet=yes"])  # a string now, refused by the bool key


def test_a_huge_integer_in_any_numeric_key_is_refused_naming_the_key():
    keys = _numeric_keys()
    for key in keys:  # an int past a float once raised OverflowError in the check
        override = f"{key}=[{'9' * 400}, 0.5, 0.5]" if key == "data.split" else f"{key}={'9' * 400}"
        with pytest.raises(ValueError, match=rf"^{re.escape(key)}: must "):
            load_config({}, overrides=[override])


@pytest.mark.parametrize("text", ["1e400", "-1e400", "1.5e-400", "[0.1, 1e999]"])
def test_a_number_beyond_a_float_is_an_error_naming_the_file_and_line(tmp_path, text):
    # YAML would read 1e400 as inf and 1e-400 as 0: a guess
    path = tmp_path / "big.yaml"
    path.write_text(f"task: finetune\nloss:\n  params:\n    gamma: {text}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:4: "):
        load_config(path)
    with pytest.raises(ValueError, match=r"'training.learning_rate=1e400'"):
        load_config({}, ["training.learning_rate=1e400"])
    assert read_yaml("[0.0, -0e5, 0.000, 1e-320, 1e308, .inf]", "t") == [0.0, 0.0, 0.0, 1e-320, 1e308, float("inf")]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["training.learning_rate=1e-3", "training.learning_rate=5e-5"], "training.learning_rate"),
        (["loss.params.gamma=2", "loss.params={}"], "loss.params"),  # the earlier gamma would be lost
        (["training.seed=1", "training={seed: 2}"], "training"),
    ],
)
def test_an_override_given_twice_is_refused_naming_the_key(overrides, named):
    with pytest.raises(ValueError, match=rf"^overrides: {re.escape(named)}="):
        load_config({}, overrides)
    assert load_config({}, ["loss.params={}", "loss.params.gamma=2", "loss.name=focal"]).loss.params == {"gamma": 2}


@pytest.mark.parametrize(
    "text, line",
    [
        ("task: finetune\ntraining:\n  learning_rate: 1.0e-3\ntraining:\n  seed: 3\n", 4),  # a second training block
        ("training:\n  seed: 1\n  quiet: true\n  seed: 2\n", 4),
        ("training: {seed: 1, seed: 2}\n", 1),
        ("a: &a {seed: 1}\nb: &b {seed: 2}\ntraining:\n  <<: *a\n  <<: *b\n", 5),  # two merges (the first won)
    ],
)
def test_a_repeated_key_names_the_file_and_line(tmp_path, text, line):
    path = tmp_path / "twice.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:{line}: invalid YAML \(duplicate key"):
        load_config(path)
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:{line}:"):
        read_yaml_file(path, "params")  # params files are read by the same function


@pytest.fixture
def validations(monkeypatch):
    """How often the training section is validated, and how many ``TrainingArguments`` are built, during a test."""
    import transformers

    import workbench.config.training as training_module

    counts = {"validations": 0, "TrainingArguments": 0}
    check, build = training_module.check_training_arguments, transformers.TrainingArguments.__init__

    def counting_check(arguments):
        counts["validations"] += 1
        return check(arguments)

    def counting_build(self, *args, **kwargs):
        counts["TrainingArguments"] += 1
        return build(self, *args, **kwargs)

    monkeypatch.setattr(training_module, "check_training_arguments", counting_check)
    monkeypatch.setattr(transformers.TrainingArguments, "__init__", counting_build)
    return counts


def test_the_training_section_is_validated_once_per_notebook_however_many_fits(validations, monkeypatch):
    # issue 39: before, 1 + settings x seeds x 2 validations (Fitter's replace(seed=...) and the run's load_config),
    # each building TrainingArguments once per key (31 validations, 310 TrainingArguments for 3 settings x 5 seeds)
    import workbench.train.fit as fit_module
    from workbench.train import build_fitter

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        raise Stop  # the fit's config is built and its run frame entered: what follows trains

    monkeypatch.setattr(fit_module, "classification_data", stop)
    monkeypatch.setattr(fit_module, "label_names", lambda split: ["a", "b"])
    training = {"num_train_epochs": 1, "learning_rate": 1e-3, "per_device_train_batch_size": 8, "warmup_steps": 0}
    config = load_config(
        {"model": {"tiny": {"num_layers": 1, "hidden_size": 16, "num_heads": 2}}, "training": training}
    )
    assert validations == {"validations": 1, "TrainingArguments": 1}  # built once per validation
    fitter = build_fitter(config.model, config.training, 32)
    for seed in range(15):  # 3 settings x 5 seeds
        with pytest.raises(Stop):
            fitter.fit({"train": None, "validation": None, "test": None}, torch.nn.CrossEntropyLoss(), seed)
    assert validations == {"validations": 1, "TrainingArguments": 1}
    reseeded = config.training.replace(seed=7, quiet=True)  # what each fit does: the seed checked alone
    assert reseeded == TrainingConfig.from_mapping({**config.training.to_dict(), "seed": 7, "quiet": True})
    with pytest.raises(ValueError, match=r"^training.seed:"):
        config.training.replace(seed=-1)
    assert config.replace(training={"seed": 3}).training.seed == 3 and load_config(config) is config


def test_a_bad_training_key_is_named_though_trainingarguments_is_built_once(validations):
    # the key is looked for only once the whole set has failed: the first key whose addition fails is named
    with pytest.raises(ValueError, match=r"^training.warmup_ratio:"):
        TrainingConfig.from_mapping({"learning_rate": 1e-3, "warmup_ratio": 2.0, "weight_decay": 0.0})
