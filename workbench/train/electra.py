"""ELECTRA pre-training (``pretrain_electra``) with the true-negatives objectives HC and SR.

ELECTRA (Clark et al., ICLR 2020, Sec. 2): a small generator G (a masked LM, its head at the masked positions only)
and a discriminator D share their embeddings (:func:`workbench.models.build_electra`). Each masked position is replaced
by a token sampled from G's softmax (no gradient through the sampling), giving x^c; D predicts for every real token
y_t = 1[x^c_t != x_t]: L_disc = -(1/n) sum_t [y_t log D(x^c, t) + (1 - y_t) log(1 - D(x^c, t))] over the n real
tokens, and L = L_MLM(G) + lambda L_disc, lambda = ``electra.discriminator_weight`` (50 in ELECTRA).

True negatives (Zhang et al., AAAI 2023, App. A): HC "affect[s] both the generator and discriminator": G's MLM loss is
eq. 2 on G's argmax; for D "the position will also be considered as the original word", y_t = 0 where the sampled
replacement is a synonym of the original (:func:`discriminator_targets`; reading this on the sample is the
workbench's). SR is added to G's MLM loss on the shared embeddings (sentence level: G's encoder).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import ElectraForMaskedLM, ElectraForPreTraining, ElectraPreTrainedModel, TrainerCallback
from transformers.utils import ModelOutput

from workbench.config import Config
from workbench.losses import IGNORE_INDEX, Correction, CorrectionCounts, HardCorrectionLoss, labelled_rows
from workbench.models import GENERATOR_DIR, build_electra, labelled_logits, model_source
from workbench.train import pretraining
from workbench.train.run_folder import Result, count_parameters, training_run


@dataclass
class ElectraOutput(ModelOutput):
    """One pass of the pair: G's logits at the masked positions (M, vocab), D's input x^c and D's logits
    (batch, length)."""

    generator_logits: torch.Tensor | None = None
    replaced_ids: torch.Tensor | None = None
    discriminator_logits: torch.Tensor | None = None


def sample_replacements(
    generator_logits: torch.Tensor,
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    sampler: torch.Generator | None = None,
) -> torch.Tensor:
    """x^c: ``input_ids`` with the originals (``labels``) restored and every masked position replaced by a token drawn
    from softmax(``generator_logits``) (temperature 1), without gradient; ``sampler`` seeds the draws (None: torch's
    global generator). ``generator_logits``: (M, vocab) at the masked positions, or (batch, length, vocab)."""
    masked = labels != IGNORE_INDEX
    original = torch.where(masked, labels, input_ids)
    probabilities = labelled_rows(generator_logits.detach(), labels).softmax(dim=-1)
    if len(probabilities) == 0:
        return original
    return original.masked_scatter(masked, torch.multinomial(probabilities, 1, generator=sampler).squeeze(-1))


def discriminator_targets(
    replaced_ids: torch.Tensor, labels: torch.Tensor, correction: HardCorrectionLoss | None = None, word_ids: Any = None
) -> tuple[torch.Tensor, Correction | None]:
    """D's targets (bool): True ("replaced") at the masked positions whose token in ``replaced_ids`` differs from the
    original (``labels``). With ``correction`` (HC, App. A) a replacement that is a synonym of the original
    (``correction.prediction_counts``: its level, lexicon and ``word_ids``) counts as original; its counts are returned
    too (``wrong`` = replaced positions, ``corrected`` = those relabelled original), else None."""
    masked = labels != IGNORE_INDEX
    replaced = masked & (replaced_ids != labels)
    if correction is None:
        return replaced, None
    counts = correction.prediction_counts(replaced_ids, labels, word_ids)
    return replaced & counts.labels.ne(IGNORE_INDEX), counts


def discriminator_loss(
    logits: torch.Tensor, targets: torch.Tensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, count)``: L_disc, the binary cross-entropy of D's ``logits`` against ``targets`` averaged over the
    ``count`` real tokens (attention_mask = 1, [CLS] and [SEP] included, as ELECTRA's input mask)."""
    real = attention_mask.bool()
    losses = F.binary_cross_entropy_with_logits(logits.float(), targets.float(), reduction="none")
    return torch.where(real, losses, 0.0).sum() / real.sum().clamp_min(1), real.sum()


