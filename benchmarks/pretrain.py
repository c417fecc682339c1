"""Corpus-scale MLM pre-training: ``python -m benchmarks pretrain [CORPUS] [--stories N] [--device cpu|cuda]``.

On the first ``--stories`` documents of ``CORPUS`` (one a line, ``.gz`` allowed;
default: the news corpus beside the checkout, else generated sentences) it reports:

1. preprocessing (jieba segmentation, encoding, packing: :func:`encode_corpus`) in
   characters per second at 1 and 2 processes and at every core, each with cold
   segmentation caches (jieba's dictionary is loaded once beforehand and its load
   time reported on its own), against the target N processes >= 0.8 * N x one;
   the old path (``encode_words`` on whole stories, one process, truncated to
   ``max_length``) for reference, with the share of characters it keeps;
2. the cache (:func:`prepare_corpus` into a fresh folder): the first run, a
   rerun that loads it, and their ratio (target >= 20x);
3. training steps (forward with the head at the masked rows, loss, backward, AdamW step) of a BertForMaskedLM on
   the same pre-masked whole-word batches for plain MLM, HC (token and word level)
   and SR (token argmax, token expected, sentence), interleaved ``--repeats`` times
   (the fastest round counts), in samples per second and time relative to plain
   (target: HC and SR <= 1.3x); on CPU also process CPU time relative to plain
   (with one torch thread, robust when other jobs share the cores);
4. the share of wall time spent before the first step in a run of ``--epochs``
   epochs over all blocks, uncached and cached (training time estimated from the
   plain samples per second).

``--device cuda`` with the defaults of the issue's run (4 layers, hidden 256,
batch 128, bf16) is one command on the GPU machine; on CPU the model and batch are
smaller by default. Preprocessing is split into chunks of ~16k characters; give
each core several (``--stories 10000`` for 16 cores) or the scaling is capped by
the slice, not the code. ``--output`` writes the figures as JSON too.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import datasets
import torch

from benchmarks.masking import DEFAULT_CORPUS
from workbench.data import sample_corpus
from workbench.losses import CorrectionCounts, build_loss
from workbench.masking import (
    JiebaSegmenter,
    WholeWordMaskCollator,
    encode_corpus,
    encode_words,
    prepare_corpus,
)
from workbench.masking.corpus import CHUNK_CHARACTERS, chunk_documents
from workbench.models import build_masked_lm, labelled_logits
from workbench.synonyms import SynonymTable, synonym_matcher
from workbench.threads import usable_cores
from workbench.vocab import load_tokenizer

SHARED_DATA = Path(DEFAULT_CORPUS).parents[1]
DEFAULT_VOCAB = SHARED_DATA / "vocab" / "bert-base-chinese-vocab.txt"
DEFAULT_LEXICON = SHARED_DATA / "cilin" / "cilin_ex.txt"
OBJECTIVES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("plain", "mlm", {}),
    ("HC token (paper)", "mlm_hc", {"level": "token"}),
    ("HC word", "mlm_hc", {"level": "word"}),
    ("SR token argmax (paper)", "mlm_sr", {}),
    ("SR token expected", "mlm_sr", {"prediction": "expected"}),
    ("SR sentence", "mlm_sr", {"level": "sentence"}),
)
SIZES = {  # device -> layers, hidden, heads, batch size, precision
    "cpu": {"layers": 2, "hidden": 64, "heads": 2, "batch_size": 16, "precision": "fp32"},
    "cuda": {"layers": 4, "hidden": 256, "heads": 4, "batch_size": 128, "precision": "bf16"},
}


def load_documents(corpus: str, stories: int) -> tuple[list[str], str]:
    """The first ``stories`` non-empty lines of ``corpus``, or generated 5-sentence stories if it is missing."""
    path = Path(corpus)
    if not path.is_file():
        sentences = sample_corpus(n_sentences=stories * 5, seed=0)
        return [" ".join(sentences[i * 5 : i * 5 + 5]) for i in range(stories)], "generated (corpus missing)"
    opener = gzip.open if path.suffix == ".gz" else open
    documents = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                documents.append(line.strip())
                if len(documents) == stories:
                    break
    return documents, str(path)


def _timed(function, *args, **kwargs) -> tuple[Any, float]:
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished child processes (the pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def preprocessing(documents: list[str], tokenizer, max_length: int) -> dict[str, Any]:
    """Characters per second of encode_corpus at 1, 2 and all cores (wall clock, and per CPU
    second summed over the processes: the latter shows the pool's overhead even when other
    jobs share the cores); the old encode_words path."""
    characters = sum(map(len, documents))
    _, jieba_load = _timed(JiebaSegmenter().words, "预热")
    processes = sorted({1, min(2, usable_cores()), usable_cores()})
    rates, cpu_rates = {}, {}
    for count in processes:
        cpu_start = _cpu_seconds()
        blocks, seconds = _timed(
            encode_corpus, documents, tokenizer, max_length=max_length, segmenter=JiebaSegmenter(), num_proc=count
        )
        rates[count] = characters / seconds
        cpu_rates[count] = characters / (_cpu_seconds() - cpu_start)
    features, seconds = _timed(encode_words, tokenizer, documents, JiebaSegmenter(), max_length)
    kept = sum(len(f["input_ids"]) - 2 for f in features)
    lengths = [len(ids) for ids in blocks["input_ids"]]
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id}
    text_tokens = sum(token not in special for ids in blocks["input_ids"] for token in ids)  # every token of the corpus
    return {
        "characters": characters,
        "jieba_load_seconds": jieba_load,
        "chars_per_second": rates,
        "speedup": {count: rates[count] / rates[1] for count in processes},
        "chars_per_cpu_second": cpu_rates,
        "chunks": len(chunk_documents(documents, CHUNK_CHARACTERS)),
        "blocks": len(blocks),
        "tokens": sum(lengths),
        "fill": sum(lengths) / (len(lengths) * max_length),
        "encode_words_chars_per_second": characters / seconds,
        "encode_words_kept_share": kept / text_tokens,
    }


def caching(documents: list[str], tokenizer, max_length: int, cache_dir: str) -> dict[str, Any]:
    """First (encoding) and second (loading) run of prepare_corpus on all cores."""
    first = prepare_corpus(documents, tokenizer, max_length=max_length, cache_dir=cache_dir, segmenter=JiebaSegmenter())
    second = prepare_corpus(
        documents, tokenizer, max_length=max_length, cache_dir=cache_dir, segmenter=JiebaSegmenter()
    )
    assert not first.cache_hit and second.cache_hit
    return {
        "first_seconds": first.preprocess_seconds,
        "cached_seconds": second.preprocess_seconds,
        "ratio": first.preprocess_seconds / second.preprocess_seconds,
        "blocks": second.blocks,
        "dataset": second.dataset,
    }


def _batches(blocks: datasets.Dataset, tokenizer, batch_size: int, count: int, device: torch.device) -> list[dict]:
    collator = WholeWordMaskCollator(tokenizer, seed=0, return_word_ids=True)
    rows = [dict(zip(blocks.column_names, values)) for values in zip(*blocks[: batch_size * count].values())]
    if len(rows) < batch_size:
        raise SystemExit(f"--stories: {len(rows)} blocks cannot fill one batch of {batch_size}; pass more stories")
    return [
        {key: value.to(device) for key, value in collator(rows[i : i + batch_size]).items()}
        for i in range(0, len(rows) - batch_size + 1, batch_size)
    ]


def _step(model, optimizer, loss, batch, stats, autocast) -> None:
    inputs = {key: batch[key] for key in ("input_ids", "attention_mask", "token_type_ids")}
    with autocast():
        logits, _ = labelled_logits(model, batch["labels"], **inputs)  # the head at the masked rows, as the trainers
        value = loss(logits, batch["labels"], model=model, word_ids=batch["word_ids"], stats=stats, **inputs)
    value.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def training(blocks, tokenizer, arguments, device: torch.device) -> dict[str, dict[str, float]]:
    """Fastest of ``repeats`` interleaved rounds of ``steps`` steps per objective."""
    sizes = {**SIZES[device.type], **{k: v for k, v in vars(arguments).items() if k in SIZES["cpu"] and v is not None}}
    batches = _batches(blocks, tokenizer, sizes["batch_size"], arguments.steps, device)
    torch.manual_seed(0)
    tiny = {
        "vocab_size": len(tokenizer),
        "num_layers": sizes["layers"],
        "hidden_size": sizes["hidden"],
        "num_heads": sizes["heads"],
        "max_position": max(arguments.max_length, 128),
    }
    initial = build_masked_lm(tiny=tiny).to(device)
    table = SynonymTable.from_path(arguments.lexicon if Path(arguments.lexicon).is_file() else None)
    runs = {}
    for label, name, params in OBJECTIVES:
        if name == "mlm_hc":
            params = {**params, "matcher": synonym_matcher(tokenizer, table)}
        model = copy.deepcopy(initial).train()
        runs[label] = {
            "model": model,
            "loss": build_loss(name, **params),
            "stats": CorrectionCounts() if name == "mlm_hc" else None,
            "optimizer": torch.optim.AdamW(model.parameters(), lr=1e-4),
            "best": float("inf"),
            "best_cpu": float("inf"),
        }
    dtype = torch.bfloat16 if sizes["precision"] == "bf16" else None

    def autocast():
        return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for round_ in range(arguments.repeats + 1):  # round 0 warms up
        for run in runs.values():
            synchronize()
            start, cpu_start = time.perf_counter(), time.process_time()
            for batch in batches:
                _step(run["model"], run["optimizer"], run["loss"], batch, run["stats"], autocast)
            synchronize()
            if round_:
                run["best"] = min(run["best"], time.perf_counter() - start)
                run["best_cpu"] = min(run["best_cpu"], time.process_time() - cpu_start)
    samples = sum(len(batch["labels"]) for batch in batches)
    plain, plain_cpu = runs["plain"]["best"], runs["plain"]["best_cpu"]
    result = {
        label: {
            "samples_per_second": samples / run["best"],
            "relative_time": run["best"] / plain,
            "relative_cpu_time": run["best_cpu"] / plain_cpu,
        }
        for label, run in runs.items()
    }
    for label, run in runs.items():
        if run["stats"] is not None:
            result[label]["prediction_rate"] = run["stats"].as_dict()["prediction_rate"]
    return {"sizes": sizes, "samples": samples, "objectives": result}


def _print_report(report: dict[str, Any]) -> None:
    pre, cache, train, share = report["preprocessing"], report["cache"], report["training"], report["first_step"]
    print(
        f"corpus: {report['source']}; {report['stories']} stories, {pre['characters']:,} characters; "
        f"vocab {report['vocab_size']:,} tokens; max_length {report['max_length']}; {usable_cores()} cores; "
        f"device {report['device']}"
    )
    print(f"\njieba dictionary load (once per run): {pre['jieba_load_seconds']:.2f} s")
    print("\n| preprocessing | characters/s | speedup vs 1 | target | characters per CPU second |")
    print("|---|---:|---:|---:|---:|")
    for count, rate in pre["chars_per_second"].items():
        print(
            f"| encode_corpus, {count} process{'es' if count > 1 else ''} | {rate:,.0f} | "
            f"{pre['speedup'][count]:.2f}x | >= {0.8 * count:.1f}x | {pre['chars_per_cpu_second'][count]:,.0f} |"
        )
    print(f"| encode_words (old path), 1 process | {pre['encode_words_chars_per_second']:,.0f} | | | |")
    print(
        f"\nchunks (units of parallel work): {pre['chunks']:,}; blocks: {pre['blocks']:,}, tokens {pre['tokens']:,}, "
        f"fill {pre['fill']:.1%} of max_length; "
        f"text kept 100% (old path, truncated to max_length: {pre['encode_words_kept_share']:.1%})"
    )
    print("\n| cache | seconds |\n|---|---:|")
    print(f"| first run (encode + write), all cores | {cache['first_seconds']:.2f} |")
    print(f"| rerun (hash + load) | {cache['cached_seconds']:.2f} |")
    print(f"| ratio (target >= 20x) | {cache['ratio']:.1f}x |")
    sizes = train["sizes"]
    print(
        f"\ntraining step: BertForMaskedLM {sizes['layers']} layers, hidden {sizes['hidden']}, "
        f"batch {sizes['batch_size']}, "
        f"{sizes['precision']}, {train['samples']} samples per round, fastest of {report['repeats']} rounds, "
        f"{torch.get_num_threads()} torch threads"
    )
    cpu = report["device"] == "cpu"  # CPU time is robust to other jobs on the cores; on a GPU it misses the device work
    print(f"\n| objective | samples/s | time vs plain |{' CPU time vs plain |' if cpu else ''} HC prediction rate |")
    print(f"|---|---:|---:|{'---:|' if cpu else ''}---:|")
    for label, row in train["objectives"].items():
        rate = f"{row['prediction_rate']:.2%}" if "prediction_rate" in row else ""
        cpu_column = f" {row['relative_cpu_time']:.2f}x |" if cpu else ""
        print(f"| {label} | {row['samples_per_second']:,.1f} | {row['relative_time']:.2f}x |{cpu_column} {rate} |")
    print(
        f"\nbefore the first step, {report['epochs']} epochs over {cache['blocks']:,} blocks at the plain rate "
        f"({share['train_seconds']:.1f} s of training): uncached {share['uncached']:.1%}, cached {share['cached']:.1%}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks pretrain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "corpus", nargs="?", default=DEFAULT_CORPUS, help="text file, one document a line (.gz allowed)"
    )
    parser.add_argument("--stories", type=int, default=500, help="documents read from the corpus")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--vocab", default=str(DEFAULT_VOCAB), help="WordPiece vocab (the shipped one when missing)")
    parser.add_argument(
        "--lexicon", default=str(DEFAULT_LEXICON), help="HC lexicon (the shipped tiny table when missing)"
    )
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--hidden", type=int, default=None)
    parser.add_argument("--heads", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--precision", choices=("fp32", "bf16"), default=None)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: 1 on cpu, the stablest figure on a shared machine; torch's on cuda)",
    )
    parser.add_argument("--steps", type=int, default=8, help="batches per timed round")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timed rounds per objective")
    parser.add_argument(
        "--epochs", type=int, default=12, help="epochs of the run whose pre-first-step share is estimated"
    )
    parser.add_argument("--cache-dir", default=None, help="cache folder (default: a temporary one)")
    parser.add_argument("--output", default=None, help="also write the figures as JSON here")
    arguments = parser.parse_args(argv)
    if arguments.stories < 1:
        parser.error("--stories must be >= 1")
    datasets.disable_progress_bars()
    device = torch.device(arguments.device)
    threads = arguments.threads or (1 if device.type == "cpu" else None)
    if threads:
        torch.set_num_threads(threads)
    documents, source = load_documents(arguments.corpus, arguments.stories)
    tokenizer = load_tokenizer(vocab_file=arguments.vocab if Path(arguments.vocab).is_file() else None)
    pre = preprocessing(documents, tokenizer, arguments.max_length)
    with tempfile.TemporaryDirectory() as temporary:
        cache = caching(documents, tokenizer, arguments.max_length, arguments.cache_dir or temporary)
        train = training(cache.pop("dataset"), tokenizer, arguments, device)
    train_seconds = arguments.epochs * cache["blocks"] / train["objectives"]["plain"]["samples_per_second"]
    report = {
        "source": source,
        "stories": len(documents),
        "vocab_size": len(tokenizer),
        "max_length": arguments.max_length,
        "device": str(device),
        "repeats": arguments.repeats,
        "epochs": arguments.epochs,
        "cores": usable_cores(),
        "preprocessing": pre,
        "cache": cache,
        "training": train,
        "first_step": {
            "train_seconds": train_seconds,
            "uncached": cache["first_seconds"] / (cache["first_seconds"] + train_seconds),
            "cached": cache["cached_seconds"] / (cache["cached_seconds"] + train_seconds),
        },
    }
    _print_report(report)
    if arguments.output:
        Path(arguments.output).write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
