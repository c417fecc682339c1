"""Trainers and fitters (docs/training.md).

* ``finetune`` (any workbench loss), ``pretrain_mlm`` (WWM/KDM + HC/SR), ``two_stage`` (auxiliary labels) and
  ``pretrain_electra`` read one config (:func:`load_config`), run on ``transformers.Trainer`` through
  ``LossTrainer`` and return a :class:`Result`; ``python -m workbench.train CONFIG.yaml [key=value ...]`` runs
  any of them, also under ``torchrun`` / ``accelerate launch``. ``fusion_finetune`` (M-BERT) and
  ``fusion_description`` serve the auxiliary-label study.
* :class:`Fitter` (``build_fitter``): how a study fits a classifier with a loss and a seed (probe or transformer).

Names are imported on first use (PEP 562), so ``python -m workbench.train --help`` loads no torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from workbench.config import TASKS, Config, load_config

_EXPORTS = {
    **dict.fromkeys(("finetune",), "workbench.train.finetuning"),
    **dict.fromkeys(("pretrain_mlm",), "workbench.train.pretraining"),
    **dict.fromkeys(("two_stage", "fusion_finetune", "fusion_description"), "workbench.train.two_stage_training"),
    **dict.fromkeys(("pretrain_electra",), "workbench.train.electra"),
    **dict.fromkeys(("Result",), "workbench.train.result"),
    **dict.fromkeys(("Fit", "Fitter", "ProbeFitter", "TransformerFitter", "build_fitter"), "workbench.train.fit"),
    **dict.fromkeys(("ClassificationData", "classification_data", "tokenize_splits"), "workbench.train.inputs"),
    **dict.fromkeys(("evaluation_split",), "workbench.train.evaluation"),
    **dict.fromkeys(("drop_weights",), "workbench.train.checkpoints"),
    **dict.fromkeys(("split_heldout", "fixed_mask_batches", "evaluate_masked_lm"), "workbench.train.heldout"),
}

__all__ = ["TASK_RUNNERS", "Config", "load_config", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name == "TASK_RUNNERS":
        return {task: __getattr__(task) for task in TASKS}
    if name not in _EXPORTS:
        raise AttributeError(f"module 'workbench.train' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
