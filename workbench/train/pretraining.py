"""MLM pre-training with random / whole-word / knowledge masking and plain / HC / SR objectives (``pretrain_mlm``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback, set_seed

from workbench.config import Config, ObjectiveConfig, load_config
from workbench.data import load_texts
from workbench.lexicon import SynonymTable
from workbench.losses import build_loss
from workbench.losses.mlm import CorrectionStats, hard_correction, soft_regularization
from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.models import build_masked_lm, model_source
from workbench.train.checkpoints import checkpoint_to_resume, remove_checkpoints
from workbench.train.result import Result, count_parameters, write_result
from workbench.train.trainer import LossTrainer, count_items, training_arguments
from workbench.threads import torch_threads
from workbench.train.verbosity import progress_bars
from workbench.vocab import load_tokenizer


class MaskedLMTrainer(LossTrainer):
    """``LossTrainer`` for MLM objectives.

    * ``plain``: cross-entropy over the masked positions;
    * ``hc`` (hard correction): ``hard_correction`` drops masked whole words
      predicted as a synonym of the gold word (``table``); it averages over the
      kept positions, so the accumulation count is the kept positions too
      (dropped positions add zero to the big-batch mean over masked positions
      that gradient accumulation reproduces);
    * ``sr`` (soft regularization): cross-entropy + ``weight`` x SR (token level:
      1 - cos between gold and predicted input embeddings; sentence level: KL
      between hidden-state distributions of the original and prediction-filled
      sentence).

    With ``hc`` every logged step adds the correction rates since the previous
    log (``hc_prediction_rate``, ``hc_iteration_rate``, and counts) and
    ``correction_totals`` accumulates them over the run.
    """

    def __init__(self, *args: Any, objective: ObjectiveConfig, table: SynonymTable | None, **kwargs: Any) -> None:
        super().__init__(*args, side_inputs=("word_ids",), **kwargs)
        self.objective = objective
        self.table = table
        self.correction_since_log = CorrectionStats()
        self.correction_totals = CorrectionStats()

    def batch_loss(
        self, model: nn.Module, outputs: Any, labels: torch.Tensor, inputs: dict[str, Any], side: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        name = self.objective.name
        if name == "hc":
            loss, counts = hard_correction(
                outputs.logits, labels, inputs["input_ids"], self.table, self.processing_class, word_ids=side.get("word_ids")
            )
            if model.training:
                self.correction_since_log.update(counts)
                self.correction_totals.update(counts)
            return loss, count_items(counts.labels)
        loss = self.loss(outputs.logits, labels)
        if name == "sr":
            loss = loss + soft_regularization(
                outputs.logits,
                labels,
                model.get_input_embeddings().weight,
                weight=self.objective.weight,
                level=self.objective.level,
                model=model,
                input_ids=inputs["input_ids"],
                attention_mask=inputs["attention_mask"],
                token_type_ids=inputs.get("token_type_ids"),
            )
        return loss, count_items(labels)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if self.objective.name == "hc" and "loss" in logs:
            logs = {**logs, **{f"hc_{key}": value for key, value in self.correction_since_log.as_dict().items()}}
            self.correction_since_log.reset()
        super().log(logs, start_time)


def pretrain_mlm(config: str | Path | Mapping[str, Any] | Config, callbacks: Sequence[TrainerCallback] = ()) -> Result:
    """MLM pre-training on ``config`` (see docs/training.md); writes a checkpoint ``finetune`` loads.

    Texts come from ``data`` (``load_texts``), are segmented with jieba and
    encoded once (``encode_words``); the ``masking`` collator draws fresh masks
    every batch (seeded by ``training.seed``). The ``objective`` is plain MLM,
    HC or SR (:class:`MaskedLMTrainer`). A checkpoint is saved per epoch
    (``training.resume`` continues from the latest); the final model and
    tokenizer go into ``output_dir`` (use it as ``model.model_name_or_path``),
    with ``metrics.json`` holding the loss history (and HC correction rates per
    logging step and in total).
    """
    config = load_config(config, task="pretrain_mlm")
    with progress_bars(not config.training.quiet), torch_threads(config.training.threads):
        return _pretrain_mlm(config, callbacks)


def _pretrain_mlm(config: Config, callbacks: Sequence[TrainerCallback]) -> Result:
    start = time.perf_counter()
    training, objective = config.training, config.objective
    set_seed(training.seed)
    output_dir = Path(config.output_dir)
    resume_from = checkpoint_to_resume(output_dir, training.resume)
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    texts, pairs = load_texts(config.data)
    features = encode_words(tokenizer, texts, JiebaSegmenter(), max_length=config.data.max_length, text_pairs=pairs)
    model = build_masked_lm(**model_source(config.model, len(tokenizer), config.data.max_length))
    collator = build_collator(config.masking, tokenizer, training.seed, return_word_ids=objective.name == "hc",
                              segmented_texts=[feature["words"] for feature in features])
    trainer = MaskedLMTrainer(
        model=model,
        args=training_arguments(training, str(output_dir), evaluate=False),
        train_dataset=features,
        data_collator=collator,
        processing_class=tokenizer,
        callbacks=list(callbacks),
        loss=build_loss("ce"),
        objective=objective,
        table=SynonymTable.from_path(objective.lexicon) if objective.name == "hc" else None,
    )
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    trainer.save_model(str(output_dir))
    metrics: dict[str, Any] = {
        "task": "pretrain_mlm",
        "masking": config.masking.strategy,
        "objective": objective.name,
        "train_loss": train_output.training_loss,
        "train_runtime": train_output.metrics["train_runtime"],
        "train_samples_per_second": train_output.metrics["train_samples_per_second"],
        "num_texts": len(features),
        "time": time.perf_counter() - start,
        "num_parameters": count_parameters(model),
        "parameters": config.to_dict(),
    }
    if objective.name == "hc":
        metrics["correction"] = trainer.correction_totals.as_dict()
    if not training.keep_checkpoints:
        remove_checkpoints(output_dir)
    return write_result(output_dir, metrics, None, trainer.state.log_history)
