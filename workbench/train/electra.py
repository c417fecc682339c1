"""ELECTRA pre-training (``pretrain_electra``) with the true-negatives objectives HC and SR.

ELECTRA (Clark et al., ICLR 2020, Sec. 2): a small generator G (a masked LM) and a discriminator
D share their embeddings. The collator masks a set Y of positions (random / WWM / KDM, as for
``pretrain_mlm``); G predicts them (eq. 1 of Zhang et al., L_MLM over Y); every masked position
is filled with a token sampled from G's softmax, without gradient through the sampling, giving
the corrupted sequence x^c; D predicts for every real token t of x^c whether it was replaced,
target y_t = 1[x^c_t != x_t] (a sample equal to the original counts as original), with the
binary cross-entropy L_disc = -(1/n) sum_t [y_t log D(x^c, t) + (1 - y_t) log(1 - D(x^c, t))]
over the n real tokens (attention mask). The loss is L = L_MLM(G) + lambda L_disc, lambda =
``electra.discriminator_weight`` (50 in ELECTRA). Construction and sharing:
:func:`workbench.models.build_electra`. G's input is the workbench collators' (BERT's recipe: of
the chosen positions 80% [MASK], 10% a random token, 10% unchanged); ELECTRA's own code puts
[MASK] at 85% and leaves 15% unchanged (``pretrain_helpers.mask``). Either way every chosen
position is predicted by G and replaced by its sample.

True negatives (Zhang et al., AAAI 2023, App. A, "How HC and SR work in ELECTRA"):

* HC "affect[s] both the generator and discriminator": (1) "If HC finds a position whose
  prediction is the synonym of the original masked word, the generator will ignore the
  prediction in that position" (its label becomes -100): G's MLM loss is
  :class:`~workbench.losses.mlm.HardCorrectionLoss` (eq. 2), whose prediction r_k is G's argmax,
  as in ``pretrain_mlm``; (2) "for the discriminator, the position will also be considered as the
  original word instead of the replaced one": y_t = 0 where the *sampled replacement* (the token D
  sees) is a synonym of the original (:func:`discriminator_targets`). Reading (2) on the sample
  and (1) on the argmax is the workbench's: the appendix speaks of one "prediction" per position;
  in ELECTRA the token that replaces the original is the sample, while eq. 2's r_k is the MLM
  prediction. Both use ``objective.hc_level`` (token: the paper; word: the workbench's
  whole-word extension) and ``objective.lexicon``.
* SR: "since the generator and discriminator share the embeddings, jointly training with SR can
  contribute to the overall loss and the gradient will be passed thorough [sic] back to the
  Embedding layer to guide the training of both modules": SR (eq. 3, or the sentence-level KL) is
  added to G's MLM loss (:class:`~workbench.losses.mlm.SoftRegularizationLoss` on G's predictions and
  the shared embedding matrix), L = L_MLM(G) + w L_sr + lambda L_disc; D's loss is unchanged. The
  sentence-level KL feeds s and s_p to "the Transformer encoder", which the paper does not name for
  ELECTRA: the workbench uses G's encoder (the model whose predictions fill s_p; its gradient reaches
  D only through the shared embeddings).

Evaluation every epoch on the fixed held-out masks: G's plain MLM loss and perplexity
(``workbench.masking.evaluate_masked_lm``) and D's loss, accuracy, precision and recall of
"replaced" (ELECTRA's ``disc_*`` metrics) with plain targets, so runs with different objectives
compare; the replacements are sampled with a seeded generator, so an evaluation is deterministic
for given weights.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from torch import nn
from transformers import ElectraForMaskedLM, ElectraForPreTraining, TrainerCallback, set_seed
from transformers.trainer import TRAINING_ARGS_NAME
from transformers.utils import ModelOutput

from workbench.config import Config, load_config
from workbench.losses import IGNORE_INDEX
from workbench.losses.mlm import CorrectionCounts, CorrectionStats, HardCorrectionLoss
from workbench.masking import evaluate_masked_lm
from workbench.masking.heldout import MODEL_INPUTS
from workbench.models import GENERATOR_DIR, build_electra, model_source
from workbench.threads import torch_threads
from workbench.train.checkpoints import checkpoint_to_resume, claim_output_dir
from workbench.train.pretraining import (
    EVAL_SEED,
    CorrectionLog,
    MaskedLMTrainer,
    objective_loss,
    prepare_pretraining,
    pretraining_trainer_kwargs,
    run_pretraining,
)
from workbench.train.result import Result, count_parameters
from workbench.train.verbosity import progress_bars

WEIGHTS_FILE = "model.safetensors"


@dataclass
class ElectraOutput(ModelOutput):
    """One forward pass of the pair: G's logits (batch, length, vocab), the discriminator's input
    x^c (the sequence with sampled replacements at the masked positions) and D's logits (batch, length)."""

    generator_logits: torch.Tensor | None = None
    replaced_ids: torch.Tensor | None = None
    discriminator_logits: torch.Tensor | None = None


