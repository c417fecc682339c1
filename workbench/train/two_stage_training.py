"""Two-stage training with auxiliary labels (``two_stage``) and the fusion baseline (``fusion_finetune``).

Xu Zhang et al., "Complicate Then Simplify" (COLING 2022), sec. 3.2 and 4.2. Stage 1 trains encoder + a K+n head
with cross-entropy over all K+n logits (eq. 10): the n auxiliary labels are never targets but share the softmax.
Stage 2 freezes the encoder and trains a fresh K-way head with the configured loss. Options: FGM adversarial training
in stage 1 (``aux.fgm_epsilon`` > 0: the workbench's reading of the "F" variant's "adversarial perturbations to the
embedding layer only") and the two-encoder fusion (``aux.fusion``, MRE-BERT) of ``model`` and ``aux.fusion_model``
(without it: ``model`` again, a second tiny BERT or the same checkpoint twice).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

from workbench import models
from workbench.config import Config
from workbench.losses import build_loss, num_outputs
from workbench.train.finetuning import (
    classification_data,
    finished_checkpoint,
    train_classifier,
    write_classifier_result,
    write_predictions,
)
from workbench.train.losses_from_specs import loss_from_spec
from workbench.train.run_folder import Result, training_run, write_result
from workbench.train.trainer import LossTrainer
from workbench.vocab import load_tokenizer


class FGM:
    """Fast Gradient Method, Miyato et al. (ICLR 2017) eq. 2-3: ``attack()`` adds r_adv = epsilon * g / ||g||_2, g =
    grad_emb L(x, y), to every trainable ``word_embeddings`` weight (each normalised by its own gradient; skipped when
    ||g|| is 0 or not finite), ``restore()`` puts the weights back."""

    def __init__(self, model: nn.Module, epsilon: float) -> None:
        if not epsilon > 0:
            raise ValueError(f"epsilon: must be > 0, got {epsilon!r}")
        self.epsilon = float(epsilon)
        named = model.named_parameters()
        self.parameters = [weight for name, weight in named if "word_embeddings" in name and weight.requires_grad]
        if not self.parameters:
            raise ValueError("model: has no trainable parameter named *word_embeddings* to perturb")
        self._backup: list[torch.Tensor] = []

    @torch.no_grad()
    def attack(self) -> None:
        self._backup = [parameter.detach().clone() for parameter in self.parameters]
        for parameter in (parameter for parameter in self.parameters if parameter.grad is not None):
            norm = torch.linalg.vector_norm(parameter.grad)
            if norm > 0 and torch.isfinite(norm):
                parameter.add_(parameter.grad, alpha=self.epsilon / norm.item())

    @torch.no_grad()
    def restore(self) -> None:
        for parameter, saved in zip(self.parameters, self._backup):
            parameter.copy_(saved)
        self._backup = []


class FGMTrainer(LossTrainer):
    """``LossTrainer`` whose every micro-batch also backwards the FGM adversarial loss (clean backward, :class:`FGM`
    attack, adversarial backward, restore); the logged loss is the clean one."""

    def __init__(self, *args: Any, fgm_epsilon: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fgm = FGM(self.model, fgm_epsilon)

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        loss = super().training_step(model, dict(inputs), num_items_in_batch)
        self.fgm.attack()
        super().training_step(model, dict(inputs), num_items_in_batch)
        self.fgm.restore()
        return loss


def fusion_description(config: Config) -> str:
    """Which two encoders a fusion of ``config`` combines, in words."""
    first = config.model.model_name_or_path or f"a tiny BERT {config.model.tiny.to_dict()} from scratch"
    if config.aux.fusion_model is not None:
        return f"{first} + {config.aux.fusion_model}"
    if config.model.model_name_or_path is not None:
        return f"{first} + the same checkpoint again (aux.fusion_model is null: identical weights at the start)"
    return f"{first} + a second tiny BERT of the same size (aux.fusion_model is null: its own random initialisation)"


def fusion_encoders(config: Config, tokenizer: Any) -> tuple[nn.Module, nn.Module]:
    """The fusion's two encoders, ``model`` and ``aux.fusion_model``, reading the same token ids (ValueError when
    ``aux.fusion_model``'s vocabulary differs from the tokenizer's)."""
    source = models.model_source(config.model, len(tokenizer), config.data.max_length)
    if config.aux.fusion_model is None:
        return models.build_encoder(**source), models.build_encoder(**source)
    second = load_tokenizer(config.aux.fusion_model, key="aux.fusion_model").get_vocab()
    if second != tokenizer.get_vocab():
        raise ValueError(
            f"aux.fusion_model: must share the model's vocabulary (both encoders read the same token ids), got "
            f"{config.aux.fusion_model!r} with {len(second)} tokens, not the model's {len(tokenizer)}"
        )
    return models.build_encoder(**source), models.build_encoder(model_name_or_path=config.aux.fusion_model)


def stage_one_model(config: Config, tokenizer: Any, num_labels: int) -> nn.Module:
    """Encoder + K+n head: a BERT classifier, or a FusionClassifier of two encoders (``aux.fusion``)."""
    source = models.model_source(config.model, len(tokenizer), config.data.max_length)
    if config.aux.fusion:
        return models.FusionClassifier(*fusion_encoders(config, tokenizer), num_labels + config.aux.num_aux)
    if config.aux.num_aux == 0:
        return models.build_sequence_classifier(num_labels, **source)
    return models.build_aux_label_classifier(num_labels, config.aux.num_aux, **source)


def stage_two_model(model: nn.Module, num_labels: int, seed: int) -> nn.Module:
    """Freeze the encoder(s) and put a fresh head of ``num_labels`` outputs on top (in place): K, or K - 1 for CORN."""
    if not isinstance(model, models.FusionClassifier):
        return models.replace_head(models.freeze_encoder(model), num_labels, seed=seed)
    for encoder in (model.encoder_a, model.encoder_b):
        encoder.requires_grad_(False)
    model.classifier = nn.Linear(model.classifier.in_features, num_labels).to(model.classifier.weight.device)
    model.num_labels = num_labels
    return model


def two_stage(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """Both stages on ``config`` (docs/training.md): stage 1 into ``output_dir/stage1`` (CE over K+n outputs,
    scored on the first K), stage 2 into ``output_dir/stage2`` (frozen encoder, fresh head, ``loss``,
    ``aux.stage2_epochs`` / ``aux.stage2_lr``), each keeping its best epoch by validation macro-F1;
    ``output_dir/metrics.json`` holds both stages' metrics, stage 2's report at the top level, and
    ``output_dir/predictions.csv`` stage 2's test (else validation) predictions."""
    with training_run(config, "two_stage", "stage1", "stage2") as config:
        data = classification_data(config)
        output_dir = Path(config.output_dir)
        keep = config.training.keep_checkpoints
        model = stage_one_model(config, data.tokenizer, len(data.names))
        fgm = partial(FGMTrainer, fgm_epsilon=config.aux.fgm_epsilon) if config.aux.fgm_epsilon > 0 else LossTrainer
        stage_one = train_classifier(config, model, build_loss("ce"), data, output_dir / "stage1", callbacks, fgm)
        loss = loss_from_spec(config.loss, data.splits["train"])
        model = stage_two_model(stage_one.trainer.model, num_outputs(loss, len(data.names)), seed=config.training.seed)
        overrides = {"num_train_epochs": config.aux.stage2_epochs, "learning_rate": config.aux.stage2_lr}
        stage_two = train_classifier(config, model, loss, data, output_dir / "stage2", callbacks, **overrides)
        finished_checkpoint(stage_one, output_dir / "stage1", keep)
        if stage_two.trainer.is_world_process_zero():  # stage 2's test (else validation) predictions, as finetune's
            write_predictions(output_dir, stage_two.gold, stage_two.probabilities, data.names, stage_two.predicted)
        metrics = {
            "task": "two_stage",
            **{key: stage_two.metrics[key] for key in ("macro_f1", "accuracy")},
            "stage1": stage_one.metrics,
            "stage2": stage_two.metrics,
            "time": stage_one.metrics["time"] + stage_two.metrics["time"],
            "parameters": config.to_dict(),
        }
        stages = ((1, stage_one), (2, stage_two))
        history = [{**entry, "stage": stage} for stage, run in stages for entry in run.trainer.state.log_history]
        return write_result(output_dir, metrics, finished_checkpoint(stage_two, output_dir / "stage2", keep), history)


def fusion_finetune(
    config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()
) -> Result:
    """The paper's M-BERT: a FusionClassifier of ``model`` and ``aux.fusion_model`` with a K-way head, both encoders
    fine-tuned in one stage with ``loss`` (``aux.num_aux``, ``aux.fgm_epsilon``, ``aux.fusion`` ignored); writes
    ``output_dir`` as :func:`workbench.train.finetune` does."""
    with training_run(config, "finetune") as config:
        data = classification_data(config)
        loss = loss_from_spec(config.loss, data.splits["train"])
        model = models.FusionClassifier(*fusion_encoders(config, data.tokenizer), num_outputs(loss, len(data.names)))
        trained = train_classifier(config, model, loss, data, Path(config.output_dir), callbacks)
        head = {"task": "fusion_finetune", "fusion": fusion_description(config), "loss": config.loss.to_dict()}
        return write_classifier_result(config, trained, data, head)
