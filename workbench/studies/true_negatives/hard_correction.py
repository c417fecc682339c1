"""Notebook 03, sections 4-6: hard-correction statistics on held-out text (token and word level), Figure 3, and
Table 6's synonym sources (a lexicon against embedding look-up)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import PreTrainedModel
from transformers.utils import logging as transformers_logging

from workbench.checks import check_choice, check_int, check_names
from workbench.config import DataConfig, MaskingSpec
from workbench.data import load_texts
from workbench.losses import HC_LEVELS, IGNORE_INDEX, CorrectionCounts, HardCorrectionLoss
from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.models import build_masked_lm, labelled_logits
from workbench.synonyms import SynonymTable, lexicon_coverage, synonym_matcher, token_text
from workbench.vocab import load_tokenizer
from workbench.word_vectors import corpus_word_vectors

from .masking_demo import BLANK

Model = str | Path | PreTrainedModel
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
CORRECTION_COLUMNS = (
    *("prediction_rate", "iteration_rate", "accuracy", "synonym_accuracy", "wrong", "corrected"),
    *("sequences", "sequences_with_correction"),
)
EMBEDDING_OPTIONS = ("source", "k", "threshold", "dim", "window", "min_count")
"""The keys of notebook 03's ``embedding`` parameter: :func:`word_vectors`' source, dim, window and min_count, and
``SynonymTable.from_embeddings``' k and threshold."""


def heldout_texts(data: DataConfig | Mapping[str, Any], n_texts: int) -> list[str]:
    """The ``n_texts`` texts after the first ``data.max_train_samples`` (those pre-training reads): none of them is a
    pre-training text, nor repeats another (``load_texts`` gives each text once)."""
    check_int("n_texts", n_texts, 1)
    data = DataConfig.from_mapping(data)
    limit = data.max_train_samples
    if limit is None:
        raise ValueError("data.max_train_samples: must be set so that the texts after it are held out, got None")
    texts, _ = load_texts(data.replace(max_train_samples=None))
    if len(texts) < limit + n_texts:
        raise ValueError(
            f"n_texts: must be at most {len(texts) - limit} (texts after max_train_samples), got {n_texts}"
        )
    return texts[limit : limit + n_texts]


def load_masked_lm(model: Model, tokenizer: Any = None) -> tuple[Any, Any]:
    """``(model, tokenizer)``: a checkpoint folder loaded (without transformers' loading bar), or a module with its
    tokenizer."""
    if isinstance(model, (str, Path)):
        was_on = transformers_logging.is_progress_bar_enabled()
        transformers_logging.disable_progress_bar()
        try:
            loaded = build_masked_lm(model_name_or_path=model)
        finally:
            if was_on:
                transformers_logging.enable_progress_bar()
        return loaded, tokenizer if tokenizer is not None else load_tokenizer(model)
    if tokenizer is None:
        raise ValueError("tokenizer: required when model is a module rather than a checkpoint path")
    return model, tokenizer


