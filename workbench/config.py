"""The one configuration system: frozen sections whose fields carry their help and check (a ``ValueError`` naming
the key), ``key.path=value`` overrides, and ``training`` as ``transformers.TrainingArguments`` by its own names.
No torch here."""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from workbench.checks import check_bool, check_choice, check_int, check_number, check_text, is_number
from workbench.data_root import expand_data_root
from workbench.losses.choices import HC_LEVELS, KL_DIRECTIONS, SR_LEVELS, SR_PREDICTIONS  # the objectives' options
from workbench.metrics_file import redact
from workbench.yaml_files import parse_override, read_yaml, read_yaml_file  # noqa: F401 - read_yaml re-exported

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
BLOCK_BOUNDARIES = ("sentence", "word")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
INT_MAX = 2**31 - 1

SectionT = TypeVar("SectionT", bound="Section")


def option(
    default: Any = None, help: str = "", within: str | None = None, choices: Any = None, factory: Any = None
) -> Any:
    """A dataclass field with its help and check: ``within`` an interval such as ``"(0, 1]"``, or ``choices``."""
    metadata = {"help": help, "check": {"within": within, "choices": choices}}
    return field(default_factory=factory, metadata=metadata) if factory else field(default=default, metadata=metadata)


def check_field(name: str, value: Any, hint: Any, within: str | None = None, choices: Any = None) -> Any:
    """``value`` checked by its type ``hint`` (bool, int, float or str (a path too, ``$WORKBENCH_DATA/...`` expanded by
    :func:`workbench.data_root.expand_data_root`), each optionally ``| None``) with the ``workbench.checks`` check,
    within the interval ``within`` (``"(0, 1]"``) or one of ``choices``."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    kinds = [kind for kind in options if kind is not type(None)]
    allow_none = type(None) in options
    if value is None and allow_none:
        return None
    ends = [float(end) for end in (within or "[-inf, inf]")[1:-1].split(",")]
    low, high = (None if abs(end) == math.inf else int(end) if end.is_integer() else end for end in ends)
    if choices is not None:
        return check_choice(name, value, choices)
    if kinds == [bool]:
        return check_bool(name, value)
    if kinds == [int]:
        return check_int(name, value, low, INT_MAX if high is None else high, allow_none=allow_none)
    if kinds == [float]:
        closed = {
            "low_inclusive": not (within or "").startswith("("),
            "high_inclusive": not (within or "").endswith(")"),
        }
        check_number(name, value, low, high, **closed, allow_none=allow_none)
    if kinds == [str]:  # a path under the data root may be written $WORKBENCH_DATA/...
        text = check_text(name, os.fspath(value) if isinstance(value, os.PathLike) else value, allow_none=allow_none)
        return expand_data_root(text)
    return value


@cache
def _section_fields(cls: type) -> dict[str, Any]:
    """Field name -> its type hint."""
    return {item.name: typing.get_type_hints(cls)[item.name] for item in fields(cls)}


def _nested(cls: type, name: str) -> type | None:
    hint = _section_fields(cls).get(name)
    return hint if isinstance(hint, type) and issubclass(hint, Section) else None


def _unknown(cls: type, key: str) -> ValueError:
    where = f" in {cls.prefix}" if cls.prefix else ""
    return ValueError(f"unknown config key {key!r}; allowed keys{where}: {', '.join(sorted(_section_fields(cls)))}")


@dataclass(frozen=True)
class Section:
    """Base of every config section, each field checked on creation by :func:`check_field`: ``prefix`` is its key path
    (``model.tiny``), ``free_mappings`` names fields holding a free-form mapping (``loss.params``)."""

    prefix: ClassVar[str] = ""
    free_mappings: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, prefix: str = "", free_mappings: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.prefix = prefix
        cls.free_mappings = free_mappings

    def __post_init__(self) -> None:
        hints = _section_fields(type(self))
        for item in fields(self):
            value = check_field(
                self.key(item.name), getattr(self, item.name), hints[item.name], **item.metadata["check"]
            )
            object.__setattr__(self, item.name, value)

    def key(self, name: str) -> str:
        """The full key of field ``name`` (``training.seed``)."""
        return f"{self.prefix}.{name}" if self.prefix else name

    @classmethod
    def from_mapping(cls: type[SectionT], values: Mapping[str, Any] | SectionT | None) -> SectionT:
        """The section from a mapping (missing keys take their defaults), an instance, or None (all defaults)."""
        if values is None or isinstance(values, cls):
            return cls() if values is None else values
        allowed = _section_fields(cls)
        if not isinstance(values, Mapping):
            raise ValueError(f"{cls.prefix}: must be a mapping with keys {', '.join(sorted(allowed))}, got {values!r}")
        for key in values:
            if key not in allowed:
                raise _unknown(cls, f"{cls.prefix}.{key}" if cls.prefix else key)
        return cls(
            **{key: _nested(cls, key).from_mapping(item) if _nested(cls, key) else item for key, item in values.items()}
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), ready for YAML or JSON."""
        return {item.name: _plain(getattr(self, item.name)) for item in fields(self)}

    def replace(self: SectionT, **changes: Any) -> SectionT:
        """A copy with ``changes``; nested sections may be given as mappings (merged over the current ones)."""
        for key, value in changes.items():
            if _nested(type(self), key) and isinstance(value, Mapping):
                changes[key] = _nested(type(self), key).from_mapping(_merge(getattr(self, key).to_dict(), value))
        return dataclasses.replace(self, **changes)


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if isinstance(value, list | tuple) else value


