"""An on-disk cache of packed corpora: encode once, load in seconds on every later run.

:func:`prepare_corpus` returns the blocks of :func:`workbench.masking.encode_corpus`
for a set of documents, from ``<cache_dir>/corpus/<key>/`` when they are there
(memory-mapped Arrow files, ``datasets.load_from_disk``), else by encoding them and
writing that folder.

The key is the SHA-256 of everything the blocks depend on (:func:`corpus_key`): the
documents' text (so the corpus file's content, and ``max_train_samples`` or any
other selection of documents), the tokenizer (its whole serialised vocabulary,
normaliser and pre-tokeniser; not the truncation and padding of its last call), ``max_length``, ``block_boundary``, the segmentation
settings (POS tagging, the user dictionary's content, jieba's version), the chunk
size of :mod:`~workbench.masking.corpus` and :data:`FORMAT` (raised whenever the
packing code changes its output). A changed
input is a new key, so a stale cache is never read; old folders stay until deleted.

Writes are atomic: the blocks and then ``manifest.json`` go into a fresh temporary
folder beside the final one (``.tmp-<key>-...``), which is renamed to ``<key>`` only
when complete (``os.replace``). A run killed before the rename leaves a
``.tmp-*`` folder that is never read (safe to delete); a folder named by its key is
used only with a manifest carrying that key.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import datasets
import jieba

from . import corpus
from .corpus import count_tokens, encode_corpus
from .packing import check_block_boundary, check_max_length
from .segment import JiebaSegmenter

CACHE_ENV = "WORKBENCH_CACHE"
FORMAT = 1
MANIFEST = "manifest.json"
BLOCKS = "blocks"

__all__ = ["CACHE_ENV", "FORMAT", "PreparedCorpus", "corpus_key", "default_cache_dir", "prepare_corpus"]


def default_cache_dir() -> Path:
    """``$WORKBENCH_CACHE`` when set, else ``$XDG_CACHE_HOME/workbench`` (``~/.cache/workbench``)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "workbench"


@dataclass
class PreparedCorpus:
    """Packed blocks and what it took to get them.

    ``dataset``: the blocks (memory-mapped Arrow); ``key`` and ``path``: the cache entry;
    ``cache_hit``: loaded rather than encoded; ``preprocess_seconds``: wall time of
    :func:`prepare_corpus` (hashing, then loading or encoding and writing);
    ``corpus_characters``: the non-space characters of the documents (the text the blocks hold;
    whitespace yields no token); ``tokens``: tokens in all blocks (special tokens included);
    ``blocks``: number of blocks.
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


def _documents_digest(documents: Sequence[str]) -> tuple[str, int, int]:
    """SHA-256 of the documents (each length-prefixed, so boundaries count), their characters and
    their non-space characters."""
    digest = hashlib.sha256()
    characters = text_characters = 0
    for document in documents:
        data = document.encode("utf-8")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
        characters += len(document)
        text_characters += sum(map(len, document.split()))
    return digest.hexdigest(), characters, text_characters


def _file_digest(path: str | None) -> str | None:
    return None if path is None else hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _tokenizer_digest(tokenizer) -> str:
    """SHA-256 of the fast tokenizer's serialisation (vocabulary, normaliser, pre-tokeniser, model,
    added tokens) without its ``truncation`` and ``padding``: those hold the settings of the last
    call (any earlier ``tokenizer(..., truncation=True)`` on the same object), not what the blocks
    depend on."""
    state = json.loads(tokenizer.backend_tokenizer.to_str())
    state.pop("truncation", None)
    state.pop("padding", None)
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode("utf-8")).hexdigest()


def corpus_key(
    documents: Sequence[str], tokenizer, *, max_length: int, segmenter: JiebaSegmenter, block_boundary: str = "sentence"
) -> tuple[str, dict]:
    """``(key, parts)``: the cache key (hex SHA-256 of ``parts`` as sorted JSON) and its parts
    (``characters``: all characters of the documents, ``text_characters``: the non-space ones)."""
    documents_sha256, characters, text_characters = _documents_digest(documents)
    parts = {
        "format": FORMAT,
        "documents_sha256": documents_sha256,
        "documents": len(documents),
        "characters": characters,
        "text_characters": text_characters,
        "tokenizer_sha256": _tokenizer_digest(tokenizer),
        "max_length": max_length,
        "block_boundary": block_boundary,
        "chunk_characters": corpus.CHUNK_CHARACTERS,
        "segmentation": {"pos": segmenter.pos, "user_dict_sha256": _file_digest(segmenter.user_dict), "jieba": jieba.__version__},
    }
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8")).hexdigest()
    return key, parts


def _corpus_root(cache_dir: str | Path | None) -> Path:
    """``<cache_dir>/corpus``, created; ValueError naming ``cache_dir`` when it cannot be used."""
    base = default_cache_dir() if cache_dir is None else Path(cache_dir).expanduser()
    if base.exists() and not base.is_dir():
        raise ValueError(f"cache_dir: {str(base)!r} exists and is not a directory")
    root = base / "corpus"
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ValueError(f"cache_dir: cannot create {str(root)!r} ({error.strerror or error})") from error
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        raise ValueError(f"cache_dir: {str(root)!r} must be readable and writable")
    return root


def _read_manifest(folder: Path, key: str) -> dict | None:
    """The manifest of a complete entry for ``key``, else None."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("key") == key else None