@torch.no_grad()
def correction_statistics(
    model: Model,
    texts: Sequence[str],
    table: SynonymTable,
    masking: MaskingSpec | Mapping[str, Any] | None = None,
    tokenizer: Any = None,
    seed: int = 0,
    batch_size: int = 64,
    max_length: int = 128,
    level: str = "token",
    examples: int = 0,
) -> dict[str, Any]:
    """Table 2's hard-correction counts (:meth:`CorrectionCounts.as_dict`) at ``level`` of a masked LM on ``texts``
    masked by ``masking`` (default WWM, seeded), ``accuracy`` = (masked - wrong) / masked, ``synonym_accuracy`` =
    (masked - wrong + corrected) / masked and, with ``examples`` > 0, a table of that many corrected words."""
    check_choice("level", level, HC_LEVELS)
    check_int("examples", examples, 0)
    check_int("batch_size", batch_size, 1)
    if not texts:
        raise ValueError("texts: must hold at least one text, got none")
    model, tokenizer = load_masked_lm(model, tokenizer)
    features = encode_words(tokenizer, texts, JiebaSegmenter(), max_length=max_length)
    segmented = [feature["words"] for feature in features]
    collator = build_collator(
        MaskingSpec.from_mapping(masking), tokenizer, seed, return_word_ids=True, segmented_texts=segmented
    )
    correction = HardCorrectionLoss(synonym_matcher(tokenizer, table), level)
    stats = CorrectionCounts()
    rows = []
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model.to(device).eval()
    for start in range(0, len(features), batch_size):
        batch = collator(features[start : start + batch_size])
        labels = batch["labels"]
        word_ids = batch["word_ids"]
        masked = labels != IGNORE_INDEX
        logits, _ = labelled_logits(model, labels.to(device), **{key: batch[key].to(device) for key in MODEL_INPUTS})
        predictions = torch.full_like(labels, IGNORE_INDEX).masked_scatter(masked, logits.argmax(-1).cpu())
        counts = correction.prediction_counts(predictions, labels, word_ids)
        stats.update(counts)
        dropped = torch.nonzero(masked & (counts.labels == IGNORE_INDEX), as_tuple=True)
        corrected_words = sorted({(int(row), int(word_ids[row, column])) for row, column in zip(*dropped)})
        for row, word in corrected_words[: examples - len(rows)]:
            span = word_ids[row] == word
            tokens = tokenizer.convert_ids_to_tokens(features[start + row]["input_ids"])
            gold = token_text(tokenizer.convert_ids_to_tokens(labels[row][span].tolist()))
            masked_input = "".join(
                BLANK if masked[row, i] else token for i, token in enumerate(tokens) if word_ids[row, i] >= 0
            )
            predicted = token_text(tokenizer.convert_ids_to_tokens(predictions[row][span].tolist()))
            rows.append((texts[start + row], masked_input, gold, predicted, " ".join(sorted(table.synonyms(gold)))))
    result = stats.as_dict()
    total = max(result["masked"], 1)
    right = result["masked"] - result["wrong"]
    result.update(accuracy=right / total, synonym_accuracy=(right + result["corrected"]) / total)
    if examples:
        result["examples"] = pd.DataFrame(rows, columns=["text", "masked_input", "gold", "predicted", "gold_synonyms"])
    return result


def correction_table(
    runs: pd.DataFrame, texts: Sequence[str], table: SynonymTable, levels: Sequence[str] = HC_LEVELS, **options: Any
) -> pd.DataFrame:
    """:func:`correction_statistics` (``options``: masking, seed, ...) of every run's model on the same ``texts``, masks
    and ``table`` at each of ``levels``: one row per (run, level), encoder, masking, objective, level and the counts."""
    check_names("levels", levels, HC_LEVELS)
    rows = []
    for run in runs.itertuples():
        model, tokenizer = load_masked_lm(run.output_dir)
        for level in levels:
            stats = correction_statistics(model, texts, table, tokenizer=tokenizer, level=level, **options)
            rows.append(
                {"encoder": run.encoder, "masking": run.masking, "objective": run.objective, "level": level, **stats}
            )
    return pd.DataFrame(rows, columns=["encoder", "masking", "objective", "level", *CORRECTION_COLUMNS])


