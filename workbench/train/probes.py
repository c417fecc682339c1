"""Fast bag-of-characters probes and their seeded training loop.

Fine-tuning even a tiny BERT through the transformers ``Trainer`` is too slow for the
many runs a notebook grid needs on a CPU. A probe trains in about a second:

* :func:`encode_split`: a split's texts as padded character-id tensors (one column, or a
  query/title pair), with its labels (:class:`EncodedSplit`);
* :class:`CharacterProbe`: for one text, a fastText-style classifier (Joulin et al., 2017,
  "Bag of Tricks for Efficient Text Classification", eq. 1: the mean of the character
  embeddings, then a linear layer); for a pair, a siamese matcher over the InferSent
  features [u, v, u * v, |u - v|] of the two means (Conneau et al., 2017, sec. 3.1);
* :func:`fit_probe`: one seeded run (AdamW, mini-batches, the epoch with the best validation
  macro-F1 kept), scored on the test split. Settings come from the config's ``training``
  section (``num_train_epochs``, ``per_device_train_batch_size``, ``learning_rate``, ``weight_decay``; the transformer-only settings
  such as warmup are not used) and ``model.probe`` (``embedding_size``, ``hidden_size``).
"""

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
from workbench.config import ProbeConfig, TrainingConfig
from workbench.metrics import classification_report
from workbench.threads import torch_threads

PAD_ID = 0
"""Padding id of the workbench tokenizers ([PAD] = 0); the embedding ignores it."""

SINGLE_COLUMNS = ("text",)
PAIR_COLUMNS = ("text", "text_pair")
SPLITS = ("train", "validation", "test")


# ----------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class EncodedSplit:
    """One split as tensors: ``ids`` holds one (texts) or two (query, title) int64 tensors
    of shape (n, length), right-padded with ``PAD_ID``; ``labels`` has shape (n,)."""

    ids: tuple[torch.Tensor, ...]
    labels: torch.Tensor

    def __post_init__(self) -> None:
        if len(self.ids) not in (1, 2):
            raise ValueError(f"ids: must hold 1 (texts) or 2 (pairs) tensors, got {len(self.ids)}")
        for ids in self.ids:
            if ids.dim() != 2 or ids.shape[0] != self.labels.shape[0]:
                raise ValueError(
                    f"ids: every tensor must have shape (n, length) with n = len(labels) = {self.labels.shape[0]}, "
                    f"got {tuple(ids.shape)}"
                )
        if self.labels.dim() != 1:
            raise ValueError(f"labels: must be one-dimensional, got shape {tuple(self.labels.shape)}")

    @property
    def is_pair(self) -> bool:
        return len(self.ids) == 2

    def __len__(self) -> int:
        return self.labels.shape[0]

    def select(self, rows: torch.Tensor) -> EncodedSplit:
        """The examples at ``rows`` (a mini-batch)."""
        return EncodedSplit(tuple(ids[rows] for ids in self.ids), self.labels[rows])


def _character_ids(texts: Sequence[str], tokenizer: Any, max_length: int) -> torch.Tensor:
    """Token ids without [CLS]/[SEP], cut at ``max_length``, right-padded with ``PAD_ID`` to the longest."""
    encoded = tokenizer(list(texts), add_special_tokens=False, truncation=True, max_length=max_length)
    rows = [torch.tensor(ids, dtype=torch.long) for ids in encoded["input_ids"]]
    return nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=PAD_ID)


def encode_split(split: Dataset, tokenizer: Any, max_length: int, columns: Sequence[str] = SINGLE_COLUMNS) -> EncodedSplit:
    """``split``'s ``columns`` (``SINGLE_COLUMNS`` or ``PAIR_COLUMNS``) as character ids and its ``label`` column."""
    check_int("max_length", max_length, 1)
    if len(columns) not in (1, 2):
        raise ValueError(f"columns: must name 1 (texts) or 2 (pairs) text columns, got {list(columns)}")
    missing = [column for column in (*columns, "label") if column not in split.column_names]
    if missing:
        raise ValueError(f"split: lacks the columns {missing} (columns: {split.column_names})")
    labels = torch.tensor(np.asarray(split["label"], dtype=np.int64))
    return EncodedSplit(tuple(_character_ids(split[column], tokenizer, max_length) for column in columns), labels)


# ----------------------------------------------------------------------------- the model


