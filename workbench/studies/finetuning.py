"""One seeded transformer fine-tuning run for the study grids (``studies.dice``, ``studies.pcl``).

:func:`fit_transformer` trains a trainer-config ``model`` (a tiny BERT or a checkpoint such as
``hfl/chinese-roberta-wwm-ext``) with one loss through the team's trainer
(``workbench.train.finetune.train_classifier``: ``LossTrainer``, one evaluation per epoch, the
epoch with the best validation macro-F1 kept) in a temporary folder, quietly, and returns the
validation and test predictions of the kept model, its epoch and its validation macro-F1.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from datasets import DatasetDict
from torch import nn
from transformers import TrainerState, set_seed

from workbench.data import label_names
from workbench.models import build_sequence_classifier
from workbench.train import load_config
from workbench.train.evaluation import PREDICTIONS_FILE
from workbench.train.finetune import train_classifier
from workbench.train.inputs import tokenize_splits
from workbench.train.runs import model_source, progress_bars, tokenizer_from_config


@dataclass
class TransformerFit:
    """The kept (best-validation) model's ``validation_predictions`` and ``test_predictions``,
    its 1-based ``best_epoch`` and ``validation_macro_f1``."""

    validation_predictions: np.ndarray
    test_predictions: np.ndarray
    best_epoch: int
    validation_macro_f1: float


def best_epoch(state: TrainerState) -> int:
    """The 1-based epoch whose evaluation gave ``state.best_metric`` (validation macro-F1; the
    first such epoch, as the Trainer keeps the first best)."""
    for entry in state.log_history:
        if entry.get("eval_macro_f1") == state.best_metric:
            return int(round(entry["epoch"]))
    raise ValueError(f"state: no evaluation in log_history has the best metric {state.best_metric!r}")


def fit_transformer(
    splits: DatasetDict, loss: nn.Module, seed: int, model: Mapping[str, Any], training: Mapping[str, Any], max_length: int
) -> TransformerFit:
    """Fine-tune ``model`` (a trainer ``model`` section) on ``splits["train"]`` with ``loss`` and ``seed``.

    ``splits`` holds ``train``, ``validation`` and ``test`` with ``text`` (and ``text_pair``)
    and ``label``; inputs are truncated to ``max_length`` tokens. ``training`` is the trainer's
    ``training`` section (``quiet`` by default; ``seed`` is set from ``seed``). The classifier is
    built after ``set_seed(seed)``, so two losses with equal gradients give equal predictions on
    a deterministic device.
    """
    names = label_names(splits["train"])
    with tempfile.TemporaryDirectory(prefix="study_finetune_") as output_dir:
        config = load_config({
            "output_dir": output_dir,
            "data": {"max_length": max_length},
            "model": dict(model),
            "training": {"quiet": True, **training, "seed": seed},
        })
        with progress_bars(False):
            set_seed(seed)
            tokenizer = tokenizer_from_config(config["model"])
            encoded = tokenize_splits(splits, tokenizer, max_length)
            classifier = build_sequence_classifier(len(names), **model_source(config["model"], tokenizer, max_length))
            trainer, _ = train_classifier(config, classifier, loss, encoded, names, output_dir, tokenizer)
            validation = trainer.predict(encoded["validation"]).predictions
        test = pd.read_csv(Path(output_dir) / PREDICTIONS_FILE)["pred"].to_numpy()
    validation = validation[0] if isinstance(validation, tuple) else validation
    return TransformerFit(
        validation_predictions=np.asarray(validation)[:, : len(names)].argmax(axis=-1),
        test_predictions=test,
        best_epoch=best_epoch(trainer.state),
        validation_macro_f1=float(trainer.state.best_metric),
    )
