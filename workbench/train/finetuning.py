"""Fine-tune a sequence classifier with any workbench loss (``finetune``), and what every classifier trainer shares:
tokenized splits, per-epoch metrics, training, predictions and the run folder. A head has the outputs its loss reads
(``workbench.losses.num_outputs``: K, or K - 1 for CORN) and predicts by the loss's rule (the argmax, or CORN's rank
rule) over its first outputs: a stage-1 model's K+n outputs are scored on its K task labels."""

from __future__ import annotations

import re
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset, DatasetDict
from torch import nn
from transformers import DataCollatorWithPadding, EvalPrediction, Trainer, TrainerCallback, TrainerState

from workbench.config import Config
from workbench.data import label_names, load_splits, shared_with_train
from workbench.losses import class_probabilities, num_outputs, predicted_labels
from workbench.metrics import classification_report
from workbench.metrics_file import write_atomically
from workbench.models import build_sequence_classifier, model_source
from workbench.train.losses_from_specs import loss_from_spec
from workbench.train.run_folder import (
    Result,
    check_classes,
    count_parameters,
    remove_checkpoints,
    training_run,
    write_result,
)
from workbench.train.trainer import LossTrainer, save_final_model, training_arguments
from workbench.vocab import clip_texts, load_tokenizer

UNREADABLE_SHARE = 0.1  # a split with more than this share of unreadable samples gets a warning
_WARNED: set[str] = set()  # messages given: Python's own once-per-place is reset whenever sklearn sets a filter


def warn_once(message: str) -> None:
    """``warnings.warn(message)`` once per process, however many fits a study runs."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, stacklevel=3)


def warn_unreadable(rows: Mapping[str, Sequence[Sequence[int]]], tokenizer: Any) -> None:
    """One warning (once per process) names the splits (name -> token-id rows) with more than ``UNREADABLE_SHARE`` of
    rows whose tokens (special tokens aside) are mostly ``[UNK]`` or single Latin letters."""
    letter = re.compile(r"(##)?[A-Za-z]")
    unreadable = {
        i for token, i in tokenizer.get_vocab().items() if token == tokenizer.unk_token or letter.fullmatch(token)
    }
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    shares = {}
    for name, split in rows.items():
        tokens = ([i for i in ids if i not in special] for ids in split)
        shares[name] = sum(bool(row) and sum(i in unreadable for i in row) > len(row) / 2 for row in tokens) / max(
            len(split), 1
        )
    named = ", ".join(f"{share:.0%} of {name}" for name, share in shares.items() if share > UNREADABLE_SHARE)
    if named:
        warn_once(
            f"text the vocabulary cannot read: {named} samples are mostly [UNK] or single Latin letters; "
            "use a vocabulary that fits the language (model.vocab_file) or a model.model_name_or_path "
            "whose tokenizer does"
        )


def tokenize_splits(splits: DatasetDict, tokenizer: Any, max_length: int) -> DatasetDict:
    """``text`` (and ``text_pair``) as at most ``max_length`` unpadded tokens (each text :func:`clip_texts`-ed first),
    ``label`` renamed ``labels``; :func:`warn_unreadable` warns about text the vocabulary cannot read."""

    def encode(batch: dict[str, list]) -> dict[str, list]:
        pairs = clip_texts(batch["text_pair"], max_length) if "text_pair" in batch else None
        encoded = tokenizer(clip_texts(batch["text"], max_length), pairs, truncation=True, max_length=max_length)
        return {**encoded, "labels": batch["label"]}

    encoded = DatasetDict(
        {
            name: split.map(encode, batched=True, remove_columns=split.column_names, desc=f"tokenize {name}")
            for name, split in splits.items()
        }
    )
    warn_unreadable({name: split["input_ids"] for name, split in encoded.items()}, tokenizer)
    return encoded


@dataclass
class ClassificationData:
    """A config's splits, label names, tokenizer, tokenized splits, ``data.is_ordinal``, rows shared with train."""

    splits: DatasetDict
    names: list[str]
    tokenizer: Any
    encoded: DatasetDict
    ordinal: bool = False
    shared_with_train: dict[str, int] = field(default_factory=dict)


def warn_shared(splits: DatasetDict) -> dict[str, int]:
    """``shared_with_train(splits)``, with a warning (once per process) when an evaluation split shares a text with
    train: splits a caller built (``load_splits``' share none, docs/data.md)."""
    shared = shared_with_train(splits)
    if any(shared.values()):
        counts = ", ".join(f"{name} {count} of {len(splits[name])}" for name, count in shared.items() if count)
        warn_once(f"rows shared with train (text, text_pair): {counts}; workbench.data.deduplicate_splits removes them")
    return shared


