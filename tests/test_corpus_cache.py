"""Corpus preparation as datasets map steps and its cache files: same blocks for any num_proc, hits and
misses, crash safety, progress bars, seeded masks in DataLoader workers, argument errors."""

from __future__ import annotations

import gzip
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
from workbench.masking.corpus import CACHE_ENV, chunk_documents
from workbench.train.run_folder import progress_bars
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


def files(cache_dir, step: str) -> list[str]:
    return sorted(name for name in os.listdir(cache_dir / "corpus") if name.startswith(f"{step}-"))


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
    with pytest.raises(ValueError, match=r"^documents\[1\]: character 2 "):
        chunk_documents(["好", "ab\ud800c"])  # a lone surrogate (e.g. a JSON "\ud800" escape) is not text


def test_cache_hit_on_the_same_inputs_and_miss_after_any_change(tokenizer, tmp_path):
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("\n".join(documents()), encoding="utf-8")
    cache_dir = tmp_path / "cache"

    def prepare(max_length=32, limit=None, tok=tokenizer, segmenter=None, block_boundary="sentence", num_proc=1):
        docs = corpus_file.read_text(encoding="utf-8").splitlines()[:limit]
        return prepare_corpus(
            docs,
            tok,
            max_length=max_length,
            cache_dir=cache_dir,
            num_proc=num_proc,
            segmenter=segmenter,
            block_boundary=block_boundary,
        )

    first = prepare()
    assert not first.cache_hit and files(cache_dir, "pack") == [f"pack-{first.key}.arrow"]
    again = prepare()
    assert again.cache_hit and again.key == first.key and rows(again.dataset) == rows(first.dataset)
    assert again.dataset.cache_files and str(cache_dir) in again.dataset.cache_files[0]["filename"]  # memory-mapped
    assert again.tokens == sum(len(ids) for ids in first.dataset["input_ids"]) and again.blocks == len(first.dataset)
    lines = corpus_file.read_text(encoding="utf-8").splitlines()
    assert (
        again.corpus_characters == sum(len("".join(line.split())) for line in lines) < sum(map(len, lines))
    )  # no spaces
    assert prepare(num_proc=2).cache_hit  # the process count changes nothing

    user_dict = tmp_path / "user.txt"
    user_dict.write_text("中国移动 10 nt\n", encoding="utf-8")
    changes = {
        "max_length": lambda: prepare(max_length=48),
        "max_train_samples": lambda: prepare(limit=10),
        "block_boundary": lambda: prepare(block_boundary="word"),
        "pos": lambda: prepare(segmenter=JiebaSegmenter(pos=False)),
        "user_dict": lambda: prepare(segmenter=JiebaSegmenter(user_dict)),
    }
    keys = {first.key}
    for change, prepared in changes.items():
        result = prepared()
        assert not result.cache_hit and result.key not in keys, change
        keys.add(result.key)
    user_dict.write_text("中国移动 10 nz\n", encoding="utf-8")  # the same file with other content
    edited_dict = prepare(segmenter=JiebaSegmenter(user_dict))
    assert not edited_dict.cache_hit and edited_dict.key not in keys
    keys.add(edited_dict.key)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text(default_vocab_file().read_text(encoding="utf-8") + "新词\n", encoding="utf-8")
    other_vocab = prepare(tok=load_tokenizer(vocab_file=vocab))
    assert not other_vocab.cache_hit and other_vocab.key not in keys
    keys.add(other_vocab.key)
    corpus_file.write_text("\n".join(documents(seed=1)), encoding="utf-8")
    edited = prepare()
    assert not edited.cache_hit and edited.key not in keys
    assert files(cache_dir, "pack") == sorted(f"pack-{key}.arrow" for key in keys | {edited.key})
    # segmentation ran once per corpus text and jieba setting: not again for a new max_length, vocabulary or boundary
    assert len(files(cache_dir, "segment")) == 6  # corpus, first 10 lines, pos=False, two user dicts, edited corpus


def test_the_key_ignores_the_tokenizers_truncation_and_padding_state(tokenizer, tmp_path):
    # the fast tokenizer keeps the truncation / padding of its last call in its serialisation; the
    # blocks do not depend on it, so neither may the key (else an earlier call makes a spurious miss)
    first = prepare_corpus(documents(4), tokenizer, max_length=32, cache_dir=tmp_path, num_proc=1)
    tokenizer(["今天天气很好"], truncation=True, max_length=4, padding="max_length")
    again = prepare_corpus(documents(4), tokenizer, max_length=32, cache_dir=tmp_path, num_proc=1)
    assert again.cache_hit and again.key == first.key
    tokenizer(["今天天气很好"])  # back to no truncation and no padding


