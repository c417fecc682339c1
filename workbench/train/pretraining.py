"""MLM pre-training at corpus scale (``pretrain_mlm``): packed blocks, cached encoding, masks drawn in DataLoader
workers; random / whole-word / knowledge masking, plain / HC / SR objectives, optionally sentence-order prediction; the
vocabulary head at the masked positions only (:func:`workbench.models.labelled_logits`). Every epoch a held-out
evaluation on blocks masked once (:func:`fixed_mask_batches`: every evaluation scores the same predictions), with the
plain MLM loss whatever the objective (:func:`evaluate_masked_lm`: plain, HC and SR runs compare). ``pretrain_electra``
shares the data (:func:`prepare_pretraining`), the Trainer, the HC logs and the run's ending
(:func:`run_pretraining`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import TrainerCallback

from workbench.checks import check_int, check_number
from workbench.config import Config, MaskingSpec, ObjectiveConfig
from workbench.data import load_texts
from workbench.losses import IGNORE_INDEX, CorrectionCounts, HardCorrectionLoss, SynonymMatcher, build_loss
from workbench.masking import PreparedCorpus, build_collator, count_tokens, prepare_corpus
from workbench.models import build_masked_lm, labelled_logits, model_source
from workbench.synonyms import synonym_matcher
from workbench.threads import usable_cores
from workbench.train.run_folder import Result, count_parameters, remove_checkpoints, training_run, write_result
from workbench.train.trainer import LossTrainer, save_final_model, training_arguments
from workbench.vocab import load_tokenizer

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def split_heldout(
    blocks: datasets.Dataset, eval_fraction: float = 0.01, seed: int = 0
) -> tuple[datasets.Dataset, datasets.Dataset]:
    """``(train, eval)``: max(1, round(``eval_fraction`` x n)) of the n >= 2 ``blocks`` held out at random (``seed``),
    ``eval_fraction`` in (0, 0.5]; both keep the blocks' order."""
    check_number("eval_fraction", eval_fraction, 0.0, 0.5, low_inclusive=False)
    total = len(blocks)
    if total < 2:
        raise ValueError(f"blocks: holding out blocks needs at least 2, got {total}")
    held_out = max(1, round(eval_fraction * total))
    chosen = np.zeros(total, dtype=bool)
    chosen[np.random.default_rng(seed).choice(total, size=held_out, replace=False)] = True
    return blocks.select(np.flatnonzero(~chosen)), blocks.select(np.flatnonzero(chosen))


def fixed_mask_batches(
    blocks: datasets.Dataset | Sequence[Mapping[str, Any]],
    collator: Callable[[list[dict]], dict[str, torch.Tensor]],
    batch_size: int = 64,
) -> list[dict[str, torch.Tensor]]:
    """The held-out ``blocks`` masked once: ``collator`` (its own, with a fixed seed and word ids) on consecutive
    batches."""
    check_int("batch_size", batch_size, 1)
    if len(blocks) == 0:
        raise ValueError("blocks: there is no held-out block to mask")
    rows = list(blocks)
    return [collator(rows[start : start + batch_size]) for start in range(0, len(rows), batch_size)]


@contextmanager
def evaluation_mode(model: torch.nn.Module, batches: Sequence) -> Iterator[torch.device]:
    """``model`` in eval mode inside the block (its mode restored after), yielding its device; ValueError without
    ``batches``."""
    if len(batches) == 0:
        raise ValueError("batches: there is no eval batch")
    was_training = model.training
    model.eval()
    try:
        yield next(model.parameters()).device
    finally:
        model.train(was_training)


@torch.no_grad()
def evaluate_masked_lm(
    model: torch.nn.Module, batches: Sequence[Mapping[str, torch.Tensor]], correction: HardCorrectionLoss | None = None
) -> dict[str, float]:
    """Plain MLM loss on pre-masked ``batches``: eval_loss = (sum over the M masked positions of -log p(w_k | s)) / M,
    perplexity = exp(eval_loss), eval_masked_tokens = M; with ``correction`` the HC counts and Table 2 rates of the
    same predictions as ``hc_<name>`` (word level: batches need ``word_ids``)."""
    total = 0.0
    masked = 0
    counts = CorrectionCounts()
    with evaluation_mode(model, batches) as device:
        for batch in batches:
            batch = {key: value.to(device) for key, value in batch.items()}
            logits, _ = labelled_logits(
                model, batch["labels"], **{key: batch[key] for key in MODEL_INPUTS if key in batch}
            )
            total += F.cross_entropy(
                logits.float(), batch["labels"][batch["labels"] != IGNORE_INDEX], reduction="sum"
            ).item()
            masked += len(logits)
            if correction is not None:
                counts.update(correction.correction_counts(logits, batch["labels"], batch.get("word_ids")))
    if masked == 0:
        raise ValueError("batches: no position is masked (labels are all -100)")
    loss = total / masked
    perplexity = math.exp(loss) if loss < math.log(np.finfo(np.float64).max) else math.inf
    result = {"eval_loss": loss, "perplexity": perplexity, "eval_masked_tokens": masked}
    if correction is not None:
        result.update({f"hc_{name}": value for name, value in counts.as_dict().items()})
    return result


