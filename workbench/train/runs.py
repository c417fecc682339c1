"""What every trainer run shares: its config, its output folder (and resuming), tokenizer and model spec, its Result."""

from __future__ import annotations

import html
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
from torch import nn
from transformers.trainer_utils import get_last_checkpoint
from transformers.utils import logging as transformers_logging

from workbench.models import tokenizer_for
from workbench.results import write_metrics
from workbench.train.config import load_config

_CHECKPOINT = re.compile(r"^checkpoint-\d+$")


@dataclass
class Result:
    """What a run produced: its folder, ``metrics`` (as in metrics.json), best checkpoint, log history."""

    output_dir: Path
    metrics: dict[str, Any]
    best_checkpoint: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(str(key))}</td><td>{value:.4g}</td></tr>"
            for key, value in self.metrics.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool)
        )
        return (
            f"<b>Result</b> {html.escape(str(self.output_dir))}<br>best checkpoint: "
            f"{html.escape(str(self.best_checkpoint))}<table>{rows}</table>"
        )


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, hide (``enabled=False``) the progress bars of ``datasets`` and of
    ``transformers`` outside the Trainer (model saving), and its warnings below errors (e.g.
    the LOAD REPORT of a classifier built from an MLM checkpoint, whose fresh head is
    expected); restore the previous settings after."""
    if enabled:
        yield
        return
    datasets_were_on = not datasets.are_progress_bars_disabled()
    transformers_were_on = transformers_logging.is_progress_bar_enabled()
    verbosity = transformers_logging.get_verbosity()
    datasets.disable_progress_bars()
    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if datasets_were_on:
            datasets.enable_progress_bars()
        if transformers_were_on:
            transformers_logging.enable_progress_bar()


def config_for_task(config: str | Path | Mapping[str, Any], task: str) -> dict[str, Any]:
    """Load ``config`` for ``task``: a mapping without ``task`` gets it; a different task is a ValueError."""
    if isinstance(config, Mapping) and "task" not in config:
        config = {**config, "task": task}
    resolved = load_config(config)
    if resolved["task"] != task:
        raise ValueError(f"task: {task}() cannot run a config whose task is {resolved['task']!r}")
    return resolved


def _checkpoints(folder: Path) -> list[Path]:
    return [child for child in folder.iterdir() if child.is_dir() and _CHECKPOINT.match(child.name)]


def checkpoint_to_resume(output_dir: str | Path, resume: bool) -> str | None:
    """The latest ``checkpoint-N`` in ``output_dir`` when ``resume`` (None if there is none).

    A run never overwrites another silently: an ``output_dir`` that already holds
    checkpoints (without ``resume``) or a finished run (its saved model or
    metrics.json, and no checkpoint to resume from) is a ValueError.
    """
    folder = Path(output_dir)
    if not folder.is_dir():
        return None
    checkpoints = _checkpoints(folder)
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


def remove_checkpoints(output_dir: str | Path) -> None:
    """Delete every ``checkpoint-N`` folder under ``output_dir`` (main process only).

    Checkpoints (model, optimizer and scheduler state) exist so that an interrupted
    run can resume; once a run has finished, its best model is saved in its folder
    and they are dead weight (megabytes per run, a grid of runs adds up).
    """
    if not is_main_process():
        return
    for checkpoint in sorted(Path(output_dir).rglob("checkpoint-*")):
        if checkpoint.is_dir() and _CHECKPOINT.match(checkpoint.name):
            shutil.rmtree(checkpoint)


def tokenizer_from_config(model: Mapping[str, Any]) -> Any:
    """The checkpoint's tokenizer when ``model.model_name_or_path`` is set, else the ``vocab_file`` one."""
    if model["model_name_or_path"] is not None:
        return tokenizer_for(model["model_name_or_path"])
    return tokenizer_for(vocab_file=model["vocab_file"])


def model_source(model: Mapping[str, Any], tokenizer: Any, max_length: int) -> dict[str, Any]:
    """Keyword arguments for the ``workbench.models`` builders: a checkpoint, or a tiny config sized to the tokenizer."""
    if model["model_name_or_path"] is not None:
        return {"model_name_or_path": model["model_name_or_path"]}
    return {"tiny": {**model["tiny"], "vocab_size": len(tokenizer), "max_position": max(128, max_length)}}


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Total and trainable parameter counts."""
    return {
        "total": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


def is_main_process() -> bool:
    """True unless this is a non-zero rank of a ``torchrun`` / ``accelerate launch`` job (env ``RANK``)."""
    return int(os.environ.get("RANK", "0")) == 0


def write_result(
    output_dir: str | Path,
    metrics: dict[str, Any],
    best_checkpoint: str | None,
    history: list[dict[str, Any]],
    keep_checkpoints: bool,
    best_model_dir: str | Path | None = None,
) -> Result:
    """Write ``metrics`` (with ``history``) to ``output_dir/metrics.json`` (main process only) and
    return the Result. Unless ``keep_checkpoints``, the finished run's checkpoints are removed
    (:func:`remove_checkpoints`) and the Result's best checkpoint is ``best_model_dir`` (the
    folder the best model was saved into; default ``output_dir``)."""
    if not keep_checkpoints:
        remove_checkpoints(output_dir)
        if best_checkpoint is not None:
            best_checkpoint = str(Path(best_model_dir if best_model_dir is not None else output_dir))
    if is_main_process():
        write_metrics(output_dir, {**metrics, "history": history})
    return Result(output_dir=Path(output_dir), metrics=metrics, best_checkpoint=best_checkpoint, history=history)