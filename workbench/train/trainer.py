"""The Trainer every workbench trainer uses (:class:`LossTrainer`): any loss, correct under gradient accumulation,
checkpoints written atomically."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import pickle
import re
import shutil
import time
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import PrinterCallback, ProgressCallback, Trainer, TrainerCallback, TrainingArguments
from transformers.integrations import TensorBoardCallback
from transformers.trainer_jit_checkpoint import JITCheckpointCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints, sort_checkpoints

from workbench.config import TrainingConfig, check_field, resolve_precision
from workbench.hub import bound_hub_timeouts, hub_error_text, is_hub_error
from workbench.losses import IGNORE_INDEX
from workbench.train.run_folder import STAGING_DIR, checkpoint_to_resume


class BarProgressCallback(ProgressCallback):
    """The Trainer's bar with the training loss in its postfix and one line per evaluation (no line per log, no
    evaluation bar)."""

    def on_prediction_step(self, *args: Any, **kwargs: Any) -> None:
        return

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or self.training_bar is None or not logs:
            return
        if "loss" in logs:
            self.training_bar.set_postfix(loss=f"{logs['loss']:.4g}", refresh=False)
        timing = ("runtime", "_per_second")
        shown = {
            k[5:]: v
            for k, v in logs.items()
            if k.startswith("eval_") and isinstance(v, float) and not k.endswith(timing)
        }
        if shown:
            self.training_bar.write(
                f"epoch {state.epoch:.0f} validation: " + ", ".join(f"{k} {v:.4g}" for k, v in shown.items())
            )


class TimeBudget(TrainerCallback):
    """Stops training once ``seconds`` have passed since it began (checked after every step)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def on_train_begin(self, *args: Any, **kwargs: Any) -> None:
        self.start = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if time.perf_counter() - self.start >= self.seconds:
            control.should_training_stop = True


class TrainingInterrupted(KeyboardInterrupt):
    """SIGTERM stopped a run with ``training.enable_jit_checkpoint`` (a preempted job): its checkpoint is kept, no
    metrics.json is written (the run is not finished) and ``training.resume=true`` continues it."""


class AtomicCheckpoints(TrainerCallback):
    """Moves each complete ``<run>/.staging/checkpoint-N`` to ``<run>/checkpoint-N`` (a kill mid-save leaves no half
    checkpoint), keeping ``save_total_limit`` of them and the best. With ``training.enable_jit_checkpoint`` it notes
    when SIGTERM asked for a checkpoint (``interrupted``: the JIT callback, called after this one, then stops the
    run)."""

    def __init__(self, jit_manager: Any = None) -> None:
        self.jit_manager, self.interrupted = jit_manager, False

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:  # what a killed run left half-written
            shutil.rmtree(args.output_dir, ignore_errors=True)

    def _watch(self, *args: Any, **kwargs: Any) -> None:
        if self.jit_manager is not None and self.jit_manager.is_checkpoint_requested:
            self.interrupted = True

    on_pre_optimizer_step = on_step_begin = on_step_end = on_epoch_end = _watch

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.publish(args, state, state.global_step)

    def publish(self, args: Any, state: Any, step: int) -> None:
        """Move the staged ``checkpoint-<step>`` into the run folder (main process); the state's best path follows."""
        name = f"{PREFIX_CHECKPOINT_DIR}-{step}"
        run_dir = os.path.dirname(args.output_dir)
        staged = os.path.join(args.output_dir, name)
        final = os.path.join(run_dir, name)
        if not state.is_world_process_zero or not os.path.isdir(staged):
            return
        if state.best_model_checkpoint == staged:  # the state names the checkpoint's final place
            state.best_model_checkpoint = final
            state.save_to_json(os.path.join(staged, "trainer_state.json"))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(staged, final)
        rotate_checkpoints(run_dir, args.save_total_limit, state.best_model_checkpoint)


