"""One way to fit a classifier for a study: ``Fitter.fit(splits, loss, seed) -> Fit``.

Two fitters share the interface, so a study runs the same grid with either:

* :class:`ProbeFitter` (``model.kind: probe``): the bag-of-characters probe of
  :mod:`workbench.train.probes`, about a second per run on a CPU;
* :class:`TransformerFitter` (``model.kind: transformer``): a tiny BERT or a checkpoint
  fine-tuned by the team's trainer (:func:`workbench.train.finetuning.train_classifier`) in a
  temporary folder, quietly.

Both evaluate on validation after every epoch, keep the epoch with the best validation
macro-F1 (the first on ties) and predict validation and test with it; the test split is
never used for selection. :func:`build_fitter` picks one from a config's ``model`` section.
"""

from __future__ import annotations

import abc
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from datasets import DatasetDict
from torch import nn
from transformers import set_seed

from workbench.checks import check_int
from workbench.config import Config, DataConfig, ModelConfig, TrainingConfig
from workbench.data import label_names
from workbench.models import build_sequence_classifier, model_source
from workbench.threads import torch_threads
from workbench.train.evaluation import predict_probabilities
from workbench.train.finetuning import train_classifier
from workbench.train.inputs import classification_data
from workbench.train.probes import PAIR_COLUMNS, SINGLE_COLUMNS, encode_split, fit_probe
from workbench.train.verbosity import progress_bars
from workbench.vocab import load_tokenizer

SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Fit:
    """One seeded fit: the kept epoch's ``validation_predictions`` and ``test_predictions`` (class
    ids), ``test_probabilities`` (n, K), the kept 1-based ``best_epoch``, its validation macro-F1
    (``validation_score``) and the per-epoch ``history``."""

    validation_predictions: np.ndarray
    test_predictions: np.ndarray
    test_probabilities: np.ndarray
    best_epoch: int
    validation_score: float
    history: list[dict[str, Any]] = field(default_factory=list)


def _check_splits(splits: DatasetDict) -> None:
    missing = [name for name in SPLITS if name not in splits]
    if missing:
        raise ValueError(f"splits: must hold {list(SPLITS)}, missing {missing}")


class Fitter(abc.ABC):
    """Fits a fresh classifier on ``splits["train"]`` with a loss and a seed (see the module doc)."""

    def __init__(self, model: ModelConfig, training: TrainingConfig, max_length: int) -> None:
        self.model = ModelConfig.from_mapping(model)
        self.training = TrainingConfig.from_mapping(training)
        self.max_length = check_int("max_length", max_length, 1)

    @abc.abstractmethod
    def fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        """Train on ``splits["train"]`` with ``loss`` and ``seed``; select the epoch on validation;
        predict validation and test.

        Args:
            splits: ``train``, ``validation`` and ``test`` datasets with ``text`` (optional
                ``text_pair``) and a ClassLabel ``label`` column.
            loss: any ``forward(logits, labels)`` module, e.g. from ``workbench.losses.resolve``.
            seed: seeds the model's initialisation and the batch order.

        Returns:
            The kept epoch's :class:`Fit`. Raises ValueError when a split is missing.
        """


class ProbeFitter(Fitter):
    """The character probe (:func:`workbench.train.probes.fit_probe`) over the model's tokenizer;
    pairs when the splits have ``text_pair``. Splits are encoded once and reused while the same
    splits are fitted again (e.g. one loss after another)."""

    def __init__(self, model: ModelConfig, training: TrainingConfig, max_length: int) -> None:
        super().__init__(model, training, max_length)
        self.tokenizer = load_tokenizer(vocab_file=self.model.vocab_file)
        self._encoded: tuple[tuple[str, ...], dict[str, Any]] | None = None

    def _encode(self, splits: DatasetDict) -> dict[str, Any]:
        key = tuple(splits[name]._fingerprint for name in SPLITS)
        if self._encoded is None or self._encoded[0] != key:
            columns = PAIR_COLUMNS if "text_pair" in splits["train"].column_names else SINGLE_COLUMNS
            encoded = {name: encode_split(splits[name], self.tokenizer, self.max_length, columns) for name in SPLITS}
            self._encoded = (key, encoded)
        return self._encoded[1]

    def fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        _check_splits(splits)
        names = label_names(splits["train"])
        run = fit_probe(
            self._encode(splits),
            loss,
            self.training,
            self.model.probe,
            len(self.tokenizer),
            len(names),
            seed=seed,
            label_names=names,
        )
        return Fit(
            run.validation_predictions,
            run.predictions,
            run.probabilities,
            run.best_epoch,
            run.validation["macro_f1"],
            run.history,
        )


class TransformerFitter(Fitter):
    """A transformer classifier trained by ``train_classifier`` (``LossTrainer``) in a temporary folder.

    The classifier is built after ``set_seed(seed)``, so two losses with equal gradients give
    equal predictions on a deterministic device. ``training.seed`` is replaced by ``seed``.
    """

    def fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        _check_splits(splits)
        with (
            tempfile.TemporaryDirectory(prefix="workbench_fit_") as folder,
            progress_bars(False),
            torch_threads(self.training.threads),
        ):
            config = Config(
                output_dir=folder,
                data=DataConfig(max_length=self.max_length),
                model=self.model,
                training=self.training.replace(seed=seed, quiet=True),
            )
            set_seed(seed)
            data = classification_data(config, splits)
            classifier = build_sequence_classifier(
                len(data.names), **model_source(config.model, len(data.tokenizer), self.max_length)
            )
            trained = train_classifier(config, classifier, loss, data, Path(folder))
            validation, _ = predict_probabilities(trained.trainer, data.encoded["validation"], len(data.names))
        history = [
            {"epoch": int(round(entry["epoch"])), "validation_macro_f1": entry["eval_macro_f1"]}
            for entry in trained.trainer.state.log_history
            if "eval_macro_f1" in entry
        ]
        return Fit(
            validation.argmax(axis=-1),
            trained.probabilities.argmax(axis=-1),
            trained.probabilities,
            trained.best_epoch,
            float(trained.trainer.state.best_metric),
            history,
        )


def build_fitter(model: ModelConfig | dict[str, Any], training: TrainingConfig | dict[str, Any], max_length: int) -> Fitter:
    """The fitter of ``model.kind``: :class:`ProbeFitter` or :class:`TransformerFitter`.

    Args:
        model: a config ``model`` section (or its mapping): ``kind: probe`` with ``probe`` sizes, or a
            transformer (``tiny`` sizes from scratch, or ``model_name_or_path``).
        training: a config ``training`` section (or its mapping): num_train_epochs, per_device_train_batch_size, learning_rate, ...
        max_length: truncation of each text (pair), in tokens.

    Returns:
        A :class:`Fitter` whose ``fit(splits, loss, seed)`` every study calls.
    """
    model = ModelConfig.from_mapping(model)
    fitter_class = ProbeFitter if model.kind == "probe" else TransformerFitter
    return fitter_class(model, training, max_length)
