"""The one configuration system: section dataclasses, YAML reading and ``key.path=value`` overrides.

A :class:`Config` has one section per concern, each a frozen dataclass in the style of
``transformers.TrainingArguments`` (every field carries help text and is checked in
``__post_init__``, so a bad value raises ``ValueError`` naming its key, e.g.
``training.learning_rate: must be a number > 0, got 0``):

* :class:`DataConfig` (``data``), :class:`ModelConfig` (``model``, with ``model.tiny`` and
  ``model.probe``), :class:`LossSpec` (``loss``), :class:`MaskingSpec` (``masking``),
  :class:`ObjectiveConfig` (``objective``), :class:`ElectraSpec` (``electra``), :class:`AuxConfig`
  (``aux``) and :class:`TrainingConfig` (``training``).

The trainer CLI, the trainers, the notebook runner and the notebooks all use them: a
notebook's ``model`` / ``training`` parameters are these sections' mappings. YAML (config
files, params files, overrides and ``--sweep`` values) is read by :func:`read_yaml` only.
This module imports no torch, so command-line help and the runner start fast.
"""

from __future__ import annotations

import dataclasses
import os
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

from workbench.checks import check_bool, check_choice, check_int, check_number, check_text, is_number

TASKS = ("finetune", "pretrain_mlm", "two_stage", "pretrain_electra")
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
ORDINAL_SOURCES = ("qbqtc", "sample_relevance")
MODEL_KINDS = ("transformer", "probe")
MASKING_STRATEGIES = ("random", "wwm", "kdm")
OBJECTIVES = ("plain", "hc", "sr")
SR_LEVELS = ("token", "sentence")
SR_PREDICTIONS = ("argmax", "expected")
HC_LEVELS = ("token", "word")
KL_DIRECTIONS = ("filled||original", "original||filled")
BLOCK_BOUNDARIES = ("sentence", "word")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")

SectionT = TypeVar("SectionT", bound="Section")


def option(default: Any = None, help: str = "", factory: Any = None) -> Any:
    """A dataclass field with help text (``metadata["help"]``), as ``TrainingArguments`` has."""
    if factory is not None:
        return field(default_factory=factory, metadata={"help": help})
    return field(default=default, metadata={"help": help})


# ----------------------------------------------------------------------------- YAML


class _YamlLoader(yaml.SafeLoader):
    """SafeLoader that also reads exponent floats without a dot (``1e-4``), which YAML 1.1 leaves as strings."""


_YamlLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def read_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` (``5e-5`` is a float); ``source`` (a file name or an argument) names it in
    errors: ``ValueError("<source>:<line>: invalid YAML (<problem>)")``."""
    try:
        return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)  # at the end of the text: the last line
        where = f"{source}:{min(mark.line + 1, len(text.splitlines()) or 1)}" if mark is not None else source
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"{where}: invalid YAML ({problem})") from None


def read_yaml_file(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file holding a mapping (an empty file is ``{}``); ``what`` names the file's role in errors,
    which also name the file (and the line, for a syntax error or a byte that is not UTF-8)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what}: no such file {str(path)!r}")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = raw.count(b"\n", 0, error.start) + 1, error.start - raw.rfind(b"\n", 0, error.start) - 1
        raise ValueError(
            f"{path}:{line}: {what} is not UTF-8 text ({error.reason} at byte {column} of the line); save it as UTF-8"
        ) from None
    loaded = read_yaml(text, str(path))
    if loaded is None:
        return {}
    if not isinstance(loaded, Mapping):
        raise ValueError(f"{what}: {str(path)!r} must hold a mapping at top level, got {type(loaded).__name__}")
    return dict(loaded)


def parse_override(override: str) -> tuple[list[str], Any]:
    """Split ``"a.b.c=value"`` into (["a", "b", "c"], YAML-parsed value)."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"overrides: expected 'section.key=value', got {override!r}")
    try:
        value = read_yaml(raw, f"override {override!r}")
    except ValueError as error:
        raise ValueError(f"overrides: cannot parse the value of {override!r} as YAML: {error}") from None
    return key.strip().split("."), value


# ----------------------------------------------------------------------------- sections


def _path_text(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


@cache
def _section_fields(cls: type) -> dict[str, type | None]:
    """Field name -> the Section subclass of a nested section (None for plain fields)."""
    hints = typing.get_type_hints(cls)
    nested = {}
    for item in fields(cls):
        hint = hints[item.name]
        nested[item.name] = hint if isinstance(hint, type) and issubclass(hint, Section) else None
    return nested


@dataclass(frozen=True)
class Section:
    """Base of every config section: built from a mapping with unknown keys refused, checked on creation.

    ``prefix`` is the section's key path (``training``, ``model.tiny``), used in messages.
    ``free_mappings`` names fields whose value is a free-form mapping (``loss.params``).
    """

    prefix: ClassVar[str] = ""
    free_mappings: ClassVar[tuple[str, ...]] = ()

    def key(self, name: str) -> str:
        """The full key of field ``name`` (``training.learning_rate``)."""
        return f"{self.prefix}.{name}" if self.prefix else name

    @classmethod
    def from_mapping(cls: type[SectionT], values: Mapping[str, Any] | SectionT | None) -> SectionT:
        """The section from a mapping (missing keys take their defaults), an instance, or None (all defaults)."""
        if values is None:
            return cls()
        if isinstance(values, cls):
            return values
        allowed = sorted(item.name for item in fields(cls))
        if not isinstance(values, Mapping):
            raise ValueError(f"{cls.prefix}: must be a mapping with keys {', '.join(allowed)}, got {values!r}")
        unknown = [key for key in values if key not in allowed]
        if unknown:
            where = f" in {cls.prefix}" if cls.prefix else ""
            full = f"{cls.prefix}.{unknown[0]}" if cls.prefix else unknown[0]
            raise ValueError(f"unknown config key {full!r}; allowed keys{where}: {', '.join(allowed)}")
        nested = _section_fields(cls)
        kwargs = {key: nested[key].from_mapping(value) if nested[key] is not None else value for key, value in values.items()}
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), ready for YAML or JSON."""
        return {item.name: _plain(getattr(self, item.name)) for item in fields(self)}

    def replace(self: SectionT, **changes: Any) -> SectionT:
        """A copy with ``changes``; nested sections may be given as mappings (merged over the current ones)."""
        nested = _section_fields(type(self))
        merged = {
            key: getattr(self, key).merged(value) if nested.get(key) is not None and isinstance(value, Mapping) else value
            for key, value in changes.items()
        }
        return dataclasses.replace(self, **merged)

    def merged(self: SectionT, values: Mapping[str, Any] | None) -> SectionT:
        """This section with ``values`` merged in key by key (nested sections merged too)."""
        if not values:
            return self
        return type(self).from_mapping(_merge(self.to_dict(), values))


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        if isinstance(merged.get(key), Mapping) and isinstance(value, Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class DataConfig(Section):
    """Where the examples come from and how they are cut."""

    prefix: ClassVar[str] = "data"

    source: str = option(
        "sample_relevance",
        "sample_relevance, sample_sentences, sample_corpus (MLM only), qbqtc, tnews, "
        "chnsenticorp, lcqmc, table, corpus (MLM only: one text a line, .gz allowed)",
    )
    path: str | list[str] | None = option(
        None,
        "the file of a file source (train file, or the only file, which is then "
        "split); source corpus: one file or a list of files, read in order",
    )
    validation_path: str | None = option(None, "a separate validation file (without it, path is cut by stratified_split)")
    test_path: str | None = option(None, "a separate test file (with validation_path)")
    labels_path: str | None = option(None, "TNEWS labels.json")
    text: str | None = option(None, "table source: the text column")
    text_pair: str | None = option(None, "table source: the second text column (optional; pairs)")
    label: str | None = option(None, "table source: the label column")
    label_names: list[str] | None = option(
        None,
        "table source: the classes of every split, in order (a label is a name or its index); "
        "null: the training file's distinct values, sorted (numbers by value)",
    )
    ordinal: bool | None = option(
        None,
        "the labels are ordered (QBQTC's 0 < 1 < 2): far-error rates and PCL's near/far cases; "
        "null: true for qbqtc and sample_relevance, false otherwise",
    )
    split: tuple[float, float, float] = option(
        (0.8, 0.1, 0.1), "train/validation/test fractions when one file is split (a 0 test fraction: no test split)"
    )
    seed: int = option(0, "seed of the sample generators and of the split")
    max_length: int = option(128, "tokens per example (truncation), 8-512")
    max_train_samples: int | None = option(None, "keep the first N training examples")
    max_eval_samples: int | None = option(None, "keep the first N validation and test examples")
    n_sentences: int = option(2000, "size of sample_corpus")
    num_proc: int | None = option(None, "pretrain_*: processes that segment and encode the corpus; null: every core")
    cache_dir: str | None = option(None, "pretrain_*: cache of encoded corpora; null: $WORKBENCH_CACHE or ~/.cache/workbench")
    eval_fraction: float = option(0.01, "pretrain_*: share of the packed blocks held out for the eval loss, (0, 0.5]")
    block_boundary: str = option("sentence", "pretrain_*: blocks end at a sentence end (sentence) or at any word (word)")

    def __post_init__(self) -> None:
        check_choice(self.key("source"), self.source, DATA_SOURCES)
        if isinstance(self.path, (list, tuple)):
            if self.source != "corpus" or not self.path:
                raise ValueError(f"{self.key('path')}: must be one file (a list only for source corpus), got {self.path!r}")
            object.__setattr__(self, "path", [check_text(self.key("path"), _path_text(item)) for item in self.path])
        else:
            object.__setattr__(self, "path", check_text(self.key("path"), _path_text(self.path), allow_none=True))
        for name in ("validation_path", "test_path", "labels_path", "text", "text_pair", "label", "cache_dir"):
            object.__setattr__(self, name, check_text(self.key(name), _path_text(getattr(self, name)), allow_none=True))
        check_int(self.key("num_proc"), self.num_proc, 1, allow_none=True)
        check_number(self.key("eval_fraction"), self.eval_fraction, 0, 0.5, low_inclusive=False)
        check_choice(self.key("block_boundary"), self.block_boundary, BLOCK_BOUNDARIES)
        split = self.split
        if not (
            isinstance(split, (list, tuple))
            and len(split) == 3
            and all(is_number(f) and 0 <= f <= 1 for f in split)
            and abs(sum(split) - 1.0) < 1e-6
            and split[0] > 0
        ):
            raise ValueError(f"{self.key('split')}: must be three fractions in [0, 1] (train > 0) summing to 1, got {split!r}")
        object.__setattr__(self, "split", tuple(float(f) for f in split))
        check_int(self.key("seed"), self.seed, 0)
        check_int(self.key("max_length"), self.max_length, 8, 512)
        check_int(self.key("max_train_samples"), self.max_train_samples, 1, allow_none=True)
        check_int(self.key("max_eval_samples"), self.max_eval_samples, 1, allow_none=True)
        check_int(self.key("n_sentences"), self.n_sentences, 1)
        if self.ordinal is not None:
            check_bool(self.key("ordinal"), self.ordinal)
        if self.test_path is not None and self.validation_path is None:
            raise ValueError(f"{self.key('test_path')}: needs {self.key('validation_path')} as well, got {self.test_path!r}")
        if self.label_names is not None:
            names = self.label_names
            if (
                self.source != "table"
                or not isinstance(names, (list, tuple))
                or len(names) < 2
                or len(set(map(str, names))) != len(names)
            ):
                raise ValueError(f"{self.key('label_names')}: must be two or more distinct names (source table), got {names!r}")
            object.__setattr__(self, "label_names", [str(name) for name in names])

    @property
    def is_ordinal(self) -> bool:
        """``ordinal``, or its default: true for the sources in ``ORDINAL_SOURCES``."""
        return self.source in ORDINAL_SOURCES if self.ordinal is None else self.ordinal


@dataclass(frozen=True)
class TinyConfig(Section):
    """A randomly initialised tiny BERT, sized for a CPU."""

    prefix: ClassVar[str] = "model.tiny"

    num_layers: int = option(2, "transformer layers")
    hidden_size: int = option(64, "hidden size (a multiple of num_heads)")
    num_heads: int = option(2, "attention heads")

    def __post_init__(self) -> None:
        for name in ("num_layers", "hidden_size", "num_heads"):
            check_int(self.key(name), getattr(self, name), 1)
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"{self.key('hidden_size')}: must be a multiple of {self.key('num_heads')} ({self.num_heads}), got {self.hidden_size}"
            )


@dataclass(frozen=True)
class ProbeConfig(Section):
    """The bag-of-characters probe (``model.kind: probe``): fast enough for many seeds on a CPU."""

    prefix: ClassVar[str] = "model.probe"

    embedding_size: int = option(32, "character embedding size")
    hidden_size: int | None = option(64, "hidden layer of the head; null: a linear head (fastText)")

    def __post_init__(self) -> None:
        check_int(self.key("embedding_size"), self.embedding_size, 1)
        check_int(self.key("hidden_size"), self.hidden_size, 1, allow_none=True)


@dataclass(frozen=True)
class ModelConfig(Section):
    """Which model is trained: a transformer (tiny, or a checkpoint) or the character probe."""

    prefix: ClassVar[str] = "model"

    kind: str = option("transformer", "transformer (a tiny BERT or model_name_or_path) or probe (bag of characters)")
    model_name_or_path: str | None = option(
        None,
        "a checkpoint folder (e.g. ../models/workbench-zh-mini, a pretrain_mlm "
        "or pretrain_electra output_dir) or hub name; its tokenizer is used",
    )
    vocab_file: str | None = option(None, "WordPiece vocab when no checkpoint is given (null: the shipped 4,500-token vocab)")
    tiny: TinyConfig = option(
        help="the tiny BERT built when no checkpoint is given (pretrain_electra: the tiny ELECTRA discriminator)",
        factory=TinyConfig,
    )
    probe: ProbeConfig = option(help="the probe's sizes (kind: probe)", factory=ProbeConfig)

    def __post_init__(self) -> None:
        check_choice(self.key("kind"), self.kind, MODEL_KINDS)
        object.__setattr__(
            self,
            "model_name_or_path",
            check_text(self.key("model_name_or_path"), _path_text(self.model_name_or_path), allow_none=True),
        )
        object.__setattr__(self, "vocab_file", check_text(self.key("vocab_file"), _path_text(self.vocab_file), allow_none=True))
        if self.kind == "probe" and self.model_name_or_path is not None:
            raise ValueError(
                f"{self.key('model_name_or_path')}: must be null with model.kind=probe, got {self.model_name_or_path!r}"
            )
        if self.model_name_or_path is not None and self.vocab_file is not None:
            raise ValueError(
                f"{self.key('vocab_file')}: must be null when model_name_or_path is set (the checkpoint's "
                f"tokenizer is used), got {self.vocab_file!r}"
            )


@dataclass(frozen=True)
class LossSpec(Section):
    """A loss: a ``workbench.losses.build_loss`` name and its parameters (``workbench.losses.resolve``
    builds it, giving wce and global-count pcl the training split's label counts)."""

    prefix: ClassVar[str] = "loss"
    free_mappings: ClassVar[tuple[str, ...]] = ("params",)

    name: str = option("ce", "any build_loss name: ce, wce, ls, focal, dice, tversky, dsc, pcl")
    params: dict[str, Any] = option(
        help="keyword arguments of that loss; wce and pcl with counts: global get label_counts "
        "from the training split unless given. An override loss.params={...} (or null) "
        "replaces the whole mapping",
        factory=dict,
    )

    def __post_init__(self) -> None:
        check_text(self.key("name"), self.name)
        params = {} if self.params is None else self.params
        if not isinstance(params, Mapping):
            raise ValueError(f"{self.key('params')}: must be a mapping of parameters, got {self.params!r}")
        object.__setattr__(self, "params", dict(params))


@dataclass(frozen=True)
class MaskingSpec(Section):
    """How MLM pre-training chooses the tokens to predict (``workbench.masking.build_collator``)."""

    prefix: ClassVar[str] = "masking"

    strategy: str = option(
        "wwm", "random (BERT tokens), wwm (jieba whole words), kdm (knowledge-based dynamic masking: entities and events first)"
    )
    mlm_probability: float = option(0.15, "share of tokens masked")
    max_ngram: int = option(
        1, "WWM n-gram spans of up to this many words (1: plain whole-word masking; >1: the ALBERT/MacBERT-style n-gram option)"
    )

    def __post_init__(self) -> None:
        check_choice(self.key("strategy"), self.strategy, MASKING_STRATEGIES)
        check_number(self.key("mlm_probability"), self.mlm_probability, 0, 1, low_inclusive=False, high_inclusive=False)
        check_int(self.key("max_ngram"), self.max_ngram, 1)


@dataclass(frozen=True)
class ObjectiveConfig(Section):
    """The MLM objective: plain, hard correction (HC) or soft regularization (SR)."""

    prefix: ClassVar[str] = "objective"

    name: str = option("plain", "plain MLM, hc (hard correction) or sr (soft regularization)")
    weight: float = option(1.0, "SR weight (loss = MLM CE + weight x SR)")
    level: str = option("token", "SR level: token (1 - cos of embeddings, eq. 3) or sentence (KL of hidden states)")
    prediction: str = option(
        "argmax",
        "SR's predicted embedding: argmax (the paper's E[r_k]) or expected (the workbench's "
        "softmax(z) E, which also reaches the logits)",
    )
    kl_direction: str = option(
        "filled||original", "sentence-level SR: KL(prediction-filled || original) (the paper) or original||filled"
    )
    hc_level: str = option(
        "token",
        "HC: token (the paper, footnote 5: words of several tokens are not corrected) or word "
        "(the workbench's whole-word extension for Chinese)",
    )
    lexicon: str | None = option(None, "HC synonym lexicon: a Cilin file, or a WordNet .tsv; null: the shipped tiny lexicon")
    sop: bool = option(False, "add sentence-order prediction: each block's halves swapped with p = 0.5 (Erlangshen, ALBERT)")

    def __post_init__(self) -> None:
        check_choice(self.key("name"), self.name, OBJECTIVES)
        check_number(self.key("weight"), self.weight, 0)
        check_choice(self.key("level"), self.level, SR_LEVELS)
        check_choice(self.key("prediction"), self.prediction, SR_PREDICTIONS)
        check_choice(self.key("kl_direction"), self.kl_direction, KL_DIRECTIONS)
        check_choice(self.key("hc_level"), self.hc_level, HC_LEVELS)
        object.__setattr__(self, "lexicon", check_text(self.key("lexicon"), _path_text(self.lexicon), allow_none=True))
        check_bool(self.key("sop"), self.sop)


@dataclass(frozen=True)
class ElectraSpec(Section):
    """ELECTRA pre-training (``pretrain_electra``; Clark et al., ICLR 2020): the generator's size and
    the weight of the discriminator's loss, L = L_MLM(generator) + discriminator_weight x L_disc."""

    prefix: ClassVar[str] = "electra"

    generator_size: float = option(
        0.25,
        "generator hidden size as a share of the discriminator's, (0, 1] (ELECTRA: 1/4 "
        "small, 1/3 base); same layers, max(1, hidden // 64) heads, embeddings shared",
    )
    discriminator_weight: float = option(50.0, "lambda of the discriminator's replaced-token loss, > 0 (ELECTRA: 50)")

    def __post_init__(self) -> None:
        check_number(self.key("generator_size"), self.generator_size, 0, 1, low_inclusive=False)
        check_number(self.key("discriminator_weight"), self.discriminator_weight, 0, low_inclusive=False)


@dataclass(frozen=True)
class AuxConfig(Section):
    """Two-stage training with auxiliary labels."""

    prefix: ClassVar[str] = "aux"

    num_aux: int = option(2, "n auxiliary labels of the stage-1 head (K + n outputs)")
    stage2_epochs: float | None = option(None, "stage 2's epochs, at most 1e6 (null: training.num_train_epochs)")
    stage2_lr: float | None = option(None, "stage 2's learning rate (null: training.learning_rate)")
    fgm_epsilon: float = option(0.0, "FGM adversarial training in stage 1 when > 0 (the F variant)")
    fusion: bool = option(False, "a two-encoder FusionClassifier (MRE) instead of one encoder")
    fusion_model: str | None = option(None, "the second encoder's checkpoint (null: another tiny BERT / the same checkpoint)")

    def __post_init__(self) -> None:
        check_int(self.key("num_aux"), self.num_aux, 0)
        check_number(self.key("stage2_epochs"), self.stage2_epochs, 0, 1e6, low_inclusive=False, allow_none=True)
        check_number(self.key("stage2_lr"), self.stage2_lr, 0, low_inclusive=False, allow_none=True)
        check_number(self.key("fgm_epsilon"), self.fgm_epsilon, 0)
        check_bool(self.key("fusion"), self.fusion)
        object.__setattr__(
            self, "fusion_model", check_text(self.key("fusion_model"), _path_text(self.fusion_model), allow_none=True)
        )


TRAINING_DEFAULTS: dict[str, Any] = {
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "warmup_steps": 0.1,  # below 1: a share of the steps
    "weight_decay": 0.01,
    "seed": 0,
    "logging_steps": 10,
    "save_total_limit": 1,
    "dataloader_num_workers": None,  # pretrain_*: min(4, cores); the others: 0
}
"""The workbench's defaults where they differ from ``transformers.TrainingArguments``'."""

TRAINING_SET_BY = {
    "output_dir": "output_dir",
    "bf16": "training.precision",
    "fp16": "training.precision",
    "disable_tqdm": "training.quiet",
    "log_level": "training.quiet",
    "resume_from_checkpoint": "training.resume",
    **dict.fromkeys(
        ("eval_strategy", "save_strategy", "load_best_model_at_end", "metric_for_best_model", "greater_is_better"),
        "the trainer (evaluation and a checkpoint every epoch, the best by validation macro_f1 kept)",
    ),
    **dict.fromkeys(("remove_unused_columns", "logging_nan_inf_filter", "do_train", "do_eval", "do_predict"), "the trainer"),
}
"""TrainingArguments fields the workbench sets itself, and what sets them."""

RENAMED = {
    "epochs": "num_train_epochs",
    "lr": "learning_rate",
    "batch_size": "per_device_train_batch_size",
    "eval_batch_size": "per_device_eval_batch_size",
    "grad_accumulation": "gradient_accumulation_steps",
    "warmup_ratio": "warmup_steps",
    "dataloader_workers": "dataloader_num_workers",
}
"""The workbench's former names of TrainingArguments fields (named in the error for an old config)."""

INT_MAX = 2**31 - 1
TRAINING_BOUNDS: dict[str, tuple[float | None, float | None, bool]] = {
    "num_train_epochs": (0, 1e6, False),
    "learning_rate": (0, None, False),
    "warmup_steps": (0, None, True),
    "weight_decay": (0, None, True),
    "max_grad_norm": (0, None, True),
    "logging_steps": (0, None, False),
    "seed": (0, None, True),
    "dataloader_num_workers": (0, None, True),
    **dict.fromkeys(
        ("per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps", "save_total_limit"),
        (1, None, True),
    ),
}
"""(low, high, low inclusive) of the numbers the workbench bounds beyond TrainingArguments' own checks;
every number is finite and every int at most 2**31 - 1."""


def _check_argument(key: str, value: Any, hint: Any) -> None:
    """Type and bounds of TrainingArguments field ``key`` from its annotation (int, float, bool or str,
    optionally or None; null also where :data:`TRAINING_DEFAULTS` has it); others are left to TrainingArguments."""
    kinds = [kind for kind in typing.get_args(hint) or (hint,) if kind is not type(None)]
    if value is None and (len(kinds) < len(typing.get_args(hint) or (hint,)) or TRAINING_DEFAULTS.get(key, 0) is None):
        return
    low, high, low_inclusive = TRAINING_BOUNDS.get(key, (None, None, True))
    name = f"training.{key}"
    if kinds == [bool]:
        check_bool(name, value)
    elif kinds == [int]:
        check_int(name, value, low, INT_MAX)
    elif kinds == [float]:
        check_number(name, value, low, high, low_inclusive=low_inclusive)
    elif kinds == [str] and not isinstance(value, str):
        raise ValueError(f"{name}: must be a string, got {value!r}")


def check_training_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` when ``transformers.TrainingArguments`` accepts them (with the workbench's bounds and
    its own checks); ValueError naming ``training.<key>`` otherwise."""
    from transformers import TrainingArguments
    from transformers.integrations import get_available_reporting_integrations

    hints = {item.name: item.type for item in fields(TrainingArguments) if item.init}
    for key, value in arguments.items():
        if key in TRAINING_SET_BY:
            raise ValueError(f"training.{key}: is set by {TRAINING_SET_BY[key]}, not by the config")
        if key not in hints:
            known = f"renamed to training.{RENAMED[key]}" if key in RENAMED else "not a transformers.TrainingArguments field"
            raise ValueError(f"training.{key}: unknown key ({known}); see docs/training.md")
        _check_argument(key, value, hints[key])
    reporters = arguments.get("report_to") or "none"
    for name in [reporters] if isinstance(reporters, str) else reporters:
        if name not in ("none", "all", *get_available_reporting_integrations()):
            available = ", ".join(["none", "all", *get_available_reporting_integrations()])
            raise ValueError(f"training.report_to: must be one of {available} (installed integrations), got {name!r}")
    given = {key: value for key, value in arguments.items() if value is not None}
    for end in range(len(given)):  # TrainingArguments' own checks, the first key that fails named
        try:
            TrainingArguments(output_dir=None, **dict(list(given.items())[: end + 1]))
        except (ValueError, TypeError) as error:
            raise ValueError(f"training.{list(given)[end]}: {str(error).splitlines()[0]}") from None
    return dict(arguments)


@dataclass(frozen=True)
class TrainingConfig(Section):
    """The run's ``transformers.TrainingArguments``, by their names (any field, checked by it at load:
    :func:`check_training_arguments`; the workbench's defaults in :data:`TRAINING_DEFAULTS`), and the
    workbench's own keys below. The probe reads num_train_epochs, per_device_train_batch_size,
    learning_rate and weight_decay."""

    prefix: ClassVar[str] = "training"
    open_keys: ClassVar[bool] = True

    time_budget_s: float | None = option(
        None,
        "stop training after this many seconds (the step in progress finishes; "
        "pretrain_* then evaluate once more); null: no limit",
    )
    threads: int | None = option(
        None,
        "torch CPU threads; null: OMP_NUM_THREADS when set (the runner sets it per kernel), "
        "else half the cores, at least 1 (a busy core elsewhere does not stall training)",
    )
    precision: str = option(
        "auto", "auto (bf16 on a CUDA device that supports it, else fp32), fp32, bf16, fp16 (these two need CUDA)"
    )
    quiet: bool = option(False, "no progress bars, no per-step log prints (headless / papermill)")
    resume: bool = option(False, "continue from the latest checkpoint-N in output_dir")
    keep_checkpoints: bool = option(False, "keep the checkpoint-N folders after the run finishes")
    arguments: dict[str, Any] = option(help="the TrainingArguments fields (given flat, beside the keys above)", factory=dict)

    def __post_init__(self) -> None:
        check_number(self.key("time_budget_s"), self.time_budget_s, 0, low_inclusive=False, allow_none=True)
        check_int(self.key("threads"), self.threads, 1, INT_MAX, allow_none=True)
        check_choice(self.key("precision"), self.precision, PRECISIONS)
        for name in ("quiet", "resume", "keep_checkpoints"):
            check_bool(self.key(name), getattr(self, name))
        object.__setattr__(self, "arguments", check_training_arguments({**TRAINING_DEFAULTS, **self.arguments}))

    @classmethod
    def from_mapping(cls, values: Any) -> TrainingConfig:
        if not isinstance(values, Mapping):
            return super().from_mapping(values)
        own = [item.name for item in fields(cls) if item.name != "arguments"]
        arguments = {key: value for key, value in values.items() if key not in own}
        return cls(**{key: value for key, value in values.items() if key in own}, arguments=arguments)

    def __getattr__(self, name: str) -> Any:
        """A TrainingArguments field as this config sets it: ``training.learning_rate``."""
        arguments = self.__dict__.get("arguments", {})
        if name in arguments:
            return arguments[name]
        from transformers import TrainingArguments

        default = next((item.default for item in fields(TrainingArguments) if item.name == name), dataclasses.MISSING)
        if default is dataclasses.MISSING or name.startswith("_"):
            raise AttributeError(f"'TrainingConfig' object has no attribute {name!r}")
        return default

    def to_dict(self) -> dict[str, Any]:
        plain = super().to_dict()
        return {**plain.pop("arguments"), **plain}

    def replace(self, **changes: Any) -> TrainingConfig:
        return type(self).from_mapping({**self.to_dict(), **changes})


@dataclass(frozen=True)
class Config(Section):
    """A whole trainer config: the task, its run folder and every section."""

    task: str = option("finetune", "finetune, pretrain_mlm, two_stage or pretrain_electra (the CLI runs this one)")
    output_dir: str = option("outputs/train", "run folder; holding checkpoints already is an error unless training.resume")
    data: DataConfig = option(help="", factory=DataConfig)
    model: ModelConfig = option(help="", factory=ModelConfig)
    loss: LossSpec = option(help="finetune; two_stage's stage 2", factory=LossSpec)
    masking: MaskingSpec = option(help="pretrain_mlm, pretrain_electra", factory=MaskingSpec)
    objective: ObjectiveConfig = option(
        help="pretrain_mlm, pretrain_electra (its generator's MLM; HC also relabels the discriminator's targets)",
        factory=ObjectiveConfig,
    )
    electra: ElectraSpec = option(help="pretrain_electra", factory=ElectraSpec)
    aux: AuxConfig = option(help="two_stage", factory=AuxConfig)
    training: TrainingConfig = option(help="", factory=TrainingConfig)

    def __post_init__(self) -> None:
        check_choice("task", self.task, TASKS)
        output_dir = _path_text(self.output_dir)
        object.__setattr__(self, "output_dir", check_text("output_dir", output_dir))
        if self.task in ("finetune", "two_stage"):
            check_loss_fits_labels(self.data, self.loss)


def check_loss_fits_labels(data: DataConfig, loss: LossSpec) -> None:
    """PCL's near and far cases need ordered labels: pcl on nominal labels (``data.is_ordinal`` false)
    without ``loss.params.cost_matrix`` raises ValueError naming both keys."""
    if loss.name == "pcl" and not data.is_ordinal and loss.params.get("cost_matrix") is None:
        raise ValueError(
            "loss.params.cost_matrix: pcl's near and far cases need ordinal labels; give a cost matrix or set "
            f"data.ordinal: true if the classes are ordered, got nominal labels (source {data.source}, data.ordinal: false)"
        )


# ----------------------------------------------------------------------------- loading


def _set_path(tree: dict[str, Any], section: type[Section], path: list[str], value: Any) -> None:
    """Set ``tree[path] = value`` (the override replaces the node it names), refusing unknown keys."""
    node, cls = tree, section
    for depth, key in enumerate(path):
        if getattr(cls, "open_keys", False):  # training: any TrainingArguments field, checked on creation
            _set_free(node, path[depth:], value)
            return
        full = ".".join(path[: depth + 1])
        allowed = sorted(item.name for item in fields(cls))
        if key not in allowed:
            where = f" in {cls.prefix}" if cls.prefix else ""
            raise ValueError(f"unknown config key {full!r}; allowed keys{where}: {', '.join(allowed)}")
        if depth == len(path) - 1:
            node[key] = value
            return
        if key in cls.free_mappings:
            free = node.get(key) if isinstance(node.get(key), Mapping) else {}
            node[key] = {**free}
            _set_free(node[key], path[depth + 1 :], value)
            return
        nested = _section_fields(cls)[key]
        if nested is None:
            raise ValueError(f"unknown config key {'.'.join(path)!r}; {full} is not a section")
        node = node.setdefault(key, {})
        cls = nested


def _set_free(node: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value


def load_config(
    config: str | Path | Mapping[str, Any] | Config | None = None,
    overrides: Iterable[str] = (),
    task: str | None = None,
) -> Config:
    """Read a config (YAML path, mapping or :class:`Config`), fill defaults, apply overrides, validate.

    Args:
        config: a YAML file, a mapping of sections, a :class:`Config`, or None (all defaults).
        overrides: ``"section.key=value"`` strings, values parsed as YAML (``training.learning_rate=1e-4`` is a
            float). An override replaces the node it names: ``loss.params={}`` (or ``null``) clears
            the loss parameters, ``loss.params.gamma=2`` sets one.
        task: for a trainer loading its config: a config without a task gets it, one with another
            task is refused.

    Returns:
        The validated :class:`Config`. Raises ValueError naming the key for an unknown key, a
        malformed override or a bad value, and naming the file and line for bad YAML.
    """
    if config is None:
        tree: dict[str, Any] = {}
    elif isinstance(config, Config):
        tree = config.to_dict()
    elif isinstance(config, Mapping):
        tree = _plain(dict(config))
    else:
        tree = read_yaml_file(config, "config")
    for override in overrides:
        path, value = parse_override(override)
        _set_path(tree, Config, path, value)
    if task is not None:
        check_choice("task", task, TASKS)
        given = tree.setdefault("task", task)
        if given != task:
            raise ValueError(f"task: {task}() cannot run a config whose task is {given!r}")
    return Config.from_mapping(tree)


# ----------------------------------------------------------------------------- docs


def _default_text(item: dataclasses.Field) -> str:
    if item.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        value = item.default_factory()  # type: ignore[misc]
        return "" if isinstance(value, Section) else f"`{_plain(value)}`"
    value = item.default
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{list(value) if isinstance(value, tuple) else value}`"


def markdown_table() -> str:
    """The docs/training.md table of every config key: key, default, meaning (from the fields' help)."""
    rows = ["| key | default | meaning |", "|---|---|---|"]

    def walk(cls: type[Section]) -> None:
        for item in fields(cls):
            nested = _section_fields(cls)[item.name]
            key = f"{cls.prefix}.{item.name}" if cls.prefix else item.name
            if nested is not None and nested is not TinyConfig and nested is not ProbeConfig:
                help_text = item.metadata.get("help", "")
                rows.append(f"| **{key}** | | {help_text} |")
                walk(nested)
            elif nested is not None:
                defaults = ", ".join(f"{sub.name}: {_default_text(sub).strip('`')}" for sub in fields(nested))
                rows.append(f"| `{key}` | `{{{defaults}}}` | {item.metadata.get('help', '')} |")
            elif item.name != "arguments" or cls is not TrainingConfig:
                rows.append(f"| `{key}` | {_default_text(item)} | {item.metadata.get('help', '')} |")
        if cls is TrainingConfig:
            for name, value in TRAINING_DEFAULTS.items():
                default = "null" if value is None else f"`{value}`"
                rows.append(f"| `training.{name}` | {default} | TrainingArguments' (the workbench's default) |")
            rows.append("| `training.<field>` | TrainingArguments' | any other `transformers.TrainingArguments` field |")

    walk(Config)
    return "\n".join(rows)
