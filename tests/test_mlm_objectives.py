"""Hard correction, soft regularization and correction statistics against hand computations."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench.lexicon import SynonymTable
from workbench.losses.mlm import CorrectionCounts, CorrectionStats, hard_correction, soft_regularization
from workbench.vocab import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def table():
    return SynonymTable.default()


def ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(list(text))


def confident_logits(predicted: torch.Tensor, vocab_size: int, seed: int = 0) -> torch.Tensor:
    """Random logits whose argmax at every position is ``predicted``."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(*predicted.shape, vocab_size, generator=generator, dtype=torch.float64)
    logits.scatter_(-1, predicted.unsqueeze(-1), 10.0)
    return logits.requires_grad_()


def build_case(tokenizer):
    """Two sequences '[CLS] 她很美丽 [SEP]' and '[CLS] 我大看书 [SEP]' with jieba-like word ids.

    Row 0 words: 她(0) 很(1) 美丽(2); row 1 words: 我(0) 大(1) 看(2) 书(3).
    """
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    gold = torch.tensor([[cls, *ids(tokenizer, "她很美丽"), sep], [cls, *ids(tokenizer, "我大看书"), sep]])
    word_ids = torch.tensor([[-1, 0, 1, 2, 2, -1], [-1, 0, 1, 2, 3, -1]])
    return gold, word_ids


def test_hc_drops_synonym_word_and_keeps_others(tokenizer, table):
    gold, word_ids = build_case(tokenizer)
    labels = torch.full_like(gold, -100)
    masked = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 1, 1, 1, 1, 0]], dtype=torch.bool)
    labels[masked] = gold[masked]
    predicted = gold.clone()
    predicted[0, 3:5] = torch.tensor(ids(tokenizer, "漂亮"))  # 美丽 -> 漂亮: synonym word, both tokens wrong
    predicted[0, 2] = ids(tokenizer, "非")[0]  # 很 -> 非: not a synonym (非常 would be)
    predicted[1, 2] = ids(tokenizer, "巨")[0]  # 大 -> 巨: single-character synonym
    predicted[1, 3] = ids(tokenizer, "吃")[0]  # 看 -> 吃: wrong, not a synonym
    # 我 (1,1) and 书 (1,4) predicted correctly
    logits = confident_logits(predicted, len(tokenizer))
    input_ids = torch.where(masked, tokenizer.mask_token_id, gold)
    loss, counts = hard_correction(logits, labels, input_ids, table, tokenizer, word_ids=word_ids)
    expected_labels = labels.clone()
    expected_labels[0, 3:5] = -100
    expected_labels[1, 2] = -100
    assert torch.equal(counts.labels, expected_labels)
    assert (counts.masked, counts.wrong, counts.corrected) == (7, 5, 3)
    assert (counts.sequences, counts.sequences_with_correction) == (2, 2)
    kept = expected_labels != -100
    by_hand = -torch.log_softmax(logits.detach(), dim=-1)[kept].gather(1, expected_labels[kept][:, None]).mean()
    assert loss.item() == pytest.approx(by_hand.item(), rel=1e-12)
    loss.backward()
    assert logits.grad[0, 3].abs().sum() == 0 and logits.grad[1, 3].abs().sum() > 0


def test_hc_partially_masked_word_is_not_corrected(tokenizer, table):
    gold, word_ids = build_case(tokenizer)
    labels = torch.full_like(gold, -100)
    labels[0, 3] = gold[0, 3]  # only 美 of 美丽 masked
    predicted = gold.clone()
    predicted[0, 3] = ids(tokenizer, "漂")[0]
    _, counts = hard_correction(confident_logits(predicted, len(tokenizer)), labels, gold, table, tokenizer, word_ids)
    assert torch.equal(counts.labels, labels) and counts.corrected == 0 and counts.wrong == 1


