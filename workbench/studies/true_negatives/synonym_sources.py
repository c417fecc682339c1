"""Notebook 03, section 6 (Table 6, second block): a lexicon against embedding look-up as the synonym source."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from workbench.checks import check_choice
from workbench.lexicon import SynonymTable, corpus_word_vectors, token_text
from workbench.masking import JiebaSegmenter
from workbench.vocab import load_tokenizer

from .hard_correction import Model, load_masked_lm

EMBEDDING_SOURCES = ("corpus", "model")


@lru_cache(maxsize=1)
def _segmenter() -> JiebaSegmenter:
    return JiebaSegmenter()


def corpus_words(texts: Sequence[str]) -> list[list[str]]:
    """The jieba words of each text, without punctuation and without words a lexicon file cannot hold (space, ``_``)."""
    return [
        [word for word in _segmenter().words(text) if re.search(r"\w", word) and not re.search(r"[\s_]", word)] for text in texts
    ]


def model_word_vectors(model: Model, words: Sequence[str], tokenizer: Any = None) -> tuple[np.ndarray, list[str]]:
    """``(vectors, words kept)``: each word's vector is the mean of its tokens' rows of the model's input embedding
    matrix; words with an [UNK] token are left out."""
    model, tokenizer = load_masked_lm(model, tokenizer)
    matrix = model.get_input_embeddings().weight.detach().float().cpu()
    vectors, kept = [], []
    for word in dict.fromkeys(words):
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        if ids and tokenizer.unk_token_id not in ids:
            vectors.append(matrix[ids].mean(dim=0))
            kept.append(word)
    if len(kept) < 2:
        raise ValueError(f"words: need at least two words the tokenizer knows, got {kept}")
    return torch.stack(vectors).numpy(), kept


def word_vectors(
    texts: Sequence[str], source: str = "corpus", model: Model | None = None, dim: int = 50, window: int = 2, min_count: int = 2
) -> tuple[np.ndarray, list[str]]:
    """The vectors of embedding look-up over the jieba words of ``texts`` seen ``min_count`` times: learnt from
    ``texts`` (``corpus``: :func:`workbench.lexicon.corpus_word_vectors`) or ``model``'s input embeddings (``model``)."""
    check_choice("source", source, EMBEDDING_SOURCES)
    vectors, words = corpus_word_vectors(corpus_words(texts), dim=dim, window=window, min_count=min_count)
    if source == "corpus":
        return vectors, words
    if model is None:
        raise ValueError("model: source='model' needs a checkpoint (or a masked LM) whose input embeddings to read")
    return model_word_vectors(model, words)


def lexicon_coverage(
    tables: Mapping[str, SynonymTable], texts: Sequence[str], tokenizer: Any = None, reference: str | None = None
) -> pd.DataFrame:
    """How much of a corpus each synonym source can correct, one row per ``name -> table``: words (with a synonym),
    pairs, corpus_word_types / corpus_word_tokens (share of distinct / running jieba words of ``texts`` with a
    synonym), corpus_pairs (both words in ``texts``), vocabulary_tokens (share of the tokenizer's non-special
    vocabulary with a synonym: footnote 5's measure) and, with ``reference``, in_reference (share of the corpus pairs
    the reference also lists). ``tokenizer``: a tokenizer, a checkpoint folder, or None (the shipped vocabulary)."""
    if not tables:
        raise ValueError("tables: must name at least one synonym table, got none")
    if reference is not None:
        check_choice("reference", reference, list(tables))
    tokenizer = load_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, (str, Path)) else tokenizer
    occurrences = Counter(word for document in corpus_words(texts) for word in document)
    special = set(tokenizer.all_special_tokens)
    vocabulary = [
        token_text([token]) for token in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))) if token not in special
    ]
    rows = []
    for name, table in tables.items():
        pairs = {(a, b) for group in table.groups for a in group for b in group if a < b}
        corpus_pairs = {(a, b) for a, b in pairs if a in occurrences and b in occurrences}
        covered = [word for word in occurrences if word in table]
        row = {
            "source": name,
            "words": len(set().union(*table.groups)),
            "pairs": len(pairs),
            "corpus_word_types": len(covered) / max(len(occurrences), 1),
            "corpus_word_tokens": sum(occurrences[word] for word in covered) / max(sum(occurrences.values()), 1),
            "corpus_pairs": len(corpus_pairs),
            "vocabulary_tokens": sum(token in table for token in vocabulary) / max(len(vocabulary), 1),
        }
        if reference is not None:
            listed = [tables[reference].are_synonyms(a, b) for a, b in corpus_pairs]
            row["in_reference"] = float(np.mean(listed)) if listed else np.nan
        rows.append(row)
    return pd.DataFrame(rows)


def neighbours(tables: Mapping[str, SynonymTable], words: Sequence[str]) -> pd.DataFrame:
    """The synonyms each source lists for each of ``words`` (sorted, space-separated): one row per word, one column per source."""
    return pd.DataFrame(
        [{"word": word, **{name: " ".join(sorted(t.synonyms(word))) for name, t in tables.items()}} for word in words]
    )