class ElectraPretrainingModel(ElectraPreTrainedModel):
    """ELECTRA's G and D as one ``PreTrainedModel`` for the Trainer: ``forward`` runs G at the masked positions, fills
    them with samples (:func:`sample_replacements`) and runs D on the result.

    D's modules sit at the pair's top level and G under ``generator``, so the pair's weights are named as D's own
    (``electra.*``, ``discriminator_predictions.*``) plus ``generator.*``; ``discriminator`` is D itself, holding the
    same modules. ``save_pretrained(folder)`` writes D's config and every weight of the pair into ``folder``
    (``finetune`` loads D from it, ignoring G's), and G on its own into ``folder/generator`` (:func:`build_electra`
    loads both from there). A checkpoint is the Trainer's own save, so the Trainer resumes the pair through its public
    ``resume_from_checkpoint``: it loads that one file into the pair. G's embeddings are D's (shared), saved once."""

    def __init__(self, generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining) -> None:
        super().__init__(discriminator.config)
        self.electra = discriminator.electra
        self.discriminator_predictions = discriminator.discriminator_predictions
        self.generator = generator
        object.__setattr__(self, "discriminator", discriminator)  # D itself: its modules are registered above
        own = {id(tensor) for tensor in discriminator.state_dict(keep_vars=True).values()}
        shared = [name for name, tensor in generator.state_dict(keep_vars=True).items() if id(tensor) in own]
        self._keys_to_ignore_on_save = [f"generator.{name}" for name in shared]  # D's, saved under D's names

    def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None, sampler=None) -> ElectraOutput:
        if labels is None:
            raise ValueError("labels: ELECTRA needs the masked positions' original tokens (-100 elsewhere), got None")
        inputs = {"attention_mask": attention_mask, "token_type_ids": token_type_ids}
        generator_logits, _ = labelled_logits(self.generator, labels, input_ids=input_ids, **inputs)
        replaced_ids = sample_replacements(generator_logits, input_ids, labels, sampler)
        return ElectraOutput(
            generator_logits, replaced_ids, self.discriminator(input_ids=replaced_ids, **inputs).logits
        )

    def tie_weights(self, *args: Any, **kwargs: Any) -> None:
        """G's embeddings are D's, its output layer tied to them (Clark et al. 2020, Sec. 3.2)."""
        self.generator.electra.embeddings = self.electra.embeddings
        self.generator.tie_weights()

    def save_pretrained(self, save_directory: str | Path, state_dict: dict | None = None, **kwargs: Any) -> None:
        """D's config and the pair's weights (``state_dict``, default its own; G's shared embeddings once, under D's
        names) into ``save_directory`` through D's ``save_pretrained``; G into ``save_directory/generator``."""
        weights = self.state_dict() if state_dict is None else state_dict
        weights = {name: tensor for name, tensor in weights.items() if name not in self._keys_to_ignore_on_save}
        self.discriminator.save_pretrained(save_directory, state_dict=weights, **kwargs)
        self.generator.save_pretrained(Path(save_directory) / GENERATOR_DIR, **kwargs)


def loss_means(sums: np.ndarray) -> dict[str, float]:
    """G's and D's mean loss from ``sums`` (G's sum, D's sum, micro-batches); empty without micro-batches."""
    return {"generator_loss": sums[0] / sums[2], "discriminator_loss": sums[1] / sums[2]} if sums[2] else {}


