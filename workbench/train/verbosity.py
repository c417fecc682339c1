"""Quiet runs: library progress bars and warnings off inside a block, restored after."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import datasets
from transformers.utils import logging as transformers_logging


@contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, only the progress bars worth watching; the previous settings are restored after.

    transformers' bars for reading and writing model files ("Loading weights", "Writing model
    shards": a 0-to-100% flash for the workbench's one-shard models) are always off. With
    ``enabled`` false (quiet runs), the bars of ``datasets`` are off too, and transformers'
    warnings below errors (e.g. the LOAD REPORT of a classifier built from an MLM checkpoint,
    whose fresh head is expected); the Trainer's own bar is the trainer's business
    (``training.quiet``, workbench.train.trainer).
    """
    transformers_were_on = transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        if enabled:
            yield
        else:
            with _quiet_datasets_and_warnings():
                yield
    finally:
        if transformers_were_on:
            transformers_logging.enable_progress_bar()


@contextmanager
def _quiet_datasets_and_warnings() -> Iterator[None]:
    datasets_were_on = not datasets.are_progress_bars_disabled()
    verbosity = transformers_logging.get_verbosity()
    datasets.disable_progress_bars()
    transformers_logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers_logging.set_verbosity(verbosity)
        if datasets_were_on:
            datasets.enable_progress_bars()
