"""Held-out evaluation of MLM pre-training: a block split, eval masks drawn once (:func:`fixed_mask_batches`, so every
evaluation scores the same predictions), the plain MLM eval loss whatever the training objective (plain, HC and SR
runs compare), perplexity and HC rates."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import datasets
import numpy as np
import torch
import torch.nn.functional as F

from workbench.checks import check_int, check_number
from workbench.losses.mlm import IGNORE_INDEX, CorrectionCounts, HardCorrectionLoss
from workbench.models import labelled_logits

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def split_heldout(
    blocks: datasets.Dataset, eval_fraction: float = 0.01, seed: int = 0
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """``(train, eval)``: max(1, round(``eval_fraction`` x n)) of the n >= 2 ``blocks`` held out at random (``seed``),
    ``eval_fraction`` in (0, 0.5]; both keep the blocks' order."""
    check_number("eval_fraction", eval_fraction, 0.0, 0.5, low_inclusive=False)
    total = len(blocks)
    if total < 2:
        raise ValueError(f"blocks: holding out blocks needs at least 2, got {total}")
    held_out = max(1, round(eval_fraction * total))
    chosen = np.zeros(total, dtype=bool)
    chosen[np.random.default_rng(seed).choice(total, size=held_out, replace=False)] = True
    return blocks.select(np.flatnonzero(~chosen)), blocks.select(np.flatnonzero(chosen))


def fixed_mask_batches(
    blocks: datasets.Dataset | Sequence[Mapping[str, Any]],
    collator: Callable[[list[dict]], dict[str, torch.Tensor]],
    batch_size: int = 64,
) -> list[dict[str, torch.Tensor]]:
    """The held-out ``blocks`` masked once: ``collator`` (one made for this alone, with a fixed seed and
    ``return_word_ids=True`` for HC rates) applied to consecutive batches of ``batch_size`` blocks, in order."""
    check_int("batch_size", batch_size, 1)
    if len(blocks) == 0:
        raise ValueError("blocks: there is no held-out block to mask")
    rows = list(blocks)
    return [collator(rows[start : start + batch_size]) for start in range(0, len(rows), batch_size)]


@contextmanager
def evaluation_mode(model: torch.nn.Module, batches: Sequence) -> Iterator[torch.device]:
    """``model`` in eval mode inside the block (its mode restored after), yielding its device; ValueError without ``batches``."""
    if len(batches) == 0:
        raise ValueError("batches: there is no eval batch")
    was_training = model.training
    model.eval()
    try:
        yield next(model.parameters()).device
    finally:
        model.train(was_training)


@torch.no_grad()
def evaluate_masked_lm(
    model: torch.nn.Module, batches: Sequence[Mapping[str, torch.Tensor]], correction: HardCorrectionLoss | None = None
) -> dict[str, float]:
    """Plain MLM loss of ``model`` on pre-masked ``batches`` (:func:`fixed_mask_batches`): eval_loss = (sum over the M
    masked positions of all batches of -log p(w_k | s)) / M, perplexity = exp(eval_loss), eval_masked_tokens = M.

    With ``correction`` (a :class:`HardCorrectionLoss`) the HC counts and Table 2 rates of the same predictions are
    added as ``hc_<name>`` (batches need ``word_ids`` at word level). Runs in eval mode, restores the mode after.
    """
    total, masked, counts = 0.0, 0, CorrectionCounts()
    with evaluation_mode(model, batches) as device:
        for batch in batches:
            batch = {key: value.to(device) for key, value in batch.items()}
            logits, _ = labelled_logits(model, batch["labels"], **{key: batch[key] for key in MODEL_INPUTS if key in batch})
            total += F.cross_entropy(logits.float(), batch["labels"][batch["labels"] != IGNORE_INDEX], reduction="sum").item()
            masked += len(logits)
            if correction is not None:
                counts.update(correction.correction_counts(logits, batch["labels"], batch.get("word_ids")))
    if masked == 0:
        raise ValueError("batches: no position is masked (labels are all -100)")
    loss = total / masked
    perplexity = math.exp(loss) if loss < math.log(np.finfo(np.float64).max) else math.inf
    result = {"eval_loss": loss, "perplexity": perplexity, "eval_masked_tokens": masked}
    if correction is not None:
        result.update({f"hc_{name}": value for name, value in counts.as_dict().items()})
    return result
