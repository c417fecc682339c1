"""Quiet runs: library progress bars and warnings off inside a block, restored after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import datasets
from transformers.utils import logging as transformers_logging


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, only the bars worth watching; the previous settings are restored after.

    transformers' bars for reading and writing model files (a 0-to-100% flash for one-shard models) are always
    off; with ``enabled`` false (quiet runs) the bars of ``datasets`` and transformers' warnings below errors
    (e.g. the LOAD REPORT of a fresh classifier head) too. The Trainer's own bar follows ``training.quiet``.
    """
    bars, datasets_bars, verbosity = (
        transformers_logging.is_progress_bar_enabled(),
        not datasets.are_progress_bars_disabled(),
        transformers_logging.get_verbosity(),
    )
    transformers_logging.disable_progress_bar()
    if not enabled:
        datasets.disable_progress_bars()
        transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()
        if datasets_bars:
            datasets.enable_progress_bars()
