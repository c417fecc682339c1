"""A run's folder: claimed by :func:`claim_output_dir` (it then holds ``run_config.yaml``, the resolved config,
locked while the run lives), its ``checkpoint-N`` folders (written atomically by ``LossTrainer``; complete with
their trainer state and weights; only direct children are resumed from or removed) and :func:`drop_weights`."""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import yaml
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint, sort_checkpoints

from workbench.config import Config
from workbench.train.result import is_main_process
from workbench.yaml_files import read_yaml_file

RUN_CONFIG = "run_config.yaml"
STAGING_DIR = ".staging"
WEIGHTS_FILES = ("model.safetensors", "pytorch_model.bin")
RESUMABLE_KEYS = (
    *("output_dir", "data.num_proc", "data.cache_dir", "training.resume", "training.num_train_epochs", "training.max_steps"),
    *("training.time_budget_s", "training.quiet", "training.threads", "training.keep_checkpoints", "training.logging_steps"),
    *("training.save_total_limit", "training.report_to"),
)
"""Keys a resumed run may change (how long it trains, and what neither its data nor its updates depend on)."""
_LOCKS: dict[Path, Any] = {}


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``."""
    if not isinstance(tree, dict) or not tree:
        return {prefix: tree}
    return {key: value for name, item in tree.items() for key, value in _flat(item, f"{prefix}.{name}".lstrip(".")).items()}


def claim_output_dir(config: Config, *subfolders: str) -> contextlib.ExitStack:
    """Make ``config.output_dir`` this run's folder before any data is loaded, or raise ValueError naming it.

    Refused: a file; a folder inside another run's folder; one holding files of no run (a user's
    predictions.csv); one (or its ``subfolders``) holding a run without ``training.resume``
    (:func:`checkpoint_to_resume`); with it, one whose run had another config outside :data:`RESUMABLE_KEYS`;
    one that cannot be written; one in use by a live run (its lock; a dead run's the system releases).
    Writes the resolved config to ``run_config.yaml`` and holds its lock until the returned stack closes
    (``with claim_output_dir(config):``), :func:`~workbench.train.result.write_result` or the process ends.
    """
    folder = Path(config.output_dir).absolute()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output_dir: {str(folder)!r} is a file; choose a folder")
    outer = next((parent for parent in folder.parents if (parent / RUN_CONFIG).is_file()), None)
    if outer is not None:
        raise ValueError(f"output_dir: {str(folder)!r} is inside the run folder {str(outer)!r}; choose a folder outside it")
    found = sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []
    if found and RUN_CONFIG not in found:
        raise ValueError(
            f"output_dir: {str(folder)!r} holds files of no workbench run ({found[0]!r}); choose a new or empty folder"
        )
    for subfolder in ("", *subfolders) if not config.training.resume else ():
        checkpoint_to_resume(folder / subfolder, resume=False)
    before = _flat(read_yaml_file(folder / RUN_CONFIG, RUN_CONFIG)) if config.training.resume and found else {}
    now = _flat(config.to_dict())
    changed = [key for key in sorted(before.keys() | now.keys()) if key not in RESUMABLE_KEYS and before.get(key) != now.get(key)]
    if before and changed:
        raise ValueError(f"training.resume: the run in {str(folder)!r} had another {', '.join(changed)} (see its {RUN_CONFIG})")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = _LOCKS.get(folder) or open(folder / RUN_CONFIG, "a+", encoding="utf-8")  # noqa: SIM115 - held open
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise ValueError(f"output_dir: {str(folder)!r} is in use by another run; wait for it or choose another folder") from None
    except OSError as error:
        raise ValueError(f"output_dir: cannot write into {str(folder)!r} ({error.strerror})") from None
    _LOCKS[folder] = lock
    lock.truncate(0)
    lock.write(yaml.safe_dump(config.to_dict(), sort_keys=False, allow_unicode=True))
    lock.flush()
    stack = contextlib.ExitStack()
    stack.callback(release_output_dir, folder)
    return stack


def release_output_dir(output_dir: str | Path) -> None:
    """Release the lock :func:`claim_output_dir` holds on ``output_dir`` (nothing when none is held)."""
    lock = _LOCKS.pop(Path(output_dir).absolute(), None)
    if lock is not None:
        lock.close()


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
    if folder.is_dir() and get_last_checkpoint(folder) and not resume:
        raise ValueError(f"output_dir: {str(folder)!r} holds checkpoints; set training.resume=true or choose another folder")
    checkpoints = sort_checkpoints(str(folder)) if folder.is_dir() else []
    if not checkpoints and ((folder / "config.json").is_file() or (folder / "metrics.json").is_file()):
        raise ValueError(f"output_dir: {str(folder)!r} holds a finished run (its checkpoints removed); choose another folder")
    for checkpoint in (path for path in checkpoints if not is_complete(path)):
        warnings.warn(f"output_dir: skipping the incomplete checkpoint {checkpoint!r}", stacklevel=2)
    complete = [path for path in checkpoints if is_complete(path)]
    if checkpoints and not complete:
        raise ValueError(f"output_dir: {str(folder)!r} holds only incomplete checkpoints; remove them or choose another folder")
    if not complete:
        return None
    shutil.rmtree(folder / STAGING_DIR, ignore_errors=True)  # what a killed run left half-written
    return complete[-1]


def remove_checkpoints(*folders: str | Path) -> None:
    """Delete the ``checkpoint-N`` folders directly inside each of ``folders`` and their staging folder (main
    process only): once a run has finished its best model is saved in its folder. Nothing deeper is touched."""
    for folder in folders if is_main_process() else ():
        for checkpoint in sort_checkpoints(str(folder)):
            shutil.rmtree(checkpoint)
        shutil.rmtree(Path(folder) / STAGING_DIR, ignore_errors=True)


def drop_weights(root: str | Path) -> int:
    """Delete the saved model weights of every finished run under ``root`` (at any depth), keeping everything
    else (metrics, predictions, configs, tokenizer; the weights inside ``checkpoint-N`` and staging folders of
    an interrupted run); the runs stay refused as new output_dirs. Main process only; returns the bytes freed."""
    freed = 0
    weights = [path for pattern in ("model*.safetensors", "pytorch_model*.bin") for path in sorted(Path(root).rglob(pattern))]
    for path in weights if is_main_process() else ():
        inside = path.relative_to(root).parts[:-1]
        if path.is_file() and not any(part.startswith(f"{PREFIX_CHECKPOINT_DIR}-") or part == STAGING_DIR for part in inside):
            freed += path.stat().st_size
            path.unlink()
    return freed
