"""The Trainer subclass every workbench trainer uses: any loss, correct under gradient accumulation.

``transformers.Trainer`` sums the gradients of ``gradient_accumulation_steps``
micro-batches before one optimizer step. What each micro-batch's loss must be
scaled by so that the accumulated update is the intended one depends on what
the loss is:

* a per-sample (or per-token) mean, ``L_b = (1/n_b) sum_{i in b} l_i``: the
  accumulated gradient must equal that of one big batch,
  ``(1/N) sum_i l_i`` with ``N = sum_b n_b`` (the ``num_items_in_batch`` the
  Trainer counts over the whole accumulated batch), so each micro-batch
  contributes ``L_b * n_b / N``;
* a batch-level loss (set-level Dice, PCL with batch counts: ``is_batch_level``),
  whose value is not a mean of per-sample terms: the update must be the MEAN of
  the micro-batches' updates, so each contributes ``L_b / G`` with ``G`` the
  number of micro-batches in this accumulation step.

The subclass therefore sets ``loss_is_scaled_for_ga = True`` and scales in
``compute_loss`` (``Trainer(compute_loss_func=...)`` alone would not divide by
``G``, scaling a batch-mean loss up ``G``-fold).
"""

from __future__ import annotations

import math
import os
import shutil
import time
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from transformers import PrinterCallback, ProgressCallback, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from workbench.checks import check_choice
from workbench.config import PRECISIONS, TrainingConfig
from workbench.losses import IGNORE_INDEX
from workbench.train.checkpoints import STAGING_DIR


class BarProgressCallback(ProgressCallback):
    """The Trainer's progress bar without a printed line per logging step: the latest training
    loss sits in the bar's postfix, and only evaluations (once per epoch) get a line. Evaluations
    draw no bar of their own (a second bar flashing under the first); their line follows."""

    def on_prediction_step(self, args: Any, state: Any, control: Any, eval_dataloader: Any = None, **kwargs: Any) -> None:
        return

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or self.training_bar is None or not logs:
            return
        if "loss" in logs:
            self.training_bar.set_postfix(loss=f"{logs['loss']:.4g}", refresh=False)
        evaluation = {
            key.removeprefix("eval_"): f"{value:.4g}"
            for key, value in logs.items()
            if key.startswith("eval_") and isinstance(value, float) and not key.endswith(("runtime", "_per_second"))
        }
        if evaluation:
            self.training_bar.write(
                f"epoch {state.epoch:.0f} validation: " + ", ".join(f"{k} {v}" for k, v in evaluation.items())
            )


