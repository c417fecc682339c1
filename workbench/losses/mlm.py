"""MLM objectives against false negatives: hard correction (HC) and soft regularization (SR).

Paper: Zhang, Zhao, Utiyama, Sumita, "Language Model Pre-training on True
Negatives" (AAAI 2023), Sec. 3. A masked position whose prediction differs from
the gold token but is a synonym of it is a *false negative*: plain MLM punishes a
correct answer. HC removes such positions from the loss (eq. 2); SR adds a
penalty that grows with the semantic distance between prediction and gold
(eq. 3, and the sentence-level variant of Sec. 5).

Three loss modules, registered in :func:`workbench.losses.build_loss`:

* ``"mlm"``: :class:`MaskedLMLoss`, cross-entropy over the masked positions (eq. 1);
* ``"mlm_hc"``: :class:`HardCorrectionLoss` (eq. 2);
* ``"mlm_sr"``: :class:`SoftRegularizationLoss`, eq. 1 + ``weight`` x eq. 3 (or the
  sentence-level KL).

They are separate classes because their parameters differ (a synonym table and a
tokenizer for HC, a weight and a form for SR); one class with every option would
accept meaningless combinations. All three share one call signature,
``forward(logits, labels, *, model=None, embeddings=None, input_ids=None,
attention_mask=None, token_type_ids=None, word_ids=None, stats=None)``, so a
trainer hands every objective the same context, and
:meth:`MaskedLMLoss.loss_and_items` also returns the number of positions the mean
runs over (for gradient accumulation). Nothing in a forward pass waits for the
device (no ``.item()``, no boolean indexing) except SR with
``prediction="expected"``, which gathers the masked rows first (one host sync
that saves a vocabulary-wide product at the ~85% unmasked positions).

Correction rates are reported as the paper's Table 2: prediction level = share
of wrong predictions that were corrected; iteration level = share of sequences
with at least one correction (:class:`CorrectionStats`, accumulated as device
tensors and read only by :meth:`CorrectionStats.as_dict`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from workbench.config import HC_LEVELS, KL_DIRECTIONS, SR_LEVELS, SR_PREDICTIONS  # the choices, defined once
from workbench.lexicon import SynonymIdIndex, SynonymTable, token_text
from workbench.losses._base import IGNORE_INDEX, check_choice, check_range

__all__ = [
    "CONTEXT_KEYS",
    "HC_LEVELS",
    "IGNORE_INDEX",
    "KL_DIRECTIONS",
    "SR_LEVELS",
    "SR_PREDICTIONS",
    "CorrectionCounts",
    "CorrectionStats",
    "HardCorrectionLoss",
    "MaskedLMLoss",
    "SoftRegularizationLoss",
    "correct_labels",
    "correct_predictions",
    "hard_correction",
    "masked_cross_entropy",
    "soft_regularization",
    "token_text",
]

COUNT_FIELDS = ("masked", "wrong", "corrected", "sequences", "sequences_with_correction")
CONTEXT_KEYS = ("model", "embeddings", "input_ids", "attention_mask", "token_type_ids", "word_ids", "stats")


@dataclass
class CorrectionCounts:
    """What one hard-correction call saw.

    ``counts``: int64 tensor ``(5,)`` on the logits' device holding :data:`COUNT_FIELDS`
    (masked positions, wrong predictions among them, wrong predictions corrected,
    sequences, sequences with a correction); ``labels``: the corrected labels (-100 at
    corrected positions). The named properties read one count each (a host sync).
    """

    counts: torch.Tensor
    labels: torch.Tensor

    def as_dict(self) -> dict[str, int]:
        """The five counts by name (one host sync)."""
        return dict(zip(COUNT_FIELDS, self.counts.tolist()))

    @property
    def masked(self) -> int:
        return int(self.counts[0])

    @property
    def wrong(self) -> int:
        return int(self.counts[1])

    @property
    def corrected(self) -> int:
        return int(self.counts[2])

    @property
    def sequences(self) -> int:
        return int(self.counts[3])

    @property
    def sequences_with_correction(self) -> int:
        return int(self.counts[4])


class CorrectionStats:
    """Running hard-correction counts and the paper's Table 2 rates.

    ``update`` adds a :class:`CorrectionCounts` on the device (no host sync); ``as_dict``
    reads the totals once and adds prediction_rate = corrected / wrong and
    iteration_rate = sequences_with_correction / sequences (both 0 before any data).
    """

    def __init__(self) -> None:
        self._totals: torch.Tensor | None = None

    def reset(self) -> None:
        self._totals = None

    def update(self, counts: CorrectionCounts) -> None:
        self._totals = (
            counts.counts.detach().clone() if self._totals is None else self._totals + counts.counts.to(self._totals.device)
        )

    def as_dict(self) -> dict[str, float]:
        totals = [0] * len(COUNT_FIELDS) if self._totals is None else self._totals.tolist()
        result: dict[str, float] = dict(zip(COUNT_FIELDS, totals))
        wrong, corrected = result["wrong"], result["corrected"]
        sequences, with_correction = result["sequences"], result["sequences_with_correction"]
        result["prediction_rate"] = corrected / wrong if wrong else 0.0
        result["iteration_rate"] = with_correction / sequences if sequences else 0.0
        return result

    def _count(self, field: str) -> int:
        return 0 if self._totals is None else int(self._totals[COUNT_FIELDS.index(field)])

    @property
    def masked(self) -> int:
        return self._count("masked")

    @property
    def wrong(self) -> int:
        return self._count("wrong")

    @property
    def corrected(self) -> int:
        return self._count("corrected")

    @property
    def sequences(self) -> int:
        return self._count("sequences")

    @property
    def sequences_with_correction(self) -> int:
        return self._count("sequences_with_correction")

    @property
    def prediction_rate(self) -> float:
        return self.as_dict()["prediction_rate"]

    @property
    def iteration_rate(self) -> float:
        return self.as_dict()["iteration_rate"]


def _check_token_inputs(logits: torch.Tensor, labels: torch.Tensor) -> None:
    if logits.ndim != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be (batch, length, vocab) and labels (batch, length); got {tuple(logits.shape)} "
            f"and {tuple(labels.shape)}"
        )


def _check_same_shape(labels: torch.Tensor, **tensors: torch.Tensor | None) -> None:
    for name, tensor in tensors.items():
        if tensor is not None and tensor.shape != labels.shape:
            raise ValueError(f"{name} must have the shape of labels {tuple(labels.shape)}, got {tuple(tensor.shape)}")


def _at_least_float32(tensor: torch.Tensor) -> torch.Tensor:
    """Half-precision tensors upcast to float32; float32 and float64 kept as they are."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


