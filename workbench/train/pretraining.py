"""MLM pre-training at corpus scale (``pretrain_mlm``): packed blocks, cached encoding, masks drawn in
DataLoader workers, a held-out eval loss every epoch; random / whole-word / knowledge masking and
plain / HC / SR objectives, optionally with sentence-order prediction."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import TrainerCallback, set_seed

from workbench.config import Config, MaskingSpec, ObjectiveConfig, load_config
from workbench.data import load_texts
from workbench.losses import build_loss
from workbench.losses.mlm import CorrectionStats, HardCorrectionLoss
from workbench.masking import build_collator, count_tokens, evaluate_masked_lm, fixed_mask_batches, prepare_corpus, split_heldout
from workbench.masking.heldout import mlm_logits
from workbench.models import build_masked_lm, model_source
from workbench.threads import torch_threads
from workbench.train.checkpoints import checkpoint_to_resume, remove_checkpoints
from workbench.train.result import Result, count_parameters, write_result
from workbench.train.trainer import LossTrainer, training_arguments
from workbench.train.verbosity import progress_bars
from workbench.vocab import load_tokenizer

EVAL_MASKING = MaskingSpec(strategy="wwm")
"""The held-out blocks are masked once with whole-word masking and a fixed seed, whatever the training
strategy, so the eval loss of runs with different masking strategies and objectives is comparable."""
EVAL_SEED = 12345
SIDE_INPUTS = ("word_ids", "sop_labels")


def objective_loss(objective: ObjectiveConfig, tokenizer: Any) -> nn.Module:
    """The objective's loss module from the registry: ``mlm``, ``mlm_hc`` or ``mlm_sr``."""
    if objective.name == "hc":
        return build_loss("mlm_hc", tokenizer=tokenizer, table=objective.lexicon, level=objective.hc_level)
    if objective.name == "sr":
        return build_loss("mlm_sr", weight=objective.weight, level=objective.level, prediction=objective.prediction,
                          kl_direction=objective.kl_direction)
    return build_loss("mlm")


