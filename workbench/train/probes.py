"""Bag-of-characters probes and their seeded training loop: about a second a run on a CPU, where fine-tuning even
a tiny BERT is too slow for a notebook's grid of runs. :class:`CharacterProbe` is fastText for one text (Joulin et
al., 2017, eq. 1) and a siamese matcher over the InferSent features for a pair (Conneau et al., 2017, sec. 3.1);
:func:`fit_probe` trains one seeded run, :func:`encode_split` gives its inputs."""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from datasets import Dataset
from torch import nn

from workbench.checks import check_int
from workbench.config import ProbeConfig, TrainingConfig, check_field
from workbench.losses import class_probabilities, num_outputs, predicted_labels
from workbench.metrics import classification_report
from workbench.threads import torch_threads
from workbench.vocab import clip_texts

PAD_ID = 0  # [PAD] of the workbench tokenizers; the embedding ignores it
SINGLE_COLUMNS = ("text",)
PAIR_COLUMNS = ("text", "text_pair")
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class EncodedSplit:
    """One split: ``ids``, one (texts) or two (query, title) int64 tensors (n, length) padded with ``PAD_ID``, and
    ``labels``."""

    ids: tuple[torch.Tensor, ...]
    labels: torch.Tensor

    def __post_init__(self) -> None:
        shapes = [tuple(ids.shape) for ids in self.ids]
        if len(self.ids) not in (1, 2) or any(len(shape) != 2 or shape[0] != len(self.labels) for shape in shapes):
            raise ValueError(
                f"ids: must be 1 or 2 tensors (n, length) with n = len(labels) = {len(self.labels)}, got {shapes}"
            )
        if self.labels.dim() != 1:
            raise ValueError(f"labels: must be one-dimensional, got shape {tuple(self.labels.shape)}")

    @property
    def is_pair(self) -> bool:
        return len(self.ids) == 2

    def __len__(self) -> int:
        return len(self.labels)


def encode_split(
    split: Dataset, tokenizer: Any, max_length: int, columns: Sequence[str] = SINGLE_COLUMNS
) -> EncodedSplit:
    """``split``'s ``columns`` (``SINGLE_COLUMNS`` or ``PAIR_COLUMNS``) as token ids without [CLS] / [SEP], cut at
    ``max_length`` (:func:`~workbench.vocab.clip_texts` first), right-padded with ``PAD_ID``, and its ``label``
    column."""
    check_int("max_length", max_length, 1)
    if len(columns) not in (1, 2):
        raise ValueError(f"columns: must name 1 (texts) or 2 (pairs) text columns, got {list(columns)}")
    missing = [column for column in (*columns, "label") if column not in split.column_names]
    if missing:
        raise ValueError(f"split: lacks the columns {missing} (columns: {split.column_names})")

    def ids(texts: list[str]) -> torch.Tensor:
        rows = tokenizer(
            clip_texts(texts, max_length), add_special_tokens=False, truncation=True, max_length=max_length
        )
        rows = rows["input_ids"]
        tensors = [torch.tensor(row, dtype=torch.long) for row in rows]
        return nn.utils.rnn.pad_sequence(tensors, batch_first=True, padding_value=PAD_ID)

    labels = torch.tensor(np.asarray(split["label"], dtype=np.int64))
    return EncodedSplit(tuple(ids(list(split[column])) for column in columns), labels)