def _write_entry(root: Path, key: str, dataset: datasets.Dataset, manifest: dict) -> Path:
    """Write ``dataset`` and ``manifest`` as the entry ``root/key`` atomically; returns its path."""
    final = root / key
    temporary = Path(tempfile.mkdtemp(prefix=f".tmp-{key[:16]}-", dir=root))
    try:
        dataset.save_to_disk(str(temporary / BLOCKS))
        (temporary / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True), encoding="utf-8")
        if final.exists() and _read_manifest(final, key) is None:
            shutil.rmtree(final)  # an entry without its manifest (written by hand?): never trusted, replaced
        try:
            os.replace(temporary, final)
        except OSError:
            if _read_manifest(final, key) is None:  # not a concurrent writer finishing first
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return final


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
    """The packed blocks of ``documents`` (see :func:`workbench.masking.encode_corpus`),
    loaded from the cache under ``cache_dir`` (default :func:`default_cache_dir`) when an
    entry for their key exists, else encoded with ``num_proc`` processes and cached.

    Raises ValueError naming ``cache_dir`` when it is not a usable folder, and as
    :func:`~workbench.masking.encode_corpus` for bad arguments or an empty corpus.
    """
    start = time.perf_counter()
    check_max_length(max_length)
    check_block_boundary(block_boundary)
    segmenter = segmenter or JiebaSegmenter()
    root = _corpus_root(cache_dir)
    key, parts = corpus_key(documents, tokenizer, max_length=max_length, segmenter=segmenter, block_boundary=block_boundary)
    folder = root / key
    manifest = _read_manifest(folder, key)
    cache_hit = manifest is not None
    if not cache_hit:
        encoded = encode_corpus(
            documents, tokenizer, max_length=max_length, segmenter=segmenter, block_boundary=block_boundary, num_proc=num_proc
        )
        tokens = count_tokens(encoded)
        manifest = {
            "key": key,
            "parts": parts,
            "blocks": len(encoded),
            "tokens": tokens,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        }
        folder = _write_entry(root, key, encoded, manifest)
    dataset = datasets.load_from_disk(str(folder / BLOCKS))
    return PreparedCorpus(
        dataset=dataset,
        key=key,
        path=folder,
        cache_hit=cache_hit,
        preprocess_seconds=time.perf_counter() - start,
        corpus_characters=parts["text_characters"],
        tokens=manifest["tokens"],
    )