def test_hc_word_with_one_correct_character(tokenizer, table):
    # gold 快乐 predicted 欢乐: the word is a synonym; only 快 -> 欢 was wrong, both positions leave the loss
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    gold = torch.tensor([[cls, *ids(tokenizer, "很快乐"), sep]])
    word_ids = torch.tensor([[-1, 0, 1, 1, -1]])
    labels = torch.tensor([[-100, -100, gold[0, 2], gold[0, 3], -100]])
    predicted = gold.clone()
    predicted[0, 2] = ids(tokenizer, "欢")[0]
    logits = confident_logits(predicted, len(tokenizer))
    loss, counts = hard_correction(logits, labels, gold, table, tokenizer, word_ids)
    assert (counts.labels == -100).all() and (counts.wrong, counts.corrected) == (1, 1)
    assert loss.item() == 0.0 and loss.requires_grad
    loss.backward()
    assert logits.grad.abs().sum() == 0


def test_hc_token_level_without_word_ids(tokenizer, table):
    gold, _ = build_case(tokenizer)
    labels = torch.full_like(gold, -100)
    labels[0, 3:5] = gold[0, 3:5]
    labels[1, 2] = gold[1, 2]
    predicted = gold.clone()
    predicted[0, 3:5] = torch.tensor(ids(tokenizer, "漂亮"))  # characters 美/漂, 丽/亮 are not synonyms
    predicted[1, 2] = ids(tokenizer, "巨")[0]
    _, counts = hard_correction(confident_logits(predicted, len(tokenizer)), labels, gold, table, tokenizer)
    assert counts.labels[1, 2] == -100 and torch.equal(counts.labels[0], labels[0])
    assert (counts.wrong, counts.corrected, counts.sequences_with_correction) == (3, 1, 1)


def test_hc_without_wrong_predictions_equals_cross_entropy(tokenizer, table):
    gold, word_ids = build_case(tokenizer)
    labels = torch.where(word_ids >= 0, gold, -100)
    logits = confident_logits(gold, len(tokenizer))
    loss, counts = hard_correction(logits, labels, gold, table, tokenizer, word_ids)
    reference = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    assert (counts.wrong, counts.corrected, counts.sequences_with_correction) == (0, 0, 0)


def test_hc_rejects_bad_shapes(tokenizer, table):
    with pytest.raises(ValueError, match="logits"):
        hard_correction(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3), table, tokenizer)
    with pytest.raises(ValueError, match="word_ids"):
        hard_correction(torch.zeros(1, 3, 5), torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3), table,
                        tokenizer, word_ids=torch.zeros(1, 4))


# --- soft regularization --------------------------------------------------------------------


