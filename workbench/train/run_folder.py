"""A run's folder: its frame (:func:`training_run`: the folder claimed by :func:`claim_output_dir`, ``run_config.yaml``
locked while the run lives; :func:`progress_bars`), its ``checkpoint-N`` folders (written atomically by ``LossTrainer``;
only direct children are resumed from or removed), :func:`drop_weights`, and what a finished run writes
(:class:`Result`)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import html
import json
import os
import shutil
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import datasets
import yaml
from torch import nn
from transformers import PreTrainedModel, set_seed
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, sort_checkpoints
from transformers.utils import logging

from workbench.checks import is_number
from workbench.config import Config, load_config, resolve_precision
from workbench.losses import check_loss_parameters, import_loss_modules, own_losses
from workbench.metrics_file import METRICS_FILE, write_json
from workbench.redaction import redact, secret_mark
from workbench.threads import torch_threads
from workbench.train.losses_from_specs import check_loss_spec, needs_label_counts
from workbench.yaml_files import read_yaml_file

RUN_CONFIG = "run_config.yaml"
STAGING_DIR = ".staging"
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")
RESUMABLE_KEYS = (
    *(
        "output_dir",
        "data.num_proc",
        "data.cache_dir",
        "training.resume",
        "training.num_train_epochs",
        "training.max_steps",
    ),
    *(
        "training.time_budget_s",
        "training.quiet",
        "training.threads",
        "training.keep_checkpoints",
        "training.logging_steps",
    ),
    *("training.save_total_limit", "training.report_to", "training.hub_token"),
)
"""Keys a resumed run may change (how long it trains, and what neither its data nor its updates depend on)."""
_LOCKS: dict[Path, Any] = {}


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    return {
        key: value for name, item in tree.items() for key, value in _flat(item, f"{prefix}.{name}".lstrip(".")).items()
    }


def claim_output_dir(config: Config, *subfolders: str) -> contextlib.ExitStack:
    """Make ``config.output_dir`` this run's folder, or raise ValueError naming it: refused are a file, a folder inside
    another run's, one holding files of no run, one (or its ``subfolders``) holding a run without ``training.resume``
    (with it: one whose run had another config outside :data:`RESUMABLE_KEYS`), one that cannot be written, one in use
    by a live run. Writes ``run_config.yaml`` and holds its lock until the returned stack closes or the process ends."""
    folder = Path(config.output_dir).resolve()  # a symlink or ".." into another run is inside it
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output_dir: {str(folder)!r} is a file; choose a folder")
    outer = next((parent for parent in folder.parents if (parent / RUN_CONFIG).is_file()), None)
    if outer is not None:
        raise ValueError(
            f"output_dir: {str(folder)!r} is inside the run folder {str(outer)!r}; choose a folder outside it"
        )
    found = sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []
    if found and RUN_CONFIG not in found:
        raise ValueError(
            f"output_dir: {str(folder)!r} holds files of no workbench run ({found[0]!r}); choose a new or empty one"
        )
    for subfolder in ("", *subfolders) if not config.training.resume else ():
        checkpoint_to_resume(folder / subfolder, resume=False)
    before = _flat(read_yaml_file(folder / RUN_CONFIG, RUN_CONFIG)) if config.training.resume and found else {}
    now = _flat(redact(config.to_dict()))
    changed = [
        key
        for key in sorted(before.keys() | now.keys())
        if key not in RESUMABLE_KEYS and before.get(key) != now.get(key)
    ]
    if before and changed:
        raise ValueError(
            f"training.resume: the run in {str(folder)!r} had another {', '.join(changed)} (see its {RUN_CONFIG})"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = _LOCKS.get(folder) or open(folder / RUN_CONFIG, "a+", encoding="utf-8")  # noqa: SIM115 - held open
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise ValueError(
            f"output_dir: {str(folder)!r} is in use by another run; wait for it or choose another folder"
        ) from None
    except OSError as error:
        raise ValueError(f"output_dir: cannot write into {str(folder)!r} ({error.strerror})") from None
    _LOCKS[folder] = lock
    lock.seek(0)
    previous = lock.read()
    try:
        _rewrite(lock, yaml.safe_dump(redact(config.to_dict()), sort_keys=False, allow_unicode=True))
    except OSError as error:  # a full disk: the previous config is put back, no half-written one is left
        _rewrite(lock, previous)
        raise ValueError(f"output_dir: cannot write into {str(folder)!r} ({error.strerror})") from None
    stack = contextlib.ExitStack()
    stack.enter_context(lock)
    stack.callback(_LOCKS.pop, folder, None)
    return stack


def _rewrite(handle: Any, text: str) -> None:
    """Replace the content of the open file ``handle`` by ``text`` (unbuffered: a failed write leaves nothing
    pending)."""
    data = text.encode("utf-8")
    os.ftruncate(handle.fileno(), 0)
    if os.pwrite(handle.fileno(), data, 0) < len(data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@contextlib.contextmanager
def progress_bars(enabled: bool) -> Iterator[None]:
    """Inside the block, only the bars worth watching: transformers' bars for reading and writing model files
    (a 0-to-100% flash) are off; with ``enabled`` false (quiet runs) the bars of ``datasets`` and transformers'
    warnings below errors (e.g. the LOAD REPORT of a fresh head) too. The Trainer's bar follows ``training.quiet``."""
    bars = logging.is_progress_bar_enabled()
    verbosity = logging.get_verbosity()
    datasets_bars = datasets.is_progress_bar_enabled()
    logging.disable_progress_bar()
    if not enabled:
        datasets.disable_progress_bars()
        logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()
        if datasets_bars:
            datasets.enable_progress_bars()


