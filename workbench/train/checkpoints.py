"""A run's ``checkpoint-N`` folders: refusing to overwrite another run, resuming, and cleaning up.

A run writes its checkpoints as direct children of its own folder (two_stage: of
``stage1/`` and ``stage2/``); only those are ever resumed from or removed. :func:`drop_weights`
removes the saved model of finished runs whose results are recorded (a study's run folders). They are written
atomically (``LossTrainer`` saves into ``<folder>/.staging/`` and renames), and a checkpoint
counts as complete only when its trainer state and weights are there.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

from workbench.train.result import is_main_process

_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
STAGING_DIR = ".staging"
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")


def checkpoints_in(folder: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders directly inside ``folder``, by increasing N (none when it does not exist)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [child for child in folder.iterdir() if child.is_dir() and _CHECKPOINT.match(child.name)]
    return sorted(found, key=lambda path: int(_CHECKPOINT.match(path.name).group(1)))


def is_complete(checkpoint: Path) -> bool:
    """True when ``checkpoint`` holds a readable ``trainer_state.json`` and the model weights."""
    try:
        json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any((checkpoint / name).is_file() for name in WEIGHTS_FILES)


def checkpoint_to_resume(output_dir: str | Path, resume: bool) -> str | None:
    """The latest complete ``checkpoint-N`` in ``output_dir`` when ``resume`` (None if there is none).

    Incomplete checkpoints (a kill mid-save by an older writer, a partial copy) are skipped with
    a warning naming them. A run never overwrites another silently: an ``output_dir`` that already
    holds checkpoints (without ``resume``) or a finished run (its saved model or metrics.json, and
    no checkpoint to resume from) is a ValueError.
    """
    folder = Path(output_dir)
    checkpoints = checkpoints_in(folder)
    if resume and checkpoints:
        complete = [checkpoint for checkpoint in checkpoints if is_complete(checkpoint)]
        for checkpoint in checkpoints:
            if checkpoint not in complete:
                warnings.warn(
                    f"output_dir: skipping the incomplete checkpoint {str(checkpoint)!r} (no readable "
                    "trainer_state.json or weights); resuming from the last complete one",
                    stacklevel=2,
                )
        if not complete:
            raise ValueError(
                f"output_dir: {str(folder)!r} holds only incomplete checkpoints "
                f"{[path.name for path in checkpoints]}; nothing to resume from: remove them or choose another output_dir"
            )
        shutil.rmtree(folder / STAGING_DIR, ignore_errors=True)
        return str(complete[-1])
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
        shutil.rmtree(Path(folder) / STAGING_DIR, ignore_errors=True)


_WEIGHTS_PATTERNS = ("model*.safetensors", "pytorch_model*.bin")


def drop_weights(root: str | Path) -> int:
    """Delete the saved model weights of every finished run under ``root`` (at any depth), keeping
    everything else: metrics.json, predictions.csv, config.json, the tokenizer. Returns the bytes freed.

    For a notebook's run folders once its results are recorded (notebook 03 trains 30-odd tiny
    models, 1.6 MB each, which would otherwise make up most of a default run folder). Weights inside
    ``checkpoint-N`` folders (an interrupted run, resumable) are left alone; a folder whose weights
    were dropped is still refused as the output_dir of a new run (:func:`checkpoint_to_resume`).
    Main process only.
    """
    root = Path(root)
    if not is_main_process() or not root.is_dir():
        return 0
    freed = 0
    for pattern in _WEIGHTS_PATTERNS:
        for path in sorted(root.rglob(pattern)):
            relative = path.relative_to(root).parts[:-1]
            if not path.is_file() or any(_CHECKPOINT.match(part) or part == STAGING_DIR for part in relative):
                continue
            freed += path.stat().st_size
            path.unlink()
    return freed
