"""MLM objectives against false negatives: hard correction (HC) and soft regularization (SR).

Paper: Zhang, Zhao, Utiyama, Sumita, "Language Model Pre-training on True
Negatives" (AAAI 2023). A masked position whose prediction differs from the
gold token but is a synonym of it is a *false negative*: plain MLM punishes a
correct answer. HC removes such positions from the loss; SR adds a penalty that
grows with the semantic distance between prediction and gold.

Correction rates are reported as the paper's Table 2: prediction level = share
of wrong predictions that were corrected; iteration level = share of sequences
with at least one correction (see :class:`CorrectionStats`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from workbench.lexicon import SynonymTable

IGNORE_INDEX = -100
SR_LEVELS = ("token", "sentence")
SR_PREDICTIONS = ("expected", "argmax")


@dataclass
class CorrectionCounts:
    """What one hard-correction call saw: positions and sequences, plus the corrected labels."""

    masked: int
    wrong: int
    corrected: int
    sequences: int
    sequences_with_correction: int
    labels: torch.Tensor


def _check_token_inputs(logits: torch.Tensor, labels: torch.Tensor) -> None:
    if logits.ndim != 3 or labels.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be (batch, length, vocab) and labels (batch, length); got {tuple(logits.shape)} "
            f"and {tuple(labels.shape)}"
        )


def _masked_mean_zero_safe(values: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Mean of ``values``; 0 connected to ``reference``'s graph when ``values`` is empty."""
    return values.mean() if values.numel() else reference.sum() * 0.0


