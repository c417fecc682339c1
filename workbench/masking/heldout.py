"""Held-out evaluation of MLM pre-training: a block split, fixed eval masks, eval loss and perplexity.

Masks drawn afresh at every evaluation would make the eval loss noisy and
incomparable across runs. Here the held-out blocks are masked once
(:func:`fixed_mask_batches`, with a collator seeded for that purpose), so every
evaluation of every run with the same blocks, masking and seed scores exactly the
same predictions. :func:`evaluate_masked_lm` reports the plain MLM loss on them,
whatever the training objective, so plain, HC and SR runs are comparable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import datasets
import numpy as np
import torch
import torch.nn.functional as F

from workbench.losses.mlm import IGNORE_INDEX, CorrectionStats, HardCorrectionLoss

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")

__all__ = ["evaluate_masked_lm", "fixed_mask_batches", "mlm_logits", "split_heldout"]


def mlm_logits(output: Any) -> torch.Tensor:
    """The masked-LM logits of a model output: ``logits`` (BertForMaskedLM) or ``prediction_logits``
    (BertForPreTraining, used with sentence-order prediction)."""
    return output["logits"] if "logits" in output else output["prediction_logits"]


def split_heldout(
    blocks: datasets.Dataset, eval_fraction: float = 0.01, seed: int = 0
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """``(train, eval)``: ``max(1, round(eval_fraction * n))`` of the ``n`` blocks, drawn at random
    (``seed``), held out; both keep the blocks' order. ``eval_fraction`` must lie in (0, 0.5];
    ``blocks`` needs at least 2 rows."""
    if isinstance(eval_fraction, bool) or not isinstance(eval_fraction, (int, float)) or not 0.0 < eval_fraction <= 0.5:
        raise ValueError(f"eval_fraction: must lie in (0, 0.5], got {eval_fraction!r}")
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
    """The held-out ``blocks`` masked once: ``collator`` applied to consecutive batches of
    ``batch_size`` blocks, in order.

    Pass a collator made for this alone (e.g. the training strategy with a fixed eval
    seed, ``return_word_ids=True`` for HC rates): a collator's generator advances with
    every batch, so a fresh one with the same seed gives the same masks. Keep the result
    for the whole run; evaluating on it is deterministic.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size: must be an integer >= 1, got {batch_size!r}")
    if len(blocks) == 0:
        raise ValueError("blocks: there is no held-out block to mask")
    batches = []
    for start in range(0, len(blocks), batch_size):
        rows = blocks[start : start + batch_size]
        features = [dict(zip(rows, values)) for values in zip(*rows.values())] if isinstance(rows, dict) else list(rows)
        batches.append(collator(features))
    return batches


@torch.no_grad()
def evaluate_masked_lm(
    model: torch.nn.Module,
    batches: Sequence[Mapping[str, torch.Tensor]],
    correction: HardCorrectionLoss | None = None,
) -> dict[str, float]:
    """Plain MLM loss of ``model`` on pre-masked ``batches`` (:func:`fixed_mask_batches`).

    eval_loss = (sum over every masked position i of all batches of -log p(y_i | x)) / M,
    M the number of masked positions (a token-weighted mean, independent of how the
    positions fall into batches); perplexity = exp(eval_loss); eval_masked_tokens = M.
    With ``correction`` (a :class:`HardCorrectionLoss`) the hard-correction counts and
    Table 2 rates on the same predictions are added as ``hc_<name>`` (e.g.
    ``hc_prediction_rate``). Runs in eval mode on the model's device, restores the
    model's mode after. Batches must hold ``labels`` and the model inputs
    (``word_ids`` too for ``correction`` at word level).
    """
    if len(batches) == 0:
        raise ValueError("batches: there is no eval batch")
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total = torch.zeros((), dtype=torch.float64, device=device)
    count = torch.zeros((), dtype=torch.int64, device=device)
    stats = CorrectionStats()
    try:
        for batch in batches:
            logits = mlm_logits(model(**{key: batch[key].to(device) for key in MODEL_INPUTS if key in batch}))
            labels = batch["labels"].to(device)
            losses = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
            total += losses.double()
            count += labels.ne(IGNORE_INDEX).sum()
            if correction is not None:
                word_ids = batch["word_ids"].to(device) if "word_ids" in batch else None
                stats.update(correction.correction_counts(logits, labels, word_ids))
    finally:
        model.train(was_training)
    masked = int(count)
    if masked == 0:
        raise ValueError("batches: no position is masked (labels are all -100)")
    loss = float(total) / masked
    perplexity = math.exp(loss) if loss < math.log(float(np.finfo(np.float64).max)) else math.inf
    result = {"eval_loss": loss, "perplexity": perplexity, "eval_masked_tokens": masked}
    if correction is not None:
        result.update({f"hc_{name}": value for name, value in stats.as_dict().items()})
    return result
