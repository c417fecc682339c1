"""What a finished trainer run returns and writes: :class:`Result` and ``metrics.json``."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn
from transformers import PreTrainedModel

from workbench.records import METRICS_FILE, write_json


@dataclass
class Result:
    """What a run produced: its folder, ``metrics`` (as in metrics.json), best checkpoint, log history."""

    output_dir: Path
    metrics: dict[str, Any]
    best_checkpoint: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def _repr_html_(self) -> str:
        numbers = {
            key: value for key, value in self.metrics.items() if isinstance(value, int | float) and not isinstance(value, bool)
        }
        rows = "".join(f"<tr><td>{html.escape(key)}</td><td>{value:.4g}</td></tr>" for key, value in numbers.items())
        where = f"{html.escape(str(self.output_dir))}<br>best checkpoint: {html.escape(str(self.best_checkpoint))}"
        return f"<b>Result</b> {where}<table>{rows}</table>"


def is_main_process() -> bool:
    """True unless this is a non-zero rank of a ``torchrun`` / ``accelerate launch`` job (env ``RANK``); where a
    trainer exists, ``trainer.is_world_process_zero()`` says the same."""
    return int(os.environ.get("RANK", "0")) == 0


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Total and trainable parameter counts (``PreTrainedModel.num_parameters``, for a fusion of two encoders too)."""
    return {
        "total": PreTrainedModel.num_parameters(model),
        "trainable": PreTrainedModel.num_parameters(model, only_trainable=True),
    }


def write_result(
    output_dir: str | Path, metrics: dict[str, Any], best_checkpoint: str | None, history: list[dict[str, Any]]
) -> Result:
    """Write ``metrics`` (with ``history``) to ``output_dir/metrics.json`` (main process only), release the run
    folder's lock (:func:`~workbench.train.checkpoints.claim_output_dir`) and return the Result."""
    from workbench.train.checkpoints import release_output_dir

    if is_main_process():
        write_json(Path(output_dir) / METRICS_FILE, {**metrics, "history": history})
    release_output_dir(output_dir)
    return Result(output_dir=Path(output_dir), metrics=metrics, best_checkpoint=best_checkpoint, history=history)
