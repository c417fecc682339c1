"""MLM data collators: random token masking, whole-word masking (WWM) and knowledge-based dynamic masking (KDM).

Every collator takes features from :func:`workbench.masking.encode_words`, pads
them to the longest sequence in the batch and returns tensors for
``BertForMaskedLM``: ``input_ids``, ``attention_mask``, ``token_type_ids`` and
``labels`` (-100 where nothing is predicted), plus ``word_ids`` when built with
``return_word_ids=True`` (the hard-correction objective needs word spans) and ``sop_labels``
when built with ``sentence_order=True`` (each block cut into two halves, swapped with
probability 0.5 before masking: :mod:`workbench.masking.sentence_order`).

Masking budget (BERT, Devlin et al. 2019, Sec. 3.1 and its
``create_pretraining_data.py``): per sequence ``round(p * n)`` tokens, n = the
number of non-special tokens, p = ``mlm_probability``. Chosen tokens become
[MASK] with probability 0.8, a random non-special vocabulary token with 0.1,
and stay unchanged with 0.1. [CLS], [SEP] and padding are never chosen.

Each collator owns a ``numpy.random.Generator`` seeded from ``seed``; it
advances with every batch, so masks are fresh each epoch ("dynamic" masking)
yet the same seed replays the same masks. In a ``DataLoader`` worker the
generator is re-seeded from ``(seed, worker_id)`` so workers do not repeat
each other.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from itertools import chain

import numpy as np
import torch

from workbench.checks import check_int, check_number
from workbench.losses import IGNORE_INDEX
from workbench.masking.knowledge import word_weights
from workbench.masking.sentence_order import sentence_order_batch

MASK_TOKEN_SHARE = 0.8
RANDOM_TOKEN_SHARE = 0.1
DEFAULT_ENTITY_WEIGHT, DEFAULT_EVENT_WEIGHT, DEFAULT_OTHER_WEIGHT = 10.0, 5.0, 1.0
"""KnowledgeMaskCollator's type weights (the workbench's choice; the paper gives none)."""
_BRACKETED_TOKEN = re.compile(r"^\[[^\]]+\]$")


def _pad(features: Sequence[Mapping], key: str, pad_value: int, width: int) -> np.ndarray:
    array = np.full((len(features), width), pad_value, dtype=np.int64)
    for row, feature in enumerate(features):
        values = feature[key]
        array[row, : len(values)] = values
    return array


class _MaskingCollator:
    """Shared padding, budget, 80/10/10 replacement and seeding; subclasses choose the masked tokens."""

    def __init__(
        self, tokenizer, mlm_probability: float = 0.15, seed: int = 0, return_word_ids: bool = False, sentence_order: bool = False
    ):
        self.mlm_probability = check_number(
            "mlm_probability", mlm_probability, 0.0, 1.0, low_inclusive=False, high_inclusive=False
        )
        if getattr(tokenizer, "mask_token_id", None) is None or getattr(tokenizer, "pad_token_id", None) is None:
            raise ValueError(f"tokenizer: must define mask_token and pad_token, got {type(tokenizer).__name__}")
        self.tokenizer = tokenizer
        self.seed = int(seed)
        self.return_word_ids = return_word_ids
        self.sentence_order = bool(sentence_order)
        self._worker_id: int | None = None
        self._rng = np.random.default_rng(self.seed)
        vocab = tokenizer.get_vocab()
        special_ids = set(tokenizer.all_special_ids)
        self._special_ids = np.array(sorted(special_ids - {tokenizer.unk_token_id}), dtype=np.int64)
        self._replacement_ids = np.array(
            sorted(i for token, i in vocab.items() if i not in special_ids and not _BRACKETED_TOKEN.match(token)),
            dtype=np.int64,
        )

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
            features, sop_labels = sentence_order_batch(
                list(features), rng, self.tokenizer.cls_token_id, self.tokenizer.sep_token_id
            )
        width = max(len(feature["input_ids"]) for feature in features)
        input_ids = _pad(features, "input_ids", self.tokenizer.pad_token_id, width)
        batch = {
            "input_ids": input_ids,
            "attention_mask": _pad(features, "attention_mask", 0, width),
            "token_type_ids": _pad(features, "token_type_ids", 0, width)
            if "token_type_ids" in features[0]
            else np.zeros_like(input_ids),
        }
        if "word_ids" in features[0]:
            word_ids = _pad(features, "word_ids", -1, width)
            maskable = word_ids >= 0
        else:
            word_ids = None
            maskable = (batch["attention_mask"] == 1) & ~np.isin(input_ids, self._special_ids)
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
    """BERT token masking: ``round(p * n)`` tokens drawn uniformly without replacement per sequence.

    Works with plain tokenizer features too (no ``word_ids``): special tokens
    are then recognised by id.
    """

    def _choose(self, features, word_ids, maskable, token_type_ids, budgets, rng) -> np.ndarray:
        keys = np.where(maskable, rng.random(maskable.shape), np.inf)
        ranks = np.argsort(np.argsort(keys, axis=1), axis=1)
        return ranks < budgets[:, None]


class _WordMaskCollator(_MaskingCollator):
    """Masks whole words: fills each sequence's token budget from an ordering of its words.

    A text with no word (empty, or only spaces) gets no mask: its budget is
    round(p * 0) = 0 and its labels stay -100, also when every text of the
    batch is empty.
    """

    def _word_order(self, features, word_counts, rng) -> tuple[tuple[np.ndarray, ...], np.ndarray]:
        """Per batch word (rows concatenated): sort keys for ``np.lexsort`` (last = primary; smaller =
        masked earlier) and the span length in words."""
        raise NotImplementedError

    def _choose(self, features, word_ids, maskable, token_type_ids, budgets, rng) -> np.ndarray:
        if word_ids is None:
            raise ValueError("features: must carry 'word_ids' for whole-word masking (use encode_words)")
        word_counts = np.where(maskable, word_ids + 1, 0).max(axis=1)
        first_word = np.concatenate(([0], np.cumsum(word_counts)[:-1]))
        batch_words = np.where(maskable, word_ids + first_word[:, None], -1)
        total = int(word_counts.sum())
        if total == 0:  # every text empty (or all whitespace): nothing to mask, labels all -100
            return np.zeros_like(maskable)
        flat = batch_words[maskable]
        word_lengths = np.bincount(flat, minlength=total)
        word_segment = np.zeros(total, dtype=np.int64)
        word_segment[flat] = token_type_ids[maskable]
        keys, spans = self._word_order(features, word_counts, rng)
        rows = np.repeat(np.arange(len(word_counts)), word_counts)
        order = np.lexsort((*keys, rows)).tolist()
        chosen = bytearray(total)
        lengths, segments, spans = word_lengths.tolist(), word_segment.tolist(), spans.tolist()
        for start, count, budget in zip(first_word.tolist(), word_counts.tolist(), budgets.tolist()):
            _fill_budget(order[start : start + count], start + count, budget, lengths, segments, spans, chosen)
        chosen_words = np.frombuffer(bytes(chosen), dtype=np.uint8).astype(bool)
        return maskable & chosen_words[np.maximum(batch_words, 0)]


def _fill_budget(order, end_of_row, budget, lengths, segments, spans, chosen) -> None:
    """Greedy whole-word selection for one sequence, in ``order``, never exceeding ``budget`` tokens.

    A span starts at word ``w`` and extends over up to ``spans[w]`` following
    words of the same segment that are not chosen yet, keeping as many words as
    fit the remaining budget; a start whose first word does not fit is skipped
    (Google BERT / ALBERT ``create_pretraining_data.py``).
    """
    remaining = budget
    for start in order:
        if remaining <= 0:
            return
        if chosen[start]:
            continue
        stop = start
        while (
            stop < end_of_row
            and stop - start < spans[start]
            and not chosen[stop]
            and segments[stop] == segments[start]
            and lengths[stop] <= remaining
        ):
            chosen[stop] = 1
            remaining -= lengths[stop]
            stop += 1


class WholeWordMaskCollator(_WordMaskCollator):
    """Whole-word masking over jieba words, with optional n-gram spans.

    Words are visited in random order; each visit opens a span of n words with
    P(n) proportional to 1/n for n = 1..``max_ngram`` (ALBERT, Lan et al. 2020,
    Sec. 4.1: p(n) = (1/n) / sum_k (1/k)), until ``round(p * n_tokens)`` tokens are masked.
    Every token of a chosen word is masked, none of the others.
    """

    def __init__(
        self,
        tokenizer,
        mlm_probability: float = 0.15,
        seed: int = 0,
        max_ngram: int = 1,
        return_word_ids: bool = False,
        sentence_order: bool = False,
    ):
        check_int("max_ngram", max_ngram, 1)
        super().__init__(tokenizer, mlm_probability, seed, return_word_ids, sentence_order)
        self.max_ngram = max_ngram
        weights = 1.0 / np.arange(1, max_ngram + 1)
        self._ngram_probabilities = weights / weights.sum()

    def _word_order(self, features, word_counts, rng):
        total = int(word_counts.sum())
        keys = (rng.random(total),)
        if self.max_ngram == 1:
            return keys, np.ones(total, dtype=np.int64)
        return keys, rng.choice(np.arange(1, self.max_ngram + 1), size=total, p=self._ngram_probabilities)


class KnowledgeMaskCollator(_WordMaskCollator):
    """Knowledge-based dynamic masking (KDM): entities and events are masked more often, at random.

    The paper (Erlangshen, arXiv 2208.02959, Sec. 2 and 3.1) proposes KDM "to mask
    semantically rich tokens such as entities and events" (Sec. 3.1), "a dynamic
    masking strategy based on knowledge in Masked Language Modeling (MLM) with
    whole word masking" (abstract); it gives no algorithm. The workbench's reading: every batch draws the
    masked words afresh at random, each word with weight

        w = type_weight * idf(word)

    type_weight = ``entity_weight`` (default 10) for named entities (jieba POS
    nr*, ns, nt, nz, or listed in ``entities``), ``event_weight`` (5) for
    events (POS v, vn), ``other_weight`` (1) for the rest; idf from ``idf``
    (word -> idf, see :func:`workbench.masking.compute_idf`; missing words
    count as the rarest, every idf is 1 without a table). The draw is weighted sampling without
    replacement by exponential keys (Efraimidis & Spirakis 2006): key =
    E / w with E ~ Exp(1), i.e. -log(U) / w, ascending, so P(a word comes
    first) = w / sum(w). Whole words are taken in key order until the
    ``round(p * n_tokens)`` budget is filled (a word that does not fit the
    remaining budget is skipped). Words of weight 0 come after every word of
    positive weight, in random order: they are masked only when the others
    cannot fill the budget. The masks therefore change from epoch to epoch
    ("dynamic") while entities and events are masked more often than other
    words; with weights far apart (e.g. 1e9 : 1e4 : 1) the draw approaches a
    fixed ranking entity > event > other. The default 10 : 5 : 1 are the
    workbench's choice (the paper gives no weights): on the sample sentences
    they mask entity and event words about twice as often as plain WWM, and a
    sentence's mask changes between successive epochs in most draws.
    Vectorised: one exponential draw per word per batch and one ``np.lexsort``.
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
        weights = {"entity_weight": entity_weight, "event_weight": event_weight, "other_weight": other_weight}
        for name, value in weights.items():
            numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (numeric and math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
        if entity_weight == event_weight == other_weight == 0:
            raise ValueError("entity_weight, event_weight, other_weight: must not all be 0")
        self.entity_weight, self.event_weight, self.other_weight = map(float, weights.values())
        self._type_weights = np.array([self.entity_weight, self.event_weight, self.other_weight], dtype=np.float64)
        self.entities = frozenset(entities or ())
        self.idf = dict(idf or {})
        if any(value < 0 for value in self.idf.values()):
            raise ValueError(f"idf: must map words to values >= 0 (see compute_idf), got {min(self.idf.values())}")
        self._unseen_idf = max(self.idf.values(), default=0.0)

    def _word_order(self, features, word_counts, rng):
        total = int(word_counts.sum())
        counts = word_counts.tolist()
        tags = list(chain.from_iterable(f["word_tags"][:n] for f, n in zip(features, counts)))
        needs_words = bool(self.entities or self.idf)
        words = list(chain.from_iterable(f["words"][:n] for f, n in zip(features, counts))) if needs_words else []
        weights = word_weights(tags, words, self.entities, self.idf, self._unseen_idf, self._type_weights)
        exponential = rng.standard_exponential(total)
        spans = np.ones(total, dtype=np.int64)
        unweighted = weights == 0
        if not unweighted.any():
            return (exponential / weights,), spans
        keys = np.divide(exponential, weights, out=exponential.copy(), where=~unweighted)
        return (keys, unweighted), spans
