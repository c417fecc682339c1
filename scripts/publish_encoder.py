"""Publish a pretrain_mlm run folder as a small self-contained masked-LM checkpoint (bf16 safetensors
plus its tokenizer), loadable by ``AutoModelForMaskedLM`` / ``AutoTokenizer.from_pretrained``.

    python scripts/publish_encoder.py outputs/pretrain/workbench-zh-mini models/workbench-zh-mini

The model card (README.md in the target folder) is written by hand from the run's metrics.json and
the downstream evidence (docs/results.md); an existing README.md in the target is kept.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

KEEP = {"README.md"}


def publish(run_dir: Path, target: Path) -> int:
    """Write the bf16 model and tokenizer of ``run_dir`` into ``target``; returns the folder's size in bytes."""
    model = AutoModelForMaskedLM.from_pretrained(str(run_dir), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(run_dir))
    target.mkdir(parents=True, exist_ok=True)
    for path in target.iterdir():
        if path.name not in KEEP:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    model.to(torch.bfloat16).save_pretrained(str(target), safe_serialization=True)
    tokenizer.save_pretrained(str(target))
    return sum(path.stat().st_size for path in target.rglob("*") if path.is_file())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a pretrain_mlm output_dir")
    parser.add_argument("target", type=Path, help="the folder to publish into, e.g. models/workbench-zh-mini")
    arguments = parser.parse_args()
    if not (arguments.run_dir / "config.json").is_file():
        parser.error(
            f"run_dir: no pretrain_mlm run folder at {str(arguments.run_dir)!r} (train it first: "
            "python -m workbench.train params/pretrain/workbench-zh-mini.yaml)"
        )
    size = publish(arguments.run_dir, arguments.target)
    print(f"{arguments.target}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