def test_a_failed_step_leaves_no_cache_file_and_is_retried(tokenizer, tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(corpus_module, "_pack", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=tmp_path, num_proc=1)
    assert files(tmp_path, "pack") == [] and len(files(tmp_path, "encode")) == 1
    monkeypatch.undo()
    result = prepare_corpus(documents(), tokenizer, max_length=32, cache_dir=tmp_path, num_proc=1)
    assert not result.cache_hit and len(files(tmp_path, "pack")) == 1


def test_a_killed_run_leaves_no_trusted_partial_cache(tokenizer, tmp_path, monkeypatch):
    script = textwrap.dedent(
        f"""
        import os, signal
        from workbench.masking import corpus, prepare_corpus
        from workbench.vocab import load_tokenizer
        from workbench.data import sample_corpus
        corpus.CHUNK_CHARACTERS = 100
        encode, calls = corpus._encode, []
        def encode_then_die(*args, **kwargs):
            calls.append(1)
            if len(calls) == 15:  # after 10 chunks went to the step's temporary file
                os.kill(os.getpid(), signal.SIGKILL)
            return encode(*args, **kwargs)
        corpus._encode = encode_then_die
        sentences = sample_corpus(n_sentences=384, seed=0)
        docs = [" ".join(sentences[i * 4 : i * 4 + 4]) for i in range(96)]
        prepare_corpus(docs, load_tokenizer(), max_length=32, cache_dir={str(tmp_path)!r}, num_proc=1)
        """
    )
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run(
        [sys.executable, "-c", script], env=environment, capture_output=True, timeout=300, check=False
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    left = sorted(os.listdir(tmp_path / "corpus"))
    assert len(files(tmp_path, "segment")) == 1 and files(tmp_path, "encode") == [] and files(tmp_path, "pack") == []
    assert any(
        name.startswith("tmp") and os.path.getsize(tmp_path / "corpus" / name) > 0 for name in left
    )  # never read
    monkeypatch.setattr(corpus_module, "CHUNK_CHARACTERS", 100)
    expected = encode_corpus(documents(96), tokenizer, max_length=32, num_proc=1)
    result = prepare_corpus(documents(96), tokenizer, max_length=32, cache_dir=tmp_path, num_proc=1)
    assert not result.cache_hit and rows(result.dataset) == rows(expected)
    assert len(files(tmp_path, "segment")) == 1  # the complete step before the kill is used
    assert prepare_corpus(documents(96), tokenizer, max_length=32, cache_dir=tmp_path, num_proc=1).cache_hit


def test_each_step_shows_a_progress_bar_unless_quiet(tokenizer, capfd):
    encode_corpus(documents(4), tokenizer, max_length=32, num_proc=1)
    shown = capfd.readouterr().err
    assert all(step in shown for step in ("segment (jieba)", "encode", "pack into blocks"))
    with progress_bars(False):  # a training config with quiet: true
        encode_corpus(documents(4), tokenizer, max_length=32, num_proc=1)
    assert capfd.readouterr().err == ""


def test_corpus_files_that_are_not_utf8_text_name_the_file_and_line(tmp_path):
    from workbench.data import load_texts

    good = "新闻联播。\n今天天气很好。\n"
    cases = {
        "gbk.txt": (good.encode("gbk"), r"gbk\.txt:1: "),
        "surrogate.txt": (good.encode() + b"\xed\xa0\x80\n", r"surrogate\.txt:3: "),  # an encoded lone surrogate
        "plain.txt.gz": (good.encode(), r"plain\.txt\.gz(:\d+)?: "),  # not gzip
        "cut.txt.gz": (gzip.compress(good.encode() * 200)[:-40], r"cut\.txt\.gz(:\d+)?: "),  # truncated
    }
    for name, (data, named) in cases.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match=named):
            load_texts({"source": "corpus", "path": str(tmp_path / name)})
    (tmp_path / "ok.txt.gz").write_bytes(gzip.compress(("\ufeff" + good).encode()))
    assert load_texts({"source": "corpus", "path": str(tmp_path / "ok.txt.gz")})[0] == ["新闻联播。", "今天天气很好。"]


def test_default_cache_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "wb"))
    assert default_cache_dir() == tmp_path / "wb"
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "workbench"


def test_bad_arguments_raise_naming_the_parameter(tokenizer, tmp_path):
    for bad in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match=r"^num_proc:"):
            encode_corpus(documents(2), tokenizer, num_proc=bad)
    for empty in ([], ["", "  \n"]):
        with pytest.raises(ValueError, match=r"^documents:"):
            encode_corpus(empty, tokenizer, num_proc=1)
        with pytest.raises(ValueError, match=r"^documents:"):
            prepare_corpus(empty, tokenizer, cache_dir=tmp_path / "cache", num_proc=1)
    with pytest.raises(ValueError, match=r"^documents:"):
        encode_corpus(["\u200b"], tokenizer, num_proc=1)  # a character that yields no token
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for unusable in (a_file, a_file / "below"):
        with pytest.raises(ValueError, match=r"^cache_dir:"):
            prepare_corpus(documents(2), tokenizer, cache_dir=unusable, num_proc=1)
    for name, value in (("max_length", 2), ("block_boundary", "paragraph")):
        with pytest.raises(ValueError, match=rf"^{name}:"):
            prepare_corpus(documents(2), tokenizer, cache_dir=tmp_path / "cache", **{name: value})


def test_an_unreadable_cache_dir_is_named(tokenizer, tmp_path, monkeypatch):
    # tests may run as root, for whom chmod 000 changes nothing: the permission check is simulated
    locked = tmp_path / "locked"
    real_access = os.access
    monkeypatch.setattr(
        os, "access", lambda path, mode: False if str(path).startswith(str(locked)) else real_access(path, mode)
    )
    with pytest.raises(ValueError, match=r"^cache_dir: '.*locked/corpus'"):
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