class TimeBudget(TrainerCallback):
    """Stops training once ``seconds`` have passed since it began (checked after every step)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.start = time.perf_counter()

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if time.perf_counter() - self.start >= self.seconds:
            control.should_training_stop = True


def scale_for_accumulation(
    loss: torch.Tensor,
    *,
    is_batch_level: bool,
    items_in_micro_batch: int | torch.Tensor,
    num_items_in_batch: int | torch.Tensor | None,
    micro_batches: int,
    num_processes: int = 1,
) -> torch.Tensor:
    """Scale one micro-batch's loss so the summed gradients give the intended update.

    Per-sample mean loss: ``L_b * n_b * P / N`` where ``n_b`` counts this
    micro-batch's non-ignored labels, ``N`` (``num_items_in_batch``) all of them
    in the accumulation step over every process and ``P`` the number of
    processes (DDP averages gradients over processes, the factor undoes it), so
    the update equals that of one batch of ``N`` items. Without ``N`` (the
    Trainer did not count) it falls back to ``L_b / G``.

    Batch-level loss: ``L_b / G`` with ``G = micro_batches``, the mean of the
    micro-batches' updates (DDP's average over processes keeps it a mean).
    """
    if micro_batches < 1:
        raise ValueError(f"micro_batches: must be >= 1, got {micro_batches}")
    if is_batch_level or num_items_in_batch is None:
        return loss / micro_batches
    return loss * (items_in_micro_batch * num_processes / num_items_in_batch)


def count_items(labels: torch.Tensor) -> torch.Tensor:
    """Number of labels that take part in the loss (not ``-100``)."""
    return labels.ne(IGNORE_INDEX).sum()


class LossTrainer(Trainer):
    """A ``transformers.Trainer`` whose training loss is ``loss(outputs.logits, labels)``.

    ``loss`` is any module with ``forward(logits, labels)`` and a bool
    ``is_batch_level`` (every ``workbench.losses.build_loss`` loss); ``time_budget_s`` stops the
    run after that many seconds (:class:`TimeBudget`). Batch keys
    listed in ``side_inputs`` (e.g. ``word_ids``) are taken out of the batch
    before the forward pass and handed to :meth:`batch_loss`. Subclasses with
    another objective override :meth:`batch_loss`; the gradient-accumulation
    scaling (:func:`scale_for_accumulation`) stays here.
    """

    loss_is_scaled_for_ga = True

    def __init__(
        self, *args: Any, loss: nn.Module, side_inputs: tuple[str, ...] = (), time_budget_s: float | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.loss = loss
        self.side_inputs = side_inputs
        if time_budget_s is not None:
            self.add_callback(TimeBudget(time_budget_s))
        # Make the Trainer count the labels of each accumulation step (num_items_in_batch);
        # compute_loss below consumes the count, it is never passed to the model.
        self.model_accepts_loss_kwargs = True
        if self.args.disable_tqdm:  # quiet: no bars and no per-step log prints
            self.remove_callback(PrinterCallback)
        elif self.pop_callback(ProgressCallback) is not None:  # a bar, not a line per logging step
            self.add_callback(BarProgressCallback)

    def batch_loss(
        self, model: nn.Module, outputs: Any, labels: torch.Tensor, inputs: dict[str, Any], side: dict[str, Any]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The loss of one micro-batch before gradient-accumulation scaling, and the number of
        items it averages over (the labels that are not -100)."""
        return self.loss(outputs.logits, labels), count_items(labels)

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor, Any]:
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        side = {key: inputs.pop(key) for key in self.side_inputs if key in inputs}
        outputs = model(**inputs)
        loss, items = self.batch_loss(model, outputs, labels, inputs, side)
        if model.training:
            loss = self.scale_for_accumulation(
                loss, items, num_items_in_batch, is_batch_level=bool(getattr(self.loss, "is_batch_level", False))
            )
        return (loss, outputs) if return_outputs else loss

    def scale_for_accumulation(
        self,
        loss: torch.Tensor,
        items: int | torch.Tensor,
        num_items_in_batch: int | torch.Tensor | None,
        *,
        is_batch_level: bool,
    ) -> torch.Tensor:
        """One training micro-batch's ``loss`` (a mean over ``items``, or batch-level) scaled by
        :func:`scale_for_accumulation` for this accumulation step and these processes."""
        return scale_for_accumulation(
            loss,
            is_batch_level=is_batch_level,
            items_in_micro_batch=items,
            num_items_in_batch=num_items_in_batch,
            micro_batches=self.current_gradient_accumulation_steps,
            num_processes=self._gradient_averaging_processes(),
        )

    def training_step(
        self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: torch.Tensor | int | None = None
    ) -> torch.Tensor:
        """One optimisation micro-step; a non-finite loss stops the run with ``FloatingPointError``
        naming the step (the checkpoints saved so far are kept, so the run can be inspected or resumed)."""
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss):
            raise self.diverged(self.state.global_step + 1, f"the loss is {loss.item()}")
        return loss

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        """The Trainer's evaluation, stopped by :meth:`check_evaluation` when its loss is not finite."""
        metrics = super().evaluate(*args, **kwargs)
        self.check_evaluation(metrics)
        return metrics

    def check_evaluation(self, metrics: Mapping[str, Any]) -> None:
        """Stop a diverged run whose held-out loss (any ``*loss`` entry of ``metrics``) is NaN or inf.

        The training loss can stay finite while an update leaves weights that overflow (one huge
        step at the end of an epoch): the model's outputs are then non-finite. Evaluation runs
        before the epoch's checkpoint is saved, so that checkpoint is never written and the last
        good one is kept; no metrics.json or predictions follow."""
        for key, value in metrics.items():
            if key.endswith("loss") and isinstance(value, float) and not math.isfinite(value):
                raise self.diverged(self.state.global_step, f"the held-out {key} is {value} (the model's outputs are not finite)")

    def diverged(self, step: int, what: str) -> FloatingPointError:
        """The error that stops a diverged run at ``step``: ``what`` went non-finite."""
        return FloatingPointError(
            f"training diverged at step {step} (epoch {self.state.epoch or 0:.2f}): {what}; lower training.learning_rate or "
            f"check the loss parameters. Checkpoints saved before are kept in {self.args.output_dir}"
        )

    def _get_output_dir(self, trial: Any) -> str:
        run_dir = super()._get_output_dir(trial)
        return os.path.join(run_dir, STAGING_DIR) if getattr(self, "_staging_checkpoint", False) else run_dir

    def _save_checkpoint(self, model: nn.Module, trial: Any) -> None:
        """Write ``checkpoint-N`` atomically: the Trainer saves it under ``<output_dir>/.staging/``, then
        it is renamed into place, so a run killed mid-save never leaves a half-written ``checkpoint-N``."""
        run_dir = self._get_output_dir(trial)
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        self._staging_checkpoint = True
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._staging_checkpoint = False
        if not self.args.should_save:
            return
        staged, final = os.path.join(run_dir, STAGING_DIR, name), os.path.join(run_dir, name)
        if self.state.best_model_checkpoint == staged:  # the state must name the checkpoint's final place
            self.state.best_model_checkpoint = final
            self.state.save_to_json(os.path.join(staged, TRAINER_STATE_NAME))
        if os.path.isdir(final):
            shutil.rmtree(final)
        os.replace(staged, final)
        shutil.rmtree(os.path.join(run_dir, STAGING_DIR), ignore_errors=True)
        rotate_checkpoints(
            output_dir=run_dir,
            save_total_limit=self.args.save_total_limit,
            best_model_checkpoint=self.state.best_model_checkpoint,
            use_mtime=False,
        )

    def _gradient_averaging_processes(self) -> int:
        """Processes whose gradients DDP averages when ``num_items_in_batch`` is a global count."""
        if self.args.average_tokens_across_devices and self.args.world_size > 1:
            return self.accelerator.num_processes
        return 1