@torch.no_grad()
def worked_example(
    model: Model, text: str, word: str, table: SynonymTable, tokenizer: Any = None, top_k: int = 5, level: str = "token"
) -> dict[str, Any]:
    """The paper's Figure 3: mask every token of the jieba word ``word`` (first occurrence) in ``text``, predict, apply
    HC at ``level``. Returns text, masked_input, gold, predicted (argmax per token), synonyms, level, corrected (never a
    word of several tokens at ``token`` level, footnote 5), loss_plain (mean CE over the word's tokens), loss_hc (0 when
    corrected) and candidates (the ``top_k`` predictions per masked position: position, rank, token, probability)."""
    check_int("top_k", top_k, 1)
    check_choice("level", level, HC_LEVELS)
    model, tokenizer = load_masked_lm(model, tokenizer)
    feature = encode_words(tokenizer, [text], JiebaSegmenter())[0]
    check_choice("word", word, feature["words"])
    input_ids = torch.tensor([feature["input_ids"]])
    word_ids = torch.tensor([feature["word_ids"]])
    span = word_ids == feature["words"].index(word)
    labels = torch.where(span, input_ids, IGNORE_INDEX)
    masked_ids = torch.where(span, tokenizer.mask_token_id, input_ids)
    inputs = {key: torch.tensor([feature[key]]) for key in ("attention_mask", "token_type_ids")}
    model.eval()
    logits = labelled_logits(model, labels, input_ids=masked_ids, **inputs)[0].float().cpu()  # the word's rows
    correction = HardCorrectionLoss(synonym_matcher(tokenizer, table), level)
    top = logits.softmax(dim=-1).topk(top_k, dim=-1)
    candidates = [
        {
            "position": position,
            "rank": rank + 1,
            "token": tokenizer.convert_ids_to_tokens(int(token)),
            "probability": float(p),
        }
        for position, (tokens, probabilities) in enumerate(zip(top.indices, top.values))
        for rank, (token, p) in enumerate(zip(tokens, probabilities))
    ]
    shown = zip(tokenizer.convert_ids_to_tokens(masked_ids[0].tolist()), word_ids[0] >= 0)
    return {
        "text": text,
        "masked_input": "".join(token for token, keep in shown if keep),
        "gold": word,
        "predicted": token_text(tokenizer.convert_ids_to_tokens(logits.argmax(dim=-1).tolist())),
        "synonyms": sorted(table.synonyms(word)),
        "level": level,
        "corrected": correction.correction_counts(logits, labels, word_ids).sequences_with_correction == 1,
        "loss_plain": float(torch.nn.functional.cross_entropy(logits, input_ids[span])),
        "loss_hc": float(correction(logits, labels, word_ids=word_ids)),
        "candidates": pd.DataFrame(candidates),
    }


def corpus_words(texts: Sequence[str]) -> list[list[str]]:
    """The jieba words of each text, without punctuation and without words a lexicon file cannot hold (space, ``_``)."""
    segmenter = JiebaSegmenter()
    return [
        [word for word in segmenter.words(text) if re.search(r"\w", word) and not re.search(r"[\s_]", word)]
        for text in texts
    ]


def model_word_vectors(model: Model, words: Sequence[str], tokenizer: Any = None) -> tuple[np.ndarray, list[str]]:
    """``(vectors, words kept)``: a word's vector is the mean input embedding of its tokens; words with [UNK] are
    left out."""
    model, tokenizer = load_masked_lm(model, tokenizer)
    matrix = model.get_input_embeddings().weight.detach().float().cpu()
    vectors = []
    kept = []
    for word in dict.fromkeys(words):
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        if ids and tokenizer.unk_token_id not in ids:
            vectors.append(matrix[ids].mean(dim=0))
            kept.append(word)
    if len(kept) < 2:
        raise ValueError(f"words: need at least two words the tokenizer knows, got {kept}")
    return torch.stack(vectors).numpy(), kept


def word_vectors(
    texts: Sequence[str],
    source: str = "corpus",
    model: Model | None = None,
    dim: int = 50,
    window: int = 2,
    min_count: int = 2,
) -> tuple[np.ndarray, list[str]]:
    """The vectors of embedding look-up over the jieba words of ``texts`` seen ``min_count`` times: learnt from
    ``texts`` (``corpus``: :func:`workbench.word_vectors.corpus_word_vectors`) or ``model``'s input embeddings
    (``model``)."""
    check_choice("source", source, ("corpus", "model"))
    vectors, words = corpus_word_vectors(corpus_words(texts), dim=dim, window=window, min_count=min_count)
    if source == "corpus":
        return vectors, words
    if model is None:
        raise ValueError("model: source='model' needs a checkpoint (or a masked LM) whose input embeddings to read")
    return model_word_vectors(model, words)