EVAL_MASKING = MaskingSpec(strategy="wwm")  # the held-out masks, whatever the training's: runs compare
EVAL_SEED = 12345
HEADLINE = ("eval_loss", "perplexity", "eval_disc_loss", "eval_disc_accuracy")  # metrics.json's top-level evaluation


def objective_loss(objective: ObjectiveConfig, matcher: SynonymMatcher) -> nn.Module:
    """The objective's loss module from the registry: ``mlm``, ``mlm_hc`` (with ``matcher``, the run's lexicon over
    its tokenizer) or ``mlm_sr``."""
    if objective.name == "hc":
        return build_loss("mlm_hc", matcher=matcher, level=objective.hc_level)
    if objective.name == "sr":
        sr = {"weight": objective.weight, "level": objective.level, "prediction": objective.prediction}
        return build_loss("mlm_sr", kl_direction=objective.kl_direction, **sr)
    return build_loss("mlm")


class CorrectionLog:
    """Running hard-correction counts since the last logged step (``since_log``), of this epoch and of the whole run
    (``totals``)."""

    def __init__(self) -> None:
        self.since_log = CorrectionCounts()
        self.epoch = CorrectionCounts()
        self.totals = CorrectionCounts()

    def update(self, counts: CorrectionCounts) -> None:
        for running in (self.since_log, self.epoch, self.totals):
            running.update(counts)

    def take(self, period: str, prefix: str) -> dict[str, float]:
        """The counts and rates of ``period`` (``since_log`` or ``epoch``) as ``<prefix>_<name>``; the period
        restarts."""
        taken = getattr(self, period).as_dict()
        setattr(self, period, CorrectionCounts())
        return {f"{prefix}_{key}": value for key, value in taken.items()}


class MaskedLMTrainer(LossTrainer):
    """``LossTrainer`` for the MLM objectives, the head at the masked positions only; ``items`` (the positions the loss
    averages, after HC) scale micro-batches. With SOP labels L = L_MLM + L_SOP (Lan et al. 2020). HC counts (Table 2)
    accumulate in ``corrections`` (``"hc"``: the MLM's) and are logged."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.correcting = isinstance(self.loss, HardCorrectionLoss)
        self.corrections: dict[str, CorrectionLog] = {"hc": CorrectionLog()} if self.correcting else {}

    def mlm_loss(
        self, mlm: nn.Module, logits: torch.Tensor, labels: torch.Tensor, inputs: dict, word_ids: Any
    ) -> tuple:
        """The objective's ``(loss, items)`` on the masked positions' ``logits`` of ``mlm`` (the HC counts are kept
        while training)."""
        stats = {"stats": self.corrections["hc"]} if self.correcting and mlm.training else {}
        context = {key: inputs.get(key) for key in ("input_ids", "attention_mask", "token_type_ids")}
        return self.loss.loss_and_items(logits, labels, model=mlm, word_ids=word_ids, **context, **stats)

    def compute_loss(
        self, model: nn.Module, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        word_ids = inputs.pop("word_ids", None)
        sop_labels = inputs.pop("sop_labels", None)
        logits, sop_logits = labelled_logits(model, labels, **inputs)
        loss, items = self.mlm_loss(self.accelerator.unwrap_model(model), logits, labels, inputs, word_ids)
        if sop_labels is not None:
            loss = loss + F.cross_entropy(
                sop_logits.to(torch.promote_types(sop_logits.dtype, torch.float32)), sop_labels
            )
        if model.training:
            loss = self.scale_for_accumulation(loss, items, num_items_in_batch)
        return (loss, logits) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            for name, running in self.corrections.items():
                logs = {**logs, **running.take("since_log", name)}
        super().log(logs, start_time)

    def run_metrics(self) -> dict[str, Any]:
        """What this trainer adds to metrics.json: with HC the run's ``correction`` counts."""
        return {"correction": self.corrections["hc"].totals.as_dict()} if self.correcting else {}