def scale_for_accumulation(
    loss: torch.Tensor, items: Any, num_items_in_batch: Any, micro_batches: int, is_batch_level=False, num_processes=1
) -> torch.Tensor:
    """One micro-batch's loss L_b scaled so that G accumulated micro-batches give the intended update: a mean
    over n_b items (N = ``num_items_in_batch`` over the step) ``L_b * n_b * P / N``, the gradient of one batch of
    N (P processes, whose average DDP undoes); a batch-level loss (set-level Dice, PCL with batch counts) or no
    N: ``L_b / G``, the mean of the micro-batches' updates."""
    if micro_batches < 1:
        raise ValueError(f"micro_batches: must be >= 1, got {micro_batches}")
    if is_batch_level or num_items_in_batch is None:
        return loss / micro_batches
    return loss * (items * num_processes / num_items_in_batch)


def count_items(labels: torch.Tensor) -> torch.Tensor:
    """Number of labels that take part in the loss (not ``-100``)."""
    return labels.ne(IGNORE_INDEX).sum()


class LossTrainer(Trainer):
    """A ``transformers.Trainer`` whose training loss is ``loss(outputs.logits, labels)`` (any ``build_loss`` loss; a
    subclass's own :meth:`compute_loss` scales with :meth:`scale_for_accumulation`); ``time_budget_s`` stops the run
    after that many seconds, a non-finite training or held-out loss with a ``FloatingPointError``."""

    loss_is_scaled_for_ga = True

    def __init__(self, *args: Any, loss: nn.Module, time_budget_s: float | None = None, **kwargs: Any) -> None:
        check_field("loss.params.reduction", getattr(loss, "reduction", "mean"), str, choices=("mean",))
        super().__init__(*args, **kwargs)
        self.loss = loss
        staged = os.path.basename(self.args.output_dir) == STAGING_DIR
        self.run_dir = os.path.dirname(self.args.output_dir) if staged else self.args.output_dir
        self.model_accepts_loss_kwargs = True  # the Trainer counts num_items_in_batch; compute_loss consumes it
        if time_budget_s is not None:
            self.add_callback(TimeBudget(time_budget_s))
        jit = next((item for item in self.callback_handler.callbacks if isinstance(item, JITCheckpointCallback)), None)
        self.checkpoints = AtomicCheckpoints(jit.jit_manager if jit is not None else None)
        if staged:
            self.callback_handler.callbacks.insert(0, self.checkpoints)  # before any on_save of others
        for callback in self.callback_handler.callbacks:  # TensorBoard's events go to the run folder
            if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
                callback.logging_dir = os.path.join(self.run_dir, "runs")
        if self.args.disable_tqdm:  # quiet: no bars and no per-step log prints
            self.remove_callback(PrinterCallback)
        elif self.pop_callback(ProgressCallback) is not None:
            self.add_callback(BarProgressCallback)

    def compute_loss(
        self, model: nn.Module, inputs: dict[str, Any], return_outputs: bool = False, num_items_in_batch: Any = None
    ) -> Any:
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        loss = self.loss(outputs.logits, labels)
        if model.training:
            batch_level = bool(getattr(self.loss, "is_batch_level", False))
            loss = self.scale_for_accumulation(loss, count_items(labels), num_items_in_batch, batch_level)
        return (loss, outputs) if return_outputs else loss

    def scale_for_accumulation(
        self, loss: torch.Tensor, items: Any, num_items_in_batch: Any, is_batch_level=False
    ) -> torch.Tensor:
        """:func:`scale_for_accumulation` for this accumulation step and these processes."""
        averaging = self.args.average_tokens_across_devices and self.args.world_size > 1
        processes = self.accelerator.num_processes if averaging else 1
        steps = self.current_gradient_accumulation_steps
        return scale_for_accumulation(loss, items, num_items_in_batch, steps, is_batch_level, processes)

    def training_step(self, model: nn.Module, inputs: dict[str, Any], num_items_in_batch: Any = None) -> torch.Tensor:
        """One micro-step; a non-finite loss stops the run naming the step (earlier checkpoints are kept)."""
        loss = super().training_step(model, inputs, num_items_in_batch)
        if not torch.isfinite(loss):
            raise self.diverged(self.state.global_step + 1, f"the loss is {loss.item()}")
        return loss

    def init_hf_repo(self, token: str | None = None) -> None:
        """The Trainer's (``training.push_to_hub``) within the hub's bounded timeouts; a failure names the key."""
        bound_hub_timeouts()
        try:
            super().init_hf_repo(token)
        except Exception as error:
            if is_hub_error(error):
                raise ValueError(f"training.push_to_hub: {hub_error_text(error)}") from None
            raise

    def push_to_hub(self, *args: Any, **kwargs: Any) -> Any:
        """The Trainer's; a failure is a ValueError naming ``training.push_to_hub``."""
        try:
            return super().push_to_hub(*args, **kwargs)
        except Exception as error:
            if is_hub_error(error):
                raise ValueError(f"training.push_to_hub: {hub_error_text(error)}") from None
            raise

    def get_eval_dataloader(self, eval_dataset: Any = None) -> Any:
        """The Trainer's, never dropping rows: ``training.dataloader_drop_last`` drops incomplete training batches
        only."""
        with every_row(self.args):
            return super().get_eval_dataloader(eval_dataset)

    def get_test_dataloader(self, test_dataset: Any) -> Any:
        """The Trainer's, never dropping rows (predictions and metrics cover every test example)."""
        with every_row(self.args):
            return super().get_test_dataloader(test_dataset)

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        metrics = super().evaluate(*args, **kwargs)
        self.check_evaluation(metrics)
        return metrics

    def check_evaluation(self, metrics: Mapping[str, Any]) -> None:
        """Stop a run whose held-out loss (any ``*loss`` of ``metrics``) is not finite (weights overflowed by one huge
        step can leave the training loss finite), before the epoch's save: the last good checkpoint is kept."""
        for key, value in metrics.items():
            if key.endswith("loss") and isinstance(value, float) and not math.isfinite(value):
                raise self.diverged(
                    self.state.global_step, f"the held-out {key} is {value} (the model's outputs are not finite)"
                )

    def diverged(self, step: int, what: str) -> FloatingPointError:
        """The error that stops a diverged run at ``step``: ``what`` went non-finite."""
        return FloatingPointError(
            f"training diverged at step {step} (epoch {self.state.epoch or 0:.2f}): {what}; "
            "lower training.learning_rate or check the loss parameters. "
            f"Checkpoints saved before are kept in {self.run_dir}"
        )

    def train(self, resume_from_checkpoint: str | None = None, **kwargs: Any) -> Any:
        """``Trainer.train`` from ``args.resume_from_checkpoint`` by default, no staging left after an error; a folder
        that cannot be written (:func:`write_failure`), a hub that does not answer (``training.push_to_hub``) and a
        checkpoint holding a file that is not a checkpoint's (or weights of another shape) are a ValueError naming it.
        A run that SIGTERM stopped (``training.enable_jit_checkpoint``) keeps its checkpoint and raises
        :class:`TrainingInterrupted`."""
        resume_from_checkpoint = resume_from_checkpoint or self.args.resume_from_checkpoint
        try:
            output = super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)
        except Exception as error:
            if self.run_dir != self.args.output_dir:
                shutil.rmtree(self.args.output_dir, ignore_errors=True)
            if write_failure(error) is not None:
                raise ValueError(f"output_dir: cannot write into {self.run_dir!r} ({write_failure(error)})") from None
            if self.args.push_to_hub and is_hub_error(error):
                raise ValueError(f"training.push_to_hub: {hub_error_text(error)}") from None
            unreadable = isinstance(error, pickle.UnpicklingError | EOFError | SafetensorError)
            # a size mismatch: another model size or class count
            if resume_from_checkpoint and (unreadable or "size mismatch" in str(error)):
                detail = " ".join(str(error).split())[:300]
                raise ValueError(
                    f"training.resume: {resume_from_checkpoint!r} does not fit this model ({detail})"
                ) from None
            raise
        if self.checkpoints.interrupted:
            raise self.interruption()
        return output

    def interruption(self) -> TrainingInterrupted:
        """The checkpoint SIGTERM asked for moved from staging into the run folder; the error that ends the run."""
        for staged in sort_checkpoints(self.args.output_dir)[-1:] if os.path.isdir(self.args.output_dir) else ():
            self.checkpoints.publish(self.args, self.state, int(staged.rsplit("-", 1)[1]))
        return TrainingInterrupted(
            f"training was stopped by SIGTERM at step {self.state.global_step} (epoch {self.state.epoch or 0:.2f} of "
            f"{self.state.num_train_epochs:g}); its checkpoints are kept in {self.run_dir}: rerun with "
            "training.resume=true to continue"
        )


