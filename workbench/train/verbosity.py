"""Quiet runs: library progress bars and warnings off inside a block, restored after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import datasets
from transformers.utils import logging as transformers_logging


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
