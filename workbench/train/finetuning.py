"""Fine-tune a sequence classifier with any workbench loss (``finetune``); what every classifier trainer shares
(:func:`train_classifier`, :func:`write_classifier_result`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn
from transformers import DataCollatorWithPadding, TrainerCallback

from workbench.config import Config
from workbench.losses import resolve
from workbench.metrics import classification_report
from workbench.models import build_sequence_classifier, model_source
from workbench.train.checkpoints import Result, count_parameters, remove_checkpoints, training_run, write_result
from workbench.train.evaluation import best_epoch, epoch_metrics, evaluation_split, predict_probabilities, write_predictions
from workbench.train.inputs import ClassificationData, classification_data
from workbench.train.trainer import LossTrainer, training_arguments


@dataclass
class TrainedClassifier:
    """What :func:`train_classifier` returns: the trainer (its model the kept epoch's), the evaluation split's
    report with run statistics (``metrics``), that split's name, probabilities and gold labels, the kept epoch."""

    trainer: LossTrainer
    metrics: dict[str, Any]
    split: str
    probabilities: np.ndarray
    gold: np.ndarray
    best_epoch: int


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
    """Train ``model`` with ``loss`` (validation every epoch, the best by macro-F1 kept; ``training.resume``
    continues from the latest checkpoint), save it and the tokenizer into ``output_dir`` and predict the evaluation
    split (test, else validation). ``argument_overrides`` go to :func:`~workbench.train.trainer.training_arguments`."""
    start = time.perf_counter()
    trainer = trainer_class(
        model=model,
        args=training_arguments(config.training, str(output_dir), evaluate=True, **argument_overrides),
        train_dataset=data.encoded["train"],
        eval_dataset=data.encoded["validation"],
        data_collator=DataCollatorWithPadding(data.tokenizer),
        processing_class=data.tokenizer,
        compute_metrics=epoch_metrics(data.names),
        callbacks=list(callbacks),
        loss=loss,
        time_budget_s=config.training.time_budget_s,
    )
    train_output = trainer.train()
    trainer.save_model(str(output_dir))
    split = evaluation_split(data.encoded)
    probabilities, gold = predict_probabilities(trainer, data.encoded[split], len(data.names))
    metrics = {
        **classification_report(gold, probabilities.argmax(axis=-1), label_names=data.names, ordinal=data.ordinal),
        "evaluated_split": split,
        "shared_with_train": data.shared_with_train,
        "best_validation_macro_f1": trainer.state.best_metric,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        "time": time.perf_counter() - start,
        "num_parameters": count_parameters(model),
    }
    return TrainedClassifier(trainer, metrics, split, probabilities, gold, best_epoch(trainer.state))


def finished_checkpoint(trained: TrainedClassifier, folder: Path, keep_checkpoints: bool) -> str | None:
    """Where a finished run's kept model lives: its checkpoint when ``keep_checkpoints``, else ``folder`` (whose
    checkpoints are removed; the best model was saved into it)."""
    if keep_checkpoints:
        return trained.trainer.state.best_model_checkpoint
    remove_checkpoints(folder)
    return str(folder)


def write_classifier_result(config: Config, trained: TrainedClassifier, data: ClassificationData, head: dict[str, Any]) -> Result:
    """``predictions.csv``, the checkpoints' clean-up and ``metrics.json`` (``head``, the report, the config)."""
    output_dir = Path(config.output_dir)
    if trained.trainer.is_world_process_zero():
        write_predictions(output_dir, trained.gold, trained.probabilities, data.names)
    best = finished_checkpoint(trained, output_dir, config.training.keep_checkpoints)
    metrics = {**head, **trained.metrics, "parameters": config.to_dict()}
    return write_result(output_dir, metrics, best, trained.trainer.state.log_history)


def finetune(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Fine-tune a classifier on ``config`` (docs/training.md) and write its run folder.

    The model is a tiny BERT or ``model.model_name_or_path``, the loss ``workbench.losses.resolve(config.loss)``
    (label counts of the training split for wce / pcl), trained by :func:`train_classifier`; ``output_dir`` gets
    the best model and tokenizer, ``metrics.json`` and ``predictions.csv`` of the test split (validation without
    one). ``callbacks``: extra TrainerCallbacks.
    """
    with training_run(config, "finetune") as config:
        data = classification_data(config)
        source = model_source(config.model, len(data.tokenizer), config.data.max_length)
        model = build_sequence_classifier(len(data.names), **source)
        loss = resolve(config.loss, data.splits["train"])
        trained = train_classifier(config, model, loss, data, Path(config.output_dir), callbacks)
        return write_classifier_result(config, trained, data, {"task": "finetune", "loss": config.loss.to_dict()})