def resolve_precision(precision: str) -> str:
    """``auto`` -> ``bf16`` on a CUDA device that supports it, else ``fp32``; others pass through.

    Raises ValueError for fp16/bf16 without CUDA (they need a GPU here).
    """
    check_choice("training.precision", precision, PRECISIONS)
    cuda = torch.cuda.is_available()
    if precision == "auto":
        return "bf16" if cuda and torch.cuda.is_bf16_supported() else "fp32"
    if precision in ("bf16", "fp16") and not cuda:
        raise ValueError(f"training.precision: {precision} needs a CUDA device; use auto or fp32 on CPU")
    return precision


def training_arguments(training: TrainingConfig, output_dir: str, *, evaluate: bool, **extra: Any) -> TrainingArguments:
    """``TrainingArguments`` from the config's ``training`` section (its TrainingArguments fields as given).

    The workbench sets the rest: a save (and an evaluation, when ``evaluate``) once per epoch so that
    runs resume and the best checkpoint by validation macro-F1 is kept; ``precision``; ``quiet``
    (no tqdm bars, no per-step log prints). ``extra`` overrides any argument (stage 2's epochs and
    learning rate, pre-training's DataLoader workers; None keeps the config's)."""
    precision = resolve_precision(training.precision)
    given = {key: value for key, value in {**training.arguments, **extra}.items() if value is not None}
    arguments: dict[str, Any] = {
        "data_seed": training.seed,
        "use_cpu": not torch.cuda.is_available(),
        **given,
        "output_dir": output_dir,
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "disable_tqdm": training.quiet,
        "log_level": "warning" if training.quiet else "passive",
        "save_strategy": "epoch",
        "eval_strategy": "epoch" if evaluate else "no",
        "load_best_model_at_end": evaluate,
        "metric_for_best_model": "macro_f1" if evaluate else None,
        "greater_is_better": True if evaluate else None,
        "logging_nan_inf_filter": False,  # LossTrainer.training_step stops a run at a non-finite loss
        "remove_unused_columns": False,
    }
    return TrainingArguments(**arguments)
