"""Corpus preparation for MLM pre-training: ``datasets`` map steps with ``num_proc`` processes and datasets' cache files.

:func:`prepare_corpus` drops blank documents and groups the others into chunks of about
:data:`CHUNK_CHARACTERS` characters (whole documents, in order; a chunk is a dataset row, so the blocks
do not depend on ``num_proc``), then maps the steps of :mod:`~workbench.masking.packing` over the chunks:
segment (jieba), encode (tokenizer and word alignment) and pack (blocks; a chunk's last block may be short).

Each step's result is a cache file ``<cache_dir>/corpus/<step>-<fingerprint>.arrow``, which datasets
writes to a temporary file and renames when complete: a killed run leaves nothing that is read. The
fingerprint (``new_fingerprint``) chains what a step's output depends on: the chunks' text and
:data:`FORMAT`; jieba's settings (POS tagging, the user dictionary's content, jieba's version); the
tokenizer (its serialisation without the truncation and padding of its last call); ``max_length`` and
``block_boundary``. A changed input is a new file (a new ``max_length`` packs again without segmenting).
"""

from __future__ import annotations

import hashlib
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
FORMAT = 2
"""Raised whenever a step's output changes for the same inputs."""
CACHE_ENV = "WORKBENCH_CACHE"
_INTS, _STRINGS = datasets.List(datasets.Value("int32")), datasets.List(datasets.Value("string"))
_BYTES = datasets.List(datasets.Value("int8"))
BLOCK_FEATURES = datasets.Features(dict(zip(BLOCK_COLUMNS, (_INTS, _BYTES, _BYTES, _INTS, _STRINGS, _STRINGS, _STRINGS))))


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
    chunks: list[list[str]] = [[]]
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
    encoded = tokenizer(chunk["documents"], add_special_tokens=False, return_offsets_mapping=True, return_attention_mask=False)
    aligned = map(align_tokens, chunk["documents"], encoded["offset_mapping"], chunk["words"], chunk["sentence_words"])
    token_word, sentence_starts = zip(*aligned)
    return {"input_ids": encoded["input_ids"], "token_word": token_word, "sentence_starts": sentence_starts}


def _pack(chunks: dict, tokenizer, max_length: int, block_boundary: str) -> dict:
    packer = Packer(tokenizer.cls_token_id, tokenizer.sep_token_id, max_length, block_boundary)
    for chunk in zip(*(chunks[name] for name in ("input_ids", "token_word", "sentence_starts", "words", "tags"))):
        for ids, token_word, sentence_starts, words, tags in zip(*chunk):
            if ids:
                packer.add(ids, token_word, sentence_starts, words, tags)
    blocks = packer.finish()
    return {name: [block[name] for block in blocks] for name in BLOCK_COLUMNS}