def _merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        both = isinstance(merged.get(key), Mapping) and isinstance(value, Mapping)
        merged[key] = _merge(merged[key], value) if both else value
    return merged


@dataclass(frozen=True)
class DataConfig(Section, prefix="data"):
    """Where the examples come from and how they are cut."""

    source: str = option(
        "sample_relevance", "docs/data.md's sources (sample_corpus, corpus: MLM only)", choices=DATA_SOURCES
    )
    path: str | list[str] | None = option(
        None,
        "a file source's file (train, or the only one, split); corpus: a list too; null: a named data set's files in "
        "the data root ($WORKBENCH_DATA, docs/data.md)",
    )
    validation_path: str | None = option(
        None, "a separate validation file (without it, path is cut by stratified_split)"
    )
    test_path: str | None = option(None, "a separate test file (with validation_path)")
    labels_path: str | None = option(None, "TNEWS labels.json")
    text: str | None = option(None, "table source: the text column")
    text_pair: str | None = option(None, "table source: the second text column (optional; pairs)")
    label: str | None = option(None, "table source: the label column")
    label_names: list[str] | None = option(
        None,
        "table source: the classes, in order (a label is a name or its index); "
        "null: the training file's values, sorted",
    )
    ordinal: bool | None = option(
        None, "the labels are ordered (far-error rates, PCL); null: true for qbqtc, sample_relevance"
    )
    split: tuple[float, float, float] = option(
        (0.8, 0.1, 0.1), "train/validation/test shares of one file (test 0: none)"
    )
    seed: int = option(0, "seed of the sample generators and of the split", "[0, inf)")
    max_length: int = option(128, "tokens per example (truncation), 8-512", "[8, 512]")
    max_train_samples: int | None = option(
        None, "keep a stratified sample of N training examples (seed data.seed); corpus: the first N texts", "[1, inf)"
    )
    max_eval_samples: int | None = option(
        None, "keep a stratified sample of N validation and N test examples (seed data.seed)", "[1, inf)"
    )
    n_sentences: int = option(2000, "size of sample_corpus", "[1, inf)")
    num_proc: int | None = option(
        None, "pretrain_*: processes that segment and encode the corpus; null: every core", "[1, inf)"
    )
    cache_dir: str | None = option(
        None, "pretrain_*: cache of encoded corpora; null: $WORKBENCH_CACHE or ~/.cache/workbench"
    )
    eval_fraction: float = option(0.01, "pretrain_*: share of the packed blocks held out for the eval loss", "(0, 0.5]")
    block_boundary: str = option(
        "sentence", "pretrain_*: blocks end at a sentence end or at any word", choices=BLOCK_BOUNDARIES
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.path, list | tuple):
            if self.source != "corpus" or not self.path:
                raise ValueError(
                    f"{self.key('path')}: must be one file (a list only for source corpus), got {self.path!r}"
                )
            object.__setattr__(self, "path", [check_field(self.key("path"), item, str) for item in self.path])
        else:
            object.__setattr__(self, "path", check_field(self.key("path"), self.path, str | None))
        split = self.split
        fractions = (
            isinstance(split, list | tuple) and len(split) == 3 and all(is_number(f) and 0 <= f <= 1 for f in split)
        )
        if not fractions or abs(sum(split) - 1.0) > 1e-6 or split[0] <= 0:
            raise ValueError(
                f"{self.key('split')}: must be three fractions in [0, 1] (train > 0) summing to 1, got {split!r}"
            )
        object.__setattr__(self, "split", tuple(float(f) for f in split))
        if self.test_path is not None and self.validation_path is None:
            raise ValueError(
                f"{self.key('test_path')}: needs {self.key('validation_path')} as well, got {self.test_path!r}"
            )
        names = self.label_names
        if names is not None:
            distinct = isinstance(names, list | tuple) and len(names) >= 2 and len(set(map(str, names))) == len(names)
            if self.source != "table" or not distinct:
                raise ValueError(
                    f"{self.key('label_names')}: must be two or more distinct names (source table), got {names!r}"
                )
            object.__setattr__(self, "label_names", [str(name) for name in names])

    @property
    def is_ordinal(self) -> bool:
        """``ordinal``, or its default: true for the sources in ``ORDINAL_SOURCES``."""
        return self.source in ORDINAL_SOURCES if self.ordinal is None else self.ordinal