def sample_replacements(
    generator_logits: torch.Tensor, input_ids: torch.Tensor, labels: torch.Tensor, sampler: torch.Generator | None = None
) -> torch.Tensor:
    """x^c: the original sequence (``labels`` restored into ``input_ids`` at the masked positions,
    labels != -100) with every masked position replaced by a token drawn from softmax(logits)
    (ELECTRA's sampling at temperature 1), without gradient. ``sampler`` seeds the draws (None:
    torch's global generator, which ``training.seed`` seeds and checkpoints keep)."""
    masked = labels != IGNORE_INDEX
    original = torch.where(masked, labels, input_ids)
    probabilities = generator_logits.detach()[masked].float().softmax(dim=-1)
    if probabilities.shape[0] == 0:
        return original
    samples = torch.multinomial(probabilities, 1, generator=sampler).squeeze(-1)
    return original.masked_scatter(masked, samples)


def discriminator_targets(
    replaced_ids: torch.Tensor,
    labels: torch.Tensor,
    correction: HardCorrectionLoss | None = None,
    word_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, CorrectionCounts | None]:
    """D's targets (bool, the shape of ``labels``): True ("replaced") at the masked positions whose
    token in ``replaced_ids`` differs from the original (``labels``), False elsewhere (ELECTRA).

    With ``correction`` (HC, Zhang et al. App. A) a replaced position whose replacement is a synonym
    of the original (``correction.prediction_counts``: its level, lexicon and ``word_ids``) is
    "considered as the original word instead of the replaced one": its target becomes False. Also
    returns those counts (None without ``correction``): ``wrong`` = replaced positions,
    ``corrected`` = replaced positions relabelled original (Table 2's rates for D).
    """
    masked = labels != IGNORE_INDEX
    replaced = masked & (replaced_ids != labels)
    if correction is None:
        return replaced, None
    counts = correction.prediction_counts(replaced_ids, labels, word_ids)
    synonym = masked & counts.labels.eq(IGNORE_INDEX)
    return replaced & ~synonym, counts