def argmax_predictions(logits: torch.Tensor) -> torch.Tensor:
    """r = argmax over the vocabulary (first index on ties), without gradient. ``max(...).indices``
    rather than ``argmax``: the same indices, about 1.7x faster over a 21k vocabulary on CPU."""
    return logits.detach().max(dim=-1).indices


def masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mean, count)``: mean over positions with ``labels != -100`` of ``-log softmax(logits_i)[y_i]``
    (eq. 1) and the number of such positions; the mean is 0, still attached to the graph, when
    there are none. No host synchronisation.

    Half-precision logits: the per-position terms come in the logits' dtype (the vocabulary-wide
    logits are not copied to float32), their sum and mean are accumulated in float32 (a sum of
    fp16 terms overflows long before their mean does) and the mean is returned in the logits' dtype."""
    count = labels.ne(IGNORE_INDEX).sum()
    terms = F.cross_entropy(logits.flatten(0, -2), labels.flatten(), ignore_index=IGNORE_INDEX, reduction="none")
    mean = _at_least_float32(terms).sum() / count.clamp_min(1)
    return mean.to(logits.dtype), count


# --- hard correction ---------------------------------------------------------------------------


def _spans(labels: torch.Tensor, word_ids: torch.Tensor | None) -> torch.Tensor:
    """Span number of every position, flattened (B*T,): positions judged together share one.

    Without ``word_ids`` each position is its own span. With them a span is one word's
    run of positions (word ids are contiguous per word); positions without a word (-1)
    stand alone. Spans are numbered 0, 1, ... in position order.
    """
    if word_ids is None:
        return torch.arange(labels.numel(), device=labels.device)
    previous = torch.cat([torch.full_like(word_ids[:, :1], -2), word_ids[:, :-1]], dim=1)
    starts = (word_ids != previous) | (word_ids < 0)
    return starts.flatten().cumsum(0) - 1


