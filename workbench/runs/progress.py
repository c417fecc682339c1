"""Where a running notebook is: the current cell and the elapsed time.

On a terminal the runner's line is redrawn every second (``[3/5] 03_true_negatives ... cell 7/19,
42 s``); in a log (output not a terminal) a line is added only every ``LOG_INTERVAL_S`` seconds,
so short notebooks print nothing extra and a long one never looks hung. With ``continues_line``
(the runner's case: it has written ``label ... `` and will end the line with the status), a log's
progress lines start on a line of their own and the label is repeated after them, so every
status follows its label:

    [3/5] 03_true_negatives ...
        [3/5] 03_true_negatives: still running, cell 10/26, 30 s
    [3/5] 03_true_negatives ... ok (41.0 s)
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

TERMINAL_INTERVAL_S = 1.0
LOG_INTERVAL_S = 30.0


class Progress:
    """A background ticker for one notebook execution; papermill calls :meth:`cell_started`
    (nbclient's ``on_cell_start`` hook) before each cell."""

    def __init__(self, label: str, total_cells: int, stream: IO[str] | None = None, interactive: bool | None = None,
                 interval: float | None = None, continues_line: bool = False) -> None:
        self.label = label
        self.continues_line = continues_line
        self.lines_written = 0
        self.total_cells = total_cells
        self.stream = stream if stream is not None else sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.interval = interval if interval is not None else (TERMINAL_INTERVAL_S if self.interactive else LOG_INTERVAL_S)
        self.cell = 0
        self._start = time.perf_counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def cell_started(self, cell: Any = None, cell_index: int = 0, **_: Any) -> None:
        """nbclient hook: ``cell_index`` (0-based, of the executed notebook) is about to run."""
        self.cell = cell_index + 1

    def status(self) -> str:
        return f"cell {self.cell}/{self.total_cells}, {time.perf_counter() - self._start:.0f} s"

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            if self.interactive:
                self.stream.write(f"\r{self.label} ... {self.status()}\033[K")
            else:
                if self.continues_line and not self.lines_written:  # end the runner's "label ... " line first
                    self.stream.write("\n")
                self.stream.write(f"    {self.label}: still running, {self.status()}\n")
                self.lines_written += 1
            self.stream.flush()

    def __enter__(self) -> Progress:
        self._start = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self.interactive:  # leave the line for the runner's final "label ... ok (n s)"
            self.stream.write(f"\r{self.label} ... \033[K" if self.continues_line else f"\r{self.label} ...\033[K")
            self.stream.flush()
        elif self.continues_line and self.lines_written:  # the status below the progress lines names its notebook
            self.stream.write(f"{self.label} ... ")
            self.stream.flush()