class CharacterProbe(nn.Module):
    """Bag-of-characters classifier of a text or a pair: u = mean_t E[x_t] (``PAD_ID`` ignored), features u or
    [u, v, u * v, |u - v|]; logits = W f + b (fastText, eq. 1) without ``hidden_size``, else W2 relu(W1 f + b1) + b2."""

    def __init__(
        self,
        vocab_size: int,
        num_labels: int,
        embedding_size: int = 32,
        hidden_size: int | None = None,
        pair: bool = False,
    ) -> None:
        super().__init__()
        check_int("vocab_size", vocab_size, 1)
        check_int("num_labels", num_labels, 2)
        check_int("embedding_size", embedding_size, 1)
        check_int("hidden_size", hidden_size, 1, allow_none=True)
        self.pair = bool(pair)
        self.embedding = nn.EmbeddingBag(vocab_size, embedding_size, mode="mean", padding_idx=PAD_ID)
        features = 4 * embedding_size if self.pair else embedding_size
        if hidden_size is None:
            self.head = nn.Linear(features, num_labels)
        else:
            self.head = nn.Sequential(nn.Linear(features, hidden_size), nn.ReLU(), nn.Linear(hidden_size, num_labels))

    def forward(self, input_ids: torch.Tensor, pair_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (n, num_labels) of texts ``input_ids`` (n, length), or of pairs with ``pair_ids``."""
        if (pair_ids is not None) != self.pair:
            raise ValueError(
                f"pair_ids: this probe takes {2 if self.pair else 1} id tensor(s), got {1 + (pair_ids is not None)}"
            )
        u = self.embedding(input_ids)
        if pair_ids is None:
            return self.head(u)
        v = self.embedding(pair_ids)
        return self.head(torch.cat([u, v, u * v, (u - v).abs()], dim=-1))


@dataclass(frozen=True)
class ProbeFit:
    """:func:`fit_probe`'s kept 1-based ``best_epoch``, that epoch's ``validation`` and ``test`` reports and
    predictions, test ``probabilities``, the per-epoch ``history`` (mean training loss, validation macro-F1) and the
    kept epoch's ``validation_probabilities``."""

    best_epoch: int
    validation: dict[str, Any]
    test: dict[str, Any]
    validation_predictions: np.ndarray
    predictions: np.ndarray
    probabilities: np.ndarray
    history: list[dict[str, float]]
    validation_probabilities: np.ndarray | None = None
    num_parameters: int | None = None
    steps: int | None = None


def _check_encoded(encoded: Mapping[str, EncodedSplit], vocab_size: int, num_labels: int) -> None:
    missing = [name for name in SPLITS if name not in encoded]
    if missing or len({encoded[name].is_pair for name in SPLITS}) != 1:
        raise ValueError(f"encoded: must hold the splits {list(SPLITS)}, all texts or all pairs; missing {missing}")
    for name, split in ((name, encoded[name]) for name in SPLITS):
        if len(split) == 0:
            raise ValueError(f"encoded: split {name!r} is empty")
        if split.labels.min() < 0 or split.labels.max() >= num_labels:
            raise ValueError(
                f"num_labels: labels of {name!r} must be in [0, {num_labels - 1}], got {split.labels.max().item()}"
            )
        if any(ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size) for ids in split.ids):
            low = min(ids.min().item() for ids in split.ids if ids.numel())
            high = max(ids.max().item() for ids in split.ids if ids.numel())
            raise ValueError(
                f"vocab_size: character ids of {name!r} must be in [0, {vocab_size - 1}], got range [{low}, {high}]"
            )