@contextlib.contextmanager
def every_row(args: TrainingArguments) -> Iterator[None]:
    """``args.dataloader_drop_last`` off inside the block (evaluation and prediction read every row)."""
    drop, args.dataloader_drop_last = args.dataloader_drop_last, False
    try:
        yield
    finally:
        args.dataloader_drop_last = drop


WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EFBIG}


def write_failure(error: BaseException) -> str | None:
    """Why a save failed when ``error`` (or its cause) is a failed write, else None: an OSError of a full disk, a
    quota, a read-only or forbidden folder, and how safetensors (``SafetensorError: ... (os error 28)``) and
    ``torch.save`` (``RuntimeError: [enforce fail at inline_container.cc...]``) report one."""
    for item in (error, error.__cause__, error.__context__):
        if isinstance(item, OSError) and item.errno in WRITE_ERRORS:
            return item.strerror
        code = re.search(r"os error (\d+)", str(item)) if isinstance(item, SafetensorError) else None
        if code is not None and int(code.group(1)) in WRITE_ERRORS:
            return os.strerror(int(code.group(1)))
        if isinstance(item, RuntimeError) and "inline_container" in str(item):
            return f"writing a file failed, is the disk full? ({' '.join(str(item).split())[:120]})"
    return None


def save_final_model(trainer: Trainer, folder: str | os.PathLike) -> None:
    """``trainer.save_model`` into ``folder`` through ``<folder>/.final``, each file then renamed into place: a save
    that fails (a full disk) leaves no half-written model and is a ValueError naming ``output_dir``; the checkpoints
    stay, so ``training.resume=true`` finishes the run."""
    staged = os.path.join(folder, ".final")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        trainer.save_model(staged)
    except Exception as error:
        shutil.rmtree(staged, ignore_errors=True)
        if write_failure(error) is not None:
            raise ValueError(
                f"output_dir: cannot write into {os.fspath(folder)!r} ({write_failure(error)}); its checkpoints are "
                "kept: free space, then rerun with training.resume=true"
            ) from None
        raise
    for name in os.listdir(staged) if trainer.is_world_process_zero() else ():
        target = os.path.join(folder, name)
        if os.path.isdir(target):
            shutil.rmtree(target)
        os.replace(os.path.join(staged, name), target)
    shutil.rmtree(staged, ignore_errors=True)


