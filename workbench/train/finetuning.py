"""Fine-tune a sequence classifier with any workbench loss (``finetune``); the frame every classifier trainer
shares (:func:`classifier_run`, :func:`train_classifier`, :func:`write_classifier_result`)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn
from transformers import DataCollatorWithPadding, TrainerCallback, set_seed

from workbench.config import Config, load_config
from workbench.losses import resolve
from workbench.metrics import classification_report
from workbench.models import build_sequence_classifier, model_source
from workbench.threads import torch_threads
from workbench.train.checkpoints import checkpoint_to_resume, claim_output_dir, remove_checkpoints
from workbench.train.evaluation import best_epoch, epoch_metrics, evaluation_split, predict_probabilities, write_predictions
from workbench.train.inputs import ClassificationData, classification_data
from workbench.train.result import Result, count_parameters, write_result
from workbench.train.trainer import LossTrainer, training_arguments
from workbench.train.verbosity import progress_bars


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


@contextmanager
def classifier_run(config: Any, task: str, *subfolders: str) -> Iterator[tuple[Config, ClassificationData]]:
    """The frame of a classifier run: ``config`` loaded for ``task``, its output_dir (and ``subfolders``) claimed
    before any data is loaded (:func:`claim_output_dir`), bars, threads and seed set; yields the config and data."""
    config = load_config(config, task=task)
    with claim_output_dir(config, *subfolders), progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        set_seed(config.training.seed)
        yield config, classification_data(config)


def train_classifier(
    config: Config,
    model: nn.Module,
    loss: nn.Module,
    data: ClassificationData,
    output_dir: Path,
    callbacks: Sequence[TrainerCallback] = (),
    trainer_class: type[LossTrainer] = LossTrainer,
    trainer_kwargs: Mapping[str, Any] | None = None,
    **argument_overrides: Any,
) -> TrainedClassifier:
    """Train ``model`` with ``loss`` (validation every epoch, the best by macro-F1 kept), save it and the tokenizer
    into ``output_dir`` and predict the evaluation split (test, else validation). ``trainer_kwargs`` go to
    ``trainer_class``, ``argument_overrides`` to :func:`~workbench.train.trainer.training_arguments`."""
    start = time.perf_counter()
    resume_from = checkpoint_to_resume(output_dir, config.training.resume)
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
        **dict(trainer_kwargs or {}),
    )
    train_output = trainer.train(resume_from_checkpoint=resume_from)
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
    (label counts of the training split for wce / pcl); :func:`train_classifier` trains it (``training.resume``
    continues from the latest checkpoint); ``output_dir`` gets the best model and tokenizer, ``metrics.json``
    and ``predictions.csv`` of the test split (validation without one). ``callbacks``: extra TrainerCallbacks.
    """
    with classifier_run(config, "finetune") as (config, data):
        source = model_source(config.model, len(data.tokenizer), config.data.max_length)
        model = build_sequence_classifier(len(data.names), **source)
        trained = train_classifier(
            config, model, resolve(config.loss, data.splits["train"]), data, Path(config.output_dir), callbacks
        )
        return write_classifier_result(config, trained, data, {"task": "finetune", "loss": config.loss.to_dict()})
