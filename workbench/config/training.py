"""The ``training`` section: ``transformers.TrainingArguments`` by its own names, checked by it when the config is
loaded (transformers is imported then, not at module import), and the workbench's own keys."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from workbench.checks import MAX_SEED, check_choice
from workbench.config.sections import Bounds, Section, _section_fields, check_field, option
from workbench.redaction import redact, shown

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


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
    "num_train_epochs": Bounds(gt=0, le=1e6),
    "learning_rate": Bounds(gt=0),
    "save_total_limit": Bounds(ge=1),
    "adam_epsilon": Bounds(ge=1e-30, le=1),
    "adam_beta1": Bounds(ge=0, lt=1),
    "adam_beta2": Bounds(ge=0, lt=1),
    "per_device_train_batch_size": Bounds(ge=1),
    "per_device_eval_batch_size": Bounds(ge=1),
    "gradient_accumulation_steps": Bounds(ge=1),
    "weight_decay": Bounds(ge=0),
    "max_grad_norm": Bounds(ge=0),
    "seed": Bounds(ge=0, le=MAX_SEED),
    "data_seed": Bounds(ge=0, le=MAX_SEED),
    "dataloader_num_workers": Bounds(ge=0),
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

INDEPENDENT_KEYS = ("seed", "data_seed", "quiet")
"""Keys whose check reads no other key: TrainingArguments takes ``seed`` and ``data_seed`` without a check of its own
beyond their type, and ``quiet`` is the workbench's. A copy changing only these (a study's fits, one per seed) checks
each changed value alone instead of the whole section (:meth:`TrainingConfig.replace`)."""


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


def check_optimizer(arguments: Mapping[str, Any], built: Any = None) -> None:
    """ValueError naming ``training.optim`` when its package is missing, ``training.optim_args`` for a value the
    optimizer cannot read, ``training.lr_scheduler_kwargs`` for arguments the schedule does not take. ``built``: the
    ``TrainingArguments`` of ``arguments`` when the caller has them (built once per validation)."""
    import torch
    from transformers import Trainer, TrainingArguments, get_scheduler

    if built is None:
        built = TrainingArguments(
            output_dir=None, **{key: value for key, value in arguments.items() if value is not None}
        )
    try:
        Trainer.get_optimizer_cls_and_kwargs(built)
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


def resolve_precision(precision: str) -> str:
    """``auto`` -> ``bf16`` on a CUDA device that supports it, else ``fp32``; ``fp16`` and ``bf16`` need a CUDA device
    (ValueError naming ``training.precision``). The one device rule: the trainers apply it, the runner checks it
    before any kernel starts, and ``python -m workbench.train`` before its run folder is claimed or any data read."""
    import torch

    check_field("training.precision", precision, str, choices=PRECISIONS)
    cuda = torch.cuda.is_available()
    if precision == "auto":
        return "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    if precision in ("bf16", "fp16") and not cuda:
        raise ValueError(f"training.precision: {precision} needs a CUDA device; use auto or fp32 on CPU")
    return precision


@cache
def argument_hints() -> dict[str, Any]:
    """The type of each ``transformers.TrainingArguments`` field a config may give (imported on first use)."""
    from transformers import TrainingArguments

    return {item.name: item.type for item in fields(TrainingArguments) if item.init}


def check_training_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``arguments`` when ``transformers.TrainingArguments`` takes them: fields of the right type within
    :data:`TRAINING_BOUNDS`, an installed ``report_to``, its own checks; else ValueError naming ``training.<key>``."""
    from transformers import TrainingArguments
    from transformers.integrations import get_available_reporting_integrations

    hints = argument_hints()
    for key, value in arguments.items():
        if key in SET_BY_THE_WORKBENCH or key not in hints:
            what = "is set by the workbench" if key in hints else "is not a transformers.TrainingArguments field"
            raise ValueError(
                f"training.{key}: {what} (docs/training.md lists the keys), got {key}: {shown(key, value)!r}"
            )
        if value is not None or TRAINING_DEFAULTS.get(key, 0) is not None:
            check_field(f"training.{key}", value, hints[key], TRAINING_BOUNDS.get(key))
    reporters = arguments.get("report_to") or "none"
    for name in [reporters] if isinstance(reporters, str) else reporters:
        check_choice("training.report_to", name, ["none", "all", *get_available_reporting_integrations()])
    check_honoured(arguments)
    given = {key: value for key, value in arguments.items() if value is not None}
    try:  # TrainingArguments' own checks, built once
        built = TrainingArguments(output_dir=None, **given)
    except (ValueError, TypeError):
        raise first_failing_key(given) from None
    check_optimizer(arguments, built)
    return dict(arguments)


def first_failing_key(given: Mapping[str, Any]) -> ValueError:
    """The error of the first key (in the order given) whose addition makes ``TrainingArguments`` fail, naming it as
    ``training.<key>``: looked for only once the whole set has failed."""
    from transformers import TrainingArguments

    items = list(given.items())
    for end, (key, _) in enumerate(items, 1):
        try:
            TrainingArguments(output_dir=None, **dict(items[:end]))
        except (ValueError, TypeError) as error:
            return ValueError(f"training.{key}: {str(error).splitlines()[0]}")
    return ValueError(f"training: transformers.TrainingArguments refuses {dict(given)!r}")


@dataclass(frozen=True)
class TrainingConfig(Section, prefix="training"):
    """``transformers.TrainingArguments`` by their own names (any field, given flat, read as attributes:
    ``training.learning_rate``; checked by :func:`check_training_arguments`) and the workbench's own keys."""

    time_budget_s: float | None = option(None, "stop after this many seconds (pretrain_*: one more evaluation)", gt=0)
    threads: int | None = option(None, "torch CPU threads; null: OMP_NUM_THREADS when set, else half the cores", ge=1)
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
        """A copy with ``changes`` (flat keys, as a config gives them), checked as a new section is; a copy changing
        only :data:`INDEPENDENT_KEYS` checks just those values (TrainingArguments is not built again)."""
        if not changes or not set(changes) <= set(INDEPENDENT_KEYS):
            return type(self).from_mapping({**self.to_dict(), **changes})
        changed = copy.copy(self)  # no __init__: only the changed values are checked, below
        object.__setattr__(changed, "arguments", dict(self.arguments))
        own = _section_fields(type(self))
        for key, value in changes.items():
            if key in own:
                check = next(item for item in fields(self) if item.name == key).metadata["check"]
                object.__setattr__(changed, key, check_field(self.key(key), value, own[key], **check))
            else:
                hint = argument_hints()[key]
                changed.arguments[key] = check_field(f"training.{key}", value, hint, TRAINING_BOUNDS[key])
        return changed

    def merged(self, changes: Mapping[str, Any]) -> TrainingConfig:
        """:meth:`replace` for flat ``changes`` (``config.replace(training={"seed": 3})``), else merged and checked as a
        new section is."""
        if any(isinstance(value, Mapping) for value in changes.values()):
            return super().merged(changes)
        return self.replace(**changes)