class MaskedLMTrainer(LossTrainer):
    """``LossTrainer`` for the MLM objectives (``workbench.losses.mlm``) and optional SOP.

    The loss module gets the batch's context (``model``, ``input_ids``, ``word_ids``, ...) and
    returns ``(loss, items)``; ``items`` (the positions the mean runs over: after correction for
    HC) scales micro-batches under gradient accumulation. With SOP the sentence-order
    cross-entropy over the batch's blocks is added (Lan et al. 2020: L = L_MLM + L_SOP).

    HC counts (the paper's Table 2) accumulate on the device: since the last log (added to each
    logged step as ``hc_*``), per epoch and over the run (``correction_totals``).
    """

    def __init__(self, *args: Any, sentence_order: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, side_inputs=SIDE_INPUTS, **kwargs)
        self.sentence_order = sentence_order
        self.correcting = isinstance(self.loss, HardCorrectionLoss)
        self.correction_since_log = CorrectionStats()
        self.correction_epoch = CorrectionStats()
        self.correction_totals = CorrectionStats()

    def batch_loss(
        self, model: nn.Module, outputs: Any, labels: torch.Tensor, inputs: dict[str, Any], side: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = mlm_logits(outputs)
        context = {"stats": self} if self.correcting and model.training else {}
        loss, items = self.loss.loss_and_items(
            logits, labels, model=model, input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
            token_type_ids=inputs.get("token_type_ids"), word_ids=side.get("word_ids"), **context,
        )
        if self.sentence_order:
            loss = loss + F.cross_entropy(outputs.seq_relationship_logits.float(), side["sop_labels"])
        return loss, items

    def update(self, counts: Any) -> None:
        """The ``stats`` the HC loss reports a batch's counts to: added to the three running totals."""
        for running in (self.correction_since_log, self.correction_epoch, self.correction_totals):
            running.update(counts)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.correcting and "loss" in logs:
            logs = {**logs, **{f"hc_{key}": value for key, value in self.correction_since_log.as_dict().items()}}
            self.correction_since_log.reset()
        super().log(logs, start_time)


class EpochEvaluation(TrainerCallback):
    """At the end of every epoch: the eval MLM loss and perplexity on the fixed held-out batches
    (``workbench.masking.evaluate_masked_lm``), the HC correction rates of the model's predictions
    there, and the training-time HC rates of the epoch (Table 2 per checkpoint), logged together."""

    def __init__(self, trainer: MaskedLMTrainer, batches: list[dict[str, torch.Tensor]], correction: HardCorrectionLoss) -> None:
        self.trainer, self.batches, self.correction = trainer, batches, correction
        self.epochs: list[dict[str, Any]] = []

    def on_epoch_end(self, args: Any, state: Any, control: Any, model: nn.Module | None = None, **kwargs: Any) -> None:
        evaluation = evaluate_masked_lm(self.trainer.model, self.batches, self.correction)
        record = {"epoch": round(state.epoch or 0.0, 4), "step": state.global_step,
                  **{key if key.startswith("eval_") or key == "perplexity" else f"eval_{key}": value
                     for key, value in evaluation.items()}}
        if self.trainer.correcting:
            record.update({f"train_hc_{key}": value for key, value in self.trainer.correction_epoch.as_dict().items()})
            self.trainer.correction_epoch.reset()
        self.epochs.append(record)
        self.trainer.log({key: value for key, value in record.items() if key not in ("epoch", "step")})


class FirstStep(TrainerCallback):
    """Wall-clock time when the first optimisation step begins (to report the share spent before it)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.at is None:
            self.at = time.perf_counter()


def default_dataloader_workers() -> int:
    """min(4, cores): masks are drawn in these processes while the model trains."""
    return min(4, os.cpu_count() or 1)


def pretrain_mlm(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """MLM pre-training on ``config`` (see docs/training.md); writes a checkpoint ``finetune`` loads.

    Texts come from ``data`` (``load_texts``; text pairs are joined by a newline) and are packed
    into blocks of ``data.max_length`` tokens at sentence and word boundaries, segmented with
    jieba in ``data.num_proc`` processes and cached on disk (``workbench.masking.prepare_corpus``).
    ``data.eval_fraction`` of the blocks is held out and masked once (WWM, a fixed seed); the eval
    loss, perplexity = exp(eval loss) and the HC correction rates there are logged every epoch.
    The ``masking`` collator draws fresh masks in ``training.dataloader_workers`` persistent,
    per-worker-seeded processes. The ``objective`` is plain MLM, HC or SR (registered loss
    modules ``mlm``, ``mlm_hc``, ``mlm_sr``), plus sentence-order prediction when
    ``objective.sop``. A checkpoint is saved per epoch (``training.resume`` continues from the
    latest); the final model and tokenizer go into ``output_dir`` (use it as
    ``model.model_name_or_path``). ``metrics.json`` reports corpus_characters, tokens_per_epoch,
    preprocess_seconds, cache_hit, train_runtime, eval_loss, perplexity, the per-epoch
    evaluations (``epochs``) and, with HC, the correction rates per epoch and in total.
    """
    config = load_config(config, task="pretrain_mlm")
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        return _pretrain_mlm(config, callbacks)


def _pretrain_mlm(config: Config, callbacks: Sequence[TrainerCallback]) -> Result:
    start = time.perf_counter()
    data, training, objective = config.data, config.training, config.objective
    set_seed(training.seed)
    output_dir = Path(config.output_dir)
    resume_from = checkpoint_to_resume(output_dir, training.resume)
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    texts, pairs = load_texts(data)
    documents = texts if pairs is None else [f"{text}\n{pair}" for text, pair in zip(texts, pairs)]
    corpus = prepare_corpus(documents, tokenizer, max_length=data.max_length - (1 if objective.sop else 0),
                            cache_dir=data.cache_dir, num_proc=data.num_proc, block_boundary=data.block_boundary)
    train_blocks, eval_blocks = split_heldout(corpus.dataset, data.eval_fraction, seed=data.seed)
    correcting = objective.name == "hc"
    collator = build_collator(
        config.masking, tokenizer, training.seed, return_word_ids=correcting, sentence_order=objective.sop,
        segmented_texts=train_blocks["words"] if config.masking.strategy == "kdm" else None,
    )
    eval_collator = build_collator(EVAL_MASKING.replace(mlm_probability=config.masking.mlm_probability), tokenizer,
                                   EVAL_SEED, return_word_ids=True)
    eval_batches = fixed_mask_batches(eval_blocks, eval_collator, batch_size=training.eval_batch_size)
    model = build_masked_lm(**model_source(config.model, len(tokenizer), data.max_length), sentence_order=objective.sop)
    workers = default_dataloader_workers() if training.dataloader_workers is None else training.dataloader_workers
    first_step = FirstStep()
    trainer = MaskedLMTrainer(
        model=model,
        args=training_arguments(training, str(output_dir), evaluate=False, dataloader_num_workers=workers,
                                dataloader_persistent_workers=workers > 0),
        train_dataset=train_blocks,
        data_collator=collator,
        processing_class=tokenizer,
        callbacks=[first_step, *callbacks],
        loss=objective_loss(objective, tokenizer),
        sentence_order=objective.sop,
        time_budget_s=training.time_budget_s,
    )
    evaluation = EpochEvaluation(trainer, eval_batches, HardCorrectionLoss(tokenizer, objective.lexicon, objective.hc_level))
    trainer.add_callback(evaluation)
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(str(output_dir))
    if not evaluation.epochs or evaluation.epochs[-1]["step"] != trainer.state.global_step:  # stopped mid-epoch
        evaluation.on_epoch_end(trainer.args, trainer.state, trainer.control)
    final = evaluation.epochs[-1]
    wall = time.perf_counter() - start
    before_first_step = (first_step.at - start) if first_step.at is not None else wall
    metrics: dict[str, Any] = {
        "task": "pretrain_mlm",
        "masking": config.masking.strategy,
        "objective": objective.name,
        "sop": objective.sop,
        "corpus_characters": corpus.corpus_characters,
        "blocks": {"train": len(train_blocks), "eval": len(eval_blocks)},
        "tokens_per_epoch": count_tokens(train_blocks),
        "preprocess_seconds": corpus.preprocess_seconds,
        "cache_hit": corpus.cache_hit,
        "share_before_first_step": before_first_step / wall if wall > 0 else 0.0,
        "train_loss": train_output.training_loss,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        "eval_loss": final["eval_loss"],
        "perplexity": final["perplexity"] if math.isfinite(final["perplexity"]) else None,
        "epochs": evaluation.epochs,
        "time": wall,
        "num_parameters": count_parameters(model),
        "parameters": config.to_dict(),
    }
    if correcting:
        metrics["correction"] = trainer.correction_totals.as_dict()
    if not training.keep_checkpoints:
        remove_checkpoints(output_dir)
    return write_result(output_dir, metrics, None, trainer.state.log_history)
