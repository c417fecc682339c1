"""MLM data collators: random token masking, whole-word masking (WWM) and knowledge-based dynamic masking (KDM).

A collator pads features of :func:`workbench.masking.encode_words` (or packed blocks) to the longest and returns
tensors for ``BertForMaskedLM``: ``input_ids``, ``attention_mask``, ``token_type_ids``, ``labels`` (``IGNORE_INDEX``
where nothing is predicted), with ``return_word_ids`` the ``word_ids`` and with ``sentence_order`` the ``sop_labels``
(:mod:`workbench.masking.sentence_order`). Budget (the workbench's adaptation of BERT, Devlin et al. 2019, Sec. 3.1:
no max(1, .), no cap): ``round(p * n)`` tokens per sequence, n = its non-special tokens; a chosen token becomes
[MASK] with probability 0.8, a random non-special token with 0.1, stays with 0.1. Each collator's generator, seeded
from ``seed`` (``(seed, worker_id)`` in a DataLoader worker), advances per batch: fresh masks every epoch, the same
masks for the same seed.
"""

from __future__ import annotations

import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np
import torch

from workbench.checks import IGNORE_INDEX, check_int, check_number, is_number
from workbench.config import MaskingSpec
from workbench.masking.sentence_order import sentence_order_batch

MASK_TOKEN_SHARE, RANDOM_TOKEN_SHARE = 0.8, 0.1
DEFAULT_ENTITY_WEIGHT, DEFAULT_EVENT_WEIGHT, DEFAULT_OTHER_WEIGHT = 10.0, 5.0, 1.0  # KDM's (the paper gives none)
_BRACKETED_TOKEN = re.compile(r"^\[[^\]]+\]$")


def _pad(features: Sequence[Mapping], key: str, pad_value: int, width: int) -> np.ndarray:
    return np.array(
        [[*feature[key], *[pad_value] * (width - len(feature[key]))] for feature in features], dtype=np.int64
    )


