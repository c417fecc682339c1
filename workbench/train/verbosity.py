"""Quiet runs: library progress bars and warnings off inside a block, restored after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import datasets
from transformers.utils import logging


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, only the bars worth watching: transformers' bars for reading and writing model files
    (a 0-to-100% flash) are off; with ``enabled`` false (quiet runs) the bars of ``datasets`` and transformers'
    warnings below errors (e.g. the LOAD REPORT of a fresh head) too. The Trainer's bar follows ``training.quiet``."""
    bars, datasets_bars, verbosity = (
        logging.is_progress_bar_enabled(),
        datasets.is_progress_bar_enabled(),
        logging.get_verbosity(),
    )
    logging.disable_progress_bar()
    if not enabled:
        datasets.disable_progress_bars()
        logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
        if datasets_bars:
            datasets.enable_progress_bars()
