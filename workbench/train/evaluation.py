"""Evaluation of classifiers during and after training: per-epoch metrics, predictions, the kept epoch.

Predictions take the argmax over the first ``num_labels`` logits, so a stage-1 auxiliary-label model (K+n
outputs) is scored on its K task labels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset
from transformers import EvalPrediction, Trainer, TrainerState

from workbench.metrics import classification_report

PREDICTIONS_FILE = "predictions.csv"


def _logits(predictions: Any) -> np.ndarray:
    return np.asarray(predictions[0] if isinstance(predictions, tuple) else predictions)


def epoch_metrics(label_names: Sequence[str]) -> Callable[[EvalPrediction], dict[str, float]]:
    """``compute_metrics`` for the Trainer: validation ``macro_f1`` and ``accuracy``."""

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        predicted = _logits(prediction.predictions)[:, : len(label_names)].argmax(axis=-1)
        report = classification_report(prediction.label_ids, predicted, label_names=list(label_names))
        return {"macro_f1": report["macro_f1"], "accuracy": report["accuracy"]}

    return compute


def evaluation_split(splits: Any) -> str:
    """The split the final report is computed on: ``test`` when present, else ``validation``."""
    return "test" if "test" in splits else "validation"


def predict_probabilities(trainer: Trainer, dataset: Dataset, num_labels: int) -> tuple[np.ndarray, np.ndarray]:
    """``(probabilities (n, num_labels), gold labels (n,))`` of ``dataset``: float64 softmax over the first
    ``num_labels`` logits of the trainer's model."""
    output = trainer.predict(dataset)
    logits = torch.as_tensor(_logits(output.predictions)[:, :num_labels], dtype=torch.float64)
    return torch.softmax(logits, dim=-1).numpy(), np.asarray(output.label_ids)


def write_predictions(output_dir: str | Path, gold: np.ndarray, probabilities: np.ndarray, label_names: Sequence[str]) -> Path:
    """``predictions.csv``: gold, pred (the argmax) and one ``p_<label>`` column per label."""
    table = pd.DataFrame({"gold": gold, "pred": probabilities.argmax(axis=-1)})
    for index, name in enumerate(label_names):
        table[f"p_{name}"] = probabilities[:, index]
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    table.to_csv(Path(output_dir) / PREDICTIONS_FILE, index=False)
    return Path(output_dir) / PREDICTIONS_FILE


def best_epoch(state: TrainerState) -> int:
    """The 1-based epoch whose checkpoint the Trainer kept as best (``best_model_checkpoint`` ends in
    ``checkpoint-<global step>``; the epoch is that of the evaluation logged at that step)."""
    if state.best_model_checkpoint is None:
        raise ValueError("state: has no best_model_checkpoint (evaluation and saving must run every epoch)")
    step = int(Path(state.best_model_checkpoint).name.rsplit("-", 1)[1])
    for entry in state.log_history:
        if entry.get("step") == step and "eval_macro_f1" in entry:
            return int(round(entry["epoch"]))
    raise ValueError(f"state: no evaluation was logged at step {step}, the best checkpoint's step")