class EpochEvaluation(TrainerCallback):
    """At every epoch end ``evaluate(model)`` and the epoch's training HC rates (``train_<name>_*``), logged and kept in
    ``epochs`` (a non-finite eval loss stops the run before the checkpoint); ``first_step``: when training began."""

    def __init__(self, trainer: MaskedLMTrainer, evaluate: Callable[[nn.Module], dict[str, float]]) -> None:
        self.trainer = trainer
        self.evaluate = evaluate
        self.epochs: list[dict[str, Any]] = []
        self.first_step: float | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.first_step = self.first_step or time.perf_counter()

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        evaluation = self.evaluate(self.trainer.model)
        self.trainer.check_evaluation(evaluation)
        named = {k if k.startswith("eval_") or k == "perplexity" else f"eval_{k}": v for k, v in evaluation.items()}
        record = {"epoch": round(state.epoch or 0.0, 4), "step": state.global_step, **named}
        for name, running in self.trainer.corrections.items():
            record.update(running.take("epoch", f"train_{name}"))
        self.epochs.append(record)
        self.trainer.log({key: value for key, value in record.items() if key not in ("epoch", "step")})


def default_dataloader_workers() -> int:
    """min(4, cores): masks are drawn in these processes while the model trains."""
    return min(4, usable_cores())


@dataclass
class PretrainingData:
    """A pre-training run's data (:func:`prepare_pretraining`, begun at ``started``): the packed corpus split into
    training and held-out blocks, the training collator (fresh masks every batch), the held-out batches masked once,
    ``objective.lexicon`` over the tokenizer (``matcher``, read once) and the held-out evaluation's hard correction."""

    started: float
    tokenizer: Any
    corpus: PreparedCorpus
    train_blocks: datasets.Dataset
    eval_blocks: datasets.Dataset
    collator: Callable[[list[dict]], dict[str, torch.Tensor]]
    eval_batches: list[dict[str, torch.Tensor]]
    matcher: SynonymMatcher
    correction: HardCorrectionLoss

    def metrics(self) -> dict[str, Any]:
        """corpus_characters (non-space), blocks (train / eval), tokens_per_epoch (training tokens without [CLS] /
        [SEP]), preprocess_seconds, cache_hit."""
        return {
            "corpus_characters": self.corpus.corpus_characters,
            "blocks": {"train": len(self.train_blocks), "eval": len(self.eval_blocks)},
            "tokens_per_epoch": count_tokens(self.train_blocks, text_only=True),
            "preprocess_seconds": self.corpus.preprocess_seconds,
            "cache_hit": self.corpus.cache_hit,
        }


def prepare_pretraining(config: Config) -> PretrainingData:
    """The data of a pre-training run: ``data``'s texts (pairs joined by a newline) packed into blocks of
    ``data.max_length`` tokens (one fewer with ``objective.sop``: its swap adds a [SEP]) and cached
    (:func:`workbench.masking.prepare_corpus`); ``data.eval_fraction`` of the blocks held out and masked once
    (:data:`EVAL_MASKING`); ``config.masking``'s collator seeded with ``training.seed`` (KDM: the training blocks'
    IDF)."""
    started = time.perf_counter()
    data = config.data
    objective = config.objective
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    texts, pairs = load_texts(data)
    documents = texts if pairs is None else [f"{text}\n{pair}" for text, pair in zip(texts, pairs)]
    packing = {"cache_dir": data.cache_dir, "num_proc": data.num_proc, "block_boundary": data.block_boundary}
    corpus = prepare_corpus(documents, tokenizer, max_length=data.max_length - (1 if objective.sop else 0), **packing)
    check_corpus(corpus.dataset, tokenizer, config)
    train_blocks, eval_blocks = split_heldout(corpus.dataset, data.eval_fraction, seed=data.seed)
    words = train_blocks["words"] if config.masking.strategy == "kdm" else None
    masking = {"return_word_ids": objective.name == "hc", "sentence_order": objective.sop, "segmented_texts": words}
    collator = build_collator(config.masking, tokenizer, config.training.seed, **masking)
    eval_masking = EVAL_MASKING.replace(mlm_probability=config.masking.mlm_probability)
    eval_collator = build_collator(eval_masking, tokenizer, EVAL_SEED, return_word_ids=True)
    eval_batches = fixed_mask_batches(eval_blocks, eval_collator, batch_size=config.training.per_device_eval_batch_size)
    matcher = synonym_matcher(tokenizer, objective.lexicon)
    correction = HardCorrectionLoss(matcher, objective.hc_level)
    return PretrainingData(
        started, tokenizer, corpus, train_blocks, eval_blocks, collator, eval_batches, matcher, correction
    )


UNKNOWN_SHARE = 0.5  # a corpus more than this share of whose tokens are [UNK] is refused


