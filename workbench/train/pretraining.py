"""MLM pre-training at corpus scale (``pretrain_mlm``): packed blocks, cached encoding, masks drawn in DataLoader
workers, a held-out eval loss every epoch; random / whole-word / knowledge masking, plain / HC / SR objectives,
optionally sentence-order prediction. The vocabulary head runs at the masked positions only
(:func:`workbench.models.labelled_logits`). ``pretrain_electra`` (``electra.py``) shares the data
(:func:`prepare_pretraining`), the Trainer arguments, the HC logs and the run's ending (:func:`run_pretraining`)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import datasets
import torch
import torch.nn.functional as F
from torch import nn
from transformers import TrainerCallback, set_seed

from workbench.config import Config, MaskingSpec, ObjectiveConfig, load_config
from workbench.data import load_texts
from workbench.losses import build_loss
from workbench.losses.mlm import CorrectionCounts, HardCorrectionLoss
from workbench.masking import PreparedCorpus, build_collator, count_tokens, prepare_corpus
from workbench.models import build_masked_lm, labelled_logits, model_source
from workbench.threads import torch_threads, usable_cores
from workbench.train.checkpoints import checkpoint_to_resume, claim_output_dir, remove_checkpoints
from workbench.train.heldout import evaluate_masked_lm, fixed_mask_batches, split_heldout
from workbench.train.result import Result, count_parameters, write_result
from workbench.train.trainer import LossTrainer, training_arguments
from workbench.train.verbosity import progress_bars
from workbench.vocab import load_tokenizer

EVAL_MASKING = MaskingSpec(strategy="wwm")
"""The held-out blocks are masked once with whole-word masking and :data:`EVAL_SEED`, whatever the training strategy,
so the eval loss of runs with different masking strategies and objectives compares."""
EVAL_SEED = 12345


def objective_loss(objective: ObjectiveConfig, tokenizer: Any) -> nn.Module:
    """The objective's loss module from the registry: ``mlm``, ``mlm_hc`` or ``mlm_sr``."""
    if objective.name == "hc":
        return build_loss("mlm_hc", tokenizer=tokenizer, table=objective.lexicon, level=objective.hc_level)
    if objective.name == "sr":
        sr = {"weight": objective.weight, "level": objective.level, "prediction": objective.prediction}
        return build_loss("mlm_sr", kl_direction=objective.kl_direction, **sr)
    return build_loss("mlm")


class CorrectionLog:
    """Running hard-correction counts of one kind: since the last logged step (``since_log``), this epoch
    (``epoch``) and the whole run (``totals``); ``update`` adds one batch's to all three."""

    def __init__(self) -> None:
        self.since_log, self.epoch, self.totals = CorrectionCounts(), CorrectionCounts(), CorrectionCounts()

    def update(self, counts: CorrectionCounts) -> None:
        for running in (self.since_log, self.epoch, self.totals):
            running.update(counts)

    def take(self, period: str, prefix: str) -> dict[str, float]:
        """The counts and rates of ``period`` (``since_log`` or ``epoch``) as ``<prefix>_<name>``; the period restarts."""
        taken = getattr(self, period).as_dict()
        setattr(self, period, CorrectionCounts())
        return {f"{prefix}_{key}": value for key, value in taken.items()}


