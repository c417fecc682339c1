"""What a run's notebooks are doing: the current cell of each running one and its elapsed time.

The runner prints one line per notebook when it ends (``[3/5] 03_true_negatives ... ok (209.9 s)``).
While notebooks run (one, or several with ``--jobs``):

* on a terminal, one line is redrawn every second, naming each running notebook's cell and time:
  ``running: [3/5] 03_true_negatives cell 10/27, 42 s | [4/5] 04_auxiliary_labels cell 3/23, 5 s``;
  a notebook's status line replaces it when that notebook ends;
* in a log (output not a terminal), a line per running notebook is added every ``LOG_INTERVAL_S``
  seconds, so short notebooks print nothing but their status and a long one never looks hung::

      [1/5] 01_dice_loss ... ok (26.1 s)
          [3/5] 03_true_negatives: still running, cell 10/27, 30 s
      [2/5] 02_propensity_corrected_loss ... ok (19.1 s)
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

TERMINAL_INTERVAL_S = 1.0
LOG_INTERVAL_S = 30.0


@dataclass
class _Running:
    total_cells: int
    cell: int = 0
    start: float = field(default_factory=time.perf_counter)

    def status(self) -> str:
        return f"cell {self.cell}/{self.total_cells}, {time.perf_counter() - self.start:.0f} s"


class Progress:
    """The runner's progress display, shared by the notebooks running at once (thread-safe).

    :meth:`started` registers a notebook and returns the hook papermill calls before each cell
    (nbclient's ``on_cell_start``); :meth:`finished` writes its status line. With ``ticking``
    false only the status lines are written.
    """

    def __init__(
        self, stream: IO[str] | None = None, interactive: bool | None = None, interval: float | None = None, ticking: bool = True
    ) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.interactive = self.stream.isatty() if interactive is None else interactive
        self.interval = interval if interval is not None else (TERMINAL_INTERVAL_S if self.interactive else LOG_INTERVAL_S)
        self.ticking = ticking
        self._running: dict[str, _Running] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._line_drawn = False

    def started(self, label: str, total_cells: int) -> Callable[..., None]:
        """Register ``label`` as running; returns the ``on_cell_start`` hook that tracks its cell."""
        running = _Running(total_cells)
        with self._lock:
            self._running[label] = running

        def cell_started(cell: Any = None, cell_index: int = 0, **_: Any) -> None:
            running.cell = cell_index + 1  # cell_index: 0-based, of the executed notebook

        return cell_started

    def finished(self, label: str, status: str) -> None:
        """Write ``label ... status`` on a line of its own and stop tracking ``label``."""
        with self._lock:
            self._running.pop(label, None)
            self._clear_line()
            self.stream.write(f"{label} ... {status}\n")
            self.stream.flush()

    def _clear_line(self) -> None:
        if self._line_drawn:
            self.stream.write("\r\033[K")
            self._line_drawn = False

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                running = [(label, state.status()) for label, state in self._running.items()]
                if not running:
                    continue
                if self.interactive:
                    self.stream.write("\rrunning: " + " | ".join(f"{label} {status}" for label, status in running) + "\033[K")
                    self._line_drawn = True
                else:
                    for label, status in running:
                        self.stream.write(f"    {label}: still running, {status}\n")
                self.stream.flush()

    def __enter__(self) -> Progress:
        if self.ticking:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.ticking:
            self._thread.join()
        with self._lock:
            self._clear_line()
            self.stream.flush()
