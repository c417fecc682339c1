"""What a run's notebooks are doing, with tqdm: a status line per notebook when it ends
(``[3/5] 03_true_negatives ... ok (209.9 s)``); while it runs, a tqdm bar (cell, elapsed time) on a
terminal, or in a log a line ``    [3/5] 03_true_negatives: cell 10/27, 42 s`` when a cell starts
``LOG_INTERVAL_S`` or more after the previous one, so a short notebook prints only its status line.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

from tqdm import tqdm

from workbench.runs.plan import Execution

LOG_INTERVAL_S = 30.0
REDRAW_S = 1.0  # tqdm's mininterval on a terminal


class Progress:
    """The progress of a run's ``executions`` (thread-safe: tqdm's lock). ``bars``: tqdm bars
    (default: when ``stream`` is a terminal) or log lines; ``ticking`` false: status lines only."""

    def __init__(
        self,
        executions: Sequence[Execution],
        stream: IO[str] | None = None,
        bars: bool | None = None,
        ticking: bool = True,
    ) -> None:
        self.executions = executions
        self.stream = stream if stream is not None else sys.stdout
        self.bars = self.stream.isatty() if bars is None else bars
        self.ticking = ticking
        self._running: dict[int, tqdm] = {}

    def label(self, index: int) -> str:
        execution = self.executions[index]
        return f"[{index + 1}/{len(self.executions)}] {execution.name}" + (
            f" {execution.slug}" if execution.slug else ""
        )

    def started(self, index: int) -> Callable[..., None] | None:
        """Show execution ``index`` as running; returns the hook papermill calls before each cell
        (nbclient's ``on_cell_start``), None when not ticking."""
        if not self.ticking:
            return None
        label = self.label(index)
        cells = len(json.loads(self.executions[index].notebook.read_text(encoding="utf-8"))["cells"]) + 1  # + injected
        bar = tqdm(
            total=cells,
            desc=label,
            unit="cell",
            file=self.stream,
            leave=False,
            mininterval=REDRAW_S,
            disable=not self.bars,
        )
        self._running[index] = bar
        start = logged = time.monotonic()

        def cell_started(cell: Any = None, cell_index: int = 0, **_: Any) -> None:
            nonlocal logged
            bar.update(cell_index + 1 - bar.n)  # cell_index: 0-based, of the executed notebook
            if not self.bars and time.monotonic() - logged >= LOG_INTERVAL_S:
                logged = time.monotonic()
                tqdm.write(f"    {label}: cell {cell_index + 1}/{cells}, {logged - start:.0f} s", file=self.stream)

        return cell_started

    def finished(self, index: int, status: str) -> None:
        """Close execution ``index``'s bar and write ``label ... status`` on a line of its own."""
        bar = self._running.pop(index, None)
        if bar is not None:
            bar.close()
        tqdm.write(f"{self.label(index)} ... {status}", file=self.stream)
        self.stream.flush()