def training_arguments(training: TrainingConfig, output_dir: str, *, evaluate: bool, **extra: Any) -> TrainingArguments:
    """``TrainingArguments`` of the ``training`` section and what the workbench sets: ``precision``, ``quiet``, a save
    (and an evaluation when ``evaluate``) every epoch staged in ``<output_dir>/.staging``, the best by validation
    macro-F1 kept, the checkpoint to resume from. ``extra`` overrides any of them (None keeps the config's)."""
    precision = resolve_precision(training.precision)
    arguments = {
        "data_seed": training.seed,
        "use_cpu": not torch.cuda.is_available(),
        **training.arguments,
        "output_dir": os.path.join(output_dir, STAGING_DIR),
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
        "disable_tqdm": training.quiet,
        "log_level": "warning" if training.quiet else "passive",
        "save_strategy": "epoch",
        "eval_strategy": "epoch" if evaluate else "no",
        "load_best_model_at_end": evaluate,
        "metric_for_best_model": "macro_f1" if evaluate else None,
        "greater_is_better": True if evaluate else None,
        "logging_nan_inf_filter": False,  # training_step stops a run at a non-finite loss
        "remove_unused_columns": False,
        "resume_from_checkpoint": checkpoint_to_resume(output_dir, training.resume),
        "hub_token": None,  # given, it is HF_TOKEN while the run lives (run_folder.hub_token): no file holds it
        **extra,
    }
    if arguments.get("push_to_hub") and not arguments.get("hub_model_id"):  # the Trainer's default: ".staging"
        arguments["hub_model_id"] = os.path.basename(os.path.abspath(output_dir))
    return TrainingArguments(**{key: value for key, value in arguments.items() if value is not None})