class ElectraTrainer(pretraining.MaskedLMTrainer):
    """The MLM objective (plain / HC / SR) on G plus ``discriminator_weight`` x L_disc (a batch-level mean under
    gradient accumulation); with HC, D's relabellings are counted in ``corrections["disc_hc"]``; G's and D's mean
    losses are logged."""

    def __init__(self, *args: Any, discriminator_weight: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.discriminator_weight = discriminator_weight
        if self.correcting:
            self.corrections["disc_hc"] = pretraining.CorrectionLog()
        self.losses_since_log = np.zeros(3)  # G's loss sum, D's loss sum, micro-batches since the last log
        self.losses_total = np.zeros(3)  # the same over the whole run

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        word_ids = inputs.pop("word_ids", None)
        outputs = model(**inputs, labels=labels)
        generator = self.accelerator.unwrap_model(model).generator
        generator_loss, items = self.mlm_loss(generator, outputs.generator_logits, labels, inputs, word_ids)
        targets, counts = discriminator_targets(
            outputs.replaced_ids, labels, self.loss if self.correcting else None, word_ids
        )
        disc_loss, _ = discriminator_loss(outputs.discriminator_logits, targets, inputs["attention_mask"])
        if model.training:
            if counts is not None:
                self.corrections["disc_hc"].update(counts)
            step = np.array([generator_loss.item(), disc_loss.item(), 1.0])
            self.losses_since_log += step
            self.losses_total += step
            generator_loss = self.scale_for_accumulation(generator_loss, items, num_items_in_batch)
            disc_loss = self.scale_for_accumulation(disc_loss, 1, None, is_batch_level=True)
        loss = generator_loss + self.discriminator_weight * disc_loss
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs = {**logs, **loss_means(self.losses_since_log)}
            self.losses_since_log = np.zeros(3)
        super().log(logs, start_time)

    def run_metrics(self) -> dict[str, Any]:
        """:class:`MaskedLMTrainer`'s, G's and D's unscaled losses averaged over this session's micro-batches (a resumed
        run: since it resumed), each model's parameter count and with HC D's ``discriminator_correction``."""
        means = loss_means(self.losses_total)
        metrics = {
            **super().run_metrics(),
            "train_generator_loss": means.get("generator_loss"),
            "train_discriminator_loss": means.get("discriminator_loss"),
            "num_parameters_generator": count_parameters(self.model.generator),
            "num_parameters_discriminator": count_parameters(self.model.discriminator),
        }
        if self.correcting:
            metrics["discriminator_correction"] = self.corrections["disc_hc"].totals.as_dict()
        return metrics

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """The Trainer's own save (the pair's ``save_pretrained``, the tokenizer, the training arguments: checkpoints
        and the final save), and the tokenizer beside G too, so that ``generator/`` loads on its own."""
        super().save_model(output_dir, _internal_call)
        if self.args.should_save:
            self.processing_class.save_pretrained(os.path.join(output_dir or self.args.output_dir, GENERATOR_DIR))


@torch.no_grad()
def evaluate_discriminator(
    model: ElectraPretrainingModel,
    batches: Sequence[Mapping[str, torch.Tensor]],
    correction: HardCorrectionLoss | None = None,
    seed: int = pretraining.EVAL_SEED,
) -> dict[str, float]:
    """D on pre-masked ``batches``, replacements sampled from G seeded with ``seed``, plain ELECTRA targets y
    over the real tokens: eval_disc_loss (mean BCE), eval_disc_accuracy (1[logit > 0] = y), eval_disc_precision and
    eval_disc_recall of "replaced", eval_replaced_share; with ``correction`` the HC relabelling counts and rates of the
    same replacements as ``disc_hc_<name>``. Runs in eval mode, restores the mode after."""
    totals = np.zeros(6)  # loss sum, real tokens, right, true positives, predicted, replaced
    counts = CorrectionCounts()
    with pretraining.evaluation_mode(model, batches) as device:
        sampler = torch.Generator(device=device).manual_seed(seed)
        for batch in batches:
            batch = {key: value.to(device) for key, value in batch.items()}
            inputs = {key: batch[key] for key in pretraining.MODEL_INPUTS if key in batch}
            output = model(**inputs, labels=batch["labels"], sampler=sampler)
            real = batch["attention_mask"].bool()
            targets = discriminator_targets(output.replaced_ids, batch["labels"])[0] & real
            loss, tokens = discriminator_loss(output.discriminator_logits, targets, batch["attention_mask"])
            predicted = (output.discriminator_logits > 0) & real
            right = (predicted == targets) & real
            counted = [loss * tokens, tokens, right.sum(), (predicted & targets).sum(), predicted.sum(), targets.sum()]
            totals += torch.stack(counted).tolist()
            if correction is not None:
                counts.update(correction.prediction_counts(output.replaced_ids, batch["labels"], batch.get("word_ids")))
    loss_sum, tokens, right, true_positives, predicted, replaced = totals
    result = {
        "eval_disc_loss": loss_sum / tokens,
        "eval_disc_accuracy": right / tokens,
        "eval_disc_precision": true_positives / predicted if predicted else 0.0,
        "eval_disc_recall": true_positives / replaced if replaced else 0.0,
        "eval_replaced_share": replaced / tokens,
    }
    return {
        **result,
        **({f"disc_hc_{key}": value for key, value in counts.as_dict().items()} if correction is not None else {}),
    }


def evaluate_electra(
    model: ElectraPretrainingModel, batches: Sequence, correction: HardCorrectionLoss | None = None
) -> dict:
    """G's plain MLM evaluation (:func:`evaluate_masked_lm`) and D's (:func:`evaluate_discriminator`) on the same
    masks."""
    generator = pretraining.evaluate_masked_lm(model.generator, batches, correction)
    return {**generator, **evaluate_discriminator(model, batches, correction)}


def pretrain_electra(
    config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()
) -> Result:
    """ELECTRA pre-training on ``config`` (docs/training.md), with ``pretrain_mlm``'s data: D is a tiny ELECTRA
    (``model.tiny``) or the ELECTRA checkpoint ``model.model_name_or_path``, G ``electra.generator_size`` times its
    hidden size. D and the tokenizer go into ``output_dir`` (``finetune`` loads it), G into ``output_dir/generator``;
    metrics.json: pretrain_mlm's keys (G's), D's evaluation, :meth:`ElectraTrainer.run_metrics`, ``electra``."""
    with training_run(config, "pretrain_electra") as config:
        data = pretraining.prepare_pretraining(config)
        source = model_source(config.model, len(data.tokenizer), config.data.max_length)
        model = ElectraPretrainingModel(*build_electra(config.electra, **source))
        arguments = pretraining.pretraining_trainer_kwargs(config, data, callbacks)
        trainer = ElectraTrainer(model=model, discriminator_weight=config.electra.discriminator_weight, **arguments)
        return pretraining.run_pretraining(trainer, config, data, evaluate_electra, electra=config.electra.to_dict())
