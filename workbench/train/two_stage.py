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

from workbench.data import label_names
from workbench.losses import build_loss
from workbench.models import (
    FusionClassifier,
    build_aux_label_classifier,
    build_encoder,
    build_sequence_classifier,
    freeze_encoder,
    replace_head,
)
from workbench.train.fgm import FGMTrainer
from workbench.train.finetune import loss_from_config, train_classifier
from workbench.train.inputs import load_splits, tokenize_splits
from workbench.train.runs import (
    Result,
    config_for_task,
    model_source,
    progress_bars,
    tokenizer_from_config,
    write_result,
)


def stage_one_model(config: Mapping[str, Any], tokenizer: Any, num_labels: int) -> nn.Module:
    """Encoder + K+n head: a BERT classifier, or a FusionClassifier of two encoders (``aux.fusion``)."""
    aux = config["aux"]
    source = model_source(config["model"], tokenizer, config["data"]["max_length"])
    outputs = num_labels + aux["num_aux"]
    if aux["fusion"]:
        second = source if aux["fusion_model"] is None else {"model_name_or_path": aux["fusion_model"]}
        return FusionClassifier(build_encoder(**source), build_encoder(**second), outputs)
    if aux["num_aux"] == 0:
        return build_sequence_classifier(num_labels, **source)
    return build_aux_label_classifier(num_labels, aux["num_aux"], **source)


def stage_two_model(model: nn.Module, num_labels: int, seed: int) -> nn.Module:
    """Freeze the encoder(s) and put a fresh K-way head on top (in place)."""
    if isinstance(model, FusionClassifier):
        for encoder in (model.encoder_a, model.encoder_b):
            encoder.requires_grad_(False)
        model.classifier = nn.Linear(model.classifier.in_features, num_labels).to(model.classifier.weight.device)
        model.num_labels = num_labels
        return model
    return replace_head(freeze_encoder(model), num_labels, seed=seed)


def two_stage(config: str | Path | Mapping[str, Any], callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Run both stages on ``config`` (see docs/training.md).

    Stage 1 writes ``output_dir/stage1`` (CE over K+n outputs, scored on the
    first K logits), stage 2 ``output_dir/stage2`` (frozen encoder, fresh head,
    ``loss`` from the config, ``aux.stage2_epochs`` / ``aux.stage2_lr``). Each
    stage keeps its best epoch by validation macro-F1 and writes its
    predictions; ``output_dir/metrics.json`` holds both stages' metrics, with
    stage 2's report at the top level.
    """
    config = config_for_task(config, "two_stage")
    with progress_bars(not config["training"]["quiet"]):
        return _two_stage(config, callbacks)


def _two_stage(config: dict[str, Any], callbacks: Sequence[TrainerCallback]) -> Result:
    training, aux = config["training"], config["aux"]
    set_seed(training["seed"])
    output_dir = Path(config["output_dir"])
    tokenizer = tokenizer_from_config(config["model"])
    splits = load_splits(config["data"])
    names = label_names(splits["train"])
    encoded = tokenize_splits(splits, tokenizer, config["data"]["max_length"])
    common = {"encoded": encoded, "names": names, "tokenizer": tokenizer, "callbacks": callbacks}

    model = stage_one_model(config, tokenizer, len(names))
    fgm = {"trainer_class": FGMTrainer, "trainer_kwargs": {"fgm_epsilon": aux["fgm_epsilon"]}} if aux["fgm_epsilon"] > 0 else {}
    stage_one, stage_one_metrics = train_classifier(
        config, model, build_loss("ce"), output_dir=output_dir / "stage1", **common, **fgm
    )

    model = stage_two_model(stage_one.model, len(names), seed=training["seed"])
    stage_two, stage_two_metrics = train_classifier(
        config,
        model,
        loss_from_config(config["loss"], splits["train"], len(names)),
        output_dir=output_dir / "stage2",
        epochs=aux["stage2_epochs"],
        lr=aux["stage2_lr"],
        **common,
    )
    metrics = {
        "task": "two_stage",
        "macro_f1": stage_two_metrics["macro_f1"],
        "accuracy": stage_two_metrics["accuracy"],
        "stage1": stage_one_metrics,
        "stage2": stage_two_metrics,
        "time": stage_one_metrics["time"] + stage_two_metrics["time"],
        "parameters": config,
    }
    history = [{**entry, "stage": stage} for stage, trainer in ((1, stage_one), (2, stage_two)) for entry in trainer.state.log_history]
    return write_result(
        output_dir, metrics, stage_two.state.best_model_checkpoint, history,
        keep_checkpoints=training["keep_checkpoints"], best_model_dir=output_dir / "stage2",
    )