def fit_probe(
    encoded: Mapping[str, EncodedSplit],
    loss: nn.Module,
    training: TrainingConfig,
    probe: ProbeConfig,
    vocab_size: int,
    num_labels: int,
    seed: int = 0,
    label_names: Sequence[str] | None = None,
) -> ProbeFit:
    """Train a :class:`CharacterProbe` on ``encoded["train"]`` and keep the epoch with the best validation macro-F1
    (the first on ties) to score test; test is never used for selection.

    Each epoch takes one AdamW step (Loshchilov & Hutter, 2019; ``training.learning_rate``, ``weight_decay``) per
    mini-batch of ``per_device_train_batch_size`` in a seeded order, on ``loss(logits, labels)`` (any workbench
    loss with mean reduction). Initialisation and order come from ``seed`` alone (a forked RNG, one thread): the
    same inputs give bitwise equal results, and two losses with equal gradients equal predictions.
    """
    epochs = _checked_epochs(loss, training, probe, seed, num_labels, label_names)
    train = encoded.get("train")
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        pair = bool(train and train.is_pair)
        outputs = num_outputs(loss, num_labels)
        model = CharacterProbe(vocab_size, outputs, probe.embedding_size, probe.hidden_size, pair=pair)
        _check_encoded(encoded, vocab_size, num_labels)
        optimizer = torch.optim.AdamW(model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay)
        order = torch.Generator().manual_seed(seed)
        best = None
        history = []
        for epoch in range(1, epochs + 1):
            train_loss = _train_epoch(model, loss, optimizer, train, order, training.per_device_train_batch_size, epoch)
            probabilities, predicted, validation = _predict(model, loss, encoded["validation"], label_names, num_labels)
            history.append({"epoch": epoch, "train_loss": train_loss, "validation_macro_f1": validation["macro_f1"]})
            if best is None or validation["macro_f1"] > best[1]["macro_f1"]:
                best = (epoch, validation, predicted, copy.deepcopy(model.state_dict()), probabilities.numpy())
        model.load_state_dict(best[3])
        # the test split, read once, at the kept epoch
        probabilities, predicted, test = _predict(model, loss, encoded["test"], label_names, num_labels)
    parameters = sum(parameter.numel() for parameter in model.parameters())
    steps = epochs * math.ceil(len(train) / training.per_device_train_batch_size)
    scores = (best[2], predicted, probabilities.numpy())
    return ProbeFit(best[0], best[1], test, *scores, history, best[4], parameters, steps)


def _checked_epochs(
    loss: nn.Module,
    training: TrainingConfig,
    probe: ProbeConfig,
    seed: int,
    num_labels: int,
    label_names: Sequence[str] | None,
) -> int:
    """:func:`fit_probe`'s arguments checked where they enter (the sections' types, ``seed`` >= 0, a loss with mean
    reduction, one label name per class): the whole number of epochs ``training.num_train_epochs`` gives."""
    for name, value, kind in (("training", training, TrainingConfig), ("probe", probe, ProbeConfig)):
        if not isinstance(value, kind):
            raise ValueError(f"{name}: must be a {kind.__name__}, got {type(value).__name__}")
    check_int("seed", seed, 0)
    epochs = training.num_train_epochs
    if epochs != int(epochs):
        raise ValueError(f"training.num_train_epochs: must be a whole number for the probe, got {epochs!r}")
    check_field("loss.params.reduction", getattr(loss, "reduction", "mean"), str, choices=("mean",))
    if label_names is not None and len(label_names) != num_labels:
        raise ValueError(f"label_names: must have num_labels={num_labels} names, got {len(label_names)}")
    return int(epochs)


def _train_epoch(
    model: CharacterProbe,
    loss: nn.Module,
    optimizer: torch.optim.Optimizer,
    train: EncodedSplit,
    order: torch.Generator,
    batch_size: int,
    epoch: int,
) -> float:
    """One epoch: an optimizer step per mini-batch of ``batch_size`` in the order ``order`` draws; the mean training
    loss, FloatingPointError naming the ``epoch`` when it is not finite (training diverged)."""
    losses = []
    for rows in torch.randperm(len(train), generator=order).split(batch_size):
        optimizer.zero_grad()
        value = loss(model(*(ids[rows] for ids in train.ids)), train.labels[rows])
        value.backward()
        optimizer.step()
        losses.append(value.detach())
    train_loss = float(torch.stack(losses).mean())
    if not math.isfinite(train_loss):
        raise FloatingPointError(f"training diverged: the mean training loss of epoch {epoch} is {train_loss}")
    return train_loss


def _predict(
    model: CharacterProbe,
    loss: nn.Module,
    split: EncodedSplit,
    label_names: Sequence[str] | None,
    num_labels: int,
) -> tuple[torch.Tensor, np.ndarray, dict[str, Any]]:
    """The probe's class probabilities, predicted labels (as the loss reads its logits) and classification report on
    one encoded ``split``, without gradients."""
    with torch.no_grad():
        logits = model(*split.ids)
        probabilities, predicted = class_probabilities(loss, logits), predicted_labels(loss, logits).numpy()
    report = classification_report(split.labels.numpy(), predicted, label_names, num_labels=num_labels)
    return probabilities, predicted, report