def classification_data(config: Config, splits: DatasetDict | None = None) -> ClassificationData:
    """``config.data``'s splits (or ``splits``) tokenized by ``config.model``'s tokenizer; a warning counts the rows
    that the evaluation splits share with training."""
    splits = load_splits(config.data) if splits is None else splits
    shared = warn_shared(splits)
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    encoded = tokenize_splits(splits, tokenizer, config.data.max_length)
    return ClassificationData(splits, label_names(splits["train"]), tokenizer, encoded, config.data.is_ordinal, shared)


PREDICTIONS_FILE = "predictions.csv"


def _logits(predictions: Any) -> np.ndarray:
    return np.asarray(predictions[0] if isinstance(predictions, tuple) else predictions)


def _head_logits(logits: Any, loss: nn.Module, num_labels: int) -> torch.Tensor:
    """The float64 logits of the head ``loss`` reads for ``num_labels`` classes: the first ``num_outputs`` outputs."""
    return torch.as_tensor(np.asarray(logits)[:, : num_outputs(loss, num_labels)], dtype=torch.float64)


def epoch_metrics(prediction: EvalPrediction, label_names: Sequence[str], loss: nn.Module) -> dict[str, float]:
    """The Trainer's ``compute_metrics`` (with ``label_names`` and the ``loss`` bound): validation ``macro_f1`` and
    ``accuracy`` of the loss's predictions (the argmax, or CORN's rank rule)."""
    logits = _head_logits(_logits(prediction.predictions), loss, len(label_names))
    predicted = predicted_labels(loss, logits).numpy()
    report = classification_report(prediction.label_ids, predicted, label_names=list(label_names))
    return {"macro_f1": report["macro_f1"], "accuracy": report["accuracy"]}


def evaluation_split(splits: Any) -> str:
    """The split the final report is computed on: ``test`` when present, else ``validation``."""
    return "test" if "test" in splits else "validation"