def sr_case(seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 3, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    embeddings = torch.randn(5, 4, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([[1, -100, 4], [-100, 0, -100]])
    return logits, labels, embeddings


def cosine(a, b):
    return a @ b / (np.linalg.norm(a) * np.linalg.norm(b))


def test_sr_token_expected_embedding_by_hand():
    logits, labels, embeddings = sr_case()
    value = soft_regularization(logits, labels, embeddings, weight=0.5)
    E, L = embeddings.detach().numpy(), logits.detach().numpy()
    terms = []
    for b, i in [(0, 0), (0, 2), (1, 1)]:
        p = np.exp(L[b, i]) / np.exp(L[b, i]).sum()
        terms.append(1 - cosine(E[labels[b, i]], p @ E))
    assert value.item() == pytest.approx(0.5 * np.mean(terms), rel=1e-12)


def test_sr_token_argmax_by_hand_and_zero_when_prediction_is_gold():
    logits, labels, embeddings = sr_case()
    E, L = embeddings.detach().numpy(), logits.detach().numpy()
    positions = [(0, 0), (0, 2), (1, 1)]
    by_hand = np.mean([1 - cosine(E[labels[b, i]], E[L[b, i].argmax()]) for b, i in positions])
    assert soft_regularization(logits, labels, embeddings, prediction="argmax").item() == pytest.approx(by_hand)
    argmax_labels = torch.where(labels != -100, logits.detach().argmax(-1), labels)
    assert soft_regularization(logits, argmax_labels, embeddings, prediction="argmax").item() == pytest.approx(0, abs=1e-12)
    confident = confident_logits(torch.where(labels != -100, labels, 0), 5) * 10
    assert soft_regularization(confident, labels, embeddings).item() == pytest.approx(0, abs=1e-12)


def test_sr_token_gradcheck_and_empty_mask():
    logits, labels, embeddings = sr_case()
    assert torch.autograd.gradcheck(lambda lg, e: soft_regularization(lg, labels, e), (logits, embeddings))
    empty = soft_regularization(logits, torch.full_like(labels, -100), embeddings)
    assert empty.item() == 0.0 and empty.requires_grad


def test_sr_rejects_bad_level_prediction_and_embeddings():
    logits, labels, embeddings = sr_case()
    with pytest.raises(ValueError, match="level"):
        soft_regularization(logits, labels, embeddings, level="word")
    with pytest.raises(ValueError, match="prediction"):
        soft_regularization(logits, labels, embeddings, prediction="sample")
    with pytest.raises(ValueError, match="embeddings"):
        soft_regularization(logits, labels, None)
    with pytest.raises(ValueError, match="model"):
        soft_regularization(logits, labels, level="sentence")


@pytest.fixture(scope="module")
def tiny_bert():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=30, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=16)
    return BertForMaskedLM(config).double().eval()


def test_sr_sentence_level_by_hand(tiny_bert):
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.tensor([[2, 5, 4, 7, 3, 0], [2, 4, 9, 11, 12, 3]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    labels = torch.tensor([[-100, -100, 6, -100, -100, -100], [-100, 8, -100, -100, -100, -100]])
    logits = torch.randn(2, 6, 30, generator=generator, dtype=torch.float64)
    value = soft_regularization(logits, labels, weight=2.0, level="sentence", model=tiny_bert,
                                input_ids=input_ids, attention_mask=attention_mask)
    original = torch.where(labels != -100, labels, input_ids)
    filled = torch.where(labels != -100, logits.argmax(-1), original)
    with torch.no_grad():
        h_p = tiny_bert.bert(input_ids=original, attention_mask=attention_mask).last_hidden_state.numpy()
        h_q = tiny_bert.bert(input_ids=filled, attention_mask=attention_mask).last_hidden_state.numpy()
    total, count = 0.0, 0
    for b in range(2):
        for i in range(6):
            if attention_mask[b, i]:
                p = np.exp(h_p[b, i]) / np.exp(h_p[b, i]).sum()
                q = np.exp(h_q[b, i]) / np.exp(h_q[b, i]).sum()
                total += (p * np.log(p / q)).sum()
                count += 1
    assert value.item() == pytest.approx(2.0 * total / count, rel=1e-9)
    assert value.item() > 0
    gold_logits = F.one_hot(original, 30).double()
    same = soft_regularization(gold_logits, labels, level="sentence", model=tiny_bert, input_ids=input_ids,
                               attention_mask=attention_mask)
    assert same.item() == pytest.approx(0.0, abs=1e-12)


# --- statistics -----------------------------------------------------------------------------


def counts(masked, wrong, corrected, sequences, with_correction):
    return CorrectionCounts(masked, wrong, corrected, sequences, with_correction, torch.empty(0))


def test_correction_stats_rates_by_hand():
    stats = CorrectionStats()
    assert stats.as_dict()["prediction_rate"] == 0.0 and stats.iteration_rate == 0.0
    stats.update(counts(20, 8, 2, 4, 1))
    stats.update(counts(30, 12, 3, 4, 2))
    result = stats.as_dict()
    assert result["prediction_rate"] == pytest.approx(5 / 20)
    assert result["iteration_rate"] == pytest.approx(3 / 8)
    assert (result["masked"], result["wrong"], result["corrected"]) == (50, 20, 5)
    stats.reset()
    assert stats.as_dict()["sequences"] == 0 and stats.prediction_rate == 0.0
