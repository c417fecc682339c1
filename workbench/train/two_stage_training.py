"""Two-stage training with auxiliary labels (``two_stage``) and the fusion baseline (``fusion_finetune``).

Xu Zhang et al., "Complicate Then Simplify: A Novel Way to Explore Pre-trained Models for Text
Classification" (COLING 2022), sec. 3.2 and 4.2. Stage 1 (the paper's "pre-training stage")
trains encoder + a K+n head with cross-entropy over all K+n logits (eq. 10); the n auxiliary labels
never occur as targets (targets lie in [0, K), i.e. the one-hot target padded with n zeros). The
paper's "only the original categories are involved in the calculation of the cross-entropy loss
function, and the auxiliary labels are not involved" is read together with "the auxiliary labels
also have predicted probability values": the auxiliary outputs are never targets but share the
softmax (a softmax over the K target logits alone would make them inert). Stage 2
(its "fine-tuning stage") freezes the encoder and trains a fresh K-way head with the configured
loss. Optional: FGM adversarial training in stage 1 (``aux.fgm_epsilon`` > 0, the "F" variant:
"We also tried to introduce adversarial training In the pre-training stage") and the two-encoder
fusion classifier (``aux.fusion``: MRE-BERT, which "fuses the textual representations of the
BERT-wwm and the BERT-wwm-ext models and then introduces our approach").

The two encoders of a fusion are ``model`` and ``aux.fusion_model`` (:func:`fusion_encoders`).
The paper fuses two *different* pre-trained encoders; with ``aux.fusion_model`` null the
workbench's fallback is a second encoder built from ``model`` again: a second tiny BERT of the
same size with its own random initialisation, or the same checkpoint loaded twice (identical
weights at the start). :func:`fusion_finetune` is the paper's M-BERT: the fusion fine-tuned in
one stage, without auxiliary labels ("M-BERT unites the textual semantic representations of two
pre-trained models").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import nn
from transformers import TrainerCallback, set_seed

from workbench.config import Config, load_config
from workbench.losses import build_loss, resolve
from workbench.models import (
    FusionClassifier,
    build_aux_label_classifier,
    build_encoder,
    build_sequence_classifier,
    freeze_encoder,
    model_source,
    replace_head,
)
from workbench.threads import torch_threads
from workbench.train.evaluation import write_predictions
from workbench.train.fgm import FGMTrainer
from workbench.train.finetuning import finished_checkpoint, refuse_occupied, train_classifier
from workbench.train.inputs import classification_data
from workbench.train.result import Result, is_main_process, write_result
from workbench.train.verbosity import progress_bars
from workbench.vocab import load_tokenizer


def fusion_description(config: Config) -> str:
    """Which two encoders a fusion of ``config`` combines, in words (the fallback named as such)."""
    model, second = config.model, config.aux.fusion_model
    first = model.model_name_or_path or f"a tiny BERT {model.tiny.to_dict()} from scratch"
    if second is not None:
        return f"{first} + {second}"
    if model.model_name_or_path is not None:
        return f"{first} + the same checkpoint again (aux.fusion_model is null: identical weights at the start)"
    return f"{first} + a second tiny BERT of the same size (aux.fusion_model is null: its own random initialisation)"


def fusion_encoders(config: Config, tokenizer: Any) -> tuple[nn.Module, nn.Module]:
    """The two encoders of a fusion: ``model`` and ``aux.fusion_model`` (see the module doc for the
    fallback when it is null). Both read the same token ids, so ``aux.fusion_model`` must have the
    tokenizer's vocabulary: ValueError naming it otherwise."""
    vocab_size = len(tokenizer)
    source = model_source(config.model, vocab_size, config.data.max_length)
    if config.aux.fusion_model is None:
        return build_encoder(**source), build_encoder(**source)
    second_vocab = load_tokenizer(config.aux.fusion_model).get_vocab()
    if second_vocab != tokenizer.get_vocab():
        raise ValueError(
            f"aux.fusion_model: must share the tokenizer of model (both encoders read the same token ids), got "
            f"{config.aux.fusion_model!r} with a {len(second_vocab)}-token vocabulary that differs from the model's "
            f"{vocab_size}-token one"
        )
    return build_encoder(**source), build_encoder(model_name_or_path=config.aux.fusion_model)


