"""Trainers and fitters.

* ``finetune`` (any workbench loss), ``pretrain_mlm`` (WWM/KDM + HC/SR) and ``two_stage``
  (auxiliary labels) read one config (:func:`load_config`, :class:`workbench.config.Config`;
  docs/training.md), run on ``transformers.Trainer`` through ``LossTrainer`` and return a
  :class:`Result`. ``python -m workbench.train CONFIG.yaml [key=value ...]`` runs any of them,
  also under ``torchrun`` / ``accelerate launch``.
* :class:`Fitter` (``build_fitter``): the one way a study fits a classifier with a loss and a
  seed, with the character probe or a transformer.
"""

from __future__ import annotations

from workbench.config import Config, load_config
from workbench.train.finetune import finetune
from workbench.train.fit import Fit, Fitter, ProbeFitter, TransformerFitter, build_fitter
from workbench.train.evaluation import evaluation_split
from workbench.train.inputs import ClassificationData, classification_data, tokenize_splits
from workbench.train.pretrain import pretrain_mlm
from workbench.train.result import Result
from workbench.train.two_stage import two_stage

TASK_RUNNERS = {"finetune": finetune, "pretrain_mlm": pretrain_mlm, "two_stage": two_stage}

__all__ = [
    "TASK_RUNNERS",
    "ClassificationData",
    "Config",
    "Fit",
    "Fitter",
    "ProbeFitter",
    "Result",
    "TransformerFitter",
    "build_fitter",
    "classification_data",
    "evaluation_split",
    "finetune",
    "load_config",
    "pretrain_mlm",
    "tokenize_splits",
    "two_stage",
]
