"""MLM pre-training at corpus scale (``pretrain_mlm``): packed blocks, cached encoding, masks drawn in
DataLoader workers, a held-out eval loss every epoch; random / whole-word / knowledge masking and
plain / HC / SR objectives, optionally with sentence-order prediction.

``pretrain_electra`` (``workbench.train.electra``) shares the data (:func:`prepare_pretraining`),
the Trainer arguments (:func:`pretraining_trainer_kwargs`), the HC logs (:class:`MaskedLMTrainer`,
:class:`CorrectionLog`) and the run's ending (:func:`run_pretraining`)."""

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
from workbench.losses.mlm import CorrectionCounts, CorrectionStats, HardCorrectionLoss
from workbench.masking import (
    PreparedCorpus,
    build_collator,
    count_tokens,
    evaluate_masked_lm,
    fixed_mask_batches,
    prepare_corpus,
    split_heldout,
)
from workbench.masking.heldout import mlm_logits
from workbench.models import build_masked_lm, model_source
from workbench.threads import torch_threads, usable_cores
from workbench.train.checkpoints import checkpoint_to_resume, claim_output_dir, remove_checkpoints
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
        return build_loss(
            "mlm_sr",
            weight=objective.weight,
            level=objective.level,
            prediction=objective.prediction,
            kl_direction=objective.kl_direction,
        )
    return build_loss("mlm")


class CorrectionLog:
    """Running hard-correction counts of one kind (:class:`CorrectionStats`, on the device): since
    the last logged step (``since_log``), this epoch (``epoch``) and the whole run (``totals``)."""

    def __init__(self) -> None:
        self.since_log, self.epoch, self.totals = CorrectionStats(), CorrectionStats(), CorrectionStats()

    def update(self, counts: CorrectionCounts) -> None:
        """Add one batch's counts to the three totals (the ``stats`` an HC loss reports to)."""
        for running in (self.since_log, self.epoch, self.totals):
            running.update(counts)

    @staticmethod
    def take(running: CorrectionStats, prefix: str) -> dict[str, float]:
        """``running``'s counts and rates with keys ``<prefix>_<name>``, then reset it."""
        taken = {f"{prefix}_{key}": value for key, value in running.as_dict().items()}
        running.reset()
        return taken