class MaskedLMTrainer(LossTrainer):
    """``LossTrainer`` for the MLM objectives (``workbench.losses.mlm``) with optional SOP.

    The model's head runs at the masked positions only (:func:`labelled_logits`). The loss module gets the batch's
    context (``model``, ``input_ids``, ``word_ids``, ...) and returns ``(loss, items)``; ``items`` (the positions its
    mean runs over, after correction for HC) scales micro-batches under gradient accumulation. With SOP the
    sentence-order cross-entropy is added (Lan et al. 2020: L = L_MLM + L_SOP). HC counts (Table 2) accumulate in
    ``corrections`` (name -> :class:`CorrectionLog`, ``"hc"`` for the MLM's), logged with each step as ``<name>_*``.
    """

    def __init__(self, *args: Any, sentence_order: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sentence_order = sentence_order
        self.correcting = isinstance(self.loss, HardCorrectionLoss)
        self.corrections: dict[str, CorrectionLog] = {"hc": CorrectionLog()} if self.correcting else {}

    def mlm_loss(self, mlm: nn.Module, logits: torch.Tensor, labels: torch.Tensor, inputs: dict, word_ids: Any) -> tuple:
        """The objective's ``(loss, items)`` on the masked positions' ``logits`` of the masked LM ``mlm`` (unwrapped);
        HC counts are logged while training."""
        stats = {"stats": self.corrections["hc"]} if self.correcting and mlm.training else {}
        context = {key: inputs.get(key) for key in ("input_ids", "attention_mask", "token_type_ids")}
        return self.loss.loss_and_items(logits, labels, model=mlm, word_ids=word_ids, **context, **stats)

    def compute_loss(
        self, model: nn.Module, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        inputs = dict(inputs)
        labels, word_ids, sop_labels = inputs.pop("labels"), inputs.pop("word_ids", None), inputs.pop("sop_labels", None)
        logits, sop_logits = labelled_logits(model, labels, **inputs)
        loss, items = self.mlm_loss(self.accelerator.unwrap_model(model), logits, labels, inputs, word_ids)
        if self.sentence_order:
            loss = loss + F.cross_entropy(sop_logits.float(), sop_labels)
        if model.training:
            loss = self.scale_for_accumulation(loss, items, num_items_in_batch, is_batch_level=False)
        return (loss, logits) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            for name, running in self.corrections.items():
                logs = {**logs, **running.take("since_log", name)}
        super().log(logs, start_time)


class EpochEvaluation(TrainerCallback):
    """At every epoch end: ``evaluate(model)`` on the fixed held-out batches (eval loss, perplexity, HC rates of the
    model's predictions there) and the epoch's training HC rates (``train_<name>_*``, Table 2 per checkpoint), logged
    and kept in ``epochs``. A non-finite eval loss stops the run before the epoch's checkpoint."""

    def __init__(self, trainer: MaskedLMTrainer, evaluate: Callable[[nn.Module], dict[str, float]]) -> None:
        self.trainer, self.evaluate = trainer, evaluate
        self.epochs: list[dict[str, Any]] = []

    def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        evaluation = self.evaluate(self.trainer.model)
        self.trainer.check_evaluation(evaluation)
        named = {k if k.startswith("eval_") or k == "perplexity" else f"eval_{k}": v for k, v in evaluation.items()}
        record = {"epoch": round(state.epoch or 0.0, 4), "step": state.global_step, **named}
        for name, running in self.trainer.corrections.items():
            record.update(running.take("epoch", f"train_{name}"))
        self.epochs.append(record)
        self.trainer.log({key: value for key, value in record.items() if key not in ("epoch", "step")})


class FirstStep(TrainerCallback):
    """Wall-clock time when the first optimisation step begins (to report the share spent before it)."""

    at: float | None = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.at is None:
            self.at = time.perf_counter()


def default_dataloader_workers() -> int:
    """min(4, cores): masks are drawn in these processes while the model trains."""
    return min(4, usable_cores())


@dataclass
class PretrainingData:
    """A pre-training run's data (:func:`prepare_pretraining`): the tokenizer, the packed corpus, its training and
    held-out blocks, the training collator (fresh masks every batch) and the held-out blocks masked once."""

    tokenizer: Any
    corpus: PreparedCorpus
    train_blocks: datasets.Dataset
    eval_blocks: datasets.Dataset
    collator: Callable[[list[dict]], dict[str, torch.Tensor]]
    eval_batches: list[dict[str, torch.Tensor]]

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


def prepare_pretraining(config: Config, *, return_word_ids: bool, sentence_order: bool = False) -> PretrainingData:
    """The data of a pre-training run from ``config``.

    Texts from ``data`` (pairs joined by a newline) are packed into blocks of ``data.max_length`` tokens (one fewer
    with ``sentence_order``, whose swap adds a [SEP]), segmented in ``data.num_proc`` processes and cached
    (:func:`workbench.masking.prepare_corpus`). ``data.eval_fraction`` of the blocks is held out and masked once
    (:data:`EVAL_MASKING`, word ids kept for HC rates). The training collator is ``config.masking``'s, seeded with
    ``training.seed`` (KDM weighs words by the training blocks' IDF); ``return_word_ids`` keeps the spans HC needs.
    """
    data, training = config.data, config.training
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    texts, pairs = load_texts(data)
    documents = texts if pairs is None else [f"{text}\n{pair}" for text, pair in zip(texts, pairs)]
    max_length = data.max_length - (1 if sentence_order else 0)
    corpus = prepare_corpus(
        documents,
        tokenizer,
        max_length=max_length,
        cache_dir=data.cache_dir,
        num_proc=data.num_proc,
        block_boundary=data.block_boundary,
    )
    train_blocks, eval_blocks = split_heldout(corpus.dataset, data.eval_fraction, seed=data.seed)
    words = train_blocks["words"] if config.masking.strategy == "kdm" else None
    collator = build_collator(
        config.masking,
        tokenizer,
        training.seed,
        return_word_ids=return_word_ids,
        sentence_order=sentence_order,
        segmented_texts=words,
    )
    eval_masking = EVAL_MASKING.replace(mlm_probability=config.masking.mlm_probability)
    eval_collator = build_collator(eval_masking, tokenizer, EVAL_SEED, return_word_ids=True)
    eval_batches = fixed_mask_batches(eval_blocks, eval_collator, batch_size=training.per_device_eval_batch_size)
    return PretrainingData(tokenizer, corpus, train_blocks, eval_blocks, collator, eval_batches)


def pretraining_trainer_kwargs(config: Config, data: PretrainingData, callbacks: Sequence[TrainerCallback]) -> dict[str, Any]:
    """The Trainer keyword arguments both pre-training tasks share: the training arguments (no Trainer evaluation,
    ``training.dataloader_num_workers`` persistent processes drawing the masks), the training blocks and collator, the
    tokenizer, ``callbacks`` and ``training.time_budget_s``."""
    training = config.training
    workers = default_dataloader_workers() if training.dataloader_num_workers is None else training.dataloader_num_workers
    loading = {"dataloader_num_workers": workers, "dataloader_persistent_workers": workers > 0}
    return {
        "args": training_arguments(training, config.output_dir, evaluate=False, **loading),
        "train_dataset": data.train_blocks,
        "data_collator": data.collator,
        "processing_class": data.tokenizer,
        "callbacks": list(callbacks),
        "time_budget_s": training.time_budget_s,
    }


def run_pretraining(
    trainer, evaluate, config: Config, data: PretrainingData, start, resume_from, headline, task_metrics
) -> Result:
    """What both pre-training tasks do with their ``trainer`` (started at ``start``, a ``time.perf_counter()``):
    ``evaluate(model)`` at every epoch end (:class:`EpochEvaluation`), train (from ``resume_from``), save into ``output_dir``, evaluate once more when training stopped mid-epoch
    (``training.time_budget_s``), remove the checkpoints (unless ``training.keep_checkpoints``), write metrics.json.

    Metrics: task, masking, objective, :meth:`PretrainingData.metrics`, share_before_first_step, train_loss,
    train_runtime, train_samples_per_second, the last evaluation's ``headline`` keys (non-finite as null), epochs,
    time, num_parameters, parameters (the config), then ``task_metrics()``.
    """
    first_step, evaluation = FirstStep(), EpochEvaluation(trainer, evaluate)
    trainer.add_callback(first_step)
    trainer.add_callback(evaluation)
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(config.output_dir)
    if not evaluation.epochs or evaluation.epochs[-1]["step"] != trainer.state.global_step:  # stopped mid-epoch
        evaluation.on_epoch_end(trainer.args, trainer.state, trainer.control)
    final = evaluation.epochs[-1]
    wall = time.perf_counter() - start
    before_first_step = wall if first_step.at is None else first_step.at - start
    metrics: dict[str, Any] = {
        "task": config.task,
        "masking": config.masking.strategy,
        "objective": config.objective.name,
        **data.metrics(),
        "share_before_first_step": before_first_step / wall if wall > 0 else 0.0,
        "train_loss": train_output.training_loss,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        **{key: final[key] if math.isfinite(final[key]) else None for key in headline},
        "epochs": evaluation.epochs,
        "time": wall,
        "num_parameters": count_parameters(trainer.model),
        "parameters": config.to_dict(),
        **task_metrics(),
    }
    if not config.training.keep_checkpoints:
        remove_checkpoints(Path(config.output_dir))
    return write_result(Path(config.output_dir), metrics, None, trainer.state.log_history)


def pretrain_mlm(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """MLM pre-training on ``config`` (docs/training.md); writes a BertForMaskedLM checkpoint ``finetune`` loads.

    The corpus is packed, cached and split by :func:`prepare_pretraining`; the ``masking`` collator draws fresh masks
    in ``training.dataloader_num_workers`` processes. ``objective``: plain MLM, HC or SR (``mlm``, ``mlm_hc``,
    ``mlm_sr``), plus sentence-order prediction with ``objective.sop`` (a BertForPreTraining). Every epoch: a
    checkpoint (``training.resume`` continues from the latest) and the held-out eval loss, perplexity = exp(eval
    loss) and HC rates. The model and tokenizer go into ``output_dir``; metrics.json as :func:`run_pretraining`
    says, plus ``sop`` and with HC the run's ``correction`` counts.
    """
    config = load_config(config, task="pretrain_mlm")
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        return _pretrain_mlm(config, callbacks)


def _pretrain_mlm(config: Config, callbacks: Sequence[TrainerCallback]) -> Result:
    start = time.perf_counter()
    objective = config.objective
    set_seed(config.training.seed)
    claim_output_dir(config)  # the run folder's guards; the lock is released by write_result
    resume_from = checkpoint_to_resume(config.output_dir, config.training.resume)
    data = prepare_pretraining(config, return_word_ids=objective.name == "hc", sentence_order=objective.sop)
    source = model_source(config.model, len(data.tokenizer), config.data.max_length)
    model = build_masked_lm(**source, sentence_order=objective.sop)
    loss = objective_loss(objective, data.tokenizer)
    trainer = MaskedLMTrainer(
        model=model, loss=loss, sentence_order=objective.sop, **pretraining_trainer_kwargs(config, data, callbacks)
    )
    correction = HardCorrectionLoss(data.tokenizer, objective.lexicon, objective.hc_level)

    def task_metrics() -> dict[str, Any]:
        hc = {"correction": trainer.corrections["hc"].totals.as_dict()} if trainer.correcting else {}
        return {"sop": objective.sop, **hc}

    evaluate = partial(evaluate_masked_lm, batches=data.eval_batches, correction=correction)
    return run_pretraining(trainer, evaluate, config, data, start, resume_from, ("eval_loss", "perplexity"), task_metrics)