class _MaskingCollator:
    """Padding, budget, 80/10/10 replacement and seeding; subclasses choose the masked tokens."""

    def __init__(
        self,
        tokenizer,
        mlm_probability: float = 0.15,
        seed: int = 0,
        return_word_ids: bool = False,
        sentence_order: bool = False,
    ):
        self.mlm_probability = check_number(
            "mlm_probability", mlm_probability, 0, 1, low_inclusive=False, high_inclusive=False
        )
        if getattr(tokenizer, "mask_token_id", None) is None or getattr(tokenizer, "pad_token_id", None) is None:
            raise ValueError(f"tokenizer: must define mask_token and pad_token, got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.seed = check_int("seed", seed, 0)
        self.return_word_ids = return_word_ids
        self.sentence_order = bool(sentence_order)
        self._worker_id: int | None = None
        self._rng = np.random.default_rng(self.seed)
        special_ids = set(tokenizer.all_special_ids)
        self._special_ids = np.array(sorted(special_ids - {tokenizer.unk_token_id}), dtype=np.int64)
        replacements = (
            i
            for token, i in tokenizer.get_vocab().items()
            if i not in special_ids and not _BRACKETED_TOKEN.match(token)
        )
        self._replacement_ids = np.array(sorted(replacements), dtype=np.int64)

    def _generator(self) -> np.random.Generator:
        info = torch.utils.data.get_worker_info()
        worker_id = None if info is None else info.id
        if worker_id != self._worker_id:
            self._worker_id = worker_id
            self._rng = np.random.default_rng(self.seed if worker_id is None else [self.seed, worker_id])
        return self._rng

    def __call__(self, features: Sequence[Mapping]) -> dict[str, torch.Tensor]:
        if len(features) == 0:
            raise ValueError("features: must hold at least one example, got an empty batch")
        rng = self._generator()
        sop_labels = None
        if self.sentence_order:
            cls_id = self.tokenizer.cls_token_id
            sep_id = self.tokenizer.sep_token_id
            features, sop_labels = sentence_order_batch(list(features), rng, cls_id, sep_id)
        width = max(len(feature["input_ids"]) for feature in features)
        input_ids = _pad(features, "input_ids", self.tokenizer.pad_token_id, width)
        batch = {"input_ids": input_ids, "attention_mask": _pad(features, "attention_mask", 0, width)}
        has_types = "token_type_ids" in features[0]
        batch["token_type_ids"] = _pad(features, "token_type_ids", 0, width) if has_types else np.zeros_like(input_ids)
        word_ids = _pad(features, "word_ids", -1, width) if "word_ids" in features[0] else None
        maskable = (
            word_ids >= 0
            if word_ids is not None
            else (batch["attention_mask"] == 1) & ~np.isin(input_ids, self._special_ids)
        )
        budgets = np.rint(self.mlm_probability * maskable.sum(axis=1)).astype(np.int64)
        masked = self._choose(features, word_ids, maskable, batch["token_type_ids"], budgets, rng)
        batch["input_ids"], batch["labels"] = self._replace(input_ids, masked, rng)
        if self.return_word_ids:
            if word_ids is None:
                raise ValueError("features: must carry 'word_ids' with return_word_ids=True (use encode_words)")
            batch["word_ids"] = word_ids
        if sop_labels is not None:
            batch["sop_labels"] = sop_labels
        return {key: torch.from_numpy(value) for key, value in batch.items()}

    def _replace(self, input_ids: np.ndarray, masked: np.ndarray, rng: np.random.Generator):
        labels = np.where(masked, input_ids, IGNORE_INDEX)
        draw = rng.random(input_ids.shape)
        to_mask_token = masked & (draw < MASK_TOKEN_SHARE)
        to_random_token = masked & (draw >= MASK_TOKEN_SHARE) & (draw < MASK_TOKEN_SHARE + RANDOM_TOKEN_SHARE)
        corrupted = input_ids.copy()
        corrupted[to_mask_token] = self.tokenizer.mask_token_id
        corrupted[to_random_token] = rng.choice(self._replacement_ids, size=int(to_random_token.sum()))
        return corrupted, labels

    def _choose(self, features, word_ids, maskable, token_type_ids, budgets, rng) -> np.ndarray:
        raise NotImplementedError


class RandomMaskCollator(_MaskingCollator):
    """BERT token masking: ``round(p * n)`` tokens drawn uniformly without replacement per sequence
    (features without ``word_ids`` too: special tokens are then recognised by id)."""

    def _choose(self, features, word_ids, maskable, token_type_ids, budgets, rng) -> np.ndarray:
        keys = np.where(maskable, rng.random(maskable.shape), np.inf)
        ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
        return ranks < budgets[:, None]


class _WordMaskCollator(_MaskingCollator):
    """Masks whole words, filling each sequence's budget from an ordering of its words (a text with no
    word gets no mask)."""

    def _word_order(self, features, word_counts, rng) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Per word of the batch (rows concatenated): the ``np.lexsort`` keys (the last is the primary one; the
        smaller is masked first) and the span in words."""
        raise NotImplementedError

    def _choose(self, features, word_ids, maskable, token_type_ids, budgets, rng) -> np.ndarray:
        if word_ids is None:
            raise ValueError("features: must carry 'word_ids' for whole-word masking (use encode_words)")
        word_counts = np.where(maskable, word_ids + 1, 0).max(axis=1)
        first_word = np.concatenate(([0], np.cumsum(word_counts)[:-1]))
        batch_words = np.where(maskable, word_ids + first_word[:, None], -1)
        total = int(word_counts.sum())
        if total == 0:  # every text empty (or all whitespace): nothing to mask
            return np.zeros_like(maskable)
        word_lengths = np.bincount(batch_words[maskable], minlength=total)
        word_segment = np.zeros(total, dtype=np.int64)
        word_segment[batch_words[maskable]] = token_type_ids[maskable]
        keys, spans = self._word_order(features, word_counts, rng)
        order = np.lexsort((*keys, np.repeat(np.arange(len(word_counts)), word_counts))).tolist()
        chosen = bytearray(total)
        lengths = word_lengths.tolist()
        segments = word_segment.tolist()
        spans = spans.tolist()
        for start, count, budget in zip(first_word.tolist(), word_counts.tolist(), budgets.tolist()):
            _fill_budget(order[start : start + count], start + count, budget, lengths, segments, spans, chosen)
        chosen_words = np.frombuffer(bytes(chosen), dtype=np.uint8).astype(bool)
        return maskable & chosen_words[np.maximum(batch_words, 0)]


def _fill_budget(order, end_of_row, budget, lengths, segments, spans, chosen) -> None:
    """Greedy whole-word selection for one sequence, in ``order``, never over ``budget`` tokens: a span
    starts at word ``w`` and takes up to ``spans[w]`` following words of the same segment not chosen yet
    while they fit; a start whose first word does not fit is skipped (BERT / ALBERT ``create_pretraining_data.py``)."""
    remaining = budget
    for start in order:
        if remaining <= 0:
            return
        for word in range(start, min(end_of_row, start + spans[start])):
            if chosen[word] or segments[word] != segments[start] or lengths[word] > remaining:
                break
            chosen[word] = 1
            remaining -= lengths[word]


class WholeWordMaskCollator(_WordMaskCollator):
    """Whole-word masking over jieba words with n-gram spans: words in random order, each opening a span
    of n words, P(n) = (1/n) / sum_k (1/k) for n <= ``max_ngram`` (ALBERT, Lan et al. 2020, Sec. 4.1),
    until ``round(p * n_tokens)`` tokens are masked; a chosen word is masked whole."""

    def __init__(
        self,
        tokenizer,
        mlm_probability: float = 0.15,
        seed: int = 0,
        max_ngram: int = 1,
        return_word_ids: bool = False,
        sentence_order: bool = False,
    ):
        self.max_ngram = check_int("max_ngram", max_ngram, 1)
        super().__init__(tokenizer, mlm_probability, seed, return_word_ids, sentence_order)
        weights = 1.0 / np.arange(1, max_ngram + 1)
        self._ngram_probabilities = weights / weights.sum()

    def _word_order(self, features, word_counts, rng):
        total = int(word_counts.sum())
        keys = (rng.random(total),)
        if self.max_ngram == 1:
            return keys, np.ones(total, dtype=np.int64)
        return keys, rng.choice(np.arange(1, self.max_ngram + 1), size=total, p=self._ngram_probabilities)


# Knowledge-based dynamic masking: word types, sampling weights, corpus IDF

ENTITY_TAGS = frozenset({"ns", "nt", "nz"})
ENTITY_TAG_PREFIX = "nr"  # nr, nrfg, nrt: person names
EVENT_TAGS = frozenset({"v", "vn"})
# word types: the indices of KnowledgeMaskCollator's type weights
ENTITY = 0
EVENT = 1
OTHER = 2


def word_type(tag: str) -> int:
    """ENTITY (0) for a named-entity POS tag (nr*, ns, nt, nz), EVENT (1) for an event tag (v, vn), else OTHER (2)."""
    return ENTITY if tag in ENTITY_TAGS or tag.startswith(ENTITY_TAG_PREFIX) else EVENT if tag in EVENT_TAGS else OTHER


def compute_idf(segmented_texts: Iterable[Iterable[str]]) -> dict[str, float]:
    """Smoothed IDF of every word of a segmented corpus, counted streaming (a text at a time): idf(w) = ln((1 + N) /
    (1 + df(w))) + 1, N texts, df(w) texts holding w (scikit-learn's TfidfTransformer, smooth_idf)."""
    document_frequency: Counter[str] = Counter()
    n_texts = 0
    for words in segmented_texts:
        n_texts += 1
        document_frequency.update(set(words))
    if n_texts == 0:
        raise ValueError("segmented_texts: must hold at least one text, got none")
    return {word: math.log((1 + n_texts) / (1 + df)) + 1.0 for word, df in document_frequency.items()}


class KnowledgeMaskCollator(_WordMaskCollator):
    """Knowledge-based dynamic masking (KDM; Erlangshen, arXiv 2208.02959, Sec. 3.1: "to mask semantically rich tokens
    such as entities and events"; no algorithm given). The workbench's reading: every batch draws the masked words
    afresh with weight w = type_weight * idf(word): ``entity_weight`` for named entities (jieba POS nr*, ns, nt, nz, or
    in ``entities``), ``event_weight`` for events (v, vn), ``other_weight`` else; idf from ``idf`` (:func:`compute_idf`;
    a missing word counts as the rarest; 1 without a table). Weighted sampling without replacement by exponential keys
    E / w, E ~ Exp(1), ascending (Efraimidis & Spirakis 2006: P(first) = w / sum w); whole words in key order fill the
    budget, words of weight 0 last. Weights far apart (1e9 : 1e4 : 1) approach a fixed ranking entity > event > other.
    """

    def __init__(
        self,
        tokenizer,
        mlm_probability: float = 0.15,
        seed: int = 0,
        entities: Sequence[str] | set[str] | None = None,
        idf: Mapping[str, float] | None = None,
        return_word_ids: bool = False,
        entity_weight: float = DEFAULT_ENTITY_WEIGHT,
        event_weight: float = DEFAULT_EVENT_WEIGHT,
        other_weight: float = DEFAULT_OTHER_WEIGHT,
        sentence_order: bool = False,
    ):
        super().__init__(tokenizer, mlm_probability, seed, return_word_ids, sentence_order)
        self.entity_weight = check_number("entity_weight", entity_weight, 0)
        self.event_weight = check_number("event_weight", event_weight, 0)
        self.other_weight = check_number("other_weight", other_weight, 0)
        if self.entity_weight == self.event_weight == self.other_weight == 0:
            raise ValueError(
                "entity_weight, event_weight, other_weight: must not all be 0 (one of them chooses the words to mask), "
                f"got {self.entity_weight}, {self.event_weight} and {self.other_weight}"
            )
        self._type_weights = np.array([self.entity_weight, self.event_weight, self.other_weight])
        self.entities = frozenset(entities or ())
        self.idf = dict(idf or {})
        for word in (w for w, v in self.idf.items() if not (is_number(v) and 0 <= v <= sys.float_info.max)):
            check_number(f"idf[{word!r}]", self.idf[word], 0)  # the first bad value: a ValueError naming its word
        self._unseen_idf = max(self.idf.values(), default=0.0)

    def _word_order(self, features, word_counts, rng):
        counts = word_counts.tolist()
        tags = list(chain.from_iterable(f["word_tags"][:n] for f, n in zip(features, counts)))
        words = list(chain.from_iterable(f["words"][:n] for f, n in zip(features, counts)))
        types = [ENTITY if word in self.entities else word_type(tag) for tag, word in zip(tags, words)]
        idf = np.array(
            [self.idf.get(word, self._unseen_idf) for word in words] if self.idf else [1.0] * len(words), float
        )
        weights = self._type_weights[np.array(types, dtype=np.int64)]  # w = type_weight * idf(word)
        log_e = np.log(rng.standard_exponential(len(tags)))
        unweighted = (weights == 0) | (idf == 0)
        with np.errstate(divide="ignore"):  # log E - log w: no product overflows to inf, no quotient to 0 or inf (ties)
            keys = np.where(unweighted, log_e, log_e - np.log(weights) - np.log(idf))
        return (keys, unweighted), np.ones(len(tags), dtype=np.int64)


def build_collator(
    spec: MaskingSpec | dict[str, Any],
    tokenizer: Any,
    seed: int = 0,
    return_word_ids: bool = False,
    segmented_texts: Iterable[Sequence[str]] | None = None,
    sentence_order: bool = False,
) -> RandomMaskCollator | WholeWordMaskCollator | KnowledgeMaskCollator:
    """The collator of ``spec.strategy`` with ``spec.mlm_probability``.

    Args:
        spec: a :class:`MaskingSpec` or its mapping (WWM takes ``spec.max_ngram``).
        tokenizer: the model's tokenizer (``workbench.vocab.load_tokenizer``).
        seed: seeds the collator's generator.
        return_word_ids: keep the word spans in the batch (hard correction needs them).
        segmented_texts: for KDM, texts as lists of jieba words (e.g. blocks' ``words``, streamed) whose
            IDF weighs the words; None: no IDF.
        sentence_order: add sentence-order prediction (``sop_labels``).

    Returns:
        A ``RandomMaskCollator``, ``WholeWordMaskCollator`` or ``KnowledgeMaskCollator``.
    """
    spec = MaskingSpec.from_mapping(spec)
    common = {"mlm_probability": spec.mlm_probability, "seed": seed, "return_word_ids": return_word_ids}
    if spec.strategy == "random":
        return RandomMaskCollator(tokenizer, sentence_order=sentence_order, **common)
    if spec.strategy == "wwm":
        return WholeWordMaskCollator(tokenizer, max_ngram=spec.max_ngram, sentence_order=sentence_order, **common)
    idf = compute_idf(segmented_texts) if segmented_texts is not None else None
    return KnowledgeMaskCollator(tokenizer, idf=idf, sentence_order=sentence_order, **common)