def _tokenizer_digest(tokenizer) -> str:
    """The fast tokenizer's serialisation without ``truncation`` and ``padding`` (the settings of its last call)."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    return Hasher.hash({key: value for key, value in state.items() if key not in ("truncation", "padding")})


def _blocks(documents, tokenizer, max_length, segmenter, block_boundary, num_proc, folder: Path | None):
    """The blocks (a ``datasets.Dataset``) and their fingerprint; cache files in ``folder`` (None: in memory)."""
    num_proc = resolve_num_proc(num_proc)
    check_packing(tokenizer, max_length, block_boundary)
    segmenter = segmenter or JiebaSegmenter()
    chunks = chunk_documents(documents, CHUNK_CHARACTERS)
    if not chunks:
        raise ValueError("documents: the corpus is empty (no document with a non-space character)")
    segmenter.words("预热")  # jieba's dictionary loaded here, once, before datasets forks its processes
    user_dict = None if segmenter.user_dict is None else hashlib.sha256(Path(segmenter.user_dict).read_bytes()).hexdigest()
    packing = {"tokenizer": tokenizer, "max_length": max_length, "block_boundary": block_boundary}
    steps = [  # name, progress bar, function and its arguments, what its output depends on besides the step before
        ("segment", "segment (jieba)", _segment, {"segmenter": segmenter}, [segmenter.pos, user_dict, jieba.__version__]),
        ("encode", "encode", _encode, {"tokenizer": tokenizer}, _tokenizer_digest(tokenizer)),
        ("pack", "pack into blocks", _pack, packing, [max_length, block_boundary]),
    ]
    dataset = datasets.Dataset.from_dict({"documents": chunks})
    fingerprint = Hasher.hash([FORMAT, CHUNK_CHARACTERS, chunks])
    processes = min(num_proc, len(chunks))
    for name, description, function, arguments, depends in steps:
        fingerprint = Hasher.hash([fingerprint, name, depends])
        last = name == "pack"
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
    """The blocks of :func:`prepare_corpus`, computed in memory (no cache files).

    Args:
        documents: the corpus, one document a string.
        tokenizer: a fast tokenizer.
        max_length: tokens per block, [CLS] and [SEP] included.
        segmenter: jieba's settings (default ``JiebaSegmenter()``).
        block_boundary: blocks end at sentences (``"sentence"``) or words (``"word"``).
        num_proc: processes (default: every usable core).
    """
    return _blocks(documents, tokenizer, max_length, segmenter, block_boundary, num_proc, None)[0]


@dataclass
class PreparedCorpus:
    """Packed blocks and what it took to get them.

    ``dataset``: the blocks (memory-mapped Arrow); ``key``: their fingerprint; ``path``: the folder of
    the cache files; ``cache_hit``: every file the blocks are read from was there before;
    ``preprocess_seconds``: wall time of :func:`prepare_corpus`; ``corpus_characters``: the non-space
    characters of the documents; ``tokens``: tokens in all blocks ([CLS] and [SEP] included).
    """

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
    base = default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()
    if base.exists() and not base.is_dir():
        raise ValueError(f"cache_dir: {str(base)!r} exists and is not a directory")
    folder = base / "corpus"
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cache_dir: cannot create {str(folder)!r} ({error.strerror or error})") from error
    if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
        raise ValueError(f"cache_dir: {str(folder)!r} must be readable and writable")
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
    """The packed blocks of ``documents`` (module docstring), from datasets' cache files under
    ``cache_dir`` (default :func:`default_cache_dir`) where they exist, else computed and cached.

    Arguments as :func:`encode_corpus`. Raises ValueError naming ``cache_dir`` when it is not a
    usable folder, ``documents`` for an empty corpus, and the argument at fault.
    """
    start = time.perf_counter()
    folder = _corpus_folder(cache_dir)
    existing = set(os.listdir(folder))
    dataset, key = _blocks(documents, tokenizer, max_length, segmenter, block_boundary, num_proc, folder)
    return PreparedCorpus(
        dataset=dataset,
        key=key,
        path=folder,
        cache_hit=all(Path(file["filename"]).name in existing for file in dataset.cache_files),
        preprocess_seconds=time.perf_counter() - start,
        corpus_characters=sum(len(word) for document in documents for word in document.split()),
        tokens=count_tokens(dataset),
    )


def count_tokens(blocks: datasets.Dataset, *, text_only: bool = False) -> int:
    """Tokens in all ``input_ids`` of ``blocks``, counted in Arrow; respects a selection (``select``).

    ``text_only=False``: every token, [CLS] and [SEP] included; ``True``: the tokens of the text,
    sum over blocks of #{i : word_ids[i] >= 0} (the n of the collators' budget round(p * n)).
    """
    table = blocks.with_format("arrow")[:]
    if text_only:
        counted = pc.greater_equal(pc.list_flatten(table.column("word_ids")), 0)
    else:
        counted = pc.list_value_length(table.column("input_ids"))
    return int(pc.sum(counted).as_py() or 0)