def discriminator_loss(
    logits: torch.Tensor, targets: torch.Tensor, attention_mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, count)``: L_disc, the binary cross-entropy of D's ``logits`` against ``targets`` averaged
    over the ``count`` real tokens (attention_mask = 1; [CLS] and [SEP] included, as ELECTRA's
    input mask). No host synchronisation."""
    real = attention_mask.bool()
    losses = F.binary_cross_entropy_with_logits(logits.float(), targets.float(), reduction="none")
    count = real.sum()
    return torch.where(real, losses, 0.0).sum() / count.clamp_min(1), count


class ElectraPretrainingModel(nn.Module):
    """ELECTRA's generator and discriminator as one module for the Trainer (their embeddings are
    shared by :func:`workbench.models.build_electra`).

    ``forward(input_ids, attention_mask, token_type_ids=None, labels=..., sampler=None)``: G on the
    masked input, the masked positions filled with samples (:func:`sample_replacements`), D on the
    result; returns :class:`ElectraOutput`. ``save_pretrained(folder)`` writes D into ``folder``
    (``finetune`` loads it) and G into ``folder/generator``; ``load_weights(folder)`` reads both back
    (resuming from a checkpoint).
    """

    def __init__(self, generator: ElectraForMaskedLM, discriminator: ElectraForPreTraining) -> None:
        super().__init__()
        self.generator = generator
        self.discriminator = discriminator

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        sampler: torch.Generator | None = None,
    ) -> ElectraOutput:
        if labels is None:
            raise ValueError("labels: ELECTRA needs the masked positions' original tokens (-100 elsewhere), got None")
        inputs = {"attention_mask": attention_mask, "token_type_ids": token_type_ids}
        generator_logits = self.generator(input_ids=input_ids, **inputs).logits
        replaced_ids = sample_replacements(generator_logits, input_ids, labels, sampler)
        discriminator_logits = self.discriminator(input_ids=replaced_ids, **inputs).logits
        return ElectraOutput(generator_logits, replaced_ids, discriminator_logits)

    def save_pretrained(self, folder: str | Path) -> None:
        folder = Path(folder)
        self.discriminator.save_pretrained(folder)
        self.generator.save_pretrained(folder / GENERATOR_DIR)

    def load_weights(self, folder: str | Path) -> None:
        """Load the weights :meth:`save_pretrained` wrote. The generator's file holds the shared
        embeddings too (the same values) and lacks only its output layer's weight, tied to them."""
        folder = Path(folder)
        self.discriminator.load_state_dict(load_file(str(folder / WEIGHTS_FILE)))
        result = self.generator.load_state_dict(load_file(str(folder / GENERATOR_DIR / WEIGHTS_FILE)), strict=False)
        untied = set(result.missing_keys) - {"generator_lm_head.weight"}
        if untied or result.unexpected_keys:
            raise ValueError(
                f"checkpoint: {str(folder)!r} does not hold this generator (missing {sorted(untied)}, "
                f"unexpected {sorted(result.unexpected_keys)})"
            )


class ElectraTrainer(MaskedLMTrainer):
    """The Trainer of ``pretrain_electra``: :class:`MaskedLMTrainer`'s objective (``loss``, plain / HC /
    SR, on the generator) and HC logs, with the discriminator added in :meth:`compute_loss`.

    Gradient accumulation (``LossTrainer.scale_for_accumulation``): G's loss is a mean over masked
    positions (the kept ones with HC) and is scaled as any MLM loss; L_disc is a mean over the
    micro-batch's real tokens and is scaled as a batch-level loss (1/G over G micro-batches:
    exactly one big batch's mean when the micro-batches hold as many real tokens, as packed blocks
    do). With HC the discriminator's relabellings are counted in ``corrections["disc_hc"]``
    (logged as ``disc_hc_*``). Every logged step also carries ``generator_loss`` and
    ``discriminator_loss`` (unscaled means since the last log); :meth:`loss_means` gives this
    session's means.
    """

    def __init__(self, *args: Any, discriminator_weight: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.discriminator_weight = discriminator_weight
        if self.correcting:
            self.corrections["disc_hc"] = CorrectionLog()
        self.losses_since_log: torch.Tensor | None = None
        self.losses_total: torch.Tensor | None = None

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        word_ids = inputs.pop("word_ids", None)
        outputs = model(**inputs, labels=labels)
        pair = self.accelerator.unwrap_model(model)
        training = model.training
        context = {"stats": self.corrections["hc"]} if self.correcting and training else {}
        generator_loss, items = self.loss.loss_and_items(
            outputs.generator_logits,
            labels,
            model=pair.generator,
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            token_type_ids=inputs.get("token_type_ids"),
            word_ids=word_ids,
            **context,
        )
        targets, counts = discriminator_targets(outputs.replaced_ids, labels, self.loss if self.correcting else None, word_ids)
        if counts is not None and training:
            self.corrections["disc_hc"].update(counts)
        disc_loss, _ = discriminator_loss(outputs.discriminator_logits, targets, inputs["attention_mask"])
        if training:
            self._track(generator_loss, disc_loss)
            generator_loss = self.scale_for_accumulation(generator_loss, items, num_items_in_batch, is_batch_level=False)
            disc_loss = self.scale_for_accumulation(disc_loss, 1, None, is_batch_level=True)
        loss = generator_loss + self.discriminator_weight * disc_loss
        return (loss, outputs) if return_outputs else loss

    def _track(self, generator_loss: torch.Tensor, disc_loss: torch.Tensor) -> None:
        step = torch.stack([generator_loss.detach().float(), disc_loss.detach().float(), torch.ones_like(disc_loss)])
        self.losses_since_log = step if self.losses_since_log is None else self.losses_since_log + step
        self.losses_total = step if self.losses_total is None else self.losses_total + step

    @staticmethod
    def _means(sums: torch.Tensor | None) -> dict[str, float]:
        if sums is None:
            return {}
        generator, discriminator, steps = sums.tolist()
        return {"generator_loss": generator / steps, "discriminator_loss": discriminator / steps}

    def loss_means(self) -> dict[str, float]:
        """G's and D's unscaled losses averaged over this session's micro-batches (a resumed run:
        since it resumed)."""
        return self._means(self.losses_total)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            logs = {**logs, **self._means(self.losses_since_log)}
            self.losses_since_log = None
        super().log(logs, start_time)

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        """D into ``output_dir``, G into ``output_dir/generator``, the tokenizer into both (each
        loads on its own), the training arguments beside them (checkpoints and the final save)."""
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return
        self.accelerator.unwrap_model(self.model).save_pretrained(output_dir)
        for folder in (output_dir, os.path.join(output_dir, GENERATOR_DIR)):
            self.processing_class.save_pretrained(folder)
        torch.save(self.args, os.path.join(output_dir, TRAINING_ARGS_NAME))

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None) -> None:
        self.accelerator.unwrap_model(model if model is not None else self.model).load_weights(resume_from_checkpoint)


