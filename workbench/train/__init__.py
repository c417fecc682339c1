"""Trainers and fitters.

* ``finetune`` (any workbench loss), ``pretrain_mlm`` (WWM/KDM + HC/SR), ``two_stage``
  (auxiliary labels) and ``pretrain_electra`` (generator + discriminator, HC/SR) read one config (:func:`load_config`, :class:`workbench.config.Config`;
  docs/training.md), run on ``transformers.Trainer`` through ``LossTrainer`` and return a
  :class:`Result`. ``python -m workbench.train CONFIG.yaml [key=value ...]`` runs any of them,
  also under ``torchrun`` / ``accelerate launch``.
* ``fusion_finetune`` (the fusion fine-tuned in one stage, M-BERT) and ``fusion_description``
  serve the auxiliary-label study beside ``two_stage``.
* :class:`Fitter` (``build_fitter``): the one way a study fits a classifier with a loss and a
  seed, with the character probe or a transformer.

Names are imported on first use (PEP 562), so ``python -m workbench.train --help`` does not
load torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

from workbench.config import TASKS, Config, load_config

_EXPORTS = {
    "finetune": "workbench.train.finetuning",
    "pretrain_mlm": "workbench.train.pretraining",
    "two_stage": "workbench.train.two_stage_training",
    "fusion_finetune": "workbench.train.two_stage_training",
    "fusion_description": "workbench.train.two_stage_training",
    "pretrain_electra": "workbench.train.electra",
    "Result": "workbench.train.result",
    "Fit": "workbench.train.fit",
    "Fitter": "workbench.train.fit",
    "ProbeFitter": "workbench.train.fit",
    "TransformerFitter": "workbench.train.fit",
    "build_fitter": "workbench.train.fit",
    "ClassificationData": "workbench.train.inputs",
    "classification_data": "workbench.train.inputs",
    "tokenize_splits": "workbench.train.inputs",
    "evaluation_split": "workbench.train.evaluation",
    "drop_weights": "workbench.train.checkpoints",
    "split_heldout": "workbench.train.heldout",
    "fixed_mask_batches": "workbench.train.heldout",
    "evaluate_masked_lm": "workbench.train.heldout",
}

__all__ = ["TASK_RUNNERS", "Config", "load_config", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "TASK_RUNNERS":
        return {task: __getattr__(task) for task in TASKS}
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workbench.train' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
