"""Trainers: ``finetune`` (any workbench loss), ``pretrain_mlm`` (WWM/KDM + HC/SR) and ``two_stage`` (auxiliary labels).

All three read one config format (``load_config``; see docs/training.md), run
on ``transformers.Trainer`` through :class:`~workbench.train.trainer.LossTrainer`
and return a :class:`Result`. ``python -m workbench.train CONFIG.yaml [key=value ...]``
runs any of them, also under ``torchrun`` / ``accelerate launch``.
"""

from __future__ import annotations

from workbench.train.config import DEFAULTS, load_config
from workbench.train.finetune import finetune
from workbench.train.pretrain import pretrain_mlm
from workbench.train.runs import Result
from workbench.train.two_stage import two_stage

TASK_RUNNERS = {"finetune": finetune, "pretrain_mlm": pretrain_mlm, "two_stage": two_stage}

__all__ = ["DEFAULTS", "TASK_RUNNERS", "Result", "finetune", "load_config", "pretrain_mlm", "two_stage"]
