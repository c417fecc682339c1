"""What a finished trainer run returns and writes: :class:`Result` and ``metrics.json``."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from workbench.runs.metrics import METRICS_FILE, write_json


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


def is_main_process() -> bool:
    """True unless this is a non-zero rank of a ``torchrun`` / ``accelerate launch`` job (env ``RANK``)."""
    return int(os.environ.get("RANK", "0")) == 0


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Total and trainable parameter counts."""
    return {
        "total": sum(p.numel() for p in model.parameters()),
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad),
    }


def write_result(
    output_dir: str | Path, metrics: dict[str, Any], best_checkpoint: str | None, history: list[dict[str, Any]]
) -> Result:
    """Write ``metrics`` (with ``history``) to ``output_dir/metrics.json`` (main process only) and return the Result."""
    if is_main_process():
        write_json(Path(output_dir) / METRICS_FILE, {**metrics, "history": history})
    return Result(output_dir=Path(output_dir), metrics=metrics, best_checkpoint=best_checkpoint, history=history)
