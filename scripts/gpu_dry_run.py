"""Dry-run the ``gpu`` parameter sets on the CPU at micro scale, before spending GPU minutes on them.

    python scripts/gpu_dry_run.py --encoder /tmp/micro-encoder --work-dir /tmp/gpu-dry-run [--data-dir DATA_ROOT]

writes a micro copy of every ``params/gpu/*.yaml`` into ``WORK_DIR/params/gpu`` and runs all five notebooks
through the runner into ``WORK_DIR/outputs``. The micro copy keeps every code path of the real set (its loss
grids, masking strategies, objectives, lexicons, the published-encoder loading) and shrinks its size: one seed,
one epoch, batch 16, fp32 (bf16 needs CUDA), a few hundred rows of each real data file of the data root (default
``$WORKBENCH_DATA``; copied into a micro data root, ``WORK_DIR/data``, which the run reads as its
``$WORKBENCH_DATA``; lexicons and the vocabulary linked whole), and the encoder of ``ENCODER`` as the runner's
``--encoder`` (in place of models/workbench-zh-mini, which is not published):
any transformers checkpoint folder, a classifier's, a masked LM's or a pretrain_mlm run's, e.g. one made by
``python -m workbench.train params/pretrain/workbench-zh-mini.yaml data.max_train_samples=600
model.tiny.num_layers=2 model.tiny.hidden_size=64 training.num_train_epochs=1 training.precision=fp32 output_dir=...``.
Its head is dropped (:func:`stand_in_encoder`): each notebook puts its own head on the encoder, whatever number of
labels the checkpoint was trained for. It exits 1 when a notebook fails, 2 with one ``error:`` line for bad arguments.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from transformers import AutoModel, AutoTokenizer

from workbench.config import read_yaml_file
from workbench.data_root import DATA_ROOT_ENV, data_root
from workbench.runs import run

ROOT = Path(__file__).resolve().parents[1]
TRAINING_SECTIONS = ("training", "pretrain_training", "finetune_training")
MICRO_TRAINING = {"num_train_epochs": 1, "per_device_train_batch_size": 16, "precision": "fp32"}
MICRO_ROWS = 400  # rows kept of each real data file
MICRO_CORPUS_DOCUMENTS = 60
REAL_DATA = ("qbqtc", "chnsenticorp", "tnews", "lcqmc", "corpus")  # shrunk; lexicons and the vocab stay whole


def stand_in_encoder(checkpoint: Path, work_dir: Path) -> Path:
    """The encoder of ``checkpoint`` without its head, with its tokenizer, saved in ``work_dir/encoder``: a classifier
    head sized for another task would not load into the notebooks' classifiers (AutoModel drops any head)."""
    target = work_dir / "encoder"
    AutoModel.from_pretrained(str(checkpoint)).save_pretrained(str(target))
    AutoTokenizer.from_pretrained(str(checkpoint)).save_pretrained(str(target))
    return target


def micro_copy(source: Path, target_dir: Path, data_dir: Path) -> Path:
    """A copy of the first ``MICRO_ROWS`` rows (``MICRO_CORPUS_DOCUMENTS`` documents of a .gz corpus) of
    ``source`` in ``target_dir``, made once."""
    target = target_dir / source.relative_to(data_dir)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.suffix == ".gz":
            with gzip.open(source, "rt", encoding="utf-8") as lines, gzip.open(target, "wt", encoding="utf-8") as out:
                out.writelines(itertools.islice(lines, MICRO_CORPUS_DOCUMENTS))
        else:
            with source.open(encoding="utf-8") as lines, target.open("w", encoding="utf-8") as out:
                out.writelines(itertools.islice(lines, MICRO_ROWS))
    return target


def micro_root(data_dir: Path, work_dir: Path) -> Path:
    """``WORK_DIR/data``: a micro copy of each file of the data root ``data_dir`` under ``REAL_DATA``, a link to each
    other file (lexicons, vocabulary)."""
    target_root = work_dir / "data"
    for path in sorted(data_dir.rglob("*")):
        relative = path.relative_to(data_dir)
        if not path.is_file() or relative.parts[0].startswith("."):
            continue
        if relative.parts[0] in REAL_DATA:
            micro_copy(path, target_root, data_dir)
        else:
            (target_root / relative).parent.mkdir(parents=True, exist_ok=True)
            (target_root / relative).symlink_to(path)
    return target_root


def micro_parameters(parameters: dict[str, Any]) -> dict[str, Any]:
    """The micro version of one notebook's gpu parameters (see the module docstring); the encoder is the runner's
    ``--encoder``."""
    micro = dict(parameters)
    micro["seeds"] = [0]
    for section in TRAINING_SECTIONS:
        if section in micro:
            micro[section] = {**micro[section], **MICRO_TRAINING}
    if "heldout_texts" in micro:  # notebook 03: its pre-training corpus is the data section
        micro["data"] = {**micro["data"], "max_train_samples": 30}
    for section, key, value in (
        ("finetune_data", "max_train_samples", 200),
        ("finetune_data", "max_eval_samples", 100),
        ("pretrain_training", "time_budget_s", 10),
    ):
        if section in micro:
            micro[section] = {**micro[section], key: value}
    for key, value in (("heldout_texts", 20), ("illustration_draws", 50)):
        if key in micro:
            micro[key] = value
    if "encoders" in micro:  # the from-scratch twin at its smallest
        micro["encoders"] = {
            name: {**spec, "tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}} if "tiny" in spec else spec
            for name, spec in micro["encoders"].items()
        }
    return micro


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--encoder", type=Path, required=True, help="a checkpoint folder standing in for models/workbench-zh-mini"
    )
    parser.add_argument("--data-dir", type=Path, default=data_root(), help="the data root (default: $WORKBENCH_DATA)")
    parser.add_argument(
        "--work-dir", type=Path, required=True, help="a new folder for the micro params, data and outputs"
    )
    arguments = parser.parse_args()
    encoder, data_dir, work_dir = (
        arguments.encoder.resolve(),
        arguments.data_dir.resolve(),
        arguments.work_dir.resolve(),
    )
    for name, folder in (("--encoder", encoder), ("--data-dir", data_dir)):
        if not folder.is_dir():
            parser.error(f"{name}: must be an existing folder, got {folder}")
    if work_dir.exists():
        parser.error(f"--work-dir: must not exist yet (nothing is overwritten), got {work_dir}")
    params = work_dir / "params" / "gpu"
    params.mkdir(parents=True)
    try:
        encoder = stand_in_encoder(encoder, work_dir)
    except (OSError, ValueError) as error:
        parser.error(
            f"--encoder: not a transformers checkpoint folder ({type(error).__name__}: {str(error).splitlines()[0]})"
        )
    os.environ[DATA_ROOT_ENV] = str(micro_root(data_dir, work_dir))  # the kernels read the micro data root
    for file in sorted((ROOT / "params" / "gpu").glob("*.yaml")):
        micro = micro_parameters(read_yaml_file(file, "params file"))
        (params / file.name).write_text(yaml.safe_dump(micro, allow_unicode=True, sort_keys=False), encoding="utf-8")
    report = run(
        params_set="gpu",
        notebooks_dir=ROOT / "notebooks",
        params_dir=work_dir / "params",
        outputs_dir=work_dir / "outputs",
        run_id="dry-run",
        encoder=str(encoder),
    )
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