def stage_one_model(config: Config, vocab_size: int, num_labels: int, tokenizer: Any = None) -> nn.Module:
    """Encoder + K+n head: a BERT classifier, or a FusionClassifier of two encoders (``aux.fusion``,
    :func:`fusion_encoders`; ``tokenizer`` is needed then)."""
    aux = config.aux
    source = model_source(config.model, vocab_size, config.data.max_length)
    outputs = num_labels + aux.num_aux
    if aux.fusion:
        if tokenizer is None:
            raise ValueError("tokenizer: the fusion classifier (aux.fusion) needs the tokenizer, got None")
        return FusionClassifier(*fusion_encoders(config, tokenizer), outputs)
    if aux.num_aux == 0:
        return build_sequence_classifier(num_labels, **source)
    return build_aux_label_classifier(num_labels, aux.num_aux, **source)


def stage_two_model(model: nn.Module, num_labels: int, seed: int) -> nn.Module:
    """Freeze the encoder(s) and put a fresh K-way head on top (in place)."""
    if isinstance(model, FusionClassifier):
        for encoder in (model.encoder_a, model.encoder_b):
            encoder.requires_grad_(False)
        model.classifier = nn.Linear(model.classifier.in_features, num_labels).to(model.classifier.weight.device)
        model.num_labels = num_labels
        return model
    return replace_head(freeze_encoder(model), num_labels, seed=seed)


def two_stage(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Run both stages on ``config`` (see docs/training.md).

    Stage 1 writes ``output_dir/stage1`` (CE over K+n outputs, scored on the
    first K logits), stage 2 ``output_dir/stage2`` (frozen encoder, fresh head,
    ``loss`` from the config, ``aux.stage2_epochs`` / ``aux.stage2_lr``). Each
    stage keeps its best epoch by validation macro-F1 and writes its
    predictions; ``output_dir/metrics.json`` holds both stages' metrics, with
    stage 2's report at the top level.
    """
    config = load_config(config, task="two_stage")
    refuse_occupied(config, "stage1", "stage2")
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        set_seed(config.training.seed)
        output_dir = Path(config.output_dir)
        data = classification_data(config)
        model = stage_one_model(config, len(data.tokenizer), len(data.names), data.tokenizer)
        fgm = (
            {"trainer_class": FGMTrainer, "trainer_kwargs": {"fgm_epsilon": config.aux.fgm_epsilon}}
            if config.aux.fgm_epsilon > 0
            else {}
        )
        stage_one = train_classifier(config, model, build_loss("ce"), data, output_dir / "stage1", callbacks, **fgm)
        model = stage_two_model(stage_one.trainer.model, len(data.names), seed=config.training.seed)
        stage_two = train_classifier(
            config,
            model,
            resolve(config.loss, data.splits["train"]),
            data,
            output_dir / "stage2",
            callbacks,
            num_train_epochs=config.aux.stage2_epochs,
            learning_rate=config.aux.stage2_lr,
        )
        keep = config.training.keep_checkpoints
        finished_checkpoint(stage_one, output_dir / "stage1", keep)
        best = finished_checkpoint(stage_two, output_dir / "stage2", keep)
        metrics = {
            "task": "two_stage",
            "macro_f1": stage_two.metrics["macro_f1"],
            "accuracy": stage_two.metrics["accuracy"],
            "stage1": stage_one.metrics,
            "stage2": stage_two.metrics,
            "time": stage_one.metrics["time"] + stage_two.metrics["time"],
            "parameters": config.to_dict(),
        }
        history = [
            {**entry, "stage": stage}
            for stage, trained in ((1, stage_one), (2, stage_two))
            for entry in trained.trainer.state.log_history
        ]
        return write_result(output_dir, metrics, best, history)


def fusion_finetune(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """The paper's M-BERT: a FusionClassifier of ``model`` and ``aux.fusion_model`` (:func:`fusion_encoders`)
    with a K-way head, fine-tuned in one stage with ``loss`` (both encoders trainable; no auxiliary labels,
    no frozen stage). ``aux.num_aux``, ``aux.fgm_epsilon`` and ``aux.fusion`` are ignored. Writes
    ``output_dir`` as :func:`workbench.train.finetune` does (metrics.json, predictions.csv)."""
    config = load_config(config, task="finetune")
    refuse_occupied(config)
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        set_seed(config.training.seed)
        output_dir = Path(config.output_dir)
        data = classification_data(config)
        model = FusionClassifier(*fusion_encoders(config, data.tokenizer), len(data.names))
        trained = train_classifier(config, model, resolve(config.loss, data.splits["train"]), data, output_dir, callbacks)
        if is_main_process():
            write_predictions(output_dir, trained.gold, trained.probabilities, data.names)
        best = finished_checkpoint(trained, output_dir, config.training.keep_checkpoints)
        metrics = {
            "task": "fusion_finetune",
            "fusion": fusion_description(config),
            "loss": config.loss.to_dict(),
            **trained.metrics,
            "parameters": config.to_dict(),
        }
        return write_result(output_dir, metrics, best, trained.trainer.state.log_history)