class MaskedLMTrainer(LossTrainer):
    """``LossTrainer`` for the MLM objectives (``workbench.losses.mlm``) and optional SOP.

    The loss module gets the batch's context (``model``, ``input_ids``, ``word_ids``, ...) and
    returns ``(loss, items)``; ``items`` (the positions the mean runs over: after correction for
    HC) scales micro-batches under gradient accumulation. With SOP the sentence-order
    cross-entropy over the batch's blocks is added (Lan et al. 2020: L = L_MLM + L_SOP).

    HC counts (the paper's Table 2) accumulate on the device in ``corrections`` (name ->
    :class:`CorrectionLog`; ``"hc"`` for the MLM's corrections): since the last log (added to
    each logged step as ``<name>_*``), per epoch and over the run.
    """

    def __init__(self, *args: Any, sentence_order: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, side_inputs=SIDE_INPUTS, **kwargs)
        self.sentence_order = sentence_order
        self.correcting = isinstance(self.loss, HardCorrectionLoss)
        self.corrections: dict[str, CorrectionLog] = {"hc": CorrectionLog()} if self.correcting else {}

    def batch_loss(
        self, model: nn.Module, outputs: Any, labels: torch.Tensor, inputs: dict[str, Any], side: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        logits = mlm_logits(outputs)
        context = {"stats": self.corrections["hc"]} if self.correcting and model.training else {}
        loss, items = self.loss.loss_and_items(
            logits,
            labels,
            model=model,
            input_ids=inputs["input_ids"],
            attention_mask=inputs["attention_mask"],
            token_type_ids=inputs.get("token_type_ids"),
            word_ids=side.get("word_ids"),
            **context,
        )
        if self.sentence_order:
            loss = loss + F.cross_entropy(outputs.seq_relationship_logits.float(), side["sop_labels"])
        return loss, items

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:
            for name, running in self.corrections.items():
                logs = {**logs, **CorrectionLog.take(running.since_log, name)}
        super().log(logs, start_time)


class EpochEvaluation(TrainerCallback):
    """At the end of every epoch: ``evaluate(model)`` on the fixed held-out batches (pretrain_mlm:
    :func:`workbench.masking.evaluate_masked_lm`, the eval MLM loss, perplexity and the HC
    correction rates of the model's predictions there) and the training-time HC rates of the
    epoch (``train_<name>_*``, Table 2 per checkpoint), logged together; the records are kept in
    ``epochs``. A non-finite eval loss stops the run before the epoch's checkpoint
    (:meth:`LossTrainer.check_evaluation`)."""

    def __init__(self, trainer: MaskedLMTrainer, evaluate: Callable[[nn.Module], dict[str, float]]) -> None:
        self.trainer, self.evaluate = trainer, evaluate
        self.epochs: list[dict[str, Any]] = []

    def on_epoch_end(self, args: Any, state: Any, control: Any, model: nn.Module | None = None, **kwargs: Any) -> None:
        evaluation = self.evaluate(self.trainer.model)
        self.trainer.check_evaluation(evaluation)
        record = {
            "epoch": round(state.epoch or 0.0, 4),
            "step": state.global_step,
            **{
                key if key.startswith("eval_") or key == "perplexity" else f"eval_{key}": value
                for key, value in evaluation.items()
            },
        }
        for name, running in self.trainer.corrections.items():
            record.update(CorrectionLog.take(running.epoch, f"train_{name}"))
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
    return min(4, usable_cores())


@dataclass
class PretrainingData:
    """What a pre-training task trains and evaluates on (:func:`prepare_pretraining`): the tokenizer,
    the packed corpus, its training and held-out blocks, the training collator (fresh masks every
    batch) and the held-out blocks masked once (``eval_batches``)."""

    tokenizer: Any
    corpus: PreparedCorpus
    train_blocks: datasets.Dataset
    eval_blocks: datasets.Dataset
    collator: Callable[[list[dict]], dict[str, torch.Tensor]]
    eval_batches: list[dict[str, torch.Tensor]]

    def metrics(self) -> dict[str, Any]:
        """corpus_characters (non-space characters of the texts), blocks (train / eval),
        tokens_per_epoch (the training blocks' tokens without [CLS] / [SEP]: ``count_tokens(...,
        text_only=True)``), preprocess_seconds, cache_hit."""
        return {
            "corpus_characters": self.corpus.corpus_characters,
            "blocks": {"train": len(self.train_blocks), "eval": len(self.eval_blocks)},
            "tokens_per_epoch": count_tokens(self.train_blocks, text_only=True),
            "preprocess_seconds": self.corpus.preprocess_seconds,
            "cache_hit": self.corpus.cache_hit,
        }


def prepare_pretraining(config: Config, *, return_word_ids: bool, sentence_order: bool = False) -> PretrainingData:
    """The data of a pre-training run (pretrain_mlm, pretrain_electra) from ``config``.

    Texts come from ``data`` (``load_texts``; text pairs are joined by a newline) and are packed
    into blocks of ``data.max_length`` tokens (one fewer with ``sentence_order``, whose swap adds a
    [SEP]) at sentence and word boundaries, segmented with jieba in ``data.num_proc`` processes and
    cached on disk (``workbench.masking.prepare_corpus``). ``data.eval_fraction`` of the blocks is
    held out and masked once (:data:`EVAL_MASKING`, :data:`EVAL_SEED`, word ids kept for HC rates).
    The training collator is ``config.masking``'s, seeded with ``training.seed`` (KDM weighs words
    by the IDF of the training blocks); ``return_word_ids`` keeps the word spans HC needs.
    """
    data, training = config.data, config.training
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    texts, pairs = load_texts(data)
    documents = texts if pairs is None else [f"{text}\n{pair}" for text, pair in zip(texts, pairs)]
    corpus = prepare_corpus(
        documents,
        tokenizer,
        max_length=data.max_length - (1 if sentence_order else 0),
        cache_dir=data.cache_dir,
        num_proc=data.num_proc,
        block_boundary=data.block_boundary,
    )
    train_blocks, eval_blocks = split_heldout(corpus.dataset, data.eval_fraction, seed=data.seed)
    collator = build_collator(
        config.masking,
        tokenizer,
        training.seed,
        return_word_ids=return_word_ids,
        sentence_order=sentence_order,
        segmented_texts=train_blocks["words"] if config.masking.strategy == "kdm" else None,
    )
    eval_collator = build_collator(
        EVAL_MASKING.replace(mlm_probability=config.masking.mlm_probability), tokenizer, EVAL_SEED, return_word_ids=True
    )
    eval_batches = fixed_mask_batches(eval_blocks, eval_collator, batch_size=training.per_device_eval_batch_size)
    return PretrainingData(tokenizer, corpus, train_blocks, eval_blocks, collator, eval_batches)


def pretraining_trainer_kwargs(config: Config, data: PretrainingData, callbacks: Sequence[TrainerCallback]) -> dict[str, Any]:
    """The Trainer keyword arguments both pre-training tasks share: the training arguments (no
    Trainer evaluation, ``training.dataloader_num_workers`` persistent processes drawing the masks), the
    training blocks and collator, the tokenizer, ``callbacks`` and ``training.time_budget_s``."""
    training = config.training
    workers = default_dataloader_workers() if training.dataloader_num_workers is None else training.dataloader_num_workers
    return {
        "args": training_arguments(
            training, config.output_dir, evaluate=False, dataloader_num_workers=workers, dataloader_persistent_workers=workers > 0
        ),
        "train_dataset": data.train_blocks,
        "data_collator": data.collator,
        "processing_class": data.tokenizer,
        "callbacks": list(callbacks),
        "time_budget_s": training.time_budget_s,
    }


def run_pretraining(
    trainer: MaskedLMTrainer,
    evaluate: Callable[[nn.Module], dict[str, float]],
    config: Config,
    data: PretrainingData,
    *,
    start: float,
    resume_from: str | None,
    headline: Sequence[str],
    task_metrics: Callable[[], dict[str, Any]],
) -> Result:
    """The part both pre-training tasks share after building their trainer: ``evaluate`` at every
    epoch end (:class:`EpochEvaluation`), train (from ``resume_from``), save into ``output_dir``,
    evaluate once more when training stopped mid-epoch (``training.time_budget_s``), remove the
    checkpoints (unless ``training.keep_checkpoints``) and write ``metrics.json``.

    Its metrics: task, masking, objective, the corpus's (:meth:`PretrainingData.metrics`),
    share_before_first_step, train_loss, train_runtime, train_samples_per_second, the final
    evaluation's ``headline`` keys (a non-finite value as null), epochs (every evaluation), time,
    num_parameters, parameters (the config), then ``task_metrics()``.
    """
    first_step = FirstStep()
    evaluation = EpochEvaluation(trainer, evaluate)
    trainer.add_callback(first_step)
    trainer.add_callback(evaluation)
    output_dir = Path(config.output_dir)
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(str(output_dir))
    if not evaluation.epochs or evaluation.epochs[-1]["step"] != trainer.state.global_step:  # stopped mid-epoch
        evaluation.on_epoch_end(trainer.args, trainer.state, trainer.control)
    final = evaluation.epochs[-1]
    wall = time.perf_counter() - start
    before_first_step = (first_step.at - start) if first_step.at is not None else wall
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
        remove_checkpoints(output_dir)
    return write_result(output_dir, metrics, None, trainer.state.log_history)


def pretrain_mlm(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """MLM pre-training on ``config`` (see docs/training.md); writes a checkpoint ``finetune`` loads.

    The corpus is packed, cached and split as :func:`prepare_pretraining` describes; the eval
    loss, perplexity = exp(eval loss) and the HC correction rates on the held-out blocks are
    logged every epoch. The ``masking`` collator draws fresh masks in
    ``training.dataloader_num_workers`` persistent, per-worker-seeded processes. The ``objective`` is
    plain MLM, HC or SR (registered loss modules ``mlm``, ``mlm_hc``, ``mlm_sr``), plus
    sentence-order prediction when ``objective.sop``. A checkpoint is saved per epoch
    (``training.resume`` continues from the latest); the final model and tokenizer go into
    ``output_dir`` (use it as ``model.model_name_or_path``). ``metrics.json`` reports
    corpus_characters, tokens_per_epoch, preprocess_seconds, cache_hit, train_runtime, eval_loss,
    perplexity, the per-epoch evaluations (``epochs``) and, with HC, the correction rates per
    epoch and in total (:func:`run_pretraining`).
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
    model = build_masked_lm(
        **model_source(config.model, len(data.tokenizer), config.data.max_length), sentence_order=objective.sop
    )
    trainer = MaskedLMTrainer(
        model=model,
        loss=objective_loss(objective, data.tokenizer),
        sentence_order=objective.sop,
        **pretraining_trainer_kwargs(config, data, callbacks),
    )
    correction = HardCorrectionLoss(data.tokenizer, objective.lexicon, objective.hc_level)

    def task_metrics() -> dict[str, Any]:
        return {
            "sop": objective.sop,
            **({"correction": trainer.corrections["hc"].totals.as_dict()} if trainer.correcting else {}),
        }

    return run_pretraining(
        trainer,
        partial(evaluate_masked_lm, batches=data.eval_batches, correction=correction),
        config,
        data,
        start=start,
        resume_from=resume_from,
        headline=("eval_loss", "perplexity"),
        task_metrics=task_metrics,
    )