def _at_least_float32(tensor: torch.Tensor) -> torch.Tensor:
    """Half-precision tensors upcast to float32; float32 and float64 kept as they are."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


def token_text(tokens: list[str]) -> str:
    """Join WordPiece tokens into the word they spell (``##`` continuation marks removed)."""
    return "".join(token[2:] if token.startswith("##") else token for token in tokens)


def _prediction_units(labels: torch.Tensor, word_ids: torch.Tensor | None, wrong: torch.Tensor) -> list[list[tuple[int, int]]]:
    """Groups of positions judged together: fully masked words holding a wrong prediction.

    Without ``word_ids`` every wrong position is its own unit. With them, a unit
    is all positions of one word in one sequence, kept only when every token of
    the word is masked; masked positions without a word (id -1) stand alone.
    """
    rows, columns = torch.nonzero(wrong, as_tuple=True)
    if word_ids is None:
        return [[(row, column)] for row, column in zip(rows.tolist(), columns.tolist())]
    masked = labels != IGNORE_INDEX
    units = []
    seen: set[tuple[int, int]] = set()
    for row, column in zip(rows.tolist(), columns.tolist()):
        word = int(word_ids[row, column])
        if word < 0:
            units.append([(row, column)])
            continue
        if (row, word) in seen:
            continue
        seen.add((row, word))
        span = word_ids[row] == word
        if bool(masked[row][span].all()):
            units.append([(row, int(c)) for c in torch.nonzero(span).flatten().tolist()])
    return units


def hard_correction(
    logits: torch.Tensor,
    labels: torch.Tensor,
    input_ids: torch.Tensor,
    table: SynonymTable,
    tokenizer,
    word_ids: torch.Tensor | None = None,
) -> tuple[torch.Tensor, CorrectionCounts]:
    """MLM cross-entropy with false negatives removed (HC; paper Sec. "Hard Correction").

    r_i = argmax_v logits[i, v] at every masked position i (labels != -100).
    A prediction unit is corrected when its predicted text is a synonym of its
    gold text in ``table``; all its positions get label -100. Units are single
    tokens, or with ``word_ids`` (from a collator with ``return_word_ids=True``)
    whole jieba words whose every token is masked, compared as the
    concatenation of predicted vs. gold characters (e.g. gold 美丽, predicted
    漂亮). Partially masked words are never corrected.

    loss = mean over remaining masked positions of -log softmax(logits_i)[y_i]
    (zero, still attached to the graph, when none remain).

    ``input_ids`` (the corrupted inputs) is only checked for shape; returns
    ``(loss, CorrectionCounts)``; ``counts.corrected`` counts wrong positions
    removed, ``counts.labels`` holds the corrected labels.
    """
    _check_token_inputs(logits, labels)
    if input_ids.shape != labels.shape or (word_ids is not None and word_ids.shape != labels.shape):
        raise ValueError("input_ids and word_ids must have the shape of labels (batch, length)")
    predictions = logits.detach().argmax(dim=-1)
    masked = labels != IGNORE_INDEX
    wrong = masked & (predictions != labels)
    labels_cpu, predictions_cpu = labels.detach().cpu(), predictions.cpu()
    word_ids_cpu = None if word_ids is None else word_ids.detach().cpu()
    corrected_labels = labels.clone()
    corrected = 0
    corrected_rows: set[int] = set()
    for unit in _prediction_units(labels_cpu, word_ids_cpu, wrong.cpu()):
        gold = token_text(tokenizer.convert_ids_to_tokens([int(labels_cpu[r, c]) for r, c in unit]))
        predicted = token_text(tokenizer.convert_ids_to_tokens([int(predictions_cpu[r, c]) for r, c in unit]))
        if table.are_synonyms(gold, predicted):
            rows, columns = zip(*unit)
            corrected_labels[list(rows), list(columns)] = IGNORE_INDEX
            corrected += sum(int(predictions_cpu[r, c] != labels_cpu[r, c]) for r, c in unit)
            corrected_rows.add(rows[0])
    kept = corrected_labels != IGNORE_INDEX
    loss = _masked_mean_zero_safe(F.cross_entropy(_at_least_float32(logits[kept]), corrected_labels[kept], reduction="none"), logits)
    counts = CorrectionCounts(
        masked=int(masked.sum()),
        wrong=int(wrong.sum()),
        corrected=corrected,
        sequences=labels.shape[0],
        sequences_with_correction=len(corrected_rows),
        labels=corrected_labels,
    )
    return loss, counts


def soft_regularization(
    logits: torch.Tensor,
    labels: torch.Tensor,
    embeddings: torch.Tensor | None = None,
    weight: float = 1.0,
    level: str = "token",
    prediction: str = "expected",
    *,
    model: torch.nn.Module | None = None,
    input_ids: torch.Tensor | None = None,
    attention_mask: torch.Tensor | None = None,
    token_type_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Soft regularization (SR) between predictions and gold tokens, times ``weight``.

    ``level="token"`` (paper eq. 3): mean over masked positions i of
    1 - cos(e(y_i), e(r_i)), e = rows of the input embedding matrix
    ``embeddings`` (vocab, hidden). The prediction's embedding:

    - ``prediction="expected"`` (default): e(r_i) = softmax(logits_i) @ E, the
      expected embedding, so the penalty carries gradient to the logits (the
      paper's argmax r_i has none).
    - ``prediction="argmax"``: e(r_i) = E[argmax logits_i], the paper's literal
      form; gradient reaches only the embedding matrix. Exactly 0 wherever
      argmax = gold.

    ``level="sentence"`` (paper's sentence-level SR): fill the masked positions
    of the original sentence x (gold tokens restored from ``labels`` into
    ``input_ids``) with the argmax predictions, giving x'; with h = the last
    hidden states of ``model``'s encoder, P = softmax(h(x)), Q = softmax(h(x'))
    over the hidden dimension, the value is the mean over real tokens
    (``attention_mask``) of KL(P || Q) = sum_d P_d (log P_d - log Q_d).
    Needs ``model``, ``input_ids`` and ``attention_mask``.

    Zero (attached to the graph) when there is no masked position.
    """
    _check_token_inputs(logits, labels)
    if level not in SR_LEVELS:
        raise ValueError(f"level must be one of {SR_LEVELS}, got {level!r}")
    if prediction not in SR_PREDICTIONS:
        raise ValueError(f"prediction must be one of {SR_PREDICTIONS}, got {prediction!r}")
    if level == "token":
        value = _token_soft_regularization(logits, labels, embeddings, prediction)
    else:
        value = _sentence_soft_regularization(logits, labels, model, input_ids, attention_mask, token_type_ids)
    return weight * value


def _token_soft_regularization(logits, labels, embeddings, prediction) -> torch.Tensor:
    if embeddings is None or embeddings.ndim != 2 or embeddings.shape[0] != logits.shape[-1]:
        raise ValueError("embeddings must be the (vocab, hidden) input embedding matrix for level='token'")
    masked = labels != IGNORE_INDEX
    masked_logits = logits[masked]
    gold = embeddings[labels[masked]]
    if prediction == "expected":
        predicted = _at_least_float32(masked_logits).softmax(dim=-1) @ _at_least_float32(embeddings)
    else:
        predicted = embeddings[masked_logits.argmax(dim=-1)]
    distance = 1.0 - F.cosine_similarity(_at_least_float32(gold), _at_least_float32(predicted), dim=-1)
    return _masked_mean_zero_safe(distance, logits)


def _encoder_states(model, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
    encoder = getattr(model, "base_model", model)
    kwargs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    output = encoder(**kwargs)
    return output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]


def _sentence_soft_regularization(logits, labels, model, input_ids, attention_mask, token_type_ids) -> torch.Tensor:
    if model is None or input_ids is None or attention_mask is None:
        raise ValueError("level='sentence' needs model=, input_ids= and attention_mask= keyword arguments")
    if input_ids.shape != labels.shape or attention_mask.shape != labels.shape:
        raise ValueError("input_ids and attention_mask must have the shape of labels (batch, length)")
    masked = labels != IGNORE_INDEX
    if not masked.any():
        return logits.sum() * 0.0
    original = torch.where(masked, labels, input_ids)
    filled = torch.where(masked, logits.detach().argmax(dim=-1), original)
    log_p = _at_least_float32(_encoder_states(model, original, attention_mask, token_type_ids)).log_softmax(dim=-1)
    log_q = _at_least_float32(_encoder_states(model, filled, attention_mask, token_type_ids)).log_softmax(dim=-1)
    kl_per_token = (log_p.exp() * (log_p - log_q)).sum(dim=-1)
    real = attention_mask.bool()
    return kl_per_token[real].mean()


class CorrectionStats:
    """Running hard-correction rates (paper Table 2).

    prediction_rate = corrected / wrong (share of wrong predictions corrected);
    iteration_rate = sequences_with_correction / sequences. Both 0 before any data.
    """

    _FIELDS = ("masked", "wrong", "corrected", "sequences", "sequences_with_correction")

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        for field in self._FIELDS:
            setattr(self, field, 0)

    def update(self, counts: CorrectionCounts) -> None:
        for field in self._FIELDS:
            setattr(self, field, getattr(self, field) + getattr(counts, field))

    @property
    def prediction_rate(self) -> float:
        return self.corrected / self.wrong if self.wrong else 0.0

    @property
    def iteration_rate(self) -> float:
        return self.sequences_with_correction / self.sequences if self.sequences else 0.0

    def as_dict(self) -> dict[str, float]:
        counts = {field: getattr(self, field) for field in self._FIELDS}
        return {**counts, "prediction_rate": self.prediction_rate, "iteration_rate": self.iteration_rate}
