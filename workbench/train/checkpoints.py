"""A run's ``checkpoint-N`` folders: refusing to overwrite another run, resuming, and cleaning up.

A run writes its checkpoints as direct children of its own folder (two_stage: of
``stage1/`` and ``stage2/``); only those are ever resumed from or removed.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from transformers.trainer_utils import get_last_checkpoint

from workbench.train.result import is_main_process

_CHECKPOINT = re.compile(r"^checkpoint-\d+$")


def checkpoints_in(folder: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders directly inside ``folder`` (none when it does not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(child for child in folder.iterdir() if child.is_dir() and _CHECKPOINT.match(child.name))


def checkpoint_to_resume(output_dir: str | Path, resume: bool) -> str | None:
    """The latest ``checkpoint-N`` in ``output_dir`` when ``resume`` (None if there is none).

    A run never overwrites another silently: an ``output_dir`` that already holds
    checkpoints (without ``resume``) or a finished run (its saved model or
    metrics.json, and no checkpoint to resume from) is a ValueError.
    """
    folder = Path(output_dir)
    checkpoints = checkpoints_in(folder)
    if resume and checkpoints:
        return get_last_checkpoint(str(folder))
    if checkpoints:
        raise ValueError(
            f"output_dir: {str(folder)!r} already holds checkpoints; set training.resume=true to continue "
            "that run or choose another output_dir"
        )
    if (folder / "config.json").is_file() or (folder / "metrics.json").is_file():
        raise ValueError(
            f"output_dir: {str(folder)!r} already holds a finished run (nothing to resume: its checkpoints "
            "were removed, training.keep_checkpoints=false); choose another output_dir"
        )
    return None


def remove_checkpoints(*folders: str | Path) -> None:
    """Delete the ``checkpoint-N`` folders directly inside each of ``folders`` (main process only).

    Checkpoints (model, optimizer and scheduler state) exist so that an interrupted run can
    resume; once it has finished, its best model is saved in its folder and they are dead
    weight. Nothing deeper is touched: another run nested inside keeps its files.
    """
    if not is_main_process():
        return
    for folder in folders:
        for checkpoint in checkpoints_in(folder):
            shutil.rmtree(checkpoint)
