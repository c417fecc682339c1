"""Language Model Pre-training on True Negatives (Zhang, Zhao, Utiyama, Sumita, AAAI 2023, arXiv 2212.00460),
Sec. 3 and 5.

A masked position whose prediction r_k differs from the gold token w_k but is a synonym of it is a false
negative: plain MLM punishes a right answer. Three loss modules, registered as ``mlm``, ``mlm_hc``, ``mlm_sr``:

* :class:`MaskedLMLoss`: eq. 1, the mean cross-entropy over the masked positions;
* :class:`HardCorrectionLoss`: eq. 2, eq. 1 without the positions whose prediction is a synonym;
* :class:`SoftRegularizationLoss`: eq. 1 + weight x eq. 3 (or + the sentence-level KL of Sec. 5).

``logits`` are the model's predictions at the masked positions only, ``(M, vocab)`` in the row-major order of
``labels != -100`` (:func:`workbench.models.labelled_logits`), or at every position, ``(batch, length, vocab)``;
``labels`` ``(batch, length)`` hold the gold ids at the masked positions and -100 elsewhere. Half precision is
computed in float32. Correction counts are the paper's Table 2 (:class:`CorrectionCounts`).

Hard correction reads synonyms through a :class:`SynonymMatcher` that the trainer builds from its lexicon and
tokenizer (``workbench.synonyms.synonym_matcher``): the losses import no lexicon code.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from workbench.checks import check_choice
from workbench.losses._base import IGNORE_INDEX, DeclaredParameters
from workbench.losses.choices import HC_LEVELS, KL_DIRECTIONS, SR_LEVELS, SR_PREDICTIONS, SR_WEIGHT

CONTEXT_KEYS = ("model", "embeddings", "input_ids", "attention_mask", "token_type_ids", "word_ids", "stats")


def _float(tensor: torch.Tensor) -> torch.Tensor:
    """fp16 / bf16 upcast to float32; float32 and float64 kept."""
    return tensor.to(torch.promote_types(tensor.dtype, torch.float32))


def _check_shape(labels: torch.Tensor, **tensors: torch.Tensor | None) -> None:
    for name, tensor in tensors.items():
        if tensor is not None and tensor.shape != labels.shape:
            raise ValueError(f"{name}: must have the shape of labels {tuple(labels.shape)}, got {tuple(tensor.shape)}")


def labelled_rows(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The logits at the M masked positions (labels != -100), ``(M, vocab)``: ``logits`` itself when it has
    those M rows, ``logits[labels != -100]`` when it is ``(batch, length, vocab)``. The boolean gather syncs on CUDA."""
    masked = labels != IGNORE_INDEX
    if logits.ndim == 3 and logits.shape[:2] == labels.shape:
        return _float(logits[masked])
    if logits.ndim == 2 and labels.ndim == 2 and logits.shape[0] == int(masked.sum()):
        return _float(logits)
    raise ValueError(
        f"logits: must be (batch, length, vocab) or (masked positions, vocab) for labels of shape "
        f"{tuple(labels.shape)} with {int(masked.sum())} masked, got {tuple(logits.shape)}"
    )


def masked_cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 1 as ``(mean, count)``: the mean of -log softmax(logits_k)[w_k] over the ``count`` rows whose target w_k is
    not -100; 0, attached to the graph, when there is none. ``logits`` (M, vocab), ``targets`` (M,)."""
    count = targets.ne(IGNORE_INDEX).sum()
    total = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum")
    return total / count.clamp_min(1), count


# --- hard correction -------------------------------------------------------------------------------


@dataclass
class CorrectionCounts:
    """Hard-correction counts (Table 2): masked positions, wrong predictions among them (r_k != w_k), wrong
    predictions corrected (a synonym), sequences, sequences with a correction. ``update`` adds another record."""

    masked: int = 0
    wrong: int = 0
    corrected: int = 0
    sequences: int = 0
    sequences_with_correction: int = 0

    def update(self, other: CorrectionCounts) -> None:
        for field in fields(CorrectionCounts):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))

    def as_dict(self) -> dict[str, float]:
        """The counts and Table 2's rates: prediction_rate = corrected / wrong (prediction level), iteration_rate =
        sequences_with_correction / sequences (iteration level); 0 without data."""
        return {
            **{field.name: getattr(self, field.name) for field in fields(CorrectionCounts)},
            "prediction_rate": self.corrected / self.wrong if self.wrong else 0.0,
            "iteration_rate": self.sequences_with_correction / self.sequences if self.sequences else 0.0,
        }


@dataclass
class Correction(CorrectionCounts):
    """One batch's hard correction: its counts and ``labels``, the labels with -100 at the corrected positions."""

    labels: torch.Tensor | None = None