@contextlib.contextmanager
def hub_token(token: str | None) -> Iterator[None]:
    """``training.hub_token`` reaches huggingface_hub as the ``HF_TOKEN`` environment variable while the block runs,
    never as a TrainingArguments field: no file of the run (``training_args.bin``, which the Trainer also pushes) holds
    it. Null or its mark ``<HUB_TOKEN>`` (what a written config shows): the environment's own token or ``hf auth
    login``'s."""
    if token is None or token == secret_mark("hub_token"):
        yield
        return
    before = os.environ.get("HF_TOKEN")
    os.environ["HF_TOKEN"] = token
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_TOKEN", None)
        else:
            os.environ["HF_TOKEN"] = before


@contextlib.contextmanager
def training_run(config: Any, task: str, *subfolders: str) -> Iterator[Config]:
    """The frame of a run: ``config`` loaded for ``task`` and checked where data cannot tell (the device its precision
    needs; its ``loss_modules`` imported and its loss checked against the registry and built, finetune and two_stage:
    a refused run writes nothing), its output_dir (and ``subfolders``) claimed before any data is loaded
    (:func:`claim_output_dir`), bars, threads, seed and :func:`hub_token` set; yields the config."""
    config = load_config(config, task=task)
    resolve_precision(config.training.precision)  # bf16 on a CPU: refused now, not after the corpus is prepared
    import_loss_modules(config.loss_modules)
    loss = config.loss
    if task in ("finetune", "two_stage"):  # the tasks that train with the loss section
        check_loss_parameters(loss.name, loss.params, "loss.name", "loss.params", needs_label_counts(loss))
        check_loss_spec(loss)  # each value, by the loss
    elif loss.name in own_losses():  # it would be left out silently
        raise ValueError(
            f"loss.name: {task} trains with its objective section, not with a loss; {loss.name!r} (yours) serves "
            "finetune, two_stage and fusion_finetune"
        )
    with (
        claim_output_dir(config, *subfolders),
        progress_bars(not config.training.quiet),
        torch_threads(config.training.threads),
        hub_token(config.training.arguments.get("hub_token")),
    ):
        set_seed(config.training.seed)
        yield config


def check_classes(output_dir: str | Path, names: Sequence[str], resume: bool) -> None:
    """Write the run's classes to ``classes.json``; resuming on data of other classes (a file edited in place) is an
    error."""
    path = Path(output_dir) / "classes.json"
    before = json.loads(path.read_text(encoding="utf-8"))["classes"] if resume and path.is_file() else list(names)
    if before != list(names):
        raise ValueError(
            f"training.resume: the run in {str(output_dir)!r} had the classes {before}, its data now {list(names)}"
        )
    write_json(path, {"classes": list(names)})  # every process: the same content, renamed into place


def is_complete(checkpoint: str | Path) -> bool:
    """True when ``checkpoint`` holds a readable ``trainer_state.json`` and the model weights."""
    try:
        json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any((Path(checkpoint) / name).is_file() for name in WEIGHTS_FILES)