def check_synonym_sources(embedding: Any, extra_lexicons: Any) -> None:
    """The rule of :func:`synonym_sources`' two parameters, for notebook 03's checks cell too (before any kernel
    starts): ``embedding`` a mapping with exactly the keys :data:`EMBEDDING_OPTIONS`; ``extra_lexicons`` None or a
    mapping of name -> lexicon file whose names are not "lexicon" or "embedding". ValueError naming the parameter."""
    if not isinstance(embedding, Mapping) or set(embedding) != set(EMBEDDING_OPTIONS):
        raise ValueError(
            f"embedding: must be a mapping with the keys {', '.join(EMBEDDING_OPTIONS)}, got {embedding!r}"
        )
    if extra_lexicons is not None and not isinstance(extra_lexicons, Mapping):
        raise ValueError(f"extra_lexicons: must be a mapping of name -> lexicon file, got {extra_lexicons!r}")
    taken = sorted({"lexicon", "embedding"} & set(extra_lexicons or {}))
    if taken:
        raise ValueError(f"extra_lexicons: {taken} name the lexicon and the embedding table themselves; rename them")


def synonym_sources(
    texts: Sequence[str],
    lexicon: SynonymTable,
    embedding: Mapping[str, Any],
    model: Model | None = None,
    extra_lexicons: Mapping[str, str | Path] | None = None,
) -> dict[str, SynonymTable]:
    """Table 6's synonym sources (notebook 03, section 6) by name: ``"lexicon"``, the ``lexicon`` the runs pre-trained
    with; ``"embedding"``, embedding look-up: each word's ``k`` nearest words (cosine at least ``threshold``) over the
    :func:`word_vectors` of ``texts`` (``source`` "corpus", or "model": ``model``'s input embeddings), made symmetric
    (``SynonymTable.from_embeddings``); then each of ``extra_lexicons`` (name -> a lexicon file) for the coverage
    table. ``embedding`` holds exactly the keys :data:`EMBEDDING_OPTIONS`; an extra lexicon may not take the name of
    the two sources it is compared with (:func:`check_synonym_sources`)."""
    check_synonym_sources(embedding, extra_lexicons)
    extra = dict(extra_lexicons or {})
    vectors, words = word_vectors(
        texts,
        embedding["source"],
        model=model,
        dim=embedding["dim"],
        window=embedding["window"],
        min_count=embedding["min_count"],
    )
    return {
        "lexicon": lexicon,
        "embedding": SynonymTable.from_embeddings(vectors, words, k=embedding["k"], threshold=embedding["threshold"]),
        **{name: SynonymTable.from_path(path) for name, path in extra.items()},
    }


def source_coverage(sources: Mapping[str, SynonymTable], texts: Sequence[str], model: Model) -> pd.DataFrame:
    """How much of the corpus each of ``sources`` (:func:`synonym_sources`) can correct:
    ``workbench.synonyms.lexicon_coverage`` over the jieba words of ``texts`` (:func:`corpus_words`) and the token
    texts of ``model``'s vocabulary (:func:`vocabulary_words`), each source's pairs against ``sources["lexicon"]``'s."""
    return lexicon_coverage(sources, corpus_words(texts), vocabulary_words(model), reference="lexicon")


def vocabulary_words(tokenizer: Any = None) -> list[str]:
    """The texts of the non-special tokens of ``tokenizer`` (or a checkpoint folder; None: the shipped vocabulary)."""
    tokenizer = load_tokenizer(tokenizer) if tokenizer is None or isinstance(tokenizer, (str, Path)) else tokenizer
    special = set(tokenizer.all_special_tokens)
    return [
        token_text([token])
        for token in tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        if token not in special
    ]
