"""The one configuration format shared by ``finetune``, ``pretrain_mlm`` and ``two_stage``.

A config is a nested mapping (a YAML file or a dict). ``load_config`` merges it
over :data:`DEFAULTS`, applies ``key.path=value`` overrides (values parsed as
YAML, so ``training.lr=1e-4`` is a float and ``training.quiet=true`` a bool),
rejects unknown keys and checks every value's range. The format is documented
in docs/training.md.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

TASKS = ("finetune", "pretrain_mlm", "two_stage")
DATA_SOURCES = (
    "sample_relevance",
    "sample_sentences",
    "sample_corpus",
    "qbqtc",
    "tnews",
    "chnsenticorp",
    "lcqmc",
    "table",
    "corpus",
)
MASKING_STRATEGIES = ("random", "wwm", "kdm")
OBJECTIVES = ("plain", "hc", "sr")
SR_LEVELS = ("token", "sentence")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

# Every key a config may hold, with its default. ``None`` means "not set".
DEFAULTS: dict[str, Any] = {
    "task": "finetune",
    "output_dir": "outputs/train",
    "data": {
        "source": "sample_relevance",
        "path": None,  # the file to read (train file, or the only file when it is split)
        "validation_path": None,  # optional separate validation file
        "test_path": None,  # optional separate test file
        "labels_path": None,  # tnews: labels.json
        "text": None,  # table: text column
        "text_pair": None,  # table: second text column (optional)
        "label": None,  # table: label column
        "split": [0.8, 0.1, 0.1],  # train/validation/test fractions when one file is split
        "seed": 0,
        "max_length": 128,
        "max_train_samples": None,  # keep the first N training examples (after shuffling by seed)
        "max_eval_samples": None,  # likewise for validation and test
        "n_sentences": 2000,  # sample_corpus size
    },
    "model": {
        "model_name_or_path": None,  # a checkpoint directory or hub name; None builds a tiny BERT
        "vocab_file": None,  # tokenizer vocab when no checkpoint is given (None: shipped vocab)
        "tiny": {"num_layers": 2, "hidden_size": 64, "num_heads": 2},
    },
    "loss": {"name": "ce", "params": {}},
    "masking": {"strategy": "wwm", "mlm_probability": 0.15, "max_ngram": 3},
    "objective": {"name": "plain", "weight": 1.0, "level": "token", "lexicon": None},
    "aux": {
        "num_aux": 2,
        "stage2_epochs": None,  # None: training.epochs
        "stage2_lr": None,  # None: training.lr
        "fgm_epsilon": 0.0,  # 0 disables FGM
        "fusion": False,
        "fusion_model": None,  # second encoder (checkpoint) for fusion; None: a tiny BERT
    },
    "training": {
        "epochs": 3,
        "batch_size": 16,
        "eval_batch_size": 64,
        "lr": 5e-5,
        "warmup_ratio": 0.1,
        "weight_decay": 0.01,
        "max_grad_norm": 1.0,
        "seed": 0,
        "grad_accumulation": 1,
        "precision": "auto",
        "logging_steps": 10,
        "quiet": False,
        "resume": False,
        "save_total_limit": 1,
        "keep_checkpoints": False,
    },
}



class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot (``1e-4``), which YAML 1.1 leaves as strings."""


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml(text: str) -> Any:
    """Parse YAML text (exponent floats such as ``5e-5`` become floats)."""
    return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass


# Sections whose value is a free mapping (passed through, not checked key by key).
FREE_SECTIONS = ("loss.params",)


def _check_keys(config: Mapping[str, Any], defaults: Mapping[str, Any], prefix: str = "") -> None:
    for key, value in config.items():
        path = f"{prefix}{key}"
        if key not in defaults:
            allowed = ", ".join(sorted(defaults))
            raise ValueError(f"unknown config key {path!r}; allowed keys{' in ' + prefix[:-1] if prefix else ''}: {allowed}")
        if path in FREE_SECTIONS:
            if not isinstance(value, Mapping):
                raise ValueError(f"{path}: must be a mapping of parameters, got {value!r}")
            continue
        if isinstance(defaults[key], dict):
            if not isinstance(value, Mapping):
                raise ValueError(f"{path}: must be a mapping with keys {', '.join(sorted(defaults[key]))}, got {value!r}")
            _check_keys(value, defaults[key], f"{path}.")


