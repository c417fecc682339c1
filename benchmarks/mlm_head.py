"""Issue 21, the MLM vocabulary head at the masked positions only: before and after in one run.

    python -m benchmarks mlm_head steps [--recipes six default tiny] [--threads 2] [--repeats 5] [--steps 3]
    python -m benchmarks mlm_head cli [--stories 3000] [--data-dir $WORKBENCH_DATA]

``steps`` times one pre-training step (forward, loss, backward, AdamW step) of a BertForMaskedLM on the same
whole-word-masked batches (``--batch-size`` 32 x ``--max-length`` 128 tokens packed from the news corpus, or from
generated sentences when it is missing):

* before: the full head at every position, the loss over the labelled ones, written here with plain transformers
  (``BertForMaskedLM(...)(**inputs, labels=labels).loss``: what every workbench MLM path computed before issue 21);
* after: the workbench's path, :func:`workbench.models.labelled_logits` (the head on the masked rows only) and the
  ``mlm`` loss; then HC (token, word; Cilin when found) and SR (argmax, expected, sentence) on the same path.

Recipes (layers / hidden / heads / vocabulary): ``six`` 6 / 256 / 4 / 21,128 (the workbench-zh-mini recipe, target
after >= 1.6x faster than before), ``default`` 2 / 64 / 2 / the shipped 4,500 (the default run's model, target >= 2x),
``tiny`` 1 / 64 / 2 / 21,128 (the CLI check's model). HC and SR: at most 1.3x the after-plain step. Objectives are
interleaved round by round after a warm-up round; the table gives the median over ``--repeats`` of the time per step,
wall clock and process CPU time.

``cli`` runs ``python -m workbench.train params/pretrain/workbench-zh-mini.yaml`` on the first ``--stories`` news
stories, 1 epoch, a 1-layer hidden-64 model, the 21,128-token vocabulary, fp32, in a fresh cache and output folder
(the project's CLI, as a user runs it) and reports the wall time with the run's preprocess_seconds, train_runtime and
training tokens per second.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import datasets
import torch

from benchmarks.pretrain import load_documents
from workbench.data_root import data_root
from workbench.losses import CorrectionCounts, build_loss
from workbench.masking import JiebaSegmenter, WholeWordMaskCollator, pack_documents
from workbench.models import build_masked_lm, labelled_logits
from workbench.synonyms import SynonymTable, synonym_matcher
from workbench.vocab import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
RECIPE_FILE = ROOT / "params" / "pretrain" / "workbench-zh-mini.yaml"
RECIPES = {  # layers, hidden, heads, vocabulary (full: the 21,128-token file; None: the shipped one)
    "six": (6, 256, 4, "full"),
    "default": (2, 64, 2, None),
    "tiny": (1, 64, 2, "full"),
}
TARGETS = {"six": 1.6, "default": 2.0}
OBJECTIVES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("HC token (paper)", "mlm_hc", {"level": "token"}),
    ("HC word", "mlm_hc", {"level": "word"}),
    ("SR token argmax (paper)", "mlm_sr", {}),
    ("SR token expected", "mlm_sr", {"prediction": "expected"}),
    ("SR sentence", "mlm_sr", {"level": "sentence"}),
)
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def default_data_dir() -> Path:
    """The data root (``$WORKBENCH_DATA``; docs/data.md)."""
    return data_root()


def make_batches(tokenizer: Any, documents: list[str], batch_size: int, steps: int, max_length: int) -> list[dict]:
    """``steps`` whole-word-masked batches of ``batch_size`` packed blocks (word ids kept for HC)."""
    blocks = pack_documents(tokenizer, documents, JiebaSegmenter(), max_length=max_length)
    if len(blocks) < batch_size * steps:
        raise SystemExit(
            f"--stories: {len(blocks)} blocks cannot fill {steps} batches of {batch_size}; pass more stories"
        )
    collator = WholeWordMaskCollator(tokenizer, seed=0, return_word_ids=True)
    return [collator(blocks[i * batch_size : (i + 1) * batch_size]) for i in range(steps)]


def before_step(model: torch.nn.Module, batch: dict, loss: Any = None, stats: Any = None) -> torch.Tensor:
    """Plain transformers: the full head at every position, cross-entropy over the labelled ones."""
    return model(**{key: batch[key] for key in MODEL_INPUTS}, labels=batch["labels"]).loss


def after_step(model: torch.nn.Module, batch: dict, loss: Any, stats: Any = None) -> torch.Tensor:
    """The workbench: the head at the masked rows only, then the objective."""
    inputs = {key: batch[key] for key in MODEL_INPUTS}
    logits, _ = labelled_logits(model, batch["labels"], **inputs)
    context = {"stats": stats} if stats is not None else {}
    return loss(logits, batch["labels"], model=model, word_ids=batch["word_ids"], **inputs, **context)


def time_recipe(name: str, arguments: argparse.Namespace, documents: list[str], data_dir: Path) -> dict[str, Any]:
    layers, hidden, heads, vocabulary = RECIPES[name]
    vocab_file = data_dir / "vocab" / "bert-base-chinese-vocab.txt"
    if vocabulary == "full" and not vocab_file.is_file():
        raise SystemExit(f"--data-dir: {vocab_file} is missing (recipe {name} needs the 21,128-token vocabulary)")
    tokenizer = load_tokenizer(vocab_file=vocab_file if vocabulary == "full" else None)
    batches = make_batches(tokenizer, documents, arguments.batch_size, arguments.steps, arguments.max_length)
    lexicon = data_dir / "cilin" / "cilin_ex.txt"
    table = SynonymTable.from_path(lexicon if lexicon.is_file() else None)
    torch.manual_seed(0)
    tiny = {"vocab_size": len(tokenizer), "num_layers": layers, "hidden_size": hidden, "num_heads": heads}
    initial = build_masked_lm(tiny={**tiny, "max_position": max(128, arguments.max_length)}).train()
    runs = {
        "before: full head (plain transformers)": (before_step, None),
        "after: masked rows (workbench)": (after_step, build_loss("mlm")),
    }
    for label, loss_name, params in OBJECTIVES:
        extra = {"matcher": synonym_matcher(tokenizer, table)} if loss_name == "mlm_hc" else {}
        runs[f"after, {label}"] = (after_step, build_loss(loss_name, **params, **extra))
    states = {}
    for label in runs:
        model = copy.deepcopy(initial)
        states[label] = {
            "model": model,
            "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-4),
            "wall": [],
            "cpu": [],
        }
    for round_ in range(arguments.repeats + 1):  # round 0 warms up
        for label, (step, loss) in runs.items():
            state = states[label]
            stats = CorrectionCounts() if "HC" in label else None
            wall, cpu = time.perf_counter(), time.process_time()
            for batch in batches:
                step(state["model"], batch, loss, stats).backward()
                state["optimizer"].step()
                state["optimizer"].zero_grad(set_to_none=True)
            if round_:
                state["wall"].append((time.perf_counter() - wall) / len(batches))
                state["cpu"].append((time.process_time() - cpu) / len(batches))
    rows = {
        label: {"ms": 1000 * statistics.median(s["wall"]), "cpu_ms": 1000 * statistics.median(s["cpu"])}
        for label, s in states.items()
    }
    masked = sum(int((batch["labels"] != -100).sum()) for batch in batches) / sum(
        batch["labels"].numel() for batch in batches
    )
    sizes = f"{layers} layers / hidden {hidden} / {heads} heads / vocabulary {len(tokenizer):,}"
    return {"recipe": name, "sizes": sizes, "masked_share": masked, "rows": rows}


def print_recipe(result: dict[str, Any], arguments: argparse.Namespace) -> None:
    rows = result["rows"]
    before, after = rows["before: full head (plain transformers)"], rows["after: masked rows (workbench)"]
    target = TARGETS.get(result["recipe"])
    print(
        f"\nrecipe {result['recipe']}: {result['sizes']}; batch {arguments.batch_size} x {arguments.max_length}, "
        f"{result['masked_share']:.1%} of positions masked; {torch.get_num_threads()} torch threads; "
        f"median of {arguments.repeats} interleaved rounds of {arguments.steps} steps"
    )
    print("\n| step | ms / step | CPU ms / step | speed-up vs before | time vs after plain | target |")
    print("|---|---:|---:|---:|---:|---|")
    for label, row in rows.items():
        speedup = before["ms"] / row["ms"]
        relative = row["ms"] / after["ms"]
        goal = (
            f">= {target}x faster"
            if target and label.startswith("after:")
            else ("<= 1.3x plain" if "," in label else "")
        )
        print(f"| {label} | {row['ms']:,.1f} | {row['cpu_ms']:,.1f} | {speedup:.2f}x | {relative:.2f}x | {goal} |")


def steps_main(arguments: argparse.Namespace) -> None:
    data_dir = Path(arguments.data_dir)
    torch.set_num_threads(arguments.threads)
    documents, source = load_documents(str(data_dir / "corpus" / "xwlb_news.txt.gz"), arguments.stories)
    print(f"corpus: {source}, {len(documents)} stories")
    results = [time_recipe(name, arguments, documents, data_dir) for name in arguments.recipes]
    for result in results:
        print_recipe(result, arguments)
    if arguments.output:
        Path(arguments.output).write_text(json.dumps(results, indent=1), encoding="utf-8")


def cli_main(arguments: argparse.Namespace) -> None:
    data_dir = Path(arguments.data_dir)
    corpus, vocab = data_dir / "corpus" / "xwlb_news.txt.gz", data_dir / "vocab" / "bert-base-chinese-vocab.txt"
    lexicon = data_dir / "cilin" / "cilin_ex.txt"
    for path in (corpus, vocab, lexicon):
        if not path.is_file():
            raise SystemExit(f"--data-dir: {path} is missing")
    with tempfile.TemporaryDirectory() as temporary:
        overrides = [
            f"output_dir={temporary}/run",
            f"data.path={corpus}",
            f"data.max_train_samples={arguments.stories}",
            f"data.cache_dir={temporary}/cache",
            f"model.vocab_file={vocab}",
            f"objective.lexicon={lexicon}",
            "model.tiny.num_layers=1",
            "model.tiny.hidden_size=64",
            "training.num_train_epochs=1",
            "training.precision=fp32",
            *([f"training.threads={arguments.threads}"] if arguments.threads else []),
        ]
        command = [sys.executable, "-m", "workbench.train", str(RECIPE_FILE), *overrides]
        print(" ".join(command))
        start = time.perf_counter()
        if subprocess.run(command, check=False, cwd=ROOT).returncode:
            raise SystemExit("the pre-training command failed (its error is above)")
        wall = time.perf_counter() - start
        metrics = json.loads((Path(temporary) / "run" / "metrics.json").read_text(encoding="utf-8"))
    tokens = metrics["tokens_per_epoch"]
    print("\n| run | seconds |\n|---|---:|")
    print(f"| wall time of the command | {wall:,.1f} |")
    print(f"| preprocessing (fresh cache) | {metrics['preprocess_seconds']:,.1f} |")
    print(f"| training (train_runtime) | {metrics['train_runtime']:,.1f} |")
    print(f"\n{arguments.stories:,} stories, {metrics['corpus_characters']:,} characters, {tokens:,} training tokens")
    perplexity = metrics["perplexity"] or float("nan")
    print(f"{tokens / metrics['train_runtime']:,.0f} training tokens/s; eval perplexity {perplexity:,.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks mlm_head", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    steps = commands.add_parser("steps", help="training steps before / after, per recipe")
    steps.add_argument("--recipes", nargs="+", choices=list(RECIPES), default=["six", "default"])
    steps.add_argument("--stories", type=int, default=300, help="news stories packed into blocks")
    steps.add_argument("--batch-size", type=int, default=32)
    steps.add_argument("--max-length", type=int, default=128)
    steps.add_argument("--steps", type=int, default=3, help="batches per timed round")
    steps.add_argument("--repeats", type=int, default=5, help="interleaved timed rounds (after one warm-up round)")
    steps.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    steps.add_argument("--output", default=None, help="also write the figures as JSON here")
    cli = commands.add_parser("cli", help="the 3,000-story pre-training through python -m workbench.train")
    cli.add_argument("--stories", type=int, default=3000)
    cli.add_argument("--threads", type=int, default=None, help="training.threads (default: the CLI's)")
    for command in (steps, cli):
        command.add_argument("--data-dir", default=str(default_data_dir()), help="the data root (corpus, vocab, cilin)")
    arguments = parser.parse_args(argv)
    datasets.disable_progress_bars()
    (steps_main if arguments.command == "steps" else cli_main)(arguments)