@torch.no_grad()
def evaluate_discriminator(
    model: ElectraPretrainingModel,
    batches: Sequence[Mapping[str, torch.Tensor]],
    correction: HardCorrectionLoss | None = None,
    seed: int = EVAL_SEED,
) -> dict[str, float]:
    """D on pre-masked ``batches`` (``workbench.masking.fixed_mask_batches``), replacements sampled
    from G with a generator seeded with ``seed`` (deterministic for given weights).

    With plain ELECTRA targets y (whatever the training objective) over every real token:
    eval_disc_loss = mean BCE, eval_disc_accuracy = share of tokens with 1[logit > 0] = y,
    eval_disc_precision / eval_disc_recall of "replaced", eval_replaced_share = share of real
    tokens replaced. With ``correction`` the HC relabelling counts and rates of the same
    replacements are added as ``disc_hc_<name>``. Restores the model's mode after.
    """
    if len(batches) == 0:
        raise ValueError("batches: there is no eval batch")
    device = next(model.parameters()).device
    sampler = torch.Generator(device=device).manual_seed(seed)
    was_training = model.training
    model.eval()
    # loss sum, real tokens, correct, true positives, predicted replaced, replaced
    totals = torch.zeros(6, dtype=torch.float64, device=device)
    stats = CorrectionStats()
    try:
        for batch in batches:
            inputs = {key: batch[key].to(device) for key in MODEL_INPUTS if key in batch}
            labels = batch["labels"].to(device)
            output = model(**inputs, labels=labels, sampler=sampler)
            targets, _ = discriminator_targets(output.replaced_ids, labels)
            real = inputs["attention_mask"].bool()
            loss, count = discriminator_loss(output.discriminator_logits, targets, inputs["attention_mask"])
            predicted = (output.discriminator_logits > 0) & real
            targets = targets & real
            totals += torch.stack(
                [
                    loss * count,
                    count,
                    ((predicted == targets) & real).sum(),
                    (predicted & targets).sum(),
                    predicted.sum(),
                    targets.sum(),
                ]
            ).double()
            if correction is not None:
                word_ids = batch["word_ids"].to(device) if "word_ids" in batch else None
                stats.update(correction.prediction_counts(output.replaced_ids, labels, word_ids))
    finally:
        model.train(was_training)
    loss_sum, tokens, correct, true_positives, predicted, replaced = totals.tolist()
    result = {
        "eval_disc_loss": loss_sum / tokens,
        "eval_disc_accuracy": correct / tokens,
        "eval_disc_precision": true_positives / predicted if predicted else 0.0,
        "eval_disc_recall": true_positives / replaced if replaced else 0.0,
        "eval_replaced_share": replaced / tokens,
    }
    if correction is not None:
        result.update({f"disc_hc_{name}": value for name, value in stats.as_dict().items()})
    return result