def correct_labels(
    logits: torch.Tensor,
    labels: torch.Tensor,
    index: SynonymIdIndex,
    level: str,
    word_ids: torch.Tensor | None = None,
) -> CorrectionCounts:
    """The hard-correction decision (paper eq. 2) on the argmax predictions r_i = argmax_v
    logits[i, v]: :func:`correct_predictions` with ``argmax_predictions(logits)``."""
    return correct_predictions(argmax_predictions(logits), labels, index, level, word_ids)


def correct_predictions(
    predictions: torch.Tensor,
    labels: torch.Tensor,
    index: SynonymIdIndex,
    level: str,
    word_ids: torch.Tensor | None = None,
) -> CorrectionCounts:
    """The hard-correction decision (paper eq. 2) for predicted token ids r (``predictions``, the
    shape of ``labels``): which masked positions leave the loss. :func:`correct_labels` passes the
    argmax of an MLM head; ELECTRA (paper App. A) passes the generator's sampled replacements to
    relabel the discriminator's targets.

    A *unit* of masked positions is corrected (all its labels become -100) when the text its
    predictions spell is a synonym of the text its gold tokens spell (``index``, from a
    :class:`SynonymTable`):

    * ``level="token"`` (the paper): a unit is one position whose gold token is a whole
      word. With ``word_ids`` that means a jieba word of exactly one token; positions of
      multi-token words are never corrected (paper footnote 5: "words tokenized into
      several pieces ... the correction will not be applied"). Without ``word_ids`` every
      token counts as a word.
    * ``level="word"`` (the workbench's own extension for Chinese, where most words are
      several character tokens): a unit is a jieba word whose every token is masked, and
      the texts compared are the concatenated gold and predicted characters (gold 美丽,
      predicted 漂亮). Partially masked words are never corrected. Needs ``word_ids``.

    Vectorised: spans -> per-span text hashes (segment sums) -> word numbers
    (``searchsorted``) -> pair check (``searchsorted``); no loop over positions, no host
    synchronisation. ``counts``: masked, wrong (r_i != y_i), corrected (wrong positions in
    corrected units), sequences, sequences with a correction.
    """
    check_choice("level", level, HC_LEVELS)
    if level == "word" and word_ids is None:
        raise ValueError("word_ids: level='word' needs the word ids of the batch (a collator with return_word_ids=True)")
    batch_size = labels.shape[0]
    masked = labels != IGNORE_INDEX
    wrong = masked & (predictions != labels)
    spans = _spans(labels, word_ids)
    num_spans = labels.numel()
    span_tokens = torch.zeros(num_spans, dtype=torch.int64, device=labels.device).scatter_add_(0, spans, torch.ones_like(spans))
    span_masked = torch.zeros_like(span_tokens).scatter_add_(0, spans, masked.flatten().long())
    eligible = span_masked == span_tokens
    if level == "token":
        eligible &= span_tokens == 1
    gold_words = index.span_words(torch.where(masked, labels, 0).flatten(), spans, num_spans)
    predicted_words = index.span_words(predictions.flatten(), spans, num_spans)
    corrected_spans = eligible & index.are_synonyms(gold_words, predicted_words)
    corrected = corrected_spans[spans].view_as(labels) & masked
    counts = torch.stack(
        [
            masked.sum(),
            wrong.sum(),
            (wrong & corrected).sum(),
            torch.full((), batch_size, dtype=torch.int64, device=labels.device),  # a fill, not a host copy
            corrected.any(dim=1).sum(),
        ]
    )
    return CorrectionCounts(counts=counts, labels=labels.masked_fill(corrected, IGNORE_INDEX))


