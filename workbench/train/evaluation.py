"""Evaluation of classifiers during and after training: per-epoch metrics, the final report, predictions.

Predictions take the argmax over the first ``num_labels`` logits only, so a
stage-1 auxiliary-label model (K+n outputs) is scored on its K task labels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from datasets import Dataset
from transformers import EvalPrediction, Trainer

from workbench.metrics import classification_report

PREDICTIONS_FILE = "predictions.csv"


def task_probabilities(logits: np.ndarray, num_labels: int) -> np.ndarray:
    """Softmax over the first ``num_labels`` logits of each row (float64)."""
    task_logits = torch.as_tensor(np.asarray(logits)[:, :num_labels], dtype=torch.float64)
    return torch.softmax(task_logits, dim=-1).numpy()


def epoch_metrics(label_names: Sequence[str]) -> Callable[[EvalPrediction], dict[str, float]]:
    """``compute_metrics`` for the Trainer: validation ``macro_f1`` and ``accuracy`` (scalars only)."""
    num_labels = len(label_names)

    def compute(prediction: EvalPrediction) -> dict[str, float]:
        logits = prediction.predictions[0] if isinstance(prediction.predictions, tuple) else prediction.predictions
        predicted = np.asarray(logits)[:, :num_labels].argmax(axis=-1)
        report = classification_report(prediction.label_ids, predicted, label_names=list(label_names))
        return {"macro_f1": report["macro_f1"], "accuracy": report["accuracy"]}

    return compute


def evaluation_split(splits: Any) -> str:
    """The split the final report is computed on: ``test`` when present, else ``validation``."""
    return "test" if "test" in splits else "validation"


def predict_and_report(
    trainer: Trainer, dataset: Dataset, label_names: Sequence[str], output_dir: str | Path
) -> dict[str, Any]:
    """Predict ``dataset``, write ``predictions.csv`` (gold, pred, one probability column per
    label) into ``output_dir`` (main process only) and return ``classification_report`` of the predictions."""
    output = trainer.predict(dataset)
    logits = output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
    probabilities = task_probabilities(logits, len(label_names))
    predicted = probabilities.argmax(axis=-1)
    gold = np.asarray(output.label_ids)
    table = pd.DataFrame({"gold": gold, "pred": predicted})
    for index, name in enumerate(label_names):
        table[f"p_{name}"] = probabilities[:, index]
    if trainer.is_world_process_zero():
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        table.to_csv(Path(output_dir) / PREDICTIONS_FILE, index=False)
    return classification_report(gold, predicted, label_names=list(label_names))