def evaluate_electra(
    model: ElectraPretrainingModel, batches: Sequence[Mapping[str, torch.Tensor]], correction: HardCorrectionLoss | None = None
) -> dict[str, float]:
    """G's plain MLM evaluation (``evaluate_masked_lm``: eval_loss, perplexity, eval_masked_tokens and
    HC rates ``hc_*``) and D's (:func:`evaluate_discriminator`) on the same fixed masks."""
    return {**evaluate_masked_lm(model.generator, batches, correction), **evaluate_discriminator(model, batches, correction)}


def pretrain_electra(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """ELECTRA pre-training on ``config`` (see docs/training.md and this module's docstring).

    The corpus, held-out blocks and masks are ``pretrain_mlm``'s
    (:func:`~workbench.train.pretraining.prepare_pretraining`). The discriminator is a tiny ELECTRA
    sized by ``model.tiny`` or the ELECTRA checkpoint ``model.model_name_or_path``; the generator
    has ``electra.generator_size`` times its hidden size and shares its embeddings. ``objective``:
    plain, hc (generator loss and discriminator targets) or sr (on the generator's MLM);
    ``objective.sop`` is refused (ELECTRA has no sentence-order head). The discriminator and the
    tokenizer are saved into ``output_dir`` (``finetune`` loads it as ``model.model_name_or_path``),
    the generator into ``output_dir/generator``. ``metrics.json``: pretrain_mlm's keys (eval_loss
    and perplexity are the generator's) plus eval_disc_loss, eval_disc_accuracy,
    train_generator_loss, train_discriminator_loss, the parameter counts of each model, the
    ``electra`` section, and with HC ``correction`` (generator) and ``discriminator_correction``.
    """
    config = load_config(config, task="pretrain_electra")
    if config.objective.sop:
        raise ValueError("objective.sop: must be false for pretrain_electra (ELECTRA has no sentence-order head), got True")
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        return _pretrain_electra(config, callbacks)


def _pretrain_electra(config: Config, callbacks: Sequence[TrainerCallback]) -> Result:
    start = time.perf_counter()
    objective = config.objective
    set_seed(config.training.seed)
    claim_output_dir(config)  # the run folder's guards; the lock is released by write_result
    resume_from = checkpoint_to_resume(config.output_dir, config.training.resume)
    data = prepare_pretraining(config, return_word_ids=objective.name == "hc")
    source = model_source(config.model, len(data.tokenizer), config.data.max_length)
    model = ElectraPretrainingModel(*build_electra(config.electra.generator_size, **source))
    trainer = ElectraTrainer(
        model=model,
        loss=objective_loss(objective, data.tokenizer),
        discriminator_weight=config.electra.discriminator_weight,
        **pretraining_trainer_kwargs(config, data, callbacks),
    )
    correction = HardCorrectionLoss(data.tokenizer, objective.lexicon, objective.hc_level)

    def task_metrics() -> dict[str, Any]:
        means = trainer.loss_means()
        metrics: dict[str, Any] = {
            "train_generator_loss": means.get("generator_loss"),
            "train_discriminator_loss": means.get("discriminator_loss"),
            "num_parameters_generator": count_parameters(model.generator),
            "num_parameters_discriminator": count_parameters(model.discriminator),
            "electra": config.electra.to_dict(),
        }
        if trainer.correcting:
            metrics["correction"] = trainer.corrections["hc"].totals.as_dict()
            metrics["discriminator_correction"] = trainer.corrections["disc_hc"].totals.as_dict()
        return metrics

    return run_pretraining(
        trainer,
        partial(evaluate_electra, batches=data.eval_batches, correction=correction),
        config,
        data,
        start=start,
        resume_from=resume_from,
        headline=("eval_loss", "perplexity", "eval_disc_loss", "eval_disc_accuracy"),
        task_metrics=task_metrics,
    )
