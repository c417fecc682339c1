"""Fine-tune a sequence classifier with any workbench loss (``finetune``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from datasets import Dataset, DatasetDict
from torch import nn
from transformers import DataCollatorWithPadding, TrainerCallback, set_seed

from workbench.data import label_counts, label_names
from workbench.losses import build_loss
from workbench.models import build_sequence_classifier
from workbench.train.evaluation import epoch_metrics, evaluation_split, predict_and_report
from workbench.train.inputs import load_splits, tokenize_splits
from workbench.train.runs import (
    Result,
    checkpoint_to_resume,
    config_for_task,
    count_parameters,
    model_source,
    progress_bars,
    tokenizer_from_config,
    write_result,
)
from workbench.train.trainer import LossTrainer, training_arguments

def takes_dataset_label_counts(loss: Mapping[str, Any]) -> bool:
    """True for wce, and for pcl with global counts (``counts="batch"`` takes none)."""
    params = loss["params"]
    return "label_counts" not in params and (
        loss["name"] == "wce" or (loss["name"] == "pcl" and params.get("counts", "global") == "global")
    )


def loss_from_config(loss: Mapping[str, Any], train: Dataset, num_labels: int) -> nn.Module:
    """``build_loss(loss.name, **loss.params)``; wce and global-count pcl get ``label_counts``
    from the training split unless the params give them."""
    params = dict(loss["params"])
    if takes_dataset_label_counts(loss):
        params["label_counts"] = [int(count) for count in label_counts(train, num_labels)]
    return build_loss(loss["name"], **params)


def train_classifier(
    config: dict[str, Any],
    model: nn.Module,
    loss: nn.Module,
    encoded: DatasetDict,
    names: Sequence[str],
    output_dir: Path,
    tokenizer: Any,
    callbacks: Sequence[TrainerCallback] = (),
    trainer_class: type[LossTrainer] = LossTrainer,
    trainer_kwargs: Mapping[str, Any] | None = None,
    **argument_overrides: Any,
) -> tuple[LossTrainer, dict[str, Any]]:
    """Train ``model`` with ``loss`` (per-epoch validation, best by macro-F1), save it into
    ``output_dir``, predict the evaluation split and return (trainer, metrics).

    ``trainer_kwargs`` go to ``trainer_class``; ``argument_overrides`` to
    :func:`~workbench.train.trainer.training_arguments` (e.g. ``epochs``, ``lr``)."""
    start = time.perf_counter()
    resume_from = checkpoint_to_resume(output_dir, config["training"]["resume"])
    trainer = trainer_class(
        model=model,
        args=training_arguments(config["training"], str(output_dir), evaluate=True, **argument_overrides),
        train_dataset=encoded["train"],
        eval_dataset=encoded["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        compute_metrics=epoch_metrics(names),
        callbacks=list(callbacks),
        loss=loss,
        **dict(trainer_kwargs or {}),
    )
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(str(output_dir))
    split = evaluation_split(encoded)
    report = predict_and_report(trainer, encoded[split], names, output_dir)
    metrics = {
        **report,
        "evaluated_split": split,
        "best_validation_macro_f1": trainer.state.best_metric,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        "time": time.perf_counter() - start,
        "num_parameters": count_parameters(model),
    }
    return trainer, metrics


def finetune(config: str | Path | Mapping[str, Any], callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Fine-tune a classifier on ``config`` (see docs/training.md) and write its run folder.

    Builds the model (tiny BERT or ``model.model_name_or_path``), the loss
    ``build_loss(loss.name, **loss.params)`` (label counts for wce/pcl from the
    training split), trains with :class:`~workbench.train.trainer.LossTrainer`
    (evaluation and a checkpoint per epoch, best by validation macro-F1,
    ``training.resume`` continues from the latest checkpoint), saves the best
    model and tokenizer into ``output_dir`` and writes ``metrics.json`` and
    ``predictions.csv`` for the test split (validation when there is none).
    ``callbacks`` are extra ``TrainerCallback`` objects.
    """
    config = config_for_task(config, "finetune")
    with progress_bars(not config["training"]["quiet"]):
        return _finetune(config, callbacks)


def _finetune(config: dict[str, Any], callbacks: Sequence[TrainerCallback]) -> Result:
    set_seed(config["training"]["seed"])
    output_dir = Path(config["output_dir"])
    tokenizer = tokenizer_from_config(config["model"])
    splits = load_splits(config["data"])
    names = label_names(splits["train"])
    encoded = tokenize_splits(splits, tokenizer, config["data"]["max_length"])
    model = build_sequence_classifier(len(names), **model_source(config["model"], tokenizer, config["data"]["max_length"]))
    loss = loss_from_config(config["loss"], splits["train"], len(names))
    trainer, metrics = train_classifier(config, model, loss, encoded, names, output_dir, tokenizer, callbacks)
    metrics = {"task": "finetune", "loss": config["loss"], **metrics, "parameters": config}
    return write_result(
        output_dir, metrics, trainer.state.best_model_checkpoint, trainer.state.log_history,
        keep_checkpoints=config["training"]["keep_checkpoints"],
    )
