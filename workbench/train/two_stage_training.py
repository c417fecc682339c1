"""Two-stage training with auxiliary labels (``two_stage``) and the fusion baseline (``fusion_finetune``).

Xu Zhang et al., "Complicate Then Simplify" (COLING 2022), sec. 3.2 and 4.2. Stage 1 trains encoder + a K+n
head with cross-entropy over all K+n logits (eq. 10): the n auxiliary labels are never targets ("only the
original categories are involved in the calculation of the cross-entropy loss") but share the softmax ("the
auxiliary labels also have predicted probability values"). Stage 2 freezes the encoder and trains a fresh
K-way head with the configured loss. Options: FGM in stage 1 (``aux.fgm_epsilon`` > 0, the "F" variant) and
the two-encoder fusion (``aux.fusion``, MRE-BERT: "fuses the textual representations of the BERT-wwm and the
BERT-wwm-ext models"). The fusion's encoders are ``model`` and ``aux.fusion_model``; the paper fuses two
different pre-trained encoders, the workbench's fallback without ``aux.fusion_model`` is ``model`` again (a
second tiny BERT with its own initialisation, or the same checkpoint twice). :func:`fusion_finetune` is M-BERT:
the fusion fine-tuned in one stage, without auxiliary labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import nn
from transformers import TrainerCallback

from workbench.config import Config
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
from workbench.train.finetuning import classifier_run, finished_checkpoint, train_classifier, write_classifier_result
from workbench.train.result import Result, write_result
from workbench.vocab import load_tokenizer


def fusion_description(config: Config) -> str:
    """Which two encoders a fusion of ``config`` combines, in words (the fallback named as such)."""
    first = config.model.model_name_or_path or f"a tiny BERT {config.model.tiny.to_dict()} from scratch"
    if config.aux.fusion_model is not None:
        return f"{first} + {config.aux.fusion_model}"
    if config.model.model_name_or_path is not None:
        return f"{first} + the same checkpoint again (aux.fusion_model is null: identical weights at the start)"
    return f"{first} + a second tiny BERT of the same size (aux.fusion_model is null: its own random initialisation)"


def fusion_encoders(config: Config, tokenizer: Any) -> tuple[nn.Module, nn.Module]:
    """The fusion's two encoders, ``model`` and ``aux.fusion_model`` (the module doc's fallback when null); both
    read the same token ids, so ``aux.fusion_model`` must have the tokenizer's vocabulary (ValueError otherwise)."""
    source = model_source(config.model, len(tokenizer), config.data.max_length)
    if config.aux.fusion_model is None:
        return build_encoder(**source), build_encoder(**source)
    second = load_tokenizer(config.aux.fusion_model).get_vocab()
    if second != tokenizer.get_vocab():
        raise ValueError(
            f"aux.fusion_model: must share the tokenizer of model (both encoders read the same token ids), got "
            f"{config.aux.fusion_model!r} whose {len(second)}-token vocabulary differs from the model's {len(tokenizer)} tokens"
        )
    return build_encoder(**source), build_encoder(model_name_or_path=config.aux.fusion_model)


def stage_one_model(config: Config, vocab_size: int, num_labels: int, tokenizer: Any = None) -> nn.Module:
    """Encoder + K+n head: a BERT classifier, or a FusionClassifier of two encoders (``aux.fusion``: needs ``tokenizer``)."""
    source = model_source(config.model, vocab_size, config.data.max_length)
    if config.aux.fusion:
        if tokenizer is None:
            raise ValueError("tokenizer: the fusion classifier (aux.fusion) needs the tokenizer, got None")
        return FusionClassifier(*fusion_encoders(config, tokenizer), num_labels + config.aux.num_aux)
    if config.aux.num_aux == 0:
        return build_sequence_classifier(num_labels, **source)
    return build_aux_label_classifier(num_labels, config.aux.num_aux, **source)


def stage_two_model(model: nn.Module, num_labels: int, seed: int) -> nn.Module:
    """Freeze the encoder(s) and put a fresh K-way head on top (in place)."""
    if not isinstance(model, FusionClassifier):
        return replace_head(freeze_encoder(model), num_labels, seed=seed)
    for encoder in (model.encoder_a, model.encoder_b):
        encoder.requires_grad_(False)
    model.classifier = nn.Linear(model.classifier.in_features, num_labels).to(model.classifier.weight.device)
    model.num_labels = num_labels
    return model


def two_stage(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Both stages on ``config`` (docs/training.md): stage 1 into ``output_dir/stage1`` (CE over K+n outputs,
    scored on the first K), stage 2 into ``output_dir/stage2`` (frozen encoder, fresh head, ``loss``,
    ``aux.stage2_epochs`` / ``aux.stage2_lr``), each keeping its best epoch by validation macro-F1;
    ``output_dir/metrics.json`` holds both stages' metrics, stage 2's report at the top level."""
    with classifier_run(config, "two_stage", "stage1", "stage2") as (config, data):
        output_dir, keep = Path(config.output_dir), config.training.keep_checkpoints
        model = stage_one_model(config, len(data.tokenizer), len(data.names), data.tokenizer)
        fgm = (
            {"trainer_class": FGMTrainer, "trainer_kwargs": {"fgm_epsilon": config.aux.fgm_epsilon}}
            if config.aux.fgm_epsilon > 0
            else {}
        )
        stage_one = train_classifier(config, model, build_loss("ce"), data, output_dir / "stage1", callbacks, **fgm)
        model = stage_two_model(stage_one.trainer.model, len(data.names), seed=config.training.seed)
        loss = resolve(config.loss, data.splits["train"])
        overrides = {"num_train_epochs": config.aux.stage2_epochs, "learning_rate": config.aux.stage2_lr}
        stage_two = train_classifier(config, model, loss, data, output_dir / "stage2", callbacks, **overrides)
        finished_checkpoint(stage_one, output_dir / "stage1", keep)
        best = finished_checkpoint(stage_two, output_dir / "stage2", keep)
        metrics = {
            "task": "two_stage",
            **{key: stage_two.metrics[key] for key in ("macro_f1", "accuracy")},
            "stage1": stage_one.metrics,
            "stage2": stage_two.metrics,
            "time": stage_one.metrics["time"] + stage_two.metrics["time"],
            "parameters": config.to_dict(),
        }
        history = [
            {**entry, "stage": stage}
            for stage, run in ((1, stage_one), (2, stage_two))
            for entry in run.trainer.state.log_history
        ]
        return write_result(output_dir, metrics, best, history)


def fusion_finetune(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """The paper's M-BERT: a FusionClassifier of ``model`` and ``aux.fusion_model`` with a K-way head, both encoders
    fine-tuned in one stage with ``loss`` (``aux.num_aux``, ``aux.fgm_epsilon``, ``aux.fusion`` ignored); writes
    ``output_dir`` as :func:`workbench.train.finetune` does."""
    with classifier_run(config, "finetune") as (config, data):
        model = FusionClassifier(*fusion_encoders(config, data.tokenizer), len(data.names))
        trained = train_classifier(
            config, model, resolve(config.loss, data.splits["train"]), data, Path(config.output_dir), callbacks
        )
        head = {"task": "fusion_finetune", "fusion": fusion_description(config), "loss": config.loss.to_dict()}
        return write_classifier_result(config, trained, data, head)
