"""Masking throughput: ``python -m benchmarks masking [--corpus PATH] [--sentences N] ...``.

Times (1) jieba segmentation + word-aligned encoding, once per corpus, and (2)
each collator per batch, against transformers' DataCollatorForLanguageModeling
(whole_word_mask=True) fed the same sentences pre-spaced by jieba (so its
offset-based word detection sees words). Prints a table of sentences/s.

``--preparation`` instead times corpus preparation (segment, encode, pack) on the first ``--stories``
stories, today's ``datasets`` map steps against the code of commit ``--old`` (a fork pool and a SHA-256
cache, loaded with ``git show``), interleaved ``--repeats`` times (the median counts): in memory
(``encode_corpus``) and into a fresh cache folder (``prepare_corpus``, then a cached rerun), each at
``--num-proc`` processes, in characters per second of wall time and per CPU second (all processes).
Targets: today >= old / 1.5 per CPU second; a cached rerun >= 20x faster than the first run.

``--idf`` prepares the whole ``--corpus`` (cached in ``--cache-dir``) as ``pretrain_mlm`` does, builds the
KDM collator's IDF table over the training blocks (streamed) and prints the peak resident memory (target:
the news corpus within 2 GB). Run it twice: the first run fills the cache.
"""

from __future__ import annotations

import argparse
import gzip
import importlib
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from workbench import masking
from workbench.data_root import data_root
from workbench.masking import (
    JiebaSegmenter,
    KnowledgeMaskCollator,
    RandomMaskCollator,
    WholeWordMaskCollator,
    compute_idf,
    encode_words,
)
from workbench.vocab import load_tokenizer

HF_NAME = "HF DataCollatorForLM(whole_word_mask, spaced)"
# The news corpus of the data root, $WORKBENCH_DATA (benchmarks only; generated sentences when absent).
DEFAULT_CORPUS = str(data_root() / "corpus" / "xwlb_news.txt.gz")
_SENTENCE_END = re.compile(r"(?<=[。！？])")
_FALLBACK_SENTENCES = [
    "习近平主席在北京会见了美国总统，双方就经济合作交换了意见。",
    "今天天气很好，我们一起去公园散步吧。",
    "中国科学院的研究人员发现了一种新的治疗方法。",
    "上海市政府宣布将加快建设国际金融中心。",
    "他高兴地告诉记者，这个城市的发展非常快。",
]


def load_sentences(corpus: str, count: int, seed: int = 0) -> tuple[list[str], str]:
    """The first ``count`` sentences (>= 5 characters) of a gzip corpus, or generated ones if it is missing."""
    path = Path(corpus)
    if path.is_file():
        sentences = []
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                sentences.extend(s.strip() for s in _SENTENCE_END.split(line) if len(s.strip()) >= 5)
                if len(sentences) >= count:
                    return sentences[:count], str(path)
        return sentences, str(path)
    rng = random.Random(seed)
    generated = ["".join(rng.sample(_FALLBACK_SENTENCES, 3)) for _ in range(count)]
    return generated, "generated (corpus missing)"


def _timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    return result, time.perf_counter() - start


def _time_collators(collators, batches_for, repeats):
    """Fastest epoch per collator over ``repeats`` interleaved rounds (the machine is shared),
    and each collator's mean masked share of non-special tokens."""
    best = {name: float("inf") for name in collators}
    shares = {}
    for _ in range(repeats):
        for name, collator in collators.items():
            start = time.perf_counter()
            outputs = [collator(batch) for batch in batches_for[name]]
            best[name] = min(best[name], time.perf_counter() - start)
            shares[name] = float(
                np.mean(
                    [
                        (out["labels"] != -100).sum().item()
                        / (out["attention_mask"].sum().item() - 2 * len(out["labels"]))
                        for out in outputs
                    ]
                )
            )
    return best, shares


OLD_COMMIT = (
    "899d809"  # the last commit with the fork pool (masking/corpus.py) and the SHA-256 cache (masking/cache.py)
)
ROOT = Path(__file__).resolve().parents[1]


