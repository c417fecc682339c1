"""Parallel corpus encoding and its on-disk cache: same blocks for any num_proc, hits and misses,
crash safety, Arrow storage, seeded masks in DataLoader workers, argument errors."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import datasets
import pytest
import torch

from workbench.data import sample_corpus
from workbench.masking import (
    JiebaSegmenter,
    WholeWordMaskCollator,
    default_cache_dir,
    encode_corpus,
    pack_documents,
    prepare_corpus,
)
from workbench.masking import corpus as corpus_module
from workbench.masking.cache import CACHE_ENV, corpus_key
from workbench.masking.corpus import chunk_documents
from workbench.vocab import default_vocab_file, load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(corpus_module, "CHUNK_CHARACTERS", 300)


def documents(count: int = 24, seed: int = 0) -> list[str]:
    sentences = sample_corpus(n_sentences=count * 4, seed=seed)
    return [" ".join(sentences[i * 4 : i * 4 + 4]) for i in range(count)]


def rows(dataset) -> list[dict]:
    return [dict(row) for row in dataset]


def entries(cache_dir) -> list[str]:
    return sorted(os.listdir(cache_dir / "corpus"))


def test_blocks_do_not_depend_on_num_proc(tokenizer, small_chunks):
    docs = documents()
    chunks = chunk_documents(docs, 300)
    assert len(chunks) > 4
    expected = [block for chunk in chunks for block in pack_documents(tokenizer, chunk, JiebaSegmenter(), 32)]
    serial = encode_corpus(docs, tokenizer, max_length=32, num_proc=1)
    parallel = encode_corpus(docs, tokenizer, max_length=32, num_proc=2)
    assert isinstance(parallel, datasets.Dataset) and parallel.features["input_ids"].feature.dtype == "int32"
    assert rows(serial) == rows(parallel) == expected


def test_chunks_keep_order_and_skip_blank_documents():
    assert chunk_documents(["ab", " ", "cd", "", "efg", "h"], 4) == [["ab", "cd"], ["efg", "h"]]
    assert chunk_documents([" ", ""], 4) == []


def test_cache_hit_on_the_same_key_and_miss_after_any_change(tokenizer, tmp_path):
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("\n".join(documents()), encoding="utf-8")
    cache_dir = tmp_path / "cache"

    def prepare(max_length=32, limit=None, tok=tokenizer):
        docs = corpus_file.read_text(encoding="utf-8").splitlines()[:limit]
        return prepare_corpus(docs, tok, max_length=max_length, cache_dir=cache_dir, num_proc=1)

    first = prepare()
    assert not first.cache_hit and entries(cache_dir) == [first.key]
    again = prepare()
    assert again.cache_hit and again.key == first.key and rows(again.dataset) == rows(first.dataset)
    assert again.dataset.cache_files and str(cache_dir) in again.dataset.cache_files[0]["filename"]  # memory-mapped
    assert again.tokens == sum(len(ids) for ids in first.dataset["input_ids"]) and again.blocks == len(first.dataset)
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    assert again.corpus_characters == sum(len("".join(line.split())) for line in lines) < sum(map(len, lines))  # no spaces

    keys = {first.key}
    for changed in (lambda: prepare(max_length=48), lambda: prepare(limit=10)):
        result = changed()
        assert not result.cache_hit and result.key not in keys
        keys.add(result.key)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(default_vocab_file().read_text(encoding="utf-8") + "新词\n", encoding="utf-8")
    other_vocab = prepare(tok=load_tokenizer(vocab_file=vocab))
    assert not other_vocab.cache_hit and other_vocab.key not in keys
    keys.add(other_vocab.key)
    corpus_file.write_text("\n".join(documents(seed=1)), encoding="utf-8")
    edited = prepare()
    assert not edited.cache_hit and edited.key not in keys
    assert entries(cache_dir) == sorted(keys | {edited.key})


def test_the_key_ignores_the_tokenizers_truncation_and_padding_state(tokenizer):
    # the fast tokenizer keeps the truncation / padding of its last call in its serialisation; the
    # blocks do not depend on it, so neither may the key (else an earlier call makes a spurious miss)
    segmenter = JiebaSegmenter()
    key = corpus_key(documents(4), tokenizer, max_length=32, segmenter=segmenter)[0]
    tokenizer(["今天天气很好"], truncation=True, max_length=4, padding="max_length")
    assert corpus_key(documents(4), tokenizer, max_length=32, segmenter=segmenter)[0] == key
    tokenizer(["今天天气很好"])  # back to no truncation and no padding
    assert corpus_key(documents(4), tokenizer, max_length=32, segmenter=segmenter)[0] == key


def test_a_failed_write_leaves_nothing_and_is_retried(tokenizer, tmp_path, monkeypatch):
    cache_dir = tmp_path / "cache"
    original = datasets.Dataset.save_to_disk

    def save_then_fail(self, path, *args, **kwargs):
        original(self, path, *args, **kwargs)
        raise RuntimeError("disk full")

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", save_then_fail)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=cache_dir, num_proc=1)
    assert entries(cache_dir) == []
    monkeypatch.setattr(datasets.Dataset, "save_to_disk", original)
    assert not prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=cache_dir, num_proc=1).cache_hit


def test_a_killed_run_leaves_no_trusted_partial_cache(tokenizer, tmp_path):
    cache_dir = tmp_path / "cache"
    script = textwrap.dedent(
        f"""
        import os, signal, datasets
        from workbench.masking import prepare_corpus
        from workbench.vocab import load_tokenizer
        from workbench.data import sample_corpus
        original = datasets.Dataset.save_to_disk
        def save_then_die(self, path, *args, **kwargs):
            original(self, path, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)  # killed after the blocks are written, before the rename
        datasets.Dataset.save_to_disk = save_then_die
        sentences = sample_corpus(n_sentences=96, seed=0)
        docs = [" ".join(sentences[i * 4 : i * 4 + 4]) for i in range(24)]
        prepare_corpus(docs, load_tokenizer(), max_length=32, cache_dir={str(cache_dir)!r}, num_proc=1)
        """
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, timeout=300, check=False)
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    leftovers = entries(cache_dir)
    assert len(leftovers) == 1 and leftovers[0].startswith(".tmp-")  # the partial write, under a name never read
    result = prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=cache_dir, num_proc=1)
    assert not result.cache_hit and result.key in entries(cache_dir)
    # a folder named by the key but without its manifest (hand-made, half-copied) is not trusted either
    (result.path / "manifest.json").unlink()
    again = prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=cache_dir, num_proc=1)
    assert not again.cache_hit and rows(again.dataset) == rows(result.dataset)
    assert prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=cache_dir, num_proc=1).cache_hit


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "wb"))
    assert default_cache_dir() == tmp_path / "wb"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "workbench"


def test_bad_arguments_raise_naming_the_parameter(tokenizer, tmp_path):
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="num_proc"):
            encode_corpus(documents(2), tokenizer, num_proc=bad)
    for empty in ([], ["", "  \n"]):
        with pytest.raises(ValueError, match="documents: the corpus is empty"):
            encode_corpus(empty, tokenizer, num_proc=1)
        with pytest.raises(ValueError, match="documents: the corpus is empty"):
            prepare_corpus(empty, tokenizer, cache_dir=tmp_path / "cache", num_proc=1)
    with pytest.raises(ValueError, match="documents: the corpus is empty"):
        encode_corpus(["\u200b"], tokenizer, num_proc=1)  # a character that yields no token
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for unusable in (a_file, a_file / "below"):
        with pytest.raises(ValueError, match="cache_dir"):
            prepare_corpus(documents(2), tokenizer, cache_dir=unusable, num_proc=1)
    with pytest.raises(ValueError, match="max_length"):
        prepare_corpus(documents(2), tokenizer, max_length=2, cache_dir=tmp_path / "cache")


def test_an_unreadable_cache_dir_is_named(tokenizer, tmp_path, monkeypatch):
    # tests may run as root, for whom chmod 000 changes nothing: the permission check is simulated
    locked = tmp_path / "locked"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if str(path).startswith(str(locked)) else real_access(path, mode))
    with pytest.raises(ValueError, match=r"cache_dir: '.*locked/corpus' must be readable and writable"):
        prepare_corpus(documents(2), tokenizer, cache_dir=locked, num_proc=1)


def masks_over_two_epochs(dataset, tokenizer, seed, workers=2):
    collator = WholeWordMaskCollator(tokenizer, mlm_probability=0.3, seed=seed)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=4, collate_fn=collator, num_workers=workers, persistent_workers=workers > 0
    )
    return [torch.cat([batch["labels"].flatten() for batch in loader]) for _ in range(2)]


def test_same_seed_same_masks_in_dataloader_workers(tokenizer, tmp_path):
    prepared = prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=tmp_path / "cache", num_proc=1)
    first = masks_over_two_epochs(prepared.dataset, tokenizer, seed=3)
    second = masks_over_two_epochs(prepared.dataset, tokenizer, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(first, second))
    assert not torch.equal(first[0], first[1])  # persistent workers keep drawing: fresh masks each epoch
    other = masks_over_two_epochs(prepared.dataset, tokenizer, seed=4)
    assert not torch.equal(first[0], other[0])


def test_core_defaults_follow_the_cpu_affinity_not_the_machine(monkeypatch):
    """num_proc, dataloader workers and torch threads count the cores this process may use (a container or
    taskset narrows them), not every core of the machine."""
    from workbench.masking.corpus import resolve_num_proc
    from workbench.threads import default_threads, usable_cores
    from workbench.train.pretraining import default_dataloader_workers

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert usable_cores() == 1
    assert resolve_num_proc(None) == 1 and default_dataloader_workers() == 1 and default_threads() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(6)), raising=False)
    assert resolve_num_proc(None) == 6 and default_dataloader_workers() == 4 and default_threads() == 3