@dataclass(frozen=True)
class TinyConfig(Section, prefix="model.tiny"):
    """A randomly initialised tiny BERT, sized for a CPU."""

    num_layers: int = option(2, "transformer layers", "[1, inf)")
    hidden_size: int = option(64, "hidden size (a multiple of num_heads)", "[1, inf)")
    num_heads: int = option(2, "attention heads", "[1, inf)")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"model.tiny.hidden_size: must be a multiple of num_heads={self.num_heads}, got {self.hidden_size}"
            )


@dataclass(frozen=True)
class ProbeConfig(Section, prefix="model.probe"):
    """The bag-of-characters probe (``model.kind: probe``): fast enough for many seeds on a CPU."""

    embedding_size: int = option(32, "character embedding size", "[1, inf)")
    hidden_size: int | None = option(64, "hidden layer of the head; null: a linear head (fastText)", "[1, inf)")


@dataclass(frozen=True)
class ModelConfig(Section, prefix="model"):
    """Which model is trained: a transformer (tiny, or a checkpoint) or the character probe."""

    kind: str = option(
        "transformer", "transformer (tiny or a checkpoint) or probe (bag of characters)", choices=MODEL_KINDS
    )
    model_name_or_path: str | None = option(
        None, "a checkpoint folder (a pretrain_* output_dir) or hub name, with its tokenizer"
    )
    vocab_file: str | None = option(None, "WordPiece vocab without a checkpoint (null: the shipped 4,500-token vocab)")
    tiny: TinyConfig = option(help="the tiny BERT built without a checkpoint (pretrain_electra: D)", factory=TinyConfig)
    probe: ProbeConfig = option(help="the probe's sizes (kind: probe)", factory=ProbeConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model_name_or_path is not None and (self.kind == "probe" or self.vocab_file is not None):
            other = "kind" if self.kind == "probe" else "vocab_file"
            raise ValueError(
                f"{self.key('model_name_or_path')}: must be null when model.{other} is {getattr(self, other)!r}, "
                f"got {self.model_name_or_path!r}"
            )
        check_checkpoint(self.key("model_name_or_path"), self.model_name_or_path)


def check_checkpoint(name: str, path: str | None) -> None:
    """A local ``path`` must be a checkpoint folder (with config.json), not a file such as a pickle; a path that does
    not exist is a hub name."""
    if path is not None and os.path.exists(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{name}: must be a checkpoint folder (holding config.json) or a hub name, got {path!r}")


@dataclass(frozen=True)
class LossSpec(Section, prefix="loss", free_mappings=("params",)):
    """A ``workbench.losses.build_loss`` name and its parameters (``resolve`` adds the training split's counts)."""

    name: str = option("ce", "any build_loss name: ce, wce, ls, focal, dice, tversky, dsc, pcl")
    params: dict[str, Any] = option(
        help="its keyword arguments (an override loss.params={...} replaces them all)", factory=dict
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.params, Mapping | None):
            raise ValueError(f"{self.key('params')}: must be a mapping of parameters, got {self.params!r}")
        object.__setattr__(self, "params", dict(self.params or {}))


@dataclass(frozen=True)
class MaskingSpec(Section, prefix="masking"):
    """How MLM pre-training chooses the tokens to predict (``workbench.masking.build_collator``)."""

    strategy: str = option(
        "wwm", "random (tokens), wwm (jieba words), kdm (entities, events first)", choices=MASKING_STRATEGIES
    )
    mlm_probability: float = option(0.15, "share of tokens masked", "(0, 1)")
    max_ngram: int = option(1, "WWM spans of up to this many words (>1: the ALBERT/MacBERT n-gram option)", "[1, inf)")


@dataclass(frozen=True)
class ObjectiveConfig(Section, prefix="objective"):
    """The MLM objective: plain, hard correction (HC) or soft regularization (SR)."""

    name: str = option("plain", "plain MLM, hc (hard correction) or sr (soft regularization)", choices=OBJECTIVES)
    weight: float = option(1.0, "SR weight (loss = MLM CE + weight x SR)", "[0, 1e12]")
    level: str = option(
        "token", "SR: token (1 - cos of embeddings, eq. 3) or sentence (KL of hidden states)", choices=SR_LEVELS
    )
    prediction: str = option(
        "argmax", "SR's predicted embedding: argmax (the paper's) or expected", choices=SR_PREDICTIONS
    )
    kl_direction: str = option(
        "filled||original", "sentence SR: KL(filled || original) (the paper) or reverse", choices=KL_DIRECTIONS
    )
    hc_level: str = option(
        "token", "HC: token (the paper, footnote 5) or word (the workbench's extension)", choices=HC_LEVELS
    )
    lexicon: str | None = option(
        None, "HC synonym lexicon: a Cilin file or a WordNet .tsv; null: the shipped tiny lexicon"
    )
    sop: bool = option(False, "add sentence-order prediction: each block's halves swapped with p = 0.5 (ALBERT)")


@dataclass(frozen=True)
class ElectraSpec(Section, prefix="electra"):
    """ELECTRA (Clark et al., ICLR 2020): L = L_MLM(generator) + discriminator_weight x L_disc."""

    generator_size: float = option(
        0.25, "generator hidden size as a share of the discriminator's (same layers)", "(0, 1]"
    )
    discriminator_weight: float = option(
        50.0, "lambda of the discriminator's replaced-token loss (ELECTRA: 50)", "(0, 1e12]"
    )


@dataclass(frozen=True)
class AuxConfig(Section, prefix="aux"):
    """Two-stage training with auxiliary labels."""

    num_aux: int = option(2, "n auxiliary labels of the stage-1 head (K + n outputs)", "[0, inf)")
    stage2_epochs: float | None = option(None, "stage 2's epochs (null: training.num_train_epochs)", "(0, 1e6]")
    stage2_lr: float | None = option(None, "stage 2's learning rate (null: training.learning_rate)", "(0, inf)")
    fgm_epsilon: float = option(0.0, "FGM adversarial training in stage 1 when > 0 (the F variant)", "[0, 1e12]")
    fusion: bool = option(False, "a two-encoder FusionClassifier (MRE) instead of one encoder")
    fusion_model: str | None = option(
        None, "the fusion's second encoder (null: another tiny BERT / the same checkpoint)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_checkpoint(self.key("fusion_model"), self.fusion_model)


TRAINING_DEFAULTS: dict[str, Any] = {
    "num_train_epochs": 3,
    "learning_rate": 5e-5,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "warmup_steps": 0.1,  # below 1: a share of the training steps
    "weight_decay": 0.01,
    "seed": 0,
    "logging_steps": 10,
    "save_total_limit": 1,
    "dataloader_num_workers": None,  # pretrain_*: min(4, cores); the others: 0
}
"""The workbench's defaults where they differ from ``transformers.TrainingArguments``'."""

SET_BY_THE_WORKBENCH = (
    "output_dir",
    "bf16",
    "fp16",
    "disable_tqdm",
    "log_level",
    "resume_from_checkpoint",
    "remove_unused_columns",
    "eval_strategy",
    "save_strategy",
    "load_best_model_at_end",
    "metric_for_best_model",
    "greater_is_better",
    "logging_nan_inf_filter",
    "do_train",
    "do_eval",
    "do_predict",
    "save_steps",
    "eval_steps",
    "label_smoothing_factor",
)
"""TrainingArguments fields the workbench sets or replaces (docs/training.md says by what); refused in a config."""

TRAINING_BOUNDS = {
    "num_train_epochs": "(0, 1e6]",
    "learning_rate": "(0, inf)",
    "save_total_limit": "[1, inf)",
    "adam_epsilon": "[1e-30, 1]",
    "adam_beta1": "[0, 1)",
    "adam_beta2": "[0, 1)",
    "per_device_train_batch_size": "[1, inf)",
    "per_device_eval_batch_size": "[1, inf)",
    "gradient_accumulation_steps": "[1, inf)",
    "weight_decay": "[0, inf)",
    "max_grad_norm": "[0, inf)",
    "seed": "[0, inf)",
    "data_seed": "[0, inf)",
    "dataloader_num_workers": "[0, inf)",
}
"""Bounds beyond TrainingArguments' checks (and everywhere: numbers finite, ints <= 2**31 - 1)."""

NOT_HONOURED = {
    "label_names": "the workbench's batches carry their labels as `labels` (and `sop_labels`) and it names them itself",
    "prediction_loss_only": "every evaluation is scored by macro-F1 over the predictions, which this would drop",
    "batch_eval_metrics": "the metrics (macro-F1, far-error rate) need the whole evaluation set at once",
    "eval_delay": "every epoch is evaluated: the best epoch is chosen among the saved ones by validation macro-F1",
    "eval_do_concat_batches": "the metrics need the evaluation's predictions as one array",
    "debug": "its underflow/overflow hooks fail on the models' integer and boolean outputs",
    "parallelism_config": "it must be an accelerate ParallelismConfig object, which a YAML config cannot hold",
}
"""TrainingArguments fields the workbench cannot honour (field -> why): any value but transformers' default is refused
at config load, naming the field."""


def check_honoured(arguments: Mapping[str, Any]) -> None:
    """ValueError naming ``training.<key>`` for a field the workbench cannot honour (:data:`NOT_HONOURED`, a plateau
    schedule), a malformed ``optim_args``, ``use_liger_kernel`` or ``deepspeed`` without their package (or a DeepSpeed
    file), ``fsdp`` outside distributed training: checked when the config is loaded, not when training starts."""
    from transformers import TrainingArguments
    from transformers.integrations import is_deepspeed_available
    from transformers.utils import is_liger_kernel_available

    defaults = {item.name: item.default for item in fields(TrainingArguments) if item.init}
    for key, reason in NOT_HONOURED.items():
        if key in arguments and arguments[key] != defaults[key] and arguments[key] not in (None, "", []):
            raise ValueError(f"training.{key}: cannot be honoured by the workbench: {reason} (docs/training.md)")
    if arguments.get("lr_scheduler_type") == "reduce_lr_on_plateau":
        raise ValueError(
            "training.lr_scheduler_type: reduce_lr_on_plateau cannot be honoured by the workbench (it would step on "
            "the validation macro-F1 as on a loss to minimise); choose linear, cosine, constant, ..."
        )
    optim_args = arguments.get("optim_args")
    pairs = [part.split("=") for part in optim_args.replace(" ", "").split(",")] if isinstance(optim_args, str) else []
    if any(len(pair) != 2 or not pair[0] or not pair[1] for pair in pairs):
        raise ValueError(f"training.optim_args: must be 'key=value' pairs joined by commas, got {optim_args!r}")
    if arguments.get("use_liger_kernel") and not is_liger_kernel_available():
        raise ValueError("training.use_liger_kernel: needs the liger-kernel package: pip install liger-kernel")
    deepspeed = arguments.get("deepspeed")
    if deepspeed and not is_deepspeed_available():
        raise ValueError("training.deepspeed: needs the deepspeed package: pip install deepspeed")
    if isinstance(deepspeed, str) and not os.path.isfile(deepspeed):
        raise ValueError(
            f"training.deepspeed: must name a DeepSpeed JSON config file, got {deepspeed!r} (no such file)"
        )
    if arguments.get("fsdp") and int(os.environ.get("WORLD_SIZE", "1")) < 2:
        raise ValueError(
            "training.fsdp: FSDP runs only in distributed training: launch with torchrun or accelerate (WORLD_SIZE > 1)"
        )


def check_optimizer(arguments: Mapping[str, Any]) -> None:
    """ValueError naming ``training.optim`` when its package is missing, ``training.optim_args`` for a value the
    optimizer cannot read, ``training.lr_scheduler_kwargs`` for arguments the schedule does not take."""
    import torch
    from transformers import Trainer, TrainingArguments, get_scheduler

    given = {key: value for key, value in arguments.items() if value is not None}
    try:
        Trainer.get_optimizer_cls_and_kwargs(TrainingArguments(output_dir=None, **given))
    except (ImportError, ValueError, TypeError) as error:  # some optimizers need the model: checked when it is built
        if isinstance(error, ImportError) or "install" in str(error):  # its package is missing
            raise ValueError(f"training.optim: {arguments.get('optim')!r}: {str(error).splitlines()[0]}") from None
        if arguments.get("optim_args") and "model" not in str(error):  # a value the optimizer cannot read
            raise ValueError(f"training.optim_args: {str(error).splitlines()[0]}") from None
    if arguments.get("lr_scheduler_kwargs"):
        optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        name = arguments.get("lr_scheduler_type") or "linear"
        try:
            get_scheduler(name, optimizer, 0, 10, scheduler_specific_kwargs=dict(arguments["lr_scheduler_kwargs"]))
        except (ValueError, TypeError) as error:
            raise ValueError(f"training.lr_scheduler_kwargs: {str(error).splitlines()[0]}") from None


def check_training_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` when ``transformers.TrainingArguments`` takes them: fields of the right type within
    :data:`TRAINING_BOUNDS`, an installed ``report_to``, its own checks; else ValueError naming ``training.<key>``."""
    from transformers import TrainingArguments
    from transformers.integrations import get_available_reporting_integrations

    hints = {item.name: item.type for item in fields(TrainingArguments) if item.init}
    for key, value in arguments.items():
        if key in SET_BY_THE_WORKBENCH or key not in hints:
            what = "is set by the workbench" if key in hints else "is not a transformers.TrainingArguments field"
            raise ValueError(f"training.{key}: {what} (docs/training.md lists the keys), got {key}: {value!r}")
        if value is not None or TRAINING_DEFAULTS.get(key, 0) is not None:
            check_field(f"training.{key}", value, hints[key], TRAINING_BOUNDS.get(key))
    reporters = arguments.get("report_to") or "none"
    for name in [reporters] if isinstance(reporters, str) else reporters:
        check_choice("training.report_to", name, ["none", "all", *get_available_reporting_integrations()])
    check_honoured(arguments)
    given = [(key, value) for key, value in arguments.items() if value is not None]
    for end, (key, _) in enumerate(given, 1):  # TrainingArguments' own checks; the first key that fails is named
        try:
            TrainingArguments(output_dir=None, **dict(given[:end]))
        except (ValueError, TypeError) as error:
            raise ValueError(f"training.{key}: {str(error).splitlines()[0]}") from None
    check_optimizer(arguments)
    return dict(arguments)


@dataclass(frozen=True)
class TrainingConfig(Section, prefix="training"):
    """``transformers.TrainingArguments`` by their own names (any field, given flat, read as attributes:
    ``training.learning_rate``; checked by :func:`check_training_arguments`) and the workbench's own keys."""

    time_budget_s: float | None = option(
        None, "stop after this many seconds (pretrain_*: one more evaluation)", "(0, inf)"
    )
    threads: int | None = option(
        None, "torch CPU threads; null: OMP_NUM_THREADS when set, else half the cores", "[1, inf)"
    )
    precision: str = option(
        "auto", "auto (bf16 on a CUDA device that has it, else fp32), fp32, bf16, fp16", choices=PRECISIONS
    )
    quiet: bool = option(False, "no progress bars, no per-step log prints (headless / papermill)")
    resume: bool = option(
        False, "continue from the latest checkpoint-N in output_dir (docs/training.md: what may change)"
    )
    keep_checkpoints: bool = option(False, "keep the checkpoint-N folders after the run finishes")
    arguments: dict[str, Any] = option(
        help="the TrainingArguments fields (given flat, beside the keys above)", factory=dict
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "arguments", check_training_arguments({**TRAINING_DEFAULTS, **self.arguments}))
        if self.resume and self.arguments.get("save_only_model"):
            raise ValueError(
                "training.save_only_model: a run saved with it cannot be resumed (its checkpoints hold no optimizer "
                "or learning-rate schedule state, which would restart); set training.resume=false and start anew"
            )

    def __repr__(self) -> str:
        """The fields with secrets (``hub_token``) redacted: a config shown in a notebook lands in its pages."""
        return f"TrainingConfig({', '.join(f'{key}={value!r}' for key, value in redact(self.to_dict()).items())})"

    @classmethod
    def from_mapping(cls, values: Any) -> TrainingConfig:
        if not isinstance(values, Mapping):
            return super().from_mapping(values)
        own = {key: values[key] for key in _section_fields(cls) if key in values and key != "arguments"}
        return cls(**own, arguments={key: value for key, value in values.items() if key not in own})

    def __getattr__(self, name: str) -> Any:
        """A TrainingArguments field this config sets (given or in :data:`TRAINING_DEFAULTS`)."""
        try:
            return self.__dict__["arguments"][name]
        except KeyError:
            raise AttributeError(f"'TrainingConfig' object has no attribute {name!r}") from None

    def to_dict(self) -> dict[str, Any]:
        plain = super().to_dict()
        return {**plain.pop("arguments"), **plain}

    def replace(self, **changes: Any) -> TrainingConfig:
        return type(self).from_mapping({**self.to_dict(), **changes})


@dataclass(frozen=True)
class Config(Section):
    """A whole trainer config: the task, its run folder and every section."""

    task: str = option(
        "finetune", "finetune, pretrain_mlm, two_stage or pretrain_electra (the CLI runs this one)", choices=TASKS
    )
    output_dir: str = option("outputs/train", "run folder: new, empty or this run's own (training.resume continues it)")
    data: DataConfig = option(help="", factory=DataConfig)
    model: ModelConfig = option(help="", factory=ModelConfig)
    loss: LossSpec = option(help="finetune; two_stage's stage 2", factory=LossSpec)
    masking: MaskingSpec = option(help="pretrain_mlm, pretrain_electra", factory=MaskingSpec)
    objective: ObjectiveConfig = option(
        help="pretrain_* (pretrain_electra: its generator's MLM)", factory=ObjectiveConfig
    )
    electra: ElectraSpec = option(help="pretrain_electra", factory=ElectraSpec)
    aux: AuxConfig = option(help="two_stage", factory=AuxConfig)
    training: TrainingConfig = option(help="", factory=TrainingConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.loss.params.get("reduction", "mean") != "mean":  # a trainer averages the loss of a batch
            raise ValueError(
                f"loss.params.reduction: must be 'mean' in a trainer, got {self.loss.params['reduction']!r}"
            )
        if self.task in ("finetune", "two_stage"):
            check_loss_fits_labels(self.data, self.loss)
        if self.task == "pretrain_electra" and self.objective.sop:
            raise ValueError(
                "objective.sop: must be false for pretrain_electra (ELECTRA has no sentence-order head), got True"
            )


def check_loss_fits_labels(data: DataConfig, loss: LossSpec) -> None:
    """PCL's near and far cases need ordered labels: pcl on nominal labels (``data.is_ordinal`` false)
    without ``loss.params.cost_matrix`` raises ValueError naming both keys."""
    if loss.name == "pcl" and not data.is_ordinal and loss.params.get("cost_matrix") is None:
        raise ValueError(
            "loss.params.cost_matrix: pcl's near and far cases need ordinal labels; give a cost matrix or set "
            f"data.ordinal: true if the classes are ordered, got nominal labels "
            f"(source {data.source}, data.ordinal: false)"
        )


def _set_path(tree: dict[str, Any], cls: type[Section], path: list[str], value: Any) -> None:
    """Set ``tree[path] = value`` (the override replaces the node it names), refusing unknown keys; below a
    free mapping (``loss.params``) or in ``training`` any key is set and checked when the section is built."""
    for depth, key in enumerate(path):
        if cls is TrainingConfig or key in cls.free_mappings:
            for part in path[depth:-1]:
                tree[part] = dict(tree[part]) if isinstance(tree.get(part), Mapping) else {}
                tree = tree[part]
            tree[path[-1]] = value
            return
        if key not in _section_fields(cls) or depth < len(path) - 1 and not _nested(cls, key):
            raise _unknown(cls, ".".join(path if key in _section_fields(cls) else path[: depth + 1]))
        if depth == len(path) - 1:
            tree[key] = value
            return
        tree = tree.setdefault(key, {})
        cls = _nested(cls, key)


def load_config(
    config: str | Path | Mapping[str, Any] | Config | None = None,
    overrides: Iterable[str] = (),
    task: str | None = None,
) -> Config:
    """Read a config, fill defaults, apply overrides, validate.

    Args:
        config: a YAML file, a mapping of sections, a :class:`Config`, or None (all defaults).
        overrides: ``"section.key=value"`` strings, values parsed as YAML; each replaces the node it names
            (``loss.params={}`` clears the loss parameters, ``loss.params.gamma=2`` sets one).
        task: a trainer's own task: a config without one gets it, one with another task is refused.

    Returns:
        The validated :class:`Config`; ValueError naming the key (or the file and line) for bad input.
    """
    if isinstance(config, str | Path):
        tree = read_yaml_file(config, "config")
    else:
        tree = _plain(config.to_dict() if isinstance(config, Config) else dict(config or {}))
    earlier: list[list[str]] = []
    for path, value in map(parse_override, overrides):
        # given twice, or after one of its own keys: one of them would be lost
        if any(key[: len(path)] == path for key in earlier):
            raise ValueError(f"overrides: {'.'.join(path)}= replaces an earlier override (of it or a key below it)")
        earlier.append(path)
        _set_path(tree, Config, path, value)
    if task is not None:
        given = tree.setdefault("task", check_choice("task", task, TASKS))
        if given != task:
            raise ValueError(f"task: {task}() cannot run a config whose task is {given!r}")
    return Config.from_mapping(tree)
