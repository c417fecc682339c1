"""How a study fits a classifier, ``Fitter.fit(splits, loss, seed) -> Fit``: the character probe or a transformer, the
epoch with the best validation macro-F1 (the first on ties) kept to predict validation and test."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from datasets import DatasetDict
from torch import nn

from workbench.checks import check_int
from workbench.config import Config, DataConfig, ModelConfig, TrainingConfig
from workbench.data import label_names
from workbench.losses import num_outputs
from workbench.models import build_sequence_classifier, model_source
from workbench.train.finetuning import (
    classification_data,
    predict_split,
    train_classifier,
    warn_shared,
    warn_unreadable,
)
from workbench.train.probes import PAIR_COLUMNS, SINGLE_COLUMNS, SPLITS, encode_split, fit_probe
from workbench.train.run_folder import training_run
from workbench.vocab import load_tokenizer


@dataclass(frozen=True)
class Fit:
    """One seeded fit: the kept epoch's validation and test predictions (class ids), test probabilities (n, K),
    the kept 1-based ``best_epoch``, its validation macro-F1, the per-epoch ``history``, the kept epoch's
    validation probabilities (n_validation, K), which a decision rule is tuned on (``workbench.decisions``), and the
    scale of the fit: the model's ``num_parameters`` and the optimizer ``steps`` it took (the results page's scale)."""

    validation_predictions: np.ndarray
    test_predictions: np.ndarray
    test_probabilities: np.ndarray
    best_epoch: int
    validation_score: float
    history: list[dict[str, Any]] = field(default_factory=list)
    validation_probabilities: np.ndarray | None = None
    num_parameters: int | None = None
    steps: int | None = None


def check_section(name: str, value: Any, section: type) -> Any:
    """``value`` when it is a validated config section of type ``section`` (checked once, when the config was loaded:
    ``load_config(...).training``); ValueError naming ``name`` for a raw mapping or anything else."""
    if not isinstance(value, section):
        raise ValueError(
            f"{name}: must be a validated {section.__name__} (load_config(...).{name}, or "
            f"{section.__name__}.from_mapping(...)), got {type(value).__name__}"
        )
    return value


class Fitter:
    """Fits a fresh classifier with a loss and a seed (:meth:`fit`), from a config's validated ``model`` and
    ``training`` sections (not checked again: a study's fits change only the seed)."""

    def __init__(self, model: ModelConfig, training: TrainingConfig, max_length: int) -> None:
        self.model = check_section("model", model, ModelConfig)
        self.training = check_section("training", training, TrainingConfig)
        self.max_length = check_int("max_length", max_length, 1)

    def fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        """Train on ``splits["train"]``, keep the epoch with the best validation macro-F1, predict validation and test.

        Args:
            splits: ``train``, ``validation`` and ``test`` with ``text`` (optional ``text_pair``) and a ClassLabel
                ``label``.
            loss: any ``forward(logits, labels)`` module averaging over the batch (``workbench.train.loss_from_spec``).
            seed: seeds the model's initialisation and the batch order.

        Returns:
            The kept epoch's :class:`Fit`; ValueError when a split is missing.
        """
        missing = [name for name in SPLITS if name not in splits]
        if missing:
            raise ValueError(f"splits: must hold {list(SPLITS)}, missing {missing}")
        return self._fit(splits, loss, seed)

    def _fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        raise NotImplementedError


class ProbeFitter(Fitter):
    """The character probe (:func:`~workbench.train.probes.fit_probe`), on pairs when the splits have ``text_pair``."""

    def _fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        warn_shared(splits)  # the transformer path warns in classification_data
        tokenizer = load_tokenizer(vocab_file=self.model.vocab_file)
        names = label_names(splits["train"])
        columns = PAIR_COLUMNS if "text_pair" in splits["train"].column_names else SINGLE_COLUMNS
        encoded = {name: encode_split(splits[name], tokenizer, self.max_length, columns) for name in SPLITS}
        warn_unreadable({name: np.hstack(split.ids).tolist() for name, split in encoded.items()}, tokenizer)
        run = fit_probe(
            encoded, loss, self.training, self.model.probe, len(tokenizer), len(names), seed=seed, label_names=names
        )
        scores = (run.validation_predictions, run.predictions, run.probabilities)
        selection = (run.best_epoch, run.validation["macro_f1"], run.history, run.validation_probabilities)
        return Fit(*scores, *selection, run.num_parameters, run.steps)


class TransformerFitter(Fitter):
    """A transformer classifier trained quietly by ``train_classifier`` in a temporary folder with ``training.seed`` =
    ``seed``: two losses with equal gradients give equal predictions on a deterministic device."""

    def _fit(self, splits: DatasetDict, loss: nn.Module, seed: int) -> Fit:
        outputs = num_outputs(loss, len(label_names(splits["train"])))  # K, or K - 1 for CORN
        training = self.training.replace(seed=seed, quiet=True)  # checks the seed alone (INDEPENDENT_KEYS)
        with tempfile.TemporaryDirectory(prefix="workbench_fit_") as folder:
            config = Config(
                output_dir=folder, data=DataConfig(max_length=self.max_length), model=self.model, training=training
            )
            with training_run(config, "finetune") as config:
                data = classification_data(config, splits)
                source = model_source(config.model, len(data.tokenizer), self.max_length)
                trained = train_classifier(
                    config, build_sequence_classifier(outputs, **source), loss, data, Path(folder)
                )
                validation = predict_split(trained.trainer, data.encoded["validation"], len(data.names), loss)
        state = trained.trainer.state
        evaluations = [entry for entry in state.log_history if "eval_macro_f1" in entry]
        history = [{"epoch": round(e["epoch"]), "validation_macro_f1": e["eval_macro_f1"]} for e in evaluations]
        scores = (validation.predicted, trained.predicted, trained.probabilities)
        parameters = sum(parameter.numel() for parameter in trained.trainer.model.parameters())
        selection = (trained.best_epoch, float(state.best_metric), history, validation.probabilities)
        return Fit(*scores, *selection, parameters, int(state.global_step))


def build_fitter(model: ModelConfig, training: TrainingConfig, max_length: int) -> Fitter:
    """The fitter of ``model.kind``.

    Args:
        model: a config's validated ``model`` section (``kind: probe`` with ``probe`` sizes, or a transformer).
        training: a config's validated ``training`` section (num_train_epochs, learning_rate, ...): ``load_config({
            "model": ..., "training": ...})`` checks both once.
        max_length: tokens per text or pair.

    Returns:
        A :class:`ProbeFitter` or :class:`TransformerFitter`, whose ``fit(splits, loss, seed)`` every study calls;
        ValueError naming ``model`` or ``training`` for a raw mapping.
    """
    model = check_section("model", model, ModelConfig)
    return (ProbeFitter if model.kind == "probe" else TransformerFitter)(model, training, max_length)