def check_corpus(blocks: datasets.Dataset, tokenizer: Any, config: Config) -> None:
    """A corpus must pack into two or more blocks (``data.eval_fraction`` holds out at least one, training needs
    another) and be text the vocabulary reads (at most :data:`UNKNOWN_SHARE` [UNK] tokens, counted on up to 1,000
    blocks): else ValueError naming the corpus (``data.path``, or ``data.source``) and what to change."""
    data = config.data
    where = f"data.path {data.path!r}" if data.path is not None else f"data.source {data.source!r}"
    if len(blocks) < 2:
        raise ValueError(
            f"{where}: packs into {len(blocks)} block of data.max_length={data.max_length} tokens; data.eval_fraction "
            "holds one out for evaluation and training needs another: give more text or a smaller data.max_length"
        )
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    rows = blocks.select(range(min(len(blocks), 1000)))["input_ids"]
    tokens = [token for row in rows for token in row if token not in special]
    share = sum(token == tokenizer.unk_token_id for token in tokens) / max(len(tokens), 1)
    if share > UNKNOWN_SHARE:
        raise ValueError(
            f"{where}: {share:.0%} of its tokens are [UNK]: the vocabulary cannot read this text; use one that fits "
            "its language (model.vocab_file) or a model.model_name_or_path whose tokenizer does"
        )


def pretraining_trainer_kwargs(
    config: Config, data: PretrainingData, callbacks: Sequence[TrainerCallback]
) -> dict[str, Any]:
    """The Trainer keyword arguments both pre-training tasks share: no Trainer evaluation, masks drawn in
    ``training.dataloader_num_workers`` persistent processes, the ``objective``'s loss, ``callbacks``, the time
    budget."""
    training = config.training
    workers = (
        default_dataloader_workers() if training.dataloader_num_workers is None else training.dataloader_num_workers
    )
    loading = {"dataloader_num_workers": workers, "dataloader_persistent_workers": workers > 0}
    return {
        "args": training_arguments(training, config.output_dir, evaluate=False, **loading),
        "train_dataset": data.train_blocks,
        "data_collator": data.collator,
        "processing_class": data.tokenizer,
        "loss": objective_loss(config.objective, data.matcher),
        "callbacks": list(callbacks),
        "time_budget_s": training.time_budget_s,
    }


def run_pretraining(
    trainer: MaskedLMTrainer, config: Config, data: PretrainingData, evaluate: Callable, **extra: Any
) -> Result:
    """Train ``trainer`` with ``evaluate(model, batches, correction)`` at every epoch end (and when stopped mid-epoch),
    save into ``output_dir``, remove the checkpoints (unless kept) and write metrics.json: the run's data, timing and
    training statistics, the last evaluation's :data:`HEADLINE`, ``epochs``, ``trainer.run_metrics()``, ``extra``."""
    evaluation = EpochEvaluation(trainer, partial(evaluate, batches=data.eval_batches, correction=data.correction))
    trainer.add_callback(evaluation)
    train_output = trainer.train()
    save_final_model(trainer, config.output_dir)
    if not evaluation.epochs or evaluation.epochs[-1]["step"] != trainer.state.global_step:  # stopped mid-epoch
        evaluation.on_epoch_end(trainer.args, trainer.state, trainer.control)
    final = evaluation.epochs[-1]
    wall = time.perf_counter() - data.started
    before_first_step = wall if evaluation.first_step is None else evaluation.first_step - data.started
    metrics: dict[str, Any] = {
        "task": config.task,
        "masking": config.masking.strategy,
        "objective": config.objective.name,
        **data.metrics(),
        "share_before_first_step": before_first_step / wall if wall > 0 else 0.0,
        "train_loss": train_output.training_loss,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        **{key: final[key] if math.isfinite(final[key]) else None for key in HEADLINE if key in final},
        "epochs": evaluation.epochs,
        "time": wall,
        "num_parameters": count_parameters(trainer.model),
        "parameters": config.to_dict(),
        **trainer.run_metrics(),
        **extra,
    }
    if not config.training.keep_checkpoints:
        remove_checkpoints(Path(config.output_dir))
    return write_result(Path(config.output_dir), metrics, None, trainer.state.log_history)


def pretrain_mlm(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """MLM pre-training on ``config`` (docs/training.md): plain MLM, HC or SR, plus sentence-order prediction with
    ``objective.sop`` (a BertForPreTraining); writes a checkpoint ``finetune`` loads and metrics.json
    (:func:`run_pretraining`, plus ``sop``)."""
    with training_run(config, "pretrain_mlm") as config:
        sop = config.objective.sop
        data = prepare_pretraining(config)
        model = build_masked_lm(
            **model_source(config.model, len(data.tokenizer), config.data.max_length), sentence_order=sop
        )
        trainer = MaskedLMTrainer(model=model, **pretraining_trainer_kwargs(config, data, callbacks))
        return run_pretraining(trainer, config, data, evaluate_masked_lm, sop=sop)
