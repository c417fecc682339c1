"""Fine-tune a sequence classifier with any workbench loss (``finetune``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
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
from workbench.train.checkpoints import checkpoint_to_resume, remove_checkpoints
from workbench.train.evaluation import (
    best_epoch,
    epoch_metrics,
    evaluation_split,
    predict_probabilities,
    write_predictions,
)
from workbench.train.inputs import ClassificationData, classification_data
from workbench.train.result import Result, count_parameters, is_main_process, write_result
from workbench.train.trainer import LossTrainer, training_arguments
from workbench.train.verbosity import progress_bars


@dataclass
class TrainedClassifier:
    """What :func:`train_classifier` returns: the trainer (its model is the kept epoch's), the
    report on the evaluation split with run statistics (``metrics``), that split's name, its
    probabilities and gold labels, and the kept 1-based epoch."""

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
    trainer_class: type[LossTrainer] = LossTrainer,
    trainer_kwargs: Mapping[str, Any] | None = None,
    **argument_overrides: Any,
) -> TrainedClassifier:
    """Train ``model`` with ``loss`` (validation after every epoch, the best epoch by macro-F1 kept),
    save it and the tokenizer into ``output_dir`` and predict the evaluation split (test, else validation).

    ``trainer_kwargs`` go to ``trainer_class``; ``argument_overrides`` to
    :func:`~workbench.train.trainer.training_arguments` (e.g. ``num_train_epochs``, ``learning_rate``)."""
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
    """Where the kept model of a finished run lives: its checkpoint when ``keep_checkpoints``,
    else ``folder`` (the checkpoints there are removed; the best model was saved into it)."""
    if keep_checkpoints:
        return trained.trainer.state.best_model_checkpoint
    remove_checkpoints(folder)
    return str(folder)


def refuse_occupied(config: Config, *subfolders: str) -> None:
    """Refuse an ``output_dir`` (or its ``subfolders``) that holds another run before any data is
    loaded, so the refusal is the only thing printed; with ``training.resume`` the trainer checks later."""
    if not config.training.resume:
        for folder in subfolders or ("",):
            checkpoint_to_resume(Path(config.output_dir) / folder, resume=False)


def finetune(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Fine-tune a classifier on ``config`` (see docs/training.md) and write its run folder.

    Builds the model (tiny BERT or ``model.model_name_or_path``) and the loss
    (``workbench.losses.resolve``: label counts for wce/pcl from the training split),
    trains with :class:`~workbench.train.trainer.LossTrainer` (evaluation and a checkpoint
    per epoch, best by validation macro-F1, ``training.resume`` continues from the latest
    checkpoint), saves the best model and tokenizer into ``output_dir`` and writes
    ``metrics.json`` and ``predictions.csv`` for the test split (validation when there is
    none). ``callbacks`` are extra ``TrainerCallback`` objects.
    """
    config = load_config(config, task="finetune")
    refuse_occupied(config)
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        set_seed(config.training.seed)
        output_dir = Path(config.output_dir)
        data = classification_data(config)
        source = model_source(config.model, len(data.tokenizer), config.data.max_length)
        model = build_sequence_classifier(len(data.names), **source)
        trained = train_classifier(config, model, resolve(config.loss, data.splits["train"]), data, output_dir, callbacks)
        if is_main_process():
            write_predictions(output_dir, trained.gold, trained.probabilities, data.names)
        best = finished_checkpoint(trained, output_dir, config.training.keep_checkpoints)
        metrics = {"task": "finetune", "loss": config.loss.to_dict(), **trained.metrics, "parameters": config.to_dict()}
        return write_result(output_dir, metrics, best, trained.trainer.state.log_history)