def read_predictions(output_dir: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(gold, predicted)`` class ids of a run folder's ``predictions.csv`` (:func:`write_predictions`)."""
    path = Path(output_dir) / PREDICTIONS_FILE
    if not path.is_file():
        raise ValueError(
            f"output_dir: {str(output_dir)!r} has no {PREDICTIONS_FILE} (a finetune or two_stage run writes one)"
        )
    table = pd.read_csv(path)
    return table["gold"].to_numpy(dtype=np.int64), table["pred"].to_numpy(dtype=np.int64)


@dataclass
class Predicted:
    """A split's float64 class ``probabilities`` (n, K), ``predicted`` class ids (n,) and ``gold`` labels (n,)."""

    probabilities: np.ndarray
    predicted: np.ndarray
    gold: np.ndarray


def predict_split(trainer: Trainer, dataset: Dataset, num_labels: int, loss: nn.Module) -> Predicted:
    """``dataset``'s :class:`Predicted` under ``loss`` over ``num_labels`` classes: the loss's probabilities (softmax,
    or CORN's) and predictions (argmax, or CORN's rank rule) of the head's first ``num_outputs`` outputs."""
    output = trainer.predict(dataset)
    logits = _head_logits(_logits(output.predictions), loss, num_labels)
    probabilities = class_probabilities(loss, logits).numpy()
    return Predicted(probabilities, predicted_labels(loss, logits).numpy(), np.asarray(output.label_ids))


def write_predictions(
    output_dir: str | Path,
    gold: np.ndarray,
    probabilities: np.ndarray,
    label_names: Sequence[str],
    predicted: np.ndarray,
) -> Path:
    """``predictions.csv``: gold, pred (``predicted`` by the loss's rule: the argmax, or CORN's rank rule) and one
    ``p_<label>`` column per label."""
    columns = {f"p_{name}": probabilities[:, index] for index, name in enumerate(label_names)}
    table = pd.DataFrame({"gold": gold, "pred": predicted, **columns})
    return write_atomically(Path(output_dir) / PREDICTIONS_FILE, table.to_csv(index=False))


def best_epoch(state: TrainerState) -> int:
    """The 1-based epoch of the evaluation logged at the step of ``best_model_checkpoint`` (``checkpoint-<step>``)."""
    if state.best_model_checkpoint is None:
        raise ValueError("state: has no best_model_checkpoint (evaluation and saving must run every epoch)")
    step = int(Path(state.best_model_checkpoint).name.rsplit("-", 1)[1])
    for entry in state.log_history:
        if entry.get("step") == step and "eval_macro_f1" in entry:
            return int(round(entry["epoch"]))
    raise ValueError(f"state: no evaluation was logged at step {step}, the best checkpoint's step")


@dataclass
class TrainedClassifier:
    """:func:`train_classifier`'s trainer (its model the kept epoch's), the evaluation split's report with run
    statistics, that split's name, probabilities, predictions (the loss's rule) and gold labels, and the kept epoch."""

    trainer: LossTrainer
    metrics: dict[str, Any]
    split: str
    probabilities: np.ndarray
    gold: np.ndarray
    best_epoch: int
    predicted: np.ndarray


def train_classifier(
    config: Config,
    model: nn.Module,
    loss: nn.Module,
    data: ClassificationData,
    output_dir: Path,
    callbacks: Sequence[TrainerCallback] = (),
    trainer_class: Callable[..., LossTrainer] = LossTrainer,
    **argument_overrides: Any,
) -> TrainedClassifier:
    """Train ``model`` with ``loss`` (the best epoch by validation macro-F1 kept), save it with the tokenizer into
    ``output_dir`` and predict test (else validation) by the loss's rule; ``argument_overrides`` go to
    ``training_arguments``. ``model``'s head must have the outputs ``loss`` reads (``workbench.losses.num_outputs``)."""
    start = time.perf_counter()
    check_classes(output_dir, data.names, config.training.resume)
    trainer = trainer_class(
        model=model,
        args=training_arguments(config.training, str(output_dir), evaluate=True, **argument_overrides),
        train_dataset=data.encoded["train"],
        eval_dataset=data.encoded["validation"],
        data_collator=DataCollatorWithPadding(data.tokenizer),
        processing_class=data.tokenizer,
        compute_metrics=partial(epoch_metrics, label_names=data.names, loss=loss),
        callbacks=list(callbacks),
        loss=loss,
        time_budget_s=config.training.time_budget_s,
    )
    train_output = trainer.train()
    save_final_model(trainer, output_dir)
    split = evaluation_split(data.encoded)
    predicted = predict_split(trainer, data.encoded[split], len(data.names), loss)
    metrics = {
        **classification_report(predicted.gold, predicted.predicted, label_names=data.names, ordinal=data.ordinal),
        "evaluated_split": split,
        "shared_with_train": data.shared_with_train,
        "data_provenance": getattr(data.splits, "provenance", None),  # load_splits' record: which file, cut how
        "best_validation_macro_f1": trainer.state.best_metric,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        "time": time.perf_counter() - start,
        "num_parameters": count_parameters(model),
        "train_steps": trainer.state.global_step,
    }
    return TrainedClassifier(
        trainer,
        metrics,
        split,
        predicted.probabilities,
        predicted.gold,
        best_epoch(trainer.state),
        predicted.predicted,
    )


def finished_checkpoint(trained: TrainedClassifier, folder: Path, keep_checkpoints: bool) -> str | None:
    """Where the kept model lives: its checkpoint when ``keep_checkpoints``, else ``folder`` (checkpoints removed)."""
    if keep_checkpoints:
        return trained.trainer.state.best_model_checkpoint
    remove_checkpoints(folder)
    return str(folder)


def write_classifier_result(
    config: Config, trained: TrainedClassifier, data: ClassificationData, head: dict[str, Any]
) -> Result:
    """``predictions.csv``, the checkpoints' clean-up and ``metrics.json`` (``head``, the report, the config)."""
    output_dir = Path(config.output_dir)
    if trained.trainer.is_world_process_zero():
        write_predictions(output_dir, trained.gold, trained.probabilities, data.names, trained.predicted)
    best = finished_checkpoint(trained, output_dir, config.training.keep_checkpoints)
    metrics = {**head, **trained.metrics, "parameters": config.to_dict()}
    return write_result(output_dir, metrics, best, trained.trainer.state.log_history)


def finetune(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Fine-tune a tiny BERT or ``model.model_name_or_path`` on ``config`` (docs/training.md) with
    ``loss_from_spec(config.loss)``; ``output_dir`` gets the best model, tokenizer, ``metrics.json``, test (else
    validation) ``predictions.csv``."""
    with training_run(config, "finetune") as config:
        data = classification_data(config)
        source = model_source(config.model, len(data.tokenizer), config.data.max_length)
        loss = loss_from_spec(config.loss, data.splits["train"])
        model = build_sequence_classifier(num_outputs(loss, len(data.names)), **source)
        trained = train_classifier(config, model, loss, data, Path(config.output_dir), callbacks)
        return write_classifier_result(config, trained, data, {"task": "finetune", "loss": config.loss.to_dict()})