def hard_correction(
    logits: torch.Tensor,
    labels: torch.Tensor,
    input_ids: torch.Tensor,
    table: SynonymTable,
    tokenizer: Any,
    word_ids: torch.Tensor | None = None,
    *,
    level: str | None = None,
) -> tuple[torch.Tensor, CorrectionCounts]:
    """MLM cross-entropy with false negatives removed (HC, paper eq. 2), as a function.

    loss = mean over the masked positions left after :func:`correct_labels` of
    -log softmax(logits_i)[y_i] (zero, still attached to the graph, when none remain), as
    the paper's implementation: corrected labels set to -100 before cross-entropy (App. A).

    ``level=None`` keeps this function's behaviour from before ``level`` existed: ``"word"``
    when ``word_ids`` are given, ``"token"`` otherwise; :class:`HardCorrectionLoss`
    defaults to the paper's ``"token"``. ``table.id_index(tokenizer)`` is built on the
    first call and reused. ``input_ids`` (the corrupted inputs) is only checked for shape.
    Returns ``(loss, CorrectionCounts)``.
    """
    _check_token_inputs(logits, labels)
    _check_same_shape(labels, input_ids=input_ids, word_ids=word_ids)
    if level is None:
        level = "token" if word_ids is None else "word"
    counts = correct_labels(logits, labels, table.id_index(tokenizer), level, word_ids)
    loss, _ = masked_cross_entropy(logits, counts.labels)
    return loss, counts


# --- soft regularization -----------------------------------------------------------------------


