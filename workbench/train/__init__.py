"""Trainers and fitters (docs/training.md): ``finetune``, ``pretrain_mlm``, ``two_stage`` and ``pretrain_electra`` read
one config (:func:`load_config`) and return a :class:`Result` (``python -m workbench.train CONFIG.yaml [key=value ...]``
runs any of them); ``fusion_finetune`` (M-BERT); :class:`Fitter`: how a study fits a classifier with a loss and a seed.
Names are imported on first use (PEP 562), so ``python -m workbench.train --help`` loads no torch."""

from __future__ import annotations

import importlib
from typing import Any

from workbench.config import TASKS, Config, LossSpec, load_config

_MODULES = {
    "finetuning": (
        "finetune",
        "ClassificationData",
        "classification_data",
        "tokenize_splits",
        "evaluation_split",
        "read_predictions",
    ),
    "two_stage_training": ("two_stage", "fusion_finetune", "fusion_description"),
    "electra": ("pretrain_electra",),
    "run_folder": ("Result", "drop_weights"),
    "fit": ("Fit", "Fitter", "ProbeFitter", "TransformerFitter", "build_fitter"),
    "pretraining": ("pretrain_mlm", "split_heldout", "fixed_mask_batches", "evaluate_masked_lm"),
    "losses_from_specs": (
        "loss_from_spec",
        "needs_label_counts",
        "check_specs",
        "check_loss_spec",
        "loss_hyperparameters",
        "fixed_hyperparameters",
    ),
    "settings": (
        "LOSS_SETTINGS",
        "SHARED_EPSILON",
        "check_settings_values",
        "extra_rows",
        "fair_baseline_predictions",
        "identical_by_construction",
        "offered",
        "settings_specs",
        "trained_as",
    ),
}
_EXPORTS = {name: f"workbench.train.{module}" for module, names in _MODULES.items() for name in names}
__all__ = ["TASK_RUNNERS", "Config", "LossSpec", "load_config", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "TASK_RUNNERS":
        return {task: __getattr__(task) for task in TASKS}
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workbench.train' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