def _spans(labels: torch.Tensor, word_ids: torch.Tensor | None) -> torch.Tensor:
    """Span number of every position, flattened: each position its own span without ``word_ids``; with them one
    word's run of positions (positions without a word, -1, stand alone). Numbered 0, 1, ... in position order."""
    if word_ids is None:
        return torch.arange(labels.numel(), device=labels.device)
    previous = torch.cat([torch.full_like(word_ids[:, :1], -2), word_ids[:, :-1]], dim=1)
    return ((word_ids != previous) | (word_ids < 0)).flatten().cumsum(0) - 1


class SynonymMatcher(Protocol):
    """What hard correction asks of a synonym lexicon, over a tokenizer's ids, on the device: ``span_words`` numbers
    the lexicon word each span of token ids spells (-1: none), ``are_synonyms`` says elementwise whether two word
    numbers are different words of one synonym group. ``workbench.synonyms.synonym_matcher(tokenizer, lexicon)``
    builds one (a ``SynonymIdIndex``)."""

    def span_words(self, token_ids: torch.Tensor, spans: torch.Tensor, num_spans: int) -> torch.Tensor: ...

    def are_synonyms(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor: ...


def correct_predictions(
    predictions: torch.Tensor,
    labels: torch.Tensor,
    matcher: SynonymMatcher,
    level: str,
    word_ids: torch.Tensor | None = None,
) -> Correction:
    """Eq. 2's decision, r_k in V[w_k], for predicted ids r (``predictions``, the shape of ``labels``: the MLM's argmax,
    or ELECTRA's sampled replacements). A unit of masked positions is corrected (its labels become -100) when the
    text its predictions spell is a synonym (``matcher``) of the text its gold tokens spell:

    * ``level="token"`` (the paper): a unit is one position whose gold token is a whole word; with ``word_ids`` a
      word of one token, since words of several tokens are never corrected (footnote 5);
    * ``level="word"`` (the workbench's extension for Chinese): a unit is a fully masked word (gold 美丽, predicted
      漂亮); needs ``word_ids``.

    Vectorised: spans, span texts as hashes (segment sums), synonym pairs by ``searchsorted``. The counts are read
    on the host (one sync)."""
    check_choice("level", level, HC_LEVELS)
    if level == "word" and word_ids is None:
        raise ValueError(
            "word_ids: level='word' needs the word ids of the batch (a collator with return_word_ids=True)"
        )
    _check_shape(labels, predictions=predictions, word_ids=word_ids)
    masked = labels != IGNORE_INDEX
    wrong = masked & (predictions != labels)
    spans = _spans(labels, word_ids)
    span_tokens = torch.zeros_like(spans).scatter_add_(0, spans, torch.ones_like(spans))
    span_masked = torch.zeros_like(spans).scatter_add_(0, spans, masked.flatten().long())
    eligible = span_masked == span_tokens  # every position of the unit is masked
    if level == "token":
        eligible &= span_tokens == 1
    gold_words = matcher.span_words(torch.where(masked, labels, 0).flatten(), spans, labels.numel())
    predicted_words = matcher.span_words(predictions.flatten(), spans, labels.numel())
    corrected = (eligible & matcher.are_synonyms(gold_words, predicted_words))[spans].view_as(labels) & masked
    counts = torch.stack([masked.sum(), wrong.sum(), (wrong & corrected).sum(), corrected.any(dim=1).sum()]).tolist()
    masked_count, wrong_count, corrected_count, with_correction = counts
    return Correction(
        masked_count,
        wrong_count,
        corrected_count,
        len(labels),
        with_correction,
        labels=labels.masked_fill(corrected, IGNORE_INDEX),
    )


# --- soft regularization ---------------------------------------------------------------------------


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
    """Soft regularization times ``weight``; 0, attached to the graph, without masked positions: at ``level="token"``
    the embedding distance of eq. 3 (:func:`_token_level`), at ``level="sentence"`` the KL divergence of Sec. 5
    (:func:`_sentence_level`, which needs ``model``, ``input_ids`` and ``attention_mask``)."""
    check_choice("level", level, SR_LEVELS)
    check_choice("prediction", prediction, SR_PREDICTIONS)
    check_choice("kl_direction", kl_direction, KL_DIRECTIONS)
    rows = labelled_rows(logits, labels)
    if level == "token":
        return _token_level(rows, labels, embeddings, weight, prediction)
    if model is None or input_ids is None or attention_mask is None:
        raise ValueError("model: level='sentence' needs the model=, input_ids= and attention_mask= keyword arguments")
    _check_shape(labels, input_ids=input_ids, attention_mask=attention_mask)
    return _sentence_level(rows, labels, weight, kl_direction, model, input_ids, attention_mask, token_type_ids)


def _token_level(
    rows: torch.Tensor, labels: torch.Tensor, embeddings: torch.Tensor | None, weight: float, prediction: str
) -> torch.Tensor:
    """Eq. 3 times ``weight``: L_sr = (1/N_m) sum_k (1 - cos(e_k, e'_k)) over the N_m masked positions (``rows``, their
    logits), e_k = E[w_k], E = ``embeddings`` (vocab, hidden), the input embedding matrix. ``prediction="argmax"``
    (the paper): e'_k = E[r_k], r_k = argmax logits_k, without gradient, so SR trains the embedding layer (Sec. 3.2);
    ``"expected"`` (the workbench's): e'_k = softmax(logits_k) @ E, which reaches the logits too."""
    if embeddings is None or embeddings.ndim != 2 or embeddings.shape[0] != rows.shape[-1]:
        shape = None if embeddings is None else tuple(embeddings.shape)
        raise ValueError(
            f"embeddings: must be the (vocab, hidden) input embedding matrix for level='token', got {shape}"
        )
    E = embeddings.to(rows.dtype)
    e_gold = E[labels[labels != IGNORE_INDEX]]
    e_predicted = rows.softmax(dim=-1) @ E if prediction == "expected" else E[rows.argmax(dim=-1)]
    distance = 1.0 - F.cosine_similarity(e_gold, e_predicted, dim=-1)
    return weight * distance.sum() / max(len(distance), 1)


def _sentence_level(
    rows: torch.Tensor,
    labels: torch.Tensor,
    weight: float,
    kl_direction: str,
    model: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    token_type_ids: torch.Tensor | None,
) -> torch.Tensor:
    """Sec. 5 times ``weight``. The paper writes "we fill the masked sentence s with he [sic] predicted tokens r_k to
    have the predicted sentence s_p. Then, s_p and s are fed to the Transformer encoder to have the contextualized
    representation H_p and H_s" and counts only H_p as extra work ("it requires the extra calculation for the
    predicted sequence H_p"): its s is the masked input, whose states the MLM pass has already. The workbench's
    reading, its own: s = ``input_ids`` with the gold tokens restored (the unmasked original), s_p = s with r_k at
    the masked positions (r_k the argmax of ``rows``, their logits), H_p and H_s ``model``'s encoder states on s_p
    and s, two extra encoder passes, both carrying gradient. P = softmax(H_p), Q = softmax(H_s) over the hidden
    dimension; L_kl = KL(P || Q) (``kl_direction="filled||original"``, the paper's; ``"original||filled"`` is
    KL(Q || P)) averaged over the real tokens (``attention_mask``)."""
    masked = labels != IGNORE_INDEX
    original = torch.where(masked, labels, input_ids)
    filled = original.masked_scatter(masked, rows.argmax(dim=-1))
    states = [
        model.base_model(input_ids=ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        for ids in (filled, original)
    ]
    log_filled, log_original = (_float(state.last_hidden_state).log_softmax(dim=-1) for state in states)
    log_p, log_q = (log_filled, log_original) if kl_direction == "filled||original" else (log_original, log_filled)
    kl = (log_p.exp() * (log_p - log_q)).sum(dim=-1)
    real = attention_mask.bool()
    return weight * torch.where(masked.any(), torch.where(real, kl, 0.0).sum() / real.sum().clamp_min(1), 0.0)


# --- loss modules ----------------------------------------------------------------------------------


class MaskedLMLoss(DeclaredParameters, nn.Module):
    """Plain MLM, eq. 1: L_mlm = mean over the masked positions k of -log p(w_k | s).

    ``forward(logits, labels, **context)`` returns the loss, :meth:`loss_and_items` also the number of positions its
    mean runs over (for gradient accumulation; ``is_batch_level`` is False). Every MLM loss takes the same keyword
    context (:data:`CONTEXT_KEYS`: ``model``, ``input_ids``, ``word_ids``, ...) and uses what it needs.
    """

    is_batch_level = False

    def forward(self, logits: torch.Tensor, labels: torch.Tensor, **context: Any) -> torch.Tensor:
        return self.loss_and_items(logits, labels, **context)[0]

    def loss_and_items(
        self, logits: torch.Tensor, labels: torch.Tensor, **context: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, items)``: the loss and the number of positions it averages over (a tensor)."""
        unknown = sorted(set(context) - set(CONTEXT_KEYS))
        if unknown:
            raise ValueError(f"context: unknown keyword(s) {unknown}; MLM losses take {list(CONTEXT_KEYS)}")
        return self._loss_and_items(labelled_rows(logits, labels), labels, **context)

    def _loss_and_items(
        self, logits: torch.Tensor, labels: torch.Tensor, **context: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return masked_cross_entropy(logits, labels[labels != IGNORE_INDEX])


class HardCorrectionLoss(MaskedLMLoss):
    """Hard correction, eq. 2: L_hc = mean over the masked positions k with r_k not in V[w_k] of -log p(w_k | s),
    r_k the argmax prediction, V the synonym table (corrected labels set to -100 before the cross-entropy, App. A).

    ``matcher``: the lexicon over the model's token ids (a :class:`SynonymMatcher`, built by the trainer:
    ``workbench.synonyms.synonym_matcher(tokenizer, lexicon)``); ``level``: ``"token"`` (the paper) or ``"word"``
    (:func:`correct_predictions`). ``forward(logits, labels, *, word_ids=None, stats=None)``: ``word_ids`` from a
    collator with ``return_word_ids=True``; ``stats`` (a :class:`CorrectionCounts`) gets this batch's counts.
    ``items`` counts the positions left after correction.
    """

    choices = {"level": HC_LEVELS}

    def __init__(self, matcher: SynonymMatcher | None = None, level: str = "token") -> None:
        super().__init__()
        if not all(callable(getattr(matcher, name, None)) for name in ("span_words", "are_synonyms")):
            raise ValueError(
                "matcher: must be a synonym matcher (span_words, are_synonyms) over the model's token ids, "
                f"as workbench.synonyms.synonym_matcher(tokenizer, lexicon) builds, got {matcher!r}"
            )
        self.level = check_choice("level", level, HC_LEVELS)
        self.matcher = matcher

    def correction_counts(
        self, logits: torch.Tensor, labels: torch.Tensor, word_ids: torch.Tensor | None = None
    ) -> Correction:
        """Eq. 2's decision on the argmax predictions r_k of ``logits`` (either shape): corrected labels and counts."""
        masked_argmax = labelled_rows(logits, labels).argmax(dim=-1)
        predictions = torch.zeros_like(labels).masked_scatter(labels != IGNORE_INDEX, masked_argmax)
        return self.prediction_counts(predictions, labels, word_ids)

    def prediction_counts(
        self, predictions: torch.Tensor, labels: torch.Tensor, word_ids: torch.Tensor | None = None
    ) -> Correction:
        """The same decision for given predicted ids (the shape of ``labels``; ELECTRA's sampled replacements)."""
        return correct_predictions(predictions, labels, self.matcher, self.level, word_ids)

    def _loss_and_items(self, logits, labels, *, word_ids=None, stats=None, **unused):
        correction = self.correction_counts(logits, labels, word_ids)
        if stats is not None:
            stats.update(correction)
        return masked_cross_entropy(logits, correction.labels[labels != IGNORE_INDEX])

    def extra_repr(self) -> str:
        return f"level={self.level!r}, matcher={self.matcher!r}"


class SoftRegularizationLoss(MaskedLMLoss):
    """Soft regularization: L = L_mlm + ``weight`` x L_sr (eq. 1 + eq. 3, or + L_kl at sentence level), see
    :func:`soft_regularization`.

    ``weight`` in [0, 1e12] (``SR_WEIGHT``); ``level``: ``token`` (eq. 3) or ``sentence`` (Sec. 5); ``prediction``:
    ``argmax`` (the paper's r_k) or ``expected``; ``kl_direction``: ``filled||original`` (the paper's) or
    ``original||filled``. Token level reads ``embeddings`` or ``model.get_input_embeddings().weight``; sentence level
    needs ``model``, ``input_ids`` and ``attention_mask``. ``items`` counts the masked positions.
    """

    ranges = {"weight": SR_WEIGHT}
    choices = {"level": SR_LEVELS, "prediction": SR_PREDICTIONS, "kl_direction": KL_DIRECTIONS}

    def __init__(
        self,
        weight: float = 1.0,
        level: str = "token",
        prediction: str = "argmax",
        kl_direction: str = "filled||original",
    ) -> None:
        super().__init__()
        self.weight = SR_WEIGHT.check_number("weight", weight)
        self.level = check_choice("level", level, SR_LEVELS)
        self.prediction = check_choice("prediction", prediction, SR_PREDICTIONS)
        self.kl_direction = check_choice("kl_direction", kl_direction, KL_DIRECTIONS)

    def _loss_and_items(self, logits, labels, *, model=None, embeddings=None, **context):
        loss, items = masked_cross_entropy(logits, labels[labels != IGNORE_INDEX])
        if self.level == "token" and embeddings is None and model is not None:
            embeddings = model.get_input_embeddings().weight
        sentence = {key: context.get(key) for key in ("input_ids", "attention_mask", "token_type_ids")}
        penalty = soft_regularization(
            logits,
            labels,
            embeddings,
            self.weight,
            self.level,
            self.prediction,
            kl_direction=self.kl_direction,
            model=model,
            **sentence,
        )
        return loss + penalty, items

    def extra_repr(self) -> str:
        return (
            f"weight={self.weight}, level={self.level!r}, prediction={self.prediction!r}, "
            f"kl_direction={self.kl_direction!r}"
        )