def soft_regularization(
    logits: torch.Tensor,
    labels: torch.Tensor,
    embeddings: torch.Tensor | None = None,
    weight: float = 1.0,
    level: str = "token",
    prediction: str = "argmax",
    *,
    kl_direction: str = "filled||original",
    model: nn.Module | None = None,
    input_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Soft regularization (SR) between predictions and gold tokens, times ``weight``.

    ``level="token"`` (paper eq. 3): L_sr = (1/N_m) sum_k (1 - cos(e_k, e'_k)) over the N_m
    masked positions, e_k = E[w_k] the gold token's row of the input embedding matrix
    ``embeddings`` E (vocab, hidden), e'_k the prediction's:

    - ``prediction="argmax"`` (default, the paper): e'_k = E[r_k], r_k = argmax logits_k.
      The argmax has no gradient; the penalty trains the embedding matrix (the paper
      applies SR "to the embedding layer", Sec. 3.2). Exactly 0 wherever r_k = w_k.
    - ``prediction="expected"`` (the workbench's variant): e'_k = softmax(logits_k) @ E,
      the expected embedding, so the penalty also reaches the logits.

    ``level="sentence"`` (paper Sec. 5, "From Word-level to Sentence-level
    Regularization"): s = the original sentence (gold tokens restored from ``labels`` into
    ``input_ids``), s_p = s with the masked positions filled with r_k; H_s, H_p = the last
    hidden states of ``model``'s encoder on s and s_p; P = softmax(H_p), Q = softmax(H_s)
    over the hidden dimension per token. ``kl_direction="filled||original"`` (default, the
    paper's L_kl = KL(H_p || H_s)) gives the mean over real tokens (``attention_mask``) of
    sum_d P_d (log P_d - log Q_d); ``"original||filled"`` swaps P and Q. Both passes carry
    gradient. Needs ``model``, ``input_ids`` and ``attention_mask``.

    Zero (attached to the graph) when there is no masked position.
    """
    _check_token_inputs(logits, labels)
    check_choice("level", level, SR_LEVELS)
    check_choice("prediction", prediction, SR_PREDICTIONS)
    check_choice("kl_direction", kl_direction, KL_DIRECTIONS)
    if level == "token":
        value = _token_soft_regularization(logits, labels, embeddings, prediction)
    else:
        value = _sentence_soft_regularization(logits, labels, model, input_ids, attention_mask, token_type_ids, kl_direction)
    return weight * value


def _token_soft_regularization(logits, labels, embeddings, prediction) -> torch.Tensor:
    if embeddings is None or embeddings.ndim != 2 or embeddings.shape[0] != logits.shape[-1]:
        raise ValueError("embeddings must be the (vocab, hidden) input embedding matrix for level='token'")
    masked = labels != IGNORE_INDEX
    if prediction == "expected":  # only the masked rows: one host sync, 1/0.15 less work
        gold = _at_least_float32(embeddings[labels[masked]])
        predicted = _at_least_float32(logits[masked]).softmax(dim=-1) @ _at_least_float32(embeddings)
        distance = 1.0 - F.cosine_similarity(gold, predicted, dim=-1)
        return distance.sum() / distance.numel() if distance.numel() else logits.sum() * 0.0
    gold = _at_least_float32(embeddings[torch.where(masked, labels, 0)])
    predicted = _at_least_float32(embeddings[argmax_predictions(logits)])
    distance = 1.0 - F.cosine_similarity(gold, predicted, dim=-1)
    return torch.where(masked, distance, 0.0).sum() / masked.sum().clamp_min(1)


def _encoder_states(model, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
    encoder = getattr(model, "base_model", model)
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    output = encoder(**kwargs)
    return output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]


def _sentence_soft_regularization(logits, labels, model, input_ids, attention_mask, token_type_ids, kl_direction) -> torch.Tensor:
    if model is None or input_ids is None or attention_mask is None:
        raise ValueError("level='sentence' needs model=, input_ids= and attention_mask= keyword arguments")
    _check_same_shape(labels, input_ids=input_ids, attention_mask=attention_mask)
    masked = labels != IGNORE_INDEX
    original = torch.where(masked, labels, input_ids)
    filled = torch.where(masked, argmax_predictions(logits), original)
    log_original = _at_least_float32(_encoder_states(model, original, attention_mask, token_type_ids)).log_softmax(dim=-1)
    log_filled = _at_least_float32(_encoder_states(model, filled, attention_mask, token_type_ids)).log_softmax(dim=-1)
    log_p, log_q = (log_filled, log_original) if kl_direction == "filled||original" else (log_original, log_filled)
    kl_per_token = (log_p.exp() * (log_p - log_q)).sum(dim=-1)
    real = attention_mask.bool()
    value = torch.where(real, kl_per_token, 0.0).sum() / real.sum().clamp_min(1)
    return torch.where(masked.any(), value, 0.0)


# --- loss modules ------------------------------------------------------------------------------


class MaskedLMLoss(nn.Module):
    """Plain MLM (paper eq. 1): mean cross-entropy over the masked positions (labels != -100).

    ``forward`` returns the loss; :meth:`loss_and_items` also returns the number of
    positions it averages over, which a trainer needs to scale micro-batches under
    gradient accumulation (``is_batch_level`` is False: the loss is a per-position mean).
    Keyword context (``model``, ``input_ids``, ...) is accepted by every MLM loss so a
    trainer passes the same arguments to each; this one uses none of it.
    """

    is_batch_level = False

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context: Any) -> torch.Tensor:
        return self.loss_and_items(logits, labels, **context)[0]

    def loss_and_items(self, logits: torch.Tensor, labels: torch.Tensor, **context: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, items)``: the loss and the number of positions it averages over (a tensor).

        ``context`` keywords: any of :data:`CONTEXT_KEYS` (``model``, ``embeddings``,
        ``input_ids``, ``attention_mask``, ``token_type_ids``, ``word_ids``, ``stats``).
        """
        unknown = sorted(set(context) - set(CONTEXT_KEYS))
        if unknown:
            raise ValueError(f"context: unknown keyword(s) {unknown}; MLM losses take {list(CONTEXT_KEYS)}")
        _check_token_inputs(logits, labels)
        loss, items = self._loss_and_items(logits, labels, **context)
        return loss.to(logits.dtype), items

    def _loss_and_items(self, logits: torch.Tensor, labels: torch.Tensor, **context: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return masked_cross_entropy(logits, labels)


class HardCorrectionLoss(MaskedLMLoss):
    """Hard correction (HC, paper eq. 2): L_hc = mean over k in Y with r_k not in V[w_k] of
    -log p(w_k | s), Y the masked positions, r_k the argmax prediction, V the synonym table.

    ``tokenizer``: the tokenizer of the model's vocabulary (ids -> text); ``table``: a
    :class:`SynonymTable`, a lexicon path (:meth:`SynonymTable.from_path`: WordNet TSV for
    ``.tsv``, Cilin otherwise) or None for the shipped tiny table; ``level``: ``"token"``
    (the paper, footnote 5: multi-token words are not corrected) or ``"word"`` (the
    workbench's whole-word extension for Chinese), see :func:`correct_labels`. The id
    look-up (:class:`SynonymIdIndex`) is built once here.

    ``forward(logits, labels, *, word_ids=None, stats=None, ...)``: ``word_ids`` from a
    collator with ``return_word_ids=True``; when ``stats`` (a :class:`CorrectionStats`) is
    given, this batch's counts are added to it on the device. ``items`` is the number of
    positions left after correction (the mean's denominator).
    """

    def __init__(self, tokenizer: Any = None, table: SynonymTable | str | None = None, level: str = "token") -> None:
        super().__init__()
        if tokenizer is None or not hasattr(tokenizer, "convert_ids_to_tokens"):
            raise ValueError(f"tokenizer: must be the model's tokenizer (with convert_ids_to_tokens), got {tokenizer!r}")
        check_choice("level", level, HC_LEVELS)
        self.table = table if isinstance(table, SynonymTable) else SynonymTable.from_path(table)
        self.level = level
        self.index = self.table.id_index(tokenizer)

    def correction_counts(
        self, logits: torch.Tensor, labels: torch.Tensor, word_ids: torch.Tensor | None = None
    ) -> CorrectionCounts:
        """The corrected labels and counts of one batch (:func:`correct_labels`), no loss."""
        _check_token_inputs(logits, labels)
        return self.prediction_counts(argmax_predictions(logits), labels, word_ids)

    def prediction_counts(
        self, predictions: torch.Tensor, labels: torch.Tensor, word_ids: torch.Tensor | None = None
    ) -> CorrectionCounts:
        """The same decision for given predicted ids (:func:`correct_predictions`; ELECTRA's sampled
        replacements): ``wrong`` counts the masked positions where ``predictions`` differ from the gold
        token, ``corrected`` those of them whose unit is a synonym, and ``labels`` is -100 there."""
        _check_same_shape(labels, predictions=predictions, word_ids=word_ids)
        return correct_predictions(predictions, labels, self.index, self.level, word_ids)

    def _loss_and_items(self, logits, labels, *, word_ids=None, stats=None, **unused):
        counts = self.correction_counts(logits, labels, word_ids)
        if stats is not None:
            stats.update(counts)
        return masked_cross_entropy(logits, counts.labels)

    def extra_repr(self) -> str:
        return f"level={self.level!r}, words={self.index.num_words}, pairs={self.index.num_pairs}"


class SoftRegularizationLoss(MaskedLMLoss):
    """Soft regularization (SR): L = L_mlm + ``weight`` * L_sr (paper eq. 1 + eq. 3, or + L_kl
    at sentence level); see :func:`soft_regularization` for the formulas.

    ``weight`` >= 0; ``level`` in ``token`` (eq. 3, default) / ``sentence`` (Sec. 5);
    ``prediction`` in ``argmax`` (the paper's r_k, default) / ``expected`` (the workbench's
    softmax-weighted embedding); ``kl_direction`` (sentence level) in ``filled||original``
    (the paper's KL(H_p || H_s), default) / ``original||filled``.

    ``forward(logits, labels, *, model=None, embeddings=None, input_ids=None,
    attention_mask=None, token_type_ids=None, ...)``: token level takes ``embeddings`` or
    reads ``model.get_input_embeddings().weight``; sentence level needs ``model``,
    ``input_ids`` and ``attention_mask``. ``items`` counts the masked positions.
    """

    def __init__(
        self, weight: float = 1.0, level: str = "token", prediction: str = "argmax", kl_direction: str = "filled||original"
    ) -> None:
        super().__init__()
        self.weight = check_range("weight", weight, 0.0)
        check_choice("level", level, SR_LEVELS)
        check_choice("prediction", prediction, SR_PREDICTIONS)
        check_choice("kl_direction", kl_direction, KL_DIRECTIONS)
        self.level, self.prediction, self.kl_direction = level, prediction, kl_direction

    def _loss_and_items(
        self,
        logits,
        labels,
        *,
        model=None,
        embeddings=None,
        input_ids=None,
        attention_mask=None,
        token_type_ids=None,
        **unused,
    ):
        loss, items = masked_cross_entropy(logits, labels)
        if self.level == "token" and embeddings is None and model is not None:
            embeddings = model.get_input_embeddings().weight
        penalty = soft_regularization(
            logits,
            labels,
            embeddings,
            self.weight,
            self.level,
            self.prediction,
            kl_direction=self.kl_direction,
            model=model,
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
        )
        return loss + penalty, items

    def extra_repr(self) -> str:
        return f"weight={self.weight}, level={self.level!r}, prediction={self.prediction!r}, kl_direction={self.kl_direction!r}"
