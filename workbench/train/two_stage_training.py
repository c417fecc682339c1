"""Two-stage training with auxiliary labels (``two_stage``).

Stage 1 trains encoder + a K+n head with cross-entropy over all K+n logits;
the n auxiliary labels never occur as targets (targets lie in [0, K), i.e. the
one-hot target padded with n zeros). Stage 2 freezes the encoder and trains a
fresh K-way head with the configured loss. Optional: FGM adversarial training
in stage 1 (``aux.fgm_epsilon`` > 0, the "F" variant) and the two-encoder
fusion classifier (``aux.fusion``).
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
from workbench.train.fgm import FGMTrainer
from workbench.train.finetuning import finished_checkpoint, train_classifier
from workbench.train.inputs import classification_data
from workbench.train.result import Result, write_result
from workbench.threads import torch_threads
from workbench.train.verbosity import progress_bars


def stage_one_model(config: Config, vocab_size: int, num_labels: int) -> nn.Module:
    """Encoder + K+n head: a BERT classifier, or a FusionClassifier of two encoders (``aux.fusion``)."""
    aux = config.aux
    source = model_source(config.model, vocab_size, config.data.max_length)
    outputs = num_labels + aux.num_aux
    if aux.fusion:
        second = source if aux.fusion_model is None else {"model_name_or_path": aux.fusion_model}
        return FusionClassifier(build_encoder(**source), build_encoder(**second), outputs)
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
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        set_seed(config.training.seed)
        output_dir = Path(config.output_dir)
        data = classification_data(config)
        model = stage_one_model(config, len(data.tokenizer), len(data.names))
        fgm = {"trainer_class": FGMTrainer, "trainer_kwargs": {"fgm_epsilon": config.aux.fgm_epsilon}} if config.aux.fgm_epsilon > 0 else {}
        stage_one = train_classifier(config, model, build_loss("ce"), data, output_dir / "stage1", callbacks, **fgm)
        model = stage_two_model(stage_one.trainer.model, len(data.names), seed=config.training.seed)
        stage_two = train_classifier(
            config, model, resolve(config.loss, data.splits["train"]), data, output_dir / "stage2", callbacks,
            epochs=config.aux.stage2_epochs, lr=config.aux.stage2_lr,
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