class CharacterProbe(nn.Module):
    """Bag-of-characters classifier for a text or a pair of texts.

    Each text becomes the mean of its character embeddings, u = mean_t E[x_t] (``PAD_ID``
    ignored, so padding never changes the output). The features are u for one text and
    [u, v, u * v, |u - v|] for a pair (u the query's, v the title's; the InferSent set,
    Conneau et al., 2017). The head is linear, logits = W f + b (fastText, Joulin et al.,
    2017, eq. 1), when ``hidden_size`` is None, else W2 relu(W1 f + b1) + b2.
    """

    def __init__(
        self, vocab_size: int, num_labels: int, embedding_size: int = 32, hidden_size: int | None = None, pair: bool = False
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
            self.head: nn.Module = nn.Linear(features, num_labels)
        else:
            self.head = nn.Sequential(nn.Linear(features, hidden_size), nn.ReLU(), nn.Linear(hidden_size, num_labels))

    def forward(self, input_ids: torch.Tensor, pair_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Logits (n, num_labels) of texts ``input_ids`` (n, length), or of pairs with ``pair_ids``."""
        if (pair_ids is not None) != self.pair:
            expected = "two id tensors (query, title)" if self.pair else "one id tensor"
            raise ValueError(
                f"pair_ids: this probe takes {expected}, got pair_ids={'a tensor' if pair_ids is not None else None}"
            )
        u = self.embedding(input_ids)
        if pair_ids is None:
            return self.head(u)
        v = self.embedding(pair_ids)
        return self.head(torch.cat([u, v, u * v, (u - v).abs()], dim=-1))


# ----------------------------------------------------------------------------- training


@dataclass(frozen=True)
class ProbeFit:
    """What :func:`fit_probe` returns: the kept (1-based) ``best_epoch``; ``validation`` and
    ``test`` reports of ``workbench.metrics.classification_report`` for that epoch's model;
    its ``validation_predictions``, test ``predictions`` (n,) and test softmax ``probabilities``
    (n, num_labels); ``history``: per epoch the mean training loss and validation macro-F1."""

    best_epoch: int
    validation: dict[str, Any]
    test: dict[str, Any]
    validation_predictions: np.ndarray
    predictions: np.ndarray
    probabilities: np.ndarray
    history: list[dict[str, float]]


def _probabilities(model: CharacterProbe, split: EncodedSplit) -> torch.Tensor:
    with torch.no_grad():
        return torch.softmax(model(*split.ids), dim=-1)


def _check_encoded(encoded: Mapping[str, EncodedSplit], vocab_size: int, num_labels: int) -> None:
    missing = [name for name in SPLITS if name not in encoded]
    if missing:
        raise ValueError(f"encoded: must hold the splits {list(SPLITS)}, missing {missing}")
    if len({encoded[name].is_pair for name in SPLITS}) != 1:
        raise ValueError("encoded: every split must be texts or every split pairs, got a mix")
    for name in SPLITS:
        split = encoded[name]
        if len(split) == 0:
            raise ValueError(f"encoded: split {name!r} is empty")
        if split.labels.min() < 0 or split.labels.max() >= num_labels:
            raise ValueError(
                f"num_labels: labels of {name!r} must be in [0, {num_labels - 1}], "
                f"got range [{split.labels.min().item()}, {split.labels.max().item()}]"
            )
        if any(ids.numel() and (ids.min() < 0 or ids.max() >= vocab_size) for ids in split.ids):
            raise ValueError(f"vocab_size: character ids of {name!r} must be in [0, {vocab_size - 1}]")


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
    """Train a :class:`CharacterProbe` on ``encoded["train"]``; keep the best validation epoch; score test.

    ``encoded`` maps ``train``, ``validation`` and ``test`` to :class:`EncodedSplit` (all texts
    or all pairs; the probe follows). Each epoch visits the training examples in a seeded
    random order in mini-batches of ``training.per_device_train_batch_size`` and takes one AdamW step (``training.learning_rate``,
    ``training.weight_decay``)
    (Loshchilov & Hutter, 2019) per batch on ``loss(logits, labels)`` (any workbench loss,
    e.g. from ``build_loss``). After each epoch the model is scored on validation; the epoch
    with the highest validation macro-F1 (the first on ties) is kept and predicts test.
    The test split is never used for selection.

    Initialisation and batch order come from ``seed`` alone, inside a forked RNG (the global
    one is left untouched), on one intra-op thread: the same inputs and seed give bitwise equal
    results, and two losses with equal gradients give equal predictions.
    """
    if not isinstance(training, TrainingConfig):
        raise ValueError(f"training: must be a TrainingConfig, got {type(training).__name__}")
    if not isinstance(probe, ProbeConfig):
        raise ValueError(f"probe: must be a ProbeConfig, got {type(probe).__name__}")
    check_int("seed", seed, 0)
    if training.num_train_epochs != int(training.num_train_epochs):
        raise ValueError(f"training.num_train_epochs: must be a whole number for the probe, got {training.num_train_epochs!r}")
    if label_names is not None and len(label_names) != num_labels:
        raise ValueError(f"label_names: must have num_labels={num_labels} names, got {len(label_names)}")
    train = encoded.get("train")
    model_pair = bool(train is not None and train.is_pair)
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = CharacterProbe(vocab_size, num_labels, probe.embedding_size, probe.hidden_size, pair=model_pair)
        _check_encoded(encoded, vocab_size, num_labels)
        optimizer = torch.optim.AdamW(model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay)
        order = torch.Generator().manual_seed(seed)

        def report(name: str, probabilities: torch.Tensor) -> dict[str, Any]:
            return classification_report(
                encoded[name].labels.numpy(), probabilities.argmax(-1).numpy(), label_names=label_names, num_labels=num_labels
            )

        best_score, best_epoch, best_state, best_validation, history = -1.0, 0, None, None, []
        for epoch in range(1, int(training.num_train_epochs) + 1):
            losses = []
            for rows in torch.randperm(len(train), generator=order).split(training.per_device_train_batch_size):
                batch = train.select(rows)
                optimizer.zero_grad()
                value = loss(model(*batch.ids), batch.labels)
                value.backward()
                optimizer.step()
                losses.append(value.detach())
            train_loss = float(torch.stack(losses).mean())
            if not math.isfinite(train_loss):
                raise FloatingPointError(f"training diverged: the mean training loss of epoch {epoch} is {train_loss}")
            validation_probabilities = _probabilities(model, encoded["validation"])
            validation = report("validation", validation_probabilities)
            history.append({"epoch": epoch, "train_loss": train_loss, "validation_macro_f1": validation["macro_f1"]})
            if validation["macro_f1"] > best_score:
                best_score, best_epoch, best_validation = validation["macro_f1"], epoch, validation
                best_validation_predictions = validation_probabilities.argmax(-1).numpy()
                best_state = copy.deepcopy(model.state_dict())
        model.load_state_dict(best_state)
        probabilities = _probabilities(model, encoded["test"])
    return ProbeFit(
        best_epoch,
        best_validation,
        report("test", probabilities),
        best_validation_predictions,
        probabilities.argmax(-1).numpy(),
        probabilities.numpy(),
        history,
    )