def _merge(base: dict[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in update.items():
        if isinstance(merged.get(key), dict) and isinstance(value, Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def parse_override(override: str) -> tuple[list[str], Any]:
    """Split ``"a.b.c=value"`` into (["a", "b", "c"], YAML-parsed value)."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"overrides: expected 'section.key=value', got {override!r}")
    try:
        value = read_yaml(raw)
    except yaml.YAMLError as error:
        raise ValueError(f"overrides: cannot parse the value of {override!r} as YAML: {error}") from error
    return key.strip().split("."), value


def _nest(path: list[str], value: Any) -> dict[str, Any]:
    for key in reversed(path):
        value = {key: value}
    return value


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(config: dict[str, Any]) -> None:
    _require(config["task"] in TASKS, f"task: must be one of {', '.join(TASKS)}, got {config['task']!r}")
    _require(isinstance(config["output_dir"], (str, Path)), f"output_dir: must be a path, got {config['output_dir']!r}")

    data = config["data"]
    _require(data["source"] in DATA_SOURCES, f"data.source: must be one of {', '.join(DATA_SOURCES)}, got {data['source']!r}")
    split = data["split"]
    _require(
        isinstance(split, (list, tuple)) and len(split) == 3 and all(_is_number(f) and 0 <= f <= 1 for f in split)
        and abs(sum(split) - 1.0) < 1e-6 and split[0] > 0,
        f"data.split: must be three fractions in [0, 1] (train > 0) summing to 1, got {split!r}",
    )
    _require(_is_int(data["max_length"]) and 8 <= data["max_length"] <= 512, f"data.max_length: must be an int in [8, 512], got {data['max_length']!r}")
    for key in ("max_train_samples", "max_eval_samples"):
        _require(data[key] is None or (_is_int(data[key]) and data[key] >= 1), f"data.{key}: must be null or an int >= 1, got {data[key]!r}")
    _require(_is_int(data["n_sentences"]) and data["n_sentences"] >= 1, f"data.n_sentences: must be an int >= 1, got {data['n_sentences']!r}")
    _require(_is_int(data["seed"]), f"data.seed: must be an int, got {data['seed']!r}")

    tiny = config["model"]["tiny"]
    _require(isinstance(tiny, Mapping), f"model.tiny: must be a mapping, got {tiny!r}")
    for key in ("num_layers", "hidden_size", "num_heads"):
        _require(_is_int(tiny.get(key)) and tiny[key] >= 1, f"model.tiny.{key}: must be an int >= 1, got {tiny.get(key)!r}")
    _require(tiny["hidden_size"] % tiny["num_heads"] == 0, f"model.tiny.hidden_size: must be a multiple of model.tiny.num_heads ({tiny['num_heads']}), got {tiny['hidden_size']}")

    _require(isinstance(config["loss"]["name"], str), f"loss.name: must be a loss name, got {config['loss']['name']!r}")

    masking = config["masking"]
    _require(masking["strategy"] in MASKING_STRATEGIES, f"masking.strategy: must be one of {', '.join(MASKING_STRATEGIES)}, got {masking['strategy']!r}")
    _require(_is_number(masking["mlm_probability"]) and 0 < masking["mlm_probability"] < 1, f"masking.mlm_probability: must be in (0, 1), got {masking['mlm_probability']!r}")
    _require(_is_int(masking["max_ngram"]) and masking["max_ngram"] >= 1, f"masking.max_ngram: must be an int >= 1, got {masking['max_ngram']!r}")

    objective = config["objective"]
    _require(objective["name"] in OBJECTIVES, f"objective.name: must be one of {', '.join(OBJECTIVES)}, got {objective['name']!r}")
    _require(_is_number(objective["weight"]) and objective["weight"] >= 0, f"objective.weight: must be a number >= 0, got {objective['weight']!r}")
    _require(objective["level"] in SR_LEVELS, f"objective.level: must be one of {', '.join(SR_LEVELS)}, got {objective['level']!r}")

    aux = config["aux"]
    _require(_is_int(aux["num_aux"]) and aux["num_aux"] >= 0, f"aux.num_aux: must be an int >= 0, got {aux['num_aux']!r}")
    _require(aux["stage2_epochs"] is None or (_is_number(aux["stage2_epochs"]) and aux["stage2_epochs"] > 0), f"aux.stage2_epochs: must be null or a number > 0, got {aux['stage2_epochs']!r}")
    _require(aux["stage2_lr"] is None or (_is_number(aux["stage2_lr"]) and aux["stage2_lr"] > 0), f"aux.stage2_lr: must be null or a number > 0, got {aux['stage2_lr']!r}")
    _require(_is_number(aux["fgm_epsilon"]) and aux["fgm_epsilon"] >= 0, f"aux.fgm_epsilon: must be a number >= 0, got {aux['fgm_epsilon']!r}")
    _require(isinstance(aux["fusion"], bool), f"aux.fusion: must be true or false, got {aux['fusion']!r}")

    training = config["training"]
    _require(_is_number(training["epochs"]) and training["epochs"] > 0, f"training.epochs: must be a number > 0, got {training['epochs']!r}")
    for key in ("batch_size", "eval_batch_size", "grad_accumulation", "logging_steps", "save_total_limit"):
        _require(_is_int(training[key]) and training[key] >= 1, f"training.{key}: must be an int >= 1, got {training[key]!r}")
    _require(_is_number(training["lr"]) and training["lr"] > 0, f"training.lr: must be a number > 0, got {training['lr']!r}")
    _require(_is_number(training["warmup_ratio"]) and 0 <= training["warmup_ratio"] < 1, f"training.warmup_ratio: must be in [0, 1), got {training['warmup_ratio']!r}")
    for key in ("weight_decay", "max_grad_norm"):
        _require(_is_number(training[key]) and training[key] >= 0, f"training.{key}: must be a number >= 0, got {training[key]!r}")
    _require(_is_int(training["seed"]), f"training.seed: must be an int, got {training['seed']!r}")
    _require(training["precision"] in PRECISIONS, f"training.precision: must be one of {', '.join(PRECISIONS)}, got {training['precision']!r}")
    for key in ("quiet", "resume", "keep_checkpoints"):
        _require(isinstance(training[key], bool), f"training.{key}: must be true or false, got {training[key]!r}")


def load_config(
    config: str | Path | Mapping[str, Any] | None = None, overrides: Iterable[str] = ()
) -> dict[str, Any]:
    """Read a config (YAML path or mapping), merge it over :data:`DEFAULTS`, apply overrides, validate.

    ``overrides`` are ``"section.key=value"`` strings; values are parsed as YAML.
    Returns a new nested dict holding every key. Raises ValueError naming the
    key for an unknown key, a malformed override or a value out of range.
    """
    if config is None:
        raw: Mapping[str, Any] = {}
    elif isinstance(config, Mapping):
        raw = config
    else:
        path = Path(config)
        if not path.is_file():
            raise ValueError(f"config: no such file {str(path)!r}")
        raw = read_yaml(path.read_text(encoding="utf-8")) or {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"config: {str(path)!r} must hold a mapping at top level")
    _check_keys(raw, DEFAULTS)
    merged = _merge(DEFAULTS, raw)
    for override in overrides:
        path_keys, value = parse_override(override)
        update = _nest(path_keys, value)
        _check_keys(update, DEFAULTS)
        merged = _merge(merged, update)
    _validate(merged)
    return merged
