"""Corpus preparation for MLM pre-training as ``datasets`` map steps, with ``num_proc`` processes and the datasets'
cache files.

Blank documents are dropped, the others grouped into chunks of about :data:`CHUNK_CHARACTERS` characters (whole
documents in order; a chunk is a row, so the blocks do not depend on ``num_proc``; its last block may be short), and
the steps of :mod:`~workbench.masking.packing` are mapped over the chunks: segment, encode, pack. Each step's result
is the cache file ``<cache_dir>/corpus/<step>-<fingerprint>.arrow`` (datasets writes a temporary file and renames it
when complete: a killed run leaves nothing that is read). The fingerprint chains what the step's output depends on:
the chunks' text and :data:`FORMAT`; POS tagging, the user dictionary's content and jieba's version; the tokenizer
(its serialisation without the truncation and padding of its last call); ``max_length`` and ``block_boundary``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets
import jieba
import pyarrow.compute as pc
from datasets.fingerprint import Hasher

from workbench.checks import check_int
from workbench.threads import usable_cores

from .packing import BLOCK_COLUMNS, Packer, align_tokens, check_packing, segment_document
from .segment import JiebaSegmenter

CHUNK_CHARACTERS = 1 << 14
FORMAT = 2  # raised whenever a step's output changes for the same inputs
CACHE_ENV = "WORKBENCH_CACHE"
_INTS = datasets.List(datasets.Value("int32"))
_STRINGS = datasets.List(datasets.Value("string"))
_BYTES = datasets.List(datasets.Value("int8"))
BLOCK_FEATURES = datasets.Features(
    dict(zip(BLOCK_COLUMNS, (_INTS, _BYTES, _BYTES, _INTS, _STRINGS, _STRINGS, _STRINGS)))
)


def default_cache_dir() -> Path:
    """``$WORKBENCH_CACHE`` when set, else ``$XDG_CACHE_HOME/workbench`` (``~/.cache/workbench``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "workbench"


def resolve_num_proc(num_proc: int | None) -> int:
    """``num_proc``, or the number of usable CPU cores when None; ValueError unless an integer >= 1."""
    return usable_cores() if num_proc is None else check_int("num_proc", num_proc, 1)


def chunk_documents(documents: Sequence[str], chunk_characters: int = CHUNK_CHARACTERS) -> list[list[str]]:
    """Consecutive documents in chunks of at least ``chunk_characters`` characters (the last may be
    smaller); blank documents are dropped, a string that is not text (a lone surrogate) is a ValueError."""
    chunks = [[]]
    size = 0
    for number, document in enumerate(documents):
        try:
            document.encode("utf-8")
        except UnicodeEncodeError as error:
            raise ValueError(f"documents[{number}]: character {error.start} is a lone surrogate, not text") from None
        if not document.strip():
            continue
        if size >= chunk_characters:
            chunks.append([])
            size = 0
        chunks[-1].append(document)
        size += len(document)
    return chunks if chunks[0] else []


def _segment(chunk: dict, segmenter: JiebaSegmenter) -> dict:
    words, tags, counts = zip(*(segment_document(text, segmenter) for text in chunk["documents"]))
    return {"words": words, "tags": tags, "sentence_words": counts}


def _encode(chunk: dict, tokenizer) -> dict:
    encoded = tokenizer(
        chunk["documents"], add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False
    )
    aligned = map(align_tokens, chunk["documents"], encoded["offset_mapping"], chunk["words"], chunk["sentence_words"])
    token_word, sentence_starts = zip(*aligned)
    return {"input_ids": encoded["input_ids"], "token_word": token_word, "sentence_starts": sentence_starts}


def _pack(chunks: dict, tokenizer, max_length: int, block_boundary: str) -> dict:
    packer = Packer(tokenizer.cls_token_id, tokenizer.sep_token_id, max_length, block_boundary)
    for document in zip(*(chunks[name][0] for name in ("input_ids", "token_word", "sentence_starts", "words", "tags"))):
        packer.add(*document)  # the documents of one chunk (batch_size=1)
    blocks = packer.finish()
    return {name: [block[name] for block in blocks] for name in BLOCK_COLUMNS}


def _blocks(documents, tokenizer, max_length, segmenter, block_boundary, num_proc, folder: Path | None):
    """The blocks (a ``datasets.Dataset``) and their fingerprint; cache files in ``folder`` (None: in memory)."""
    num_proc = resolve_num_proc(num_proc)
    check_packing(tokenizer, max_length, block_boundary)
    segmenter = segmenter or JiebaSegmenter()
    chunks = chunk_documents(documents, CHUNK_CHARACTERS)
    if not chunks:
        raise ValueError("documents: the corpus is empty (no document with a non-space character)")
    user_dict = None if segmenter.user_dict is None else Path(segmenter.user_dict).read_bytes()
    vocabulary = {
        k: v for k, v in json.loads(tokenizer.backend_tokenizer.to_str()).items() if k not in ("truncation", "padding")
    }
    packing = {"tokenizer": tokenizer, "max_length": max_length, "block_boundary": block_boundary}
    steps = [  # name, progress bar, function and its arguments, what its output depends on besides the step before
        (
            "segment",
            "segment (jieba)",
            _segment,
            {"segmenter": segmenter},
            [segmenter.pos, user_dict, jieba.__version__],
        ),
        ("encode", "encode", _encode, {"tokenizer": tokenizer}, vocabulary),
        ("pack", "pack into blocks", _pack, packing, [max_length, block_boundary]),
    ]
    dataset = datasets.Dataset.from_dict({"documents": chunks})
    fingerprint = Hasher.hash([FORMAT, CHUNK_CHARACTERS, chunks])
    processes = min(num_proc, len(chunks))
    for name, description, function, arguments, depends in steps:
        fingerprint = Hasher.hash([fingerprint, name, depends])
        last = name == "pack"
        if name == "segment" and not (folder and any(folder.glob(f"{name}-{fingerprint}*.arrow"))):
            segmenter.words("预热")  # jieba's dictionary loaded once, here, before datasets forks its processes
        dataset = dataset.map(
            function,
            fn_kwargs=arguments,
            batched=last,  # one chunk in, its blocks out
            batch_size=1,
            remove_columns=dataset.column_names if last else None,
            features=BLOCK_FEATURES if last else None,
            num_proc=processes if processes > 1 else None,
            writer_batch_size=1000 if last else 10,
            new_fingerprint=fingerprint,
            cache_file_name=None if folder is None else str(folder / f"{name}-{fingerprint}.arrow"),
            desc=description,
        )
    if len(dataset) == 0:
        raise ValueError("documents: the corpus is empty (its documents hold no token)")
    return dataset, fingerprint


def encode_corpus(
    documents: Sequence[str],
    tokenizer,
    *,
    max_length: int = 128,
    segmenter: JiebaSegmenter | None = None,
    block_boundary: str = "sentence",
    num_proc: int | None = None,
) -> datasets.Dataset:
    """The blocks of :func:`prepare_corpus`, computed in memory (no cache files)."""
    return _blocks(documents, tokenizer, max_length, segmenter, block_boundary, num_proc, None)[0]


@dataclass
class PreparedCorpus:
    """The blocks (memory-mapped), their fingerprint ``key``, the cache folder ``path``, ``cache_hit`` (every file read
    was there before), the wall time, the documents' non-space characters and the blocks' tokens ([CLS], [SEP] too)."""

    dataset: datasets.Dataset
    key: str
    path: Path
    cache_hit: bool
    preprocess_seconds: float
    corpus_characters: int
    tokens: int

    @property
    def blocks(self) -> int:
        return len(self.dataset)


def _corpus_folder(cache_dir: str | Path | None) -> Path:
    """``<cache_dir>/corpus``, created; ValueError naming ``cache_dir`` when it cannot be used."""
    folder = (default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()) / "corpus"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cache_dir: cannot create {str(folder)!r} ({error.strerror or error})") from None
    if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
        raise ValueError(f"cache_dir: {str(folder)!r} must be a readable and writable folder")
    return folder


def prepare_corpus(
    documents: Sequence[str],
    tokenizer,
    *,
    max_length: int = 128,
    cache_dir: str | Path | None = None,
    num_proc: int | None = None,
    segmenter: JiebaSegmenter | None = None,
    block_boundary: str = "sentence",
) -> PreparedCorpus:
    """The packed blocks of ``documents`` (module docstring) from datasets' cache files, computed where missing.

    Args:
        documents: the corpus, one document a string.
        tokenizer: a fast tokenizer.
        max_length: tokens per block, [CLS] and [SEP] included.
        cache_dir: the cache's folder (default :func:`default_cache_dir`); ValueError naming it when unusable.
        num_proc: processes (default: every usable core).
        segmenter: jieba's settings (default ``JiebaSegmenter()``).
        block_boundary: blocks end at sentences (``"sentence"``) or fill up to words (``"word"``).
    """
    start = time.perf_counter()
    folder = _corpus_folder(cache_dir)
    existing = set(os.listdir(folder))
    dataset, key = _blocks(documents, tokenizer, max_length, segmenter, block_boundary, num_proc, folder)
    cache_hit = all(Path(file["filename"]).name in existing for file in dataset.cache_files)
    characters = sum(len(word) for document in documents for word in document.split())
    return PreparedCorpus(
        dataset, key, folder, cache_hit, time.perf_counter() - start, characters, count_tokens(dataset)
    )


def count_tokens(blocks: datasets.Dataset, *, text_only: bool = False) -> int:
    """Tokens in all ``input_ids`` of ``blocks`` (a selection too), [CLS] and [SEP] included; ``text_only``: the text's,
    sum over blocks of #{i : word_ids[i] >= 0} (the n of the collators' budget round(p * n))."""
    table = blocks.with_format("arrow")[:]
    if text_only:
        counted = pc.greater_equal(pc.list_flatten(table.column("word_ids")), 0)
    else:
        counted = pc.list_value_length(table.column("input_ids"))
    return int(pc.sum(counted).as_py() or 0)