def checkpoint_to_resume(output_dir: str | Path, resume: bool) -> str | None:
    """The latest complete ``checkpoint-N`` in ``output_dir`` when ``resume`` (None if there is none); incomplete
    ones (a partial copy) are skipped with a warning naming them. A folder holding checkpoints without ``resume``,
    or a finished run (its model or metrics.json, no checkpoint), is a ValueError: no run is overwritten."""
    folder = Path(output_dir)
    checkpoints = sort_checkpoints(str(folder)) if folder.is_dir() else []
    if checkpoints and not resume:
        raise ValueError(
            f"output_dir: {str(folder)!r} holds checkpoints; set training.resume=true or give output_dir=NEW_FOLDER"
        )
    if not checkpoints and ((folder / "config.json").is_file() or (folder / METRICS_FILE).is_file()):
        raise ValueError(
            f"output_dir: {str(folder)!r} holds a finished run, which is never overwritten; give output_dir=NEW_FOLDER"
        )
    for checkpoint in (path for path in checkpoints if not is_complete(path)):
        warnings.warn(f"output_dir: skipping the incomplete checkpoint {checkpoint!r}", stacklevel=2)
    complete = [path for path in checkpoints if is_complete(path)]
    if checkpoints and not complete:
        raise ValueError(
            f"output_dir: {str(folder)!r} holds only incomplete checkpoints; remove them or choose another folder"
        )
    if not complete:
        return None
    lacking = [part for part in ("optimizer", "scheduler") if not list(Path(complete[-1]).glob(f"{part}.*"))]
    if lacking:  # the Trainer would restart them silently
        raise ValueError(
            f"training.resume: {complete[-1]!r} holds no {' and no '.join(lacking)} state (saved with "
            "training.save_only_model?): a resumed run would restart them; start anew in another output_dir"
        )
    shutil.rmtree(folder / STAGING_DIR, ignore_errors=True)  # what a killed run left half-written
    return complete[-1]


def remove_checkpoints(*folders: str | Path) -> None:
    """Delete the ``checkpoint-N`` folders directly inside each of ``folders`` and their staging folder (in the main
    process only)."""
    for folder in folders if is_main_process() else ():
        for checkpoint in sort_checkpoints(str(folder)):
            shutil.rmtree(checkpoint)
        shutil.rmtree(Path(folder) / STAGING_DIR, ignore_errors=True)


def drop_weights(root: str | Path) -> int:
    """Delete the saved model weights of every finished run under ``root`` (at any depth; not inside ``checkpoint-N``
    or staging folders), keeping everything else: the runs stay refused as new output_dirs. Returns the bytes freed."""
    freed = 0
    weights = [
        path for pattern in ("model*.safetensors", "pytorch_model*.bin") for path in sorted(Path(root).rglob(pattern))
    ]
    for path in weights if is_main_process() else ():
        inside = path.relative_to(root).parts[:-1]
        if path.is_file() and not any(
            part.startswith(f"{PREFIX_CHECKPOINT_DIR}-") or part == STAGING_DIR for part in inside
        ):
            freed += path.stat().st_size
            path.unlink()
    return freed


@dataclass
class Result:
    """What a run produced: its folder, ``metrics`` (as in metrics.json), best checkpoint, log history."""

    output_dir: Path
    metrics: dict[str, Any]
    best_checkpoint: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def _repr_html_(self) -> str:
        numbers = {key: value for key, value in self.metrics.items() if is_number(value)}
        rows = "".join(f"<tr><td>{html.escape(key)}</td><td>{value:.4g}</td></tr>" for key, value in numbers.items())
        where = f"{html.escape(str(self.output_dir))}<br>best checkpoint: {html.escape(str(self.best_checkpoint))}"
        return f"<b>Result</b> {where}<table>{rows}</table>"


def is_main_process() -> bool:
    """False in a non-zero rank of a ``torchrun`` / ``accelerate launch`` job (env ``RANK``), where no trainer can
    say."""
    return int(os.environ.get("RANK", "0")) == 0


def count_parameters(model: nn.Module) -> dict[str, int]:
    """Total and trainable parameter counts (``PreTrainedModel.num_parameters``, for a fusion of two encoders too)."""
    return {"total": PreTrainedModel.num_parameters(model), "trainable": PreTrainedModel.num_parameters(model, True)}


def write_result(
    output_dir: str | Path, metrics: Mapping[str, Any], best_checkpoint: str | None, history: list
) -> Result:
    """Write ``metrics`` (with ``history``) to ``output_dir/metrics.json`` (main process only); return the Result
    (its metrics :func:`~workbench.metrics_file.redact`-ed as the file's: a notebook shows them)."""
    if is_main_process():
        write_json(Path(output_dir) / METRICS_FILE, {**metrics, "history": history})
    return Result(Path(output_dir), redact(dict(metrics)), best_checkpoint, history)
