"""Downstream evidence for pre-trained encoders: fine-tune each on QBQTC (its public dev.json cut into
train / validation / test, stratified and seeded) with label smoothing, over several seeds, and report
mean ± std of test macro-F1 and accuracy (the epoch is kept on validation macro-F1; the test split is
never used for any choice).

    python scripts/encoder_evidence.py --qbqtc $WORKBENCH_DATA/qbqtc/dev.json \\
        --encoder workbench-zh-mini=models/workbench-zh-mini \\
        --encoder scratch=scratch --scratch-vocab $WORKBENCH_DATA/vocab/bert-base-chinese-vocab.txt \\
        --seeds 0 1 2 --output-dir outputs/encoder-evidence --jobs 3

``scratch`` is the same architecture as models/workbench-zh-mini (6 layers, hidden 256, 4 heads)
randomly initialised. Writes runs.csv and summary.md into the output folder.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.stats import formatted, summarize

UNPUBLISHED = (Path(__file__).resolve().parents[1] / "models" / "workbench-zh-mini").resolve()
SCRATCH = {"tiny": {"num_layers": 6, "hidden_size": 256, "num_heads": 4}}
METRICS = ("macro_f1", "accuracy")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Fine-tune one (encoder, seed) and return its test scores."""
    from workbench.train import finetune

    result = finetune(job["config"])
    metrics = result.metrics
    return {
        "encoder": job["encoder"],
        "seed": job["seed"],
        "macro_f1": metrics["macro_f1"],
        "accuracy": metrics["accuracy"],
        "best_validation_macro_f1": metrics["best_validation_macro_f1"],
        "train_runtime": metrics["train_runtime"],
    }


def jobs(arguments: argparse.Namespace) -> list[dict[str, Any]]:
    planned = []
    for spec in arguments.encoder:
        name, _, path = spec.partition("=")
        model = (
            {**SCRATCH, "vocab_file": arguments.scratch_vocab} if path == "scratch" else {"model_name_or_path": path}
        )
        for seed in arguments.seeds:
            planned.append(
                {
                    "encoder": name,
                    "seed": seed,
                    "config": {
                        "task": "finetune",
                        "output_dir": str(arguments.output_dir / f"{name}-seed{seed}"),
                        "data": {
                            "source": "qbqtc",
                            "path": arguments.qbqtc,
                            "seed": 0,
                            "max_length": arguments.max_length,
                            "max_train_samples": arguments.train_samples,
                            "max_eval_samples": arguments.eval_samples,
                        },
                        "model": model,
                        "loss": {"name": "ls", "params": {"epsilon": 0.1}},
                        "training": {
                            "num_train_epochs": arguments.epochs,
                            "per_device_train_batch_size": arguments.batch_size,
                            "per_device_eval_batch_size": 256,
                            "learning_rate": arguments.lr,
                            "seed": seed,
                            "precision": arguments.precision,
                            "quiet": True,
                        },
                    },
                }
            )
    return planned


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qbqtc", required=True, help="QBQTC dev.json")
    parser.add_argument("--encoder", action="append", required=True, metavar="NAME=PATH|scratch")
    parser.add_argument("--scratch-vocab", help="vocabulary of the from-scratch baseline")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train-samples", type=int, default=None, help="keep the first N training pairs")
    parser.add_argument(
        "--eval-samples", type=int, default=None, help="keep the first N validation and test pairs (micro runs)"
    )
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--jobs", type=int, default=1, help="fine-tunes running at once (one GPU can take several)")
    parser.add_argument("--output-dir", type=Path, default=Path("outputs/encoder-evidence"))
    arguments = parser.parse_args()
    for spec in arguments.encoder:
        name, _, path = spec.partition("=")
        if not name or not path:
            parser.error(f"--encoder {spec!r}: expected NAME=PATH or NAME=scratch")
        if (
            path != "scratch"
            and not Path(path).is_dir()
            and (Path(path).resolve() == UNPUBLISHED or path.startswith((".", "/")))
        ):
            unpublished = (
                " (the workbench's own encoder is not published: README, Models)"
                if Path(path).resolve() == UNPUBLISHED
                else ""
            )
            parser.error(f"--encoder {name}: no checkpoint folder {path!r}{unpublished}")
    planned = jobs(arguments)
    if arguments.jobs > 1:
        with concurrent.futures.ProcessPoolExecutor(
            arguments.jobs, mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            rows = list(pool.map(run_one, planned))
    else:
        rows = [run_one(job) for job in planned]
    runs = pd.DataFrame(rows)
    arguments.output_dir.mkdir(parents=True, exist_ok=True)
    runs.to_csv(arguments.output_dir / "runs.csv", index=False)
    summary = formatted(summarize(runs, "encoder", METRICS), METRICS, digits=4)
    shown = summary[["encoder", *METRICS, "n"]].astype(str)
    table = "\n".join(
        [
            "| " + " | ".join(shown.columns) + " |",
            "|" + "---|" * len(shown.columns),
            *("| " + " | ".join(row) + " |" for row in shown.itertuples(index=False)),
        ]
    )
    (arguments.output_dir / "summary.md").write_text(table + "\n", encoding="utf-8")
    print(table)


if __name__ == "__main__":
    main()