def old_preparation(commit: str = OLD_COMMIT):
    """The ``workbench.masking`` corpus modules of ``commit`` (``git show``), imported as the package
    ``old_masking``."""
    package = Path(tempfile.mkdtemp(prefix="old-masking-")) / "old_masking"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in ("cache", "corpus", "encode", "packing", "segment"):
        show = ["git", "show", f"{commit}:workbench/masking/{name}.py"]
        source = subprocess.run(show, cwd=ROOT, capture_output=True, text=True, check=True).stdout
        (package / f"{name}.py").write_text(source, encoding="utf-8")
    sys.path.insert(0, str(package.parent))
    return importlib.import_module("old_masking.cache")


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished child processes (datasets' or the pool's workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _wall_and_cpu(function, *args, **kwargs) -> tuple[object, float, float]:
    wall, cpu = time.perf_counter(), _cpu_seconds()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, _cpu_seconds() - cpu


def load_stories(corpus: str, count: int) -> tuple[list[str], str]:
    """The first ``count`` stories of a gzip corpus (one a line), or generated 5-sentence stories if it is missing."""
    path = Path(corpus)
    if not path.is_file():
        sentences, _ = load_sentences(corpus, count * 5)
        return [" ".join(sentences[i * 5 : i * 5 + 5]) for i in range(count)], "generated (corpus missing)"
    stories = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                stories.append(line.strip())
            if len(stories) == count:
                break
    return stories, str(path)


def preparation(args) -> None:
    """Old and new corpus preparation side by side (module docstring)."""
    stories, source = load_stories(args.corpus, args.stories)
    tokenizer = load_tokenizer(vocab_file=args.vocab)
    old = old_preparation(args.old)
    JiebaSegmenter().words("预热")  # jieba's dictionary, outside the timing
    characters = sum(map(len, stories))
    options = {"max_length": args.max_length, "num_proc": args.num_proc}
    variants = {
        f"{args.old} encode_corpus (fork pool)": lambda folder: old.encode_corpus(stories, tokenizer, **options),
        "today encode_corpus (datasets map)": lambda folder: masking.encode_corpus(stories, tokenizer, **options),
        f"{args.old} prepare_corpus, first run": lambda folder: old.prepare_corpus(
            stories, tokenizer, cache_dir=folder, **options
        ),
        "today prepare_corpus, first run": lambda folder: masking.prepare_corpus(
            stories, tokenizer, cache_dir=folder, **options
        ),
    }
    times: dict[str, list[tuple[float, float]]] = {
        name: [] for name in [*variants, *(n.replace("first", "cached") for n in variants)]
    }
    blocks = {}
    for _ in range(args.repeats):
        for name, run in variants.items():
            with tempfile.TemporaryDirectory() as folder:
                result, wall, cpu = _wall_and_cpu(run, folder)
                times[name].append((wall, cpu))
                if "first run" in name:
                    _, wall, cpu = _wall_and_cpu(run, folder)
                    times[name.replace("first", "cached")].append((wall, cpu))
                blocks[name] = len(result) if hasattr(result, "__len__") else result.blocks
    median = {name: tuple(statistics.median(values) for values in zip(*runs)) for name, runs in times.items() if runs}
    print(
        f"corpus: {source}; {len(stories)} stories, {characters:,} characters; max_length {args.max_length}; "
        f"num_proc {args.num_proc}; vocab {len(tokenizer):,}; median of {args.repeats} interleaved repeats"
    )
    print("\n| variant | seconds | characters/s | characters per CPU second | blocks |\n|---|---:|---:|---:|---:|")
    for name, (wall, cpu) in median.items():
        print(f"| {name} | {wall:.2f} | {characters / wall:,.0f} | {characters / cpu:,.0f} | {blocks.get(name, '')} |")
    for kind in ("encode_corpus", "prepare_corpus, first run"):
        old_cpu = next(cpu for name, (_, cpu) in median.items() if name.startswith(args.old) and kind in name)
        new_cpu = next(cpu for name, (_, cpu) in median.items() if name.startswith("today") and kind in name)
        print(f"{kind}: today / old CPU time {new_cpu / old_cpu:.2f} (target <= 1.5)")
    first, cached = median["today prepare_corpus, first run"][0], median["today prepare_corpus, cached run"][0]
    print(f"today's cached rerun: {first / cached:.0f}x faster than the first run (target >= 20x)")


def idf_memory(args) -> None:
    """Peak memory of KDM's IDF table over the whole corpus (module docstring)."""
    from workbench.train import split_heldout

    with gzip.open(args.corpus, "rt", encoding="utf-8") as handle:
        stories = [line.strip() for line in handle if line.strip()]
    tokenizer = load_tokenizer(vocab_file=args.vocab)
    corpus = masking.prepare_corpus(
        stories, tokenizer, max_length=args.max_length, cache_dir=args.cache_dir, num_proc=args.num_proc
    )
    train, _ = split_heldout(corpus.dataset, 0.005, seed=0)
    start = time.perf_counter()
    collator = masking.build_collator({"strategy": "kdm"}, tokenizer, segmented_texts=train["words"])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    print(
        f"corpus: {args.corpus}; {corpus.corpus_characters:,} characters, {corpus.blocks:,} blocks "
        f"(cache hit: {corpus.cache_hit}, {corpus.preprocess_seconds:.1f} s); "
        f"IDF of {len(collator.idf):,} words in {time.perf_counter() - start:.1f} s; "
        f"peak resident memory {peak:.2f} GiB (target <= 2 GB)"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks masking", description=__doc__)
    parser.add_argument("--corpus", default=DEFAULT_CORPUS, help="gzip text, one story a line")
    parser.add_argument("--sentences", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument(
        "--repeats", type=int, default=5, help="interleaved epochs per collator; the fastest is reported"
    )
    parser.add_argument("--vocab", default=None, help="WordPiece vocab (default: the shipped 4,500-token vocab)")
    parser.add_argument("--preparation", action="store_true", help="time corpus preparation, old against today's")
    parser.add_argument("--stories", type=int, default=2000, help="--preparation: stories of --corpus")
    parser.add_argument("--num-proc", type=int, default=1, help="--preparation: processes")
    parser.add_argument("--old", default=OLD_COMMIT, help="--preparation: the commit to compare with")
    parser.add_argument("--idf", action="store_true", help="peak memory of KDM's IDF over the whole corpus")
    parser.add_argument("--cache-dir", default=None, help="--idf: the corpus cache (default: the workbench's)")
    args = parser.parse_args(argv)
    if args.preparation:
        preparation(args)
        return
    if args.idf:
        idf_memory(args)
        return

    sentences, source = load_sentences(args.corpus, args.sentences)
    tokenizer = load_tokenizer(vocab_file=args.vocab)
    segmenter = JiebaSegmenter()
    segmenter.words("预热")  # load jieba's dictionary outside the timing
    features, cold = _timed(encode_words, tokenizer, sentences, segmenter, args.max_length)
    _, warm = _timed(encode_words, tokenizer, sentences, segmenter, args.max_length)
    size = args.batch_size
    batches = [features[i : i + size] for i in range(0, len(features), size)]

    spaced = [" ".join(w for w in segmenter.words(s) if w.strip()) for s in sentences]
    hf_batches = []
    for i in range(0, len(spaced), size):
        encoded = tokenizer(
            spaced[i : i + size],
            truncation=True,
            max_length=args.max_length,
            padding=True,
            return_offsets_mapping=True,
            return_special_tokens_mask=True,
        )
        hf_batches.append([{key: encoded[key][row] for key in encoded} for row in range(len(encoded["input_ids"]))])
    from transformers import DataCollatorForLanguageModeling

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hf_wwm = DataCollatorForLanguageModeling(tokenizer, whole_word_mask=True, seed=0)
    idf = compute_idf(segmenter.words(sentence) for sentence in sentences)
    collators = {
        "RandomMaskCollator": RandomMaskCollator(tokenizer),
        "WholeWordMaskCollator": WholeWordMaskCollator(tokenizer),
        "WholeWordMaskCollator(max_ngram=3)": WholeWordMaskCollator(tokenizer, max_ngram=3),
        "KnowledgeMaskCollator": KnowledgeMaskCollator(tokenizer),
        "KnowledgeMaskCollator(idf=corpus)": KnowledgeMaskCollator(tokenizer, idf=idf),
        HF_NAME: hf_wwm,
    }
    batches_for = {name: hf_batches if name == HF_NAME else batches for name in collators}
    best, shares = _time_collators(collators, batches_for, args.repeats)
    rows = [
        ("segment+encode (cold cache)", len(sentences) / cold, cold * 1e3 / len(batches), float("nan")),
        ("segment+encode (warm cache)", len(sentences) / warm, warm * 1e3 / len(batches), float("nan")),
    ]
    rows += [(name, len(sentences) / best[name], best[name] * 1e3 / len(batches), shares[name]) for name in collators]

    print(
        f"corpus: {source}; {len(sentences)} sentences, batch {size}, max_length {args.max_length}, "
        f"vocab {len(tokenizer)} tokens, fastest of {args.repeats} interleaved epochs"
    )
    wwm, kdm = best["WholeWordMaskCollator"], best["KnowledgeMaskCollator(idf=corpus)"]
    print(f"WWM vs HF per batch: {best[HF_NAME] / wwm:.1f}x faster; KDM(idf) / WWM time: {kdm / wwm:.2f}")
    print(f"{'step':48s} {'sentences/s':>12s} {'ms/batch':>9s} {'masked share':>13s}")
    for name, rate, per_batch, share in rows:
        print(f"{name:48s} {rate:12.0f} {per_batch:9.2f} {share:13.3f}")
