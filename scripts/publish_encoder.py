"""Publish a pretrain_mlm run folder as a small self-contained masked-LM checkpoint: float16 safetensors in shards of
at most 15 MiB, its tokenizer and a model card (README.md, written from the run's metrics.json), at most 25 MB in
all, loadable by ``AutoModelForMaskedLM`` / ``AutoTokenizer.from_pretrained``.

    python scripts/publish_encoder.py outputs/pretrain/workbench-zh-mini models/workbench-zh-mini

The target must be a new or empty folder (``--replace`` replaces what a folder holds, and says so). The card names
the corpus, the steps and tokens trained, the held-out perplexity and the command (``--command``: the one the run
was trained with; default the recipe's); the downstream evidence is recorded in docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

SHARD_BYTES = 15 * 2**20
SIZE_LIMIT_BYTES = 25 * 10**6
RECIPE = "python -m workbench.train params/pretrain/workbench-zh-mini.yaml"


def folder_size(folder: Path) -> int:
    """Bytes of the files under ``folder``."""
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def data_file(path: str) -> str:
    """A corpus path as the data root names it (``corpus/xwlb_news.txt.gz``): its folder and file name."""
    return "/".join(Path(path).parts[-2:])


def model_card(metrics: dict[str, Any], command: str, hardware: str | None = None) -> str:
    """The model card (markdown) of a pretrain_mlm run from its ``metrics``: architecture, corpus, steps, tokens,
    held-out perplexity, the ``command`` and, when given, the ``hardware``."""
    parameters = metrics["parameters"]
    data, model, training = parameters["data"], parameters["model"], parameters["training"]
    tiny, last = model["tiny"], metrics["epochs"][-1]
    paths = data["path"] if isinstance(data["path"], list) else [data["path"]]
    corpus = ", ".join(f"`{data_file(path)}`" for path in paths) if data["path"] else f"`{data['source']}`"
    steps, epochs = last["step"], last["epoch"]
    tokens = round(epochs * metrics["tokens_per_epoch"])
    budget, planned = training.get("time_budget_s"), training["num_train_epochs"]
    stopped = (
        f", stopped by its time budget ({budget:g} s) after {epochs:g} of {planned:g} planned epochs"
        if budget is not None and epochs < planned
        else ""
    )
    lines = [
        "# workbench-zh-mini",
        "",
        "The Imbalance Workbench's own small Chinese encoder: a BERT of "
        f"{tiny['num_layers']} layers, hidden size {tiny['hidden_size']}, {tiny['num_heads']} attention heads "
        f"({metrics['num_parameters']['total']:,} parameters) with the 21,128-token Chinese BERT vocabulary, "
        f"pre-trained from scratch by the workbench's `pretrain_mlm` ({metrics['masking']} masking, "
        f"{metrics['objective']} MLM objective). Float16 safetensors; load it with "
        "`AutoModelForMaskedLM.from_pretrained` and `AutoTokenizer.from_pretrained`, or name it as "
        "`model.model_name_or_path` of a workbench config.",
        "",
        "| | |",
        "|---|---|",
        f"| corpus | {corpus}: {metrics['corpus_characters']:,} characters, {metrics['blocks']['train']:,} training "
        f"blocks of up to {data['max_length']} tokens ({metrics['tokens_per_epoch']:,} text tokens an epoch) |",
        f"| training | {steps:,} steps of {training['per_device_train_batch_size']} blocks, {epochs:g} epochs, "
        f"{tokens:,} tokens{stopped}; learning rate {training['learning_rate']:g}, precision "
        f"{training['precision']}, {metrics['train_runtime']:.0f} s{f' on {hardware}' if hardware else ''} |",
        f"| held-out perplexity | {metrics['perplexity']:.2f} (loss {metrics['eval_loss']:.4f}) on "
        f"{metrics['blocks']['eval']:,} held-out blocks ({data['eval_fraction']:g} of the corpus), "
        f"{last['eval_masked_tokens']:,} whole-word-masked tokens drawn once |",
        "",
        "Trained with",
        "",
        f"    {command}",
        "",
        "Downstream evidence (QBQTC, against the same architecture from scratch): docs/results.md.",
        "",
        "## Licence",
        "",
        "The workbench's code is under the MIT licence. These weights were learnt from the CCTV news transcripts "
        "(CCTV's copyright, offered for study use only) and a Chinese Wikipedia (CC BY-SA) and CLUECorpusSmall "
        "sample: use them for research and teaching.",
        "",
    ]
    return "\n".join(lines)


def publish(
    run_dir: Path, target: Path, command: str = RECIPE, hardware: str | None = None, replace: bool = False
) -> int:
    """Write the float16 model (shards of at most :data:`SHARD_BYTES`), the tokenizer and the model card of
    ``run_dir`` into ``target``; returns the folder's size in bytes. ValueError for a target that holds files
    (unless ``replace``) and for a folder over :data:`SIZE_LIMIT_BYTES`."""
    metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    if target.exists() and any(target.iterdir()) and not replace:
        raise ValueError(f"target: {str(target)!r} already holds files (give --replace to replace them)")
    model = AutoModelForMaskedLM.from_pretrained(str(run_dir), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(run_dir))
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    model.to(torch.float16).save_pretrained(str(target), safe_serialization=True, max_shard_size=SHARD_BYTES)
    tokenizer.save_pretrained(str(target))
    (target / "README.md").write_text(model_card(metrics, command, hardware), encoding="utf-8")
    size = folder_size(target)
    if size > SIZE_LIMIT_BYTES:
        raise ValueError(f"target: {str(target)!r} holds {size:,} bytes, over the limit of {SIZE_LIMIT_BYTES:,}")
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, help="a pretrain_mlm output_dir")
    parser.add_argument("target", type=Path, help="the folder to publish into, e.g. models/workbench-zh-mini")
    parser.add_argument("--command", default=RECIPE, help="the command the run was trained with (for the card)")
    parser.add_argument("--hardware", help="where it was trained, e.g. 'NVIDIA H100 80GB HBM3' (for the card)")
    parser.add_argument("--replace", action="store_true", help="replace what the target folder holds")
    arguments = parser.parse_args()
    if not (arguments.run_dir / "config.json").is_file() or not (arguments.run_dir / "metrics.json").is_file():
        parser.error(
            f"run_dir: no finished pretrain_mlm run folder at {str(arguments.run_dir)!r} (train it first: {RECIPE})"
        )
    replaced = sorted(path.name for path in arguments.target.iterdir()) if arguments.target.is_dir() else []
    try:
        size = publish(arguments.run_dir, arguments.target, arguments.command, arguments.hardware, arguments.replace)
    except ValueError as error:
        parser.error(str(error))
    if replaced:
        print(f"replaced {len(replaced)} files of {arguments.target}: {', '.join(replaced)}")
    print(f"{arguments.target}: {size / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
