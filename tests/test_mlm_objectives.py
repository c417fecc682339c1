"""Hard correction, soft regularization and correction statistics: hand computations, the
paper's rules, the loss modules, the vectorised code against the earlier loop versions
(kept below as oracles), and the head applied at the masked rows only against the full head."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from workbench.losses import build_loss
from workbench.losses.mlm import (
    CorrectionCounts,
    HardCorrectionLoss,
    MaskedLMLoss,
    SoftRegularizationLoss,
    labelled_rows,
    soft_regularization,
)
from workbench.models import labelled_logits
from workbench.synonyms import SynonymTable, synonym_matcher, token_text
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


def hard_correction(logits, labels, table, tokenizer, word_ids=None, level=None):
    """HC's loss and correction of one batch (word level with word ids, token level without, unless ``level``)."""
    hc = HardCorrectionLoss(synonym_matcher(tokenizer, table), level or ("token" if word_ids is None else "word"))
    return hc(logits, labels, word_ids=word_ids), hc.correction_counts(logits, labels, word_ids)


def count_tuple(counts):
    return (counts.masked, counts.wrong, counts.corrected, counts.sequences, counts.sequences_with_correction)


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
    loss, counts = hard_correction(logits, labels, table, tokenizer, word_ids=word_ids)
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
    _, counts = hard_correction(confident_logits(predicted, len(tokenizer)), labels, table, tokenizer, word_ids)
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
    loss, counts = hard_correction(logits, labels, table, tokenizer, word_ids)
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
    _, counts = hard_correction(confident_logits(predicted, len(tokenizer)), labels, table, tokenizer)
    assert counts.labels[1, 2] == -100 and torch.equal(counts.labels[0], labels[0])
    assert (counts.wrong, counts.corrected, counts.sequences_with_correction) == (3, 1, 1)


def test_hc_without_wrong_predictions_equals_cross_entropy(tokenizer, table):
    gold, word_ids = build_case(tokenizer)
    labels = torch.where(word_ids >= 0, gold, -100)
    logits = confident_logits(gold, len(tokenizer))
    loss, counts = hard_correction(logits, labels, table, tokenizer, word_ids)
    reference = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    assert (counts.wrong, counts.corrected, counts.sequences_with_correction) == (0, 0, 0)


def test_hc_rejects_bad_shapes(tokenizer, table):
    with pytest.raises(ValueError, match=r"^logits:"):
        hard_correction(torch.zeros(2, 3), torch.zeros(2, 3, dtype=torch.long), table, tokenizer)
    with pytest.raises(ValueError, match=r"^logits:"):  # masked rows: one per masked position
        hard_correction(torch.zeros(2, 5), torch.tensor([[1, -100, 2], [3, -100, -100]]), table, tokenizer)
    with pytest.raises(ValueError, match=r"^word_ids:"):
        hard_correction(
            torch.zeros(1, 3, 5), torch.zeros(1, 3, dtype=torch.long), table, tokenizer, word_ids=torch.zeros(1, 4)
        )
    with pytest.raises(ValueError, match=r"^predictions:"):  # ELECTRA's sampled ids must line up with the labels
        HardCorrectionLoss(synonym_matcher(tokenizer, table)).prediction_counts(
            torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long)
        )


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
    value = soft_regularization(logits, labels, embeddings, weight=0.5, prediction="expected")
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
    assert soft_regularization(logits, argmax_labels, embeddings, prediction="argmax").item() == pytest.approx(
        0, abs=1e-12
    )
    confident = confident_logits(torch.where(labels != -100, labels, 0), 5) * 10
    assert soft_regularization(confident, labels, embeddings).item() == pytest.approx(0, abs=1e-12)


def test_sr_token_gradcheck_and_empty_mask():
    logits, labels, embeddings = sr_case()
    assert torch.autograd.gradcheck(
        lambda lg, e: soft_regularization(lg, labels, e, prediction="expected"), (logits, embeddings)
    )
    assert torch.autograd.gradcheck(lambda e: soft_regularization(logits.detach(), labels, e), (embeddings,))
    for prediction in ("argmax", "expected"):
        empty = soft_regularization(logits, torch.full_like(labels, -100), embeddings, prediction=prediction)
        assert empty.item() == 0.0 and empty.requires_grad


def test_sr_rejects_bad_level_prediction_and_embeddings():
    logits, labels, embeddings = sr_case()
    with pytest.raises(ValueError, match=r"^level:"):
        soft_regularization(logits, labels, embeddings, level="word")
    with pytest.raises(ValueError, match=r"^prediction:"):
        soft_regularization(logits, labels, embeddings, prediction="sample")
    with pytest.raises(ValueError, match=r"^embeddings:"):
        soft_regularization(logits, labels, None)
    with pytest.raises(ValueError, match=r"^model:"):
        soft_regularization(logits, labels, level="sentence")


@pytest.fixture(scope="module")
def tiny_bert():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=16,
    )
    return BertForMaskedLM(config).double().eval()


def test_sr_sentence_level_by_hand(tiny_bert):
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.tensor([[2, 5, 4, 7, 3, 0], [2, 4, 9, 11, 12, 3]])
    attention_mask = torch.tensor([[1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1]])
    labels = torch.tensor([[-100, -100, 6, -100, -100, -100], [-100, 8, -100, -100, -100, -100]])
    logits = torch.randn(2, 6, 30, generator=generator, dtype=torch.float64)
    value = soft_regularization(
        logits,
        labels,
        weight=2.0,
        level="sentence",
        model=tiny_bert,
        input_ids=input_ids,
        attention_mask=attention_mask,
        kl_direction="original||filled",
    )
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
    same = soft_regularization(
        gold_logits, labels, level="sentence", model=tiny_bert, input_ids=input_ids, attention_mask=attention_mask
    )
    assert same.item() == pytest.approx(0.0, abs=1e-12)


# --- statistics -----------------------------------------------------------------------------


def test_correction_counts_add_up_and_give_table_2_rates_by_hand():
    stats = CorrectionCounts()
    assert stats.as_dict()["prediction_rate"] == 0.0 and stats.as_dict()["iteration_rate"] == 0.0
    stats.update(CorrectionCounts(20, 8, 2, 4, 1))
    stats.update(CorrectionCounts(30, 12, 3, 4, 2))
    result = stats.as_dict()
    assert result["prediction_rate"] == pytest.approx(5 / 20)
    assert result["iteration_rate"] == pytest.approx(3 / 8)
    assert (result["masked"], result["wrong"], result["corrected"], result["sequences"]) == (50, 20, 5, 8)


def test_sr_sentence_level_follows_the_papers_kl_direction(tiny_bert):
    # paper Sec. 5: L_kl = KL(H_p || H_s), H_p from the prediction-filled sentence, H_s from the original
    generator = torch.Generator().manual_seed(2)
    input_ids = torch.tensor([[2, 5, 4, 7, 3], [2, 4, 9, 11, 3]])
    attention_mask = torch.ones_like(input_ids)
    labels = torch.tensor([[-100, 6, -100, -100, -100], [-100, -100, 8, 13, -100]])
    logits = torch.randn(2, 5, 30, generator=generator, dtype=torch.float64)
    kwargs = {"level": "sentence", "model": tiny_bert, "input_ids": input_ids, "attention_mask": attention_mask}
    paper = soft_regularization(logits, labels, **kwargs)
    reverse = soft_regularization(logits, labels, kl_direction="original||filled", **kwargs)
    original = torch.where(labels != -100, labels, input_ids)
    filled = torch.where(labels != -100, logits.argmax(-1), original)
    with torch.no_grad():
        log_p = tiny_bert.bert(input_ids=filled, attention_mask=attention_mask).last_hidden_state.log_softmax(-1)
        log_q = tiny_bert.bert(input_ids=original, attention_mask=attention_mask).last_hidden_state.log_softmax(-1)
    assert paper.item() == pytest.approx(
        F.kl_div(log_q, log_p, log_target=True, reduction="none").sum(-1).mean().item(), rel=1e-9
    )
    assert reverse.item() == pytest.approx(
        F.kl_div(log_p, log_q, log_target=True, reduction="none").sum(-1).mean().item(), rel=1e-9
    )
    assert paper.item() != pytest.approx(reverse.item())
    with pytest.raises(ValueError, match=r"^kl_direction:"):
        soft_regularization(logits, labels, kl_direction="p||q", **kwargs)


# --- the loop implementations the vectorised code replaced (oracles) ---------------------------


def oracle_hard_correction(logits, labels, table, tokenizer, word_ids=None, level="word"):
    """The earlier per-unit loop: units of wrong positions (token level: one position, and with
    word ids only single-token words; word level: fully masked words), judged by text."""
    predictions = logits.detach().argmax(dim=-1)
    masked = labels != -100
    wrong = masked & (predictions != labels)
    units = []
    seen = set()
    for row, column in zip(*(index.tolist() for index in torch.nonzero(wrong, as_tuple=True))):
        word = -1 if word_ids is None else int(word_ids[row, column])
        if word < 0:
            units.append([(row, column)])
            continue
        span = torch.nonzero(word_ids[row] == word).flatten().tolist()
        if level == "token":
            if len(span) == 1:
                units.append([(row, column)])
            continue
        if (row, word) in seen:
            continue
        seen.add((row, word))
        if bool(masked[row, span].all()):
            units.append([(row, c) for c in span])
    corrected_labels = labels.clone()
    corrected, rows_with = 0, set()
    for unit in units:
        gold = token_text(tokenizer.convert_ids_to_tokens([int(labels[r, c]) for r, c in unit]))
        predicted = token_text(tokenizer.convert_ids_to_tokens([int(predictions[r, c]) for r, c in unit]))
        if table.are_synonyms(gold, predicted):
            for r, c in unit:
                corrected_labels[r, c] = -100
            corrected += sum(int(predictions[r, c] != labels[r, c]) for r, c in unit)
            rows_with.add(unit[0][0])
    kept = corrected_labels != -100
    values = F.cross_entropy(logits[kept], corrected_labels[kept], reduction="none")
    loss = values.mean() if values.numel() else logits.sum() * 0.0
    summary = (int(masked.sum()), int(wrong.sum()), corrected, labels.shape[0], len(rows_with))
    return loss, corrected_labels, summary


def oracle_token_sr(logits, labels, embeddings, prediction):
    masked = labels != -100
    masked_logits = logits[masked]
    gold = embeddings[labels[masked]]
    if prediction == "expected":
        predicted = masked_logits.softmax(dim=-1) @ embeddings
    else:
        predicted = embeddings[masked_logits.argmax(dim=-1)]
    distance = 1.0 - F.cosine_similarity(gold, predicted, dim=-1)
    return distance.mean() if distance.numel() else logits.sum() * 0.0


def random_hc_batch(tokenizer, table, seed, rows=6, words_per_row=12):
    """Rows of table words and random characters with word ids, WWM-like masks (some words partly
    masked), and logits whose argmax is a synonym of the gold word, a same-length synonym of one
    character, the gold itself, a '##' twin of the gold or a random token."""
    rng = np.random.default_rng(seed)
    vocab = tokenizer.get_vocab()
    groups = [sorted(group) for group in table.groups]
    characters = [token for token in vocab if len(token) == 1 and "\u4e00" <= token <= "\u9fff"]
    cls, sep, pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
    gold_rows, predicted_rows, word_rows, masked_rows = [], [], [], []
    for _ in range(rows):
        gold, predicted, words, masked = [cls], [cls], [-1], [False]
        for word in range(int(rng.integers(1, words_per_row))):
            if rng.random() < 0.6:
                group = groups[rng.integers(len(groups))]
                text = group[rng.integers(len(group))]
            else:
                text = "".join(rng.choice(characters, size=int(rng.integers(1, 3))))
            ids = tokenizer.convert_tokens_to_ids(list(text))
            choice = rng.random()
            if choice < 0.35 and table.synonyms(text):
                options = sorted(table.synonyms(text))
                guess = tokenizer.convert_tokens_to_ids(list(options[rng.integers(len(options))]))
                guess = (guess + ids)[: len(ids)] if len(guess) < len(ids) else guess[: len(ids)]
            elif choice < 0.5:
                guess = list(ids)
            elif choice < 0.6:
                guess = [vocab.get("##" + tokenizer.convert_ids_to_tokens(i), i) for i in ids]
            else:
                guess = rng.integers(0, len(tokenizer), size=len(ids)).tolist()
            fully = rng.random() < 0.7
            gold += ids
            predicted += guess
            words += [word] * len(ids)
            masked += [True] * len(ids) if fully else (rng.random(len(ids)) < 0.5).tolist()
        gold.append(sep), predicted.append(sep), words.append(-1), masked.append(False)
        gold_rows.append(gold), predicted_rows.append(predicted), word_rows.append(words), masked_rows.append(masked)
    width = max(map(len, gold_rows))

    def pad_to(rows_, value):
        return torch.tensor([r + [value] * (width - len(r)) for r in rows_])

    gold, predicted = pad_to(gold_rows, pad), pad_to(predicted_rows, pad)
    word_ids, masked = pad_to(word_rows, -1), pad_to(masked_rows, False)
    labels = torch.where(masked, gold, -100)
    logits = confident_logits(predicted, len(tokenizer), seed=seed)
    return logits, labels, word_ids


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("level", "with_word_ids"), [("word", True), ("token", True), ("token", False)])
def test_vectorised_hc_equals_the_loop_oracle(tokenizer, table, seed, level, with_word_ids):
    logits, labels, word_ids = random_hc_batch(tokenizer, table, seed)
    word_ids = word_ids if with_word_ids else None
    loss, counts = hard_correction(logits, labels, table, tokenizer, word_ids, level=level)
    oracle_loss, oracle_labels, summary = oracle_hard_correction(logits, labels, table, tokenizer, word_ids, level)
    assert torch.equal(counts.labels, oracle_labels)
    assert count_tuple(counts) == summary
    assert loss.item() == pytest.approx(oracle_loss.item(), rel=1e-12)


def test_random_batches_exercise_corrections(tokenizer, table):
    corrected = {"word": 0, "token": 0}
    for seed in range(6):
        logits, labels, word_ids = random_hc_batch(tokenizer, table, seed)
        for level in corrected:
            corrected[level] += hard_correction(logits, labels, table, tokenizer, word_ids, level=level)[1].corrected
    assert corrected["word"] > corrected["token"] > 0


def test_hc_with_a_padded_output_layer(tokenizer, table):
    # the model's output layer may be wider than the tokenizer's vocabulary: those ids spell no word
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    gold = torch.tensor([[cls, *ids(tokenizer, "大大"), sep]])
    word_ids = torch.tensor([[-1, 0, 1, -1]])
    labels = torch.tensor([[-100, gold[0, 1], gold[0, 2], -100]])
    predicted = torch.tensor([[cls, ids(tokenizer, "巨")[0], len(tokenizer) + 5, sep]])
    _, counts = hard_correction(confident_logits(predicted, len(tokenizer) + 64), labels, table, tokenizer, word_ids)
    assert counts.labels.tolist() == [[-100, -100, labels[0, 2].item(), -100]]


def test_hc_token_level_skips_multi_token_words(tokenizer, table):
    # paper footnote 5: a word tokenized into several pieces is not corrected
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    gold = torch.tensor([[cls, *ids(tokenizer, "大看很"), sep]])
    word_ids = torch.tensor([[-1, 0, 0, 1, -1]])  # 大看 is one (made-up) two-token word, 很 another
    labels = torch.tensor([[-100, gold[0, 1], gold[0, 2], gold[0, 3], -100]])
    predicted = gold.clone()
    predicted[0, 1] = ids(tokenizer, "巨")[0]  # 大 -> 巨: synonyms as single characters
    logits = confident_logits(predicted, len(tokenizer))
    token_level = HardCorrectionLoss(synonym_matcher(tokenizer, table), level="token")
    assert torch.equal(token_level.correction_counts(logits, labels, word_ids).labels, labels)
    assert token_level.correction_counts(logits, labels).labels[0, 1] == -100  # without word ids every token is a word
    single = torch.tensor([[-1, 0, 1, 2, -1]])
    assert token_level.correction_counts(logits, labels, single).labels[0, 1] == -100
    with pytest.raises(ValueError, match=r"^word_ids:"):
        HardCorrectionLoss(synonym_matcher(tokenizer, table), level="word").correction_counts(logits, labels)


# --- loss modules --------------------------------------------------------------------------------


def test_modules_are_registered_and_validate_their_arguments(tokenizer, table):
    assert isinstance(build_loss("mlm"), MaskedLMLoss)
    hc = build_loss("mlm_hc", matcher=synonym_matcher(tokenizer, table), level="word")
    assert isinstance(hc, HardCorrectionLoss) and hc.level == "word"
    assert synonym_matcher(tokenizer).table.are_synonyms("美丽", "漂亮")  # None: the shipped table
    sr = build_loss("mlm_sr", weight=0.5)
    assert (sr.prediction, sr.level, sr.kl_direction) == ("argmax", "token", "filled||original")
    assert build_loss("mlm_hc", matcher=synonym_matcher(tokenizer)).level == "token"
    with pytest.raises(ValueError, match=r"^tokenizer:"):  # the matcher is built by the trainer, from its tokenizer
        synonym_matcher(None)
    with pytest.raises(ValueError, match="lexicon.txt"):
        synonym_matcher(tokenizer, "/no/such/lexicon.txt")
    for name, params, message in [
        ("mlm_hc", {}, r"^matcher:"),
        ("mlm_hc", {"matcher": tokenizer}, r"^matcher:"),
        ("mlm_hc", {"matcher": synonym_matcher(tokenizer), "level": "span"}, r"^level:"),
        ("mlm_sr", {"weight": -1.0}, r"^weight:"),
        ("mlm_sr", {"level": "word"}, r"^level:"),
        ("mlm_sr", {"prediction": "sample"}, r"^prediction:"),
        ("mlm_sr", {"kl_direction": "forward"}, r"^kl_direction:"),
        ("mlm_sr", {"lexicon": None}, "lexicon"),
    ]:
        with pytest.raises(ValueError, match=message):
            build_loss(name, **params)
    logits, labels, _ = sr_case()
    with pytest.raises(ValueError, match=r"^context:"):
        build_loss("mlm")(logits, labels, word_id=None)
    with pytest.raises(ValueError, match=r"^logits:"):
        build_loss("mlm")(logits[0], labels[0])


def test_plain_module_is_masked_cross_entropy_with_item_count():
    logits, labels, _ = sr_case()
    loss, items = MaskedLMLoss().loss_and_items(logits, labels)
    assert items.item() == 3
    reference = F.cross_entropy(logits.reshape(-1, 5), labels.reshape(-1), ignore_index=-100)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
    empty = MaskedLMLoss()(logits, torch.full_like(labels, -100))
    empty.backward()
    assert empty.item() == 0.0 and (logits.grad == 0).all()


@pytest.mark.parametrize("name", ["mlm", "mlm_hc", "mlm_sr"])
def test_fp16_logits_are_computed_in_float32(name, tokenizer, table):
    # 64 masked positions with a margin of 1e4: each term is about 1e4 (fits fp16, max 65504),
    # their sum 6.4e5 does not; the mean must still come out near 1e4.
    vocab = len(tokenizer)
    logits = torch.zeros(2, 32, vocab, dtype=torch.float64)
    logits[..., 7] = 1e4
    labels = torch.full((2, 32), 8)
    context = (
        {"embeddings": torch.randn(vocab, 4, generator=torch.Generator().manual_seed(0))} if name == "mlm_sr" else {}
    )
    params = {"matcher": synonym_matcher(tokenizer, table)} if name == "mlm_hc" else {}
    loss = build_loss(name, **params)
    expected, items = loss.loss_and_items(logits, labels, **context)
    value, half_items = loss.loss_and_items(logits.half(), labels, **context)
    assert value.dtype == torch.float32 and torch.isfinite(value)
    assert items.item() == half_items.item() == 64
    torch.testing.assert_close(value.double(), expected, rtol=1e-3, atol=0.0)


def test_hc_module_equals_function_counts_kept_items_and_accumulates_stats(tokenizer, table):
    hc = HardCorrectionLoss(synonym_matcher(tokenizer, table), level="word")
    stats = CorrectionCounts()
    totals = np.zeros(5, dtype=np.int64)
    for seed in range(3):
        logits, labels, word_ids = random_hc_batch(tokenizer, table, seed)
        loss, items = hc.loss_and_items(logits, labels, word_ids=word_ids, stats=stats, input_ids=labels)
        _, counts = hard_correction(logits, labels, table, tokenizer, word_ids, level="word")
        kept = counts.labels != -100
        reference = F.cross_entropy(logits[kept], counts.labels[kept])
        assert loss.item() == pytest.approx(reference.item(), rel=1e-12)
        assert items.item() == int(kept.sum())
        totals += np.array(count_tuple(counts))
    result = stats.as_dict()
    assert [
        result[key] for key in ("masked", "wrong", "corrected", "sequences", "sequences_with_correction")
    ] == totals.tolist()
    assert result["prediction_rate"] == pytest.approx(totals[2] / totals[1])
    assert result["iteration_rate"] == pytest.approx(totals[4] / totals[3])


@pytest.mark.parametrize("prediction", ["argmax", "expected"])
@pytest.mark.parametrize("seed", range(3))
def test_vectorised_token_sr_equals_the_reference(prediction, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 7, 11, generator=generator, dtype=torch.float64, requires_grad=True)
    embeddings = torch.randn(11, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.where(
        torch.rand(3, 7, generator=generator) < 0.4, torch.randint(0, 11, (3, 7), generator=generator), -100
    )
    value = soft_regularization(logits, labels, embeddings, prediction=prediction)
    reference = oracle_token_sr(logits, labels, embeddings, prediction)
    assert value.item() == pytest.approx(reference.item(), rel=1e-12)
    grads = torch.autograd.grad(value, (logits, embeddings), allow_unused=True, materialize_grads=True)
    reference_grads = torch.autograd.grad(reference, (logits, embeddings), allow_unused=True, materialize_grads=True)
    for grad, reference_grad in zip(grads, reference_grads):
        torch.testing.assert_close(grad, reference_grad)


def test_argmax_sr_module_by_hand_trains_only_the_embeddings(tiny_bert):
    # issue 10: argmax SR = 1 - cos(e_gold, e_argmax), its gradient goes to the embedding matrix
    generator = torch.Generator().manual_seed(3)
    logits = torch.randn(2, 6, 30, generator=generator, dtype=torch.float64, requires_grad=True)
    labels = torch.tensor([[-100, 4, -100, 9, -100, -100], [-100, -100, 17, -100, -100, -100]])
    sr = SoftRegularizationLoss(weight=0.7)
    value, items = sr.loss_and_items(logits, labels, model=tiny_bert)
    E = tiny_bert.get_input_embeddings().weight.detach().numpy()
    argmax = logits.detach().argmax(-1).numpy()
    positions = [(0, 1), (0, 3), (1, 2)]
    by_hand = np.mean([1 - cosine(E[labels[b, i]], E[argmax[b, i]]) for b, i in positions])
    ce = F.cross_entropy(logits.detach().reshape(-1, 30), labels.reshape(-1), ignore_index=-100).item()
    assert items.item() == 3 and value.item() == pytest.approx(ce + 0.7 * by_hand, rel=1e-9)
    tiny_bert.zero_grad()
    value.backward()
    ce_only = logits.detach().clone().requires_grad_()
    F.cross_entropy(ce_only.reshape(-1, 30), labels.reshape(-1), ignore_index=-100).backward()
    torch.testing.assert_close(logits.grad, ce_only.grad)  # the argmax carries no gradient to the logits
    embedding_grad = tiny_bert.get_input_embeddings().weight.grad
    touched = {int(labels[b, i]) for b, i in positions} | {int(argmax[b, i]) for b, i in positions}
    assert all(embedding_grad[row].abs().sum() > 0 for row in touched)
    assert embedding_grad[sorted(set(range(30)) - touched)].abs().sum() == 0
    tiny_bert.zero_grad()


def test_sentence_sr_module_uses_the_model(tiny_bert):
    input_ids = torch.tensor([[2, 5, 4, 7, 3], [2, 4, 9, 11, 3]])
    labels = torch.tensor([[-100, 6, -100, -100, -100], [-100, -100, 8, -100, -100]])
    logits = torch.randn(2, 5, 30, dtype=torch.float64)
    context = {"model": tiny_bert, "input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    value = SoftRegularizationLoss(weight=2.0, level="sentence")(logits, labels, **context)
    ce = F.cross_entropy(logits.reshape(-1, 30), labels.reshape(-1), ignore_index=-100)
    penalty = soft_regularization(logits, labels, weight=2.0, level="sentence", **context)
    assert value.item() == pytest.approx((ce + penalty).item(), rel=1e-12)


# --- the vocabulary head at the masked rows only (issue 21) ------------------------------------------

HEAD_OBJECTIVES = [
    ("mlm", {}),
    ("mlm_hc", {"level": "token"}),
    ("mlm_hc", {"level": "word"}),
    ("mlm_sr", {"weight": 0.5}),
    ("mlm_sr", {"prediction": "expected"}),
    ("mlm_sr", {"level": "sentence"}),
    ("mlm_sr", {"level": "sentence", "kl_direction": "original||filled"}),
]


def head_case(tokenizer):
    """A float64 one-layer BertForMaskedLM over the shipped vocabulary, without dropout, whose output bias favours 巨
    (a synonym of 大), and build_case's batch with 很, 美丽, 大 and 书 masked."""
    from transformers import BertForMaskedLM

    from workbench.models import tiny_bert_config

    torch.manual_seed(0)
    config = tiny_bert_config(len(tokenizer), 1, 16, 2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForMaskedLM(config).double().train()
    with torch.no_grad():
        model.get_output_embeddings().bias[ids(tokenizer, "巨")[0]] += 30.0
    gold, word_ids = build_case(tokenizer)
    masked = torch.tensor([[0, 0, 1, 1, 1, 0], [0, 0, 1, 0, 1, 0]], dtype=torch.bool)
    labels = torch.where(masked, gold, -100)
    input_ids = torch.where(masked, tokenizer.mask_token_id, gold)
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(gold), "token_type_ids": torch.zeros_like(gold)}
    return model, inputs, labels, word_ids


@pytest.mark.parametrize(
    ("name", "params"), HEAD_OBJECTIVES, ids=[f"{name}-{params}" for name, params in HEAD_OBJECTIVES]
)
def test_the_head_at_the_masked_rows_gives_the_full_heads_loss_gradients_and_counts(name, params, tokenizer, table):
    model, inputs, labels, word_ids = head_case(tokenizer)
    loss = build_loss(name, **params, **({"matcher": synonym_matcher(tokenizer, table)} if name == "mlm_hc" else {}))
    results = []
    for logits_of in (lambda: model(**inputs).logits, lambda: labelled_logits(model, labels, **inputs)[0]):
        model.zero_grad()
        stats = CorrectionCounts()
        context = {"stats": stats} if name == "mlm_hc" else {}
        value, items = loss.loss_and_items(logits_of(), labels, model=model, word_ids=word_ids, **inputs, **context)
        value.backward()
        grads = {key: p.grad.clone() for key, p in model.named_parameters() if p.grad is not None}
        results.append((value.detach(), int(items), grads, stats))
    (full, full_items, full_grads, full_stats), (rows, rows_items, rows_grads, rows_stats) = results
    torch.testing.assert_close(rows, full, rtol=0.0, atol=1e-10)
    assert rows_items == full_items and rows_stats == full_stats and rows_grads.keys() == full_grads.keys()
    for key, grad in full_grads.items():
        torch.testing.assert_close(rows_grads[key], grad, rtol=0.0, atol=1e-10, msg=key)
    if name == "mlm_hc":  # 大 -> 巨 is corrected at both levels: the counts compared are not all zero
        assert (full_stats.masked, full_stats.corrected, full_stats.sequences_with_correction) == (5, 1, 1)
    rows_logits = labelled_logits(model, labels, **inputs)[0]
    torch.testing.assert_close(rows_logits, labelled_rows(model(**inputs).logits, labels), rtol=0.0, atol=1e-12)


TRAINER_CASES = [("mlm", False), ("mlm", True), ("mlm_hc", True), ("mlm_sr", True)]


@pytest.mark.parametrize(("name", "sop"), TRAINER_CASES, ids=[f"{name}-sop={sop}" for name, sop in TRAINER_CASES])
def test_the_trainers_loss_is_the_full_heads_with_and_without_sentence_order(name, sop, tokenizer, table, tmp_path):
    """MaskedLMTrainer.compute_loss (the head at the masked rows) against the full head: L_MLM over the masked rows
    of ``model(**inputs).logits`` (BertForPreTraining: ``prediction_logits``) plus, with SOP,
    CE(seq_relationship_logits)."""
    from transformers import BertForPreTraining

    from workbench.config import TrainingConfig
    from workbench.train.pretraining import MaskedLMTrainer
    from workbench.train.trainer import training_arguments

    model, inputs, labels, word_ids = head_case(tokenizer)
    if sop:
        torch.manual_seed(0)
        model = BertForPreTraining(model.config).double().train()
        with torch.no_grad():  # favours 巨 as head_case's model: 大 -> 巨 is corrected
            model.get_output_embeddings().bias[ids(tokenizer, "巨")[0]] += 30.0
    loss = build_loss(name, **({"matcher": synonym_matcher(tokenizer, table)} if name == "mlm_hc" else {}))
    args = training_arguments(TrainingConfig(quiet=True), str(tmp_path), evaluate=False, save_strategy="no")
    trainer = MaskedLMTrainer(model=model, args=args, loss=loss)
    trainer.current_gradient_accumulation_steps = 1
    sop_labels = torch.tensor([1, 0])
    batch = {**inputs, "labels": labels, "word_ids": word_ids, **({"sop_labels": sop_labels} if sop else {})}
    results = []
    for compute in ("trainer", "full head"):
        model.zero_grad()
        if compute == "trainer":
            value = trainer.compute_loss(model, dict(batch))
        else:
            output = model(**inputs)
            logits = output.prediction_logits if sop else output.logits
            value = loss(logits, labels, model=model, word_ids=word_ids, **inputs)
            if sop:
                value = value + F.cross_entropy(output.seq_relationship_logits, sop_labels)
        value.backward()
        results.append(
            (value.detach(), {key: p.grad.clone() for key, p in model.named_parameters() if p.grad is not None})
        )
    (rows, rows_grads), (full, full_grads) = results
    torch.testing.assert_close(rows, full, rtol=0.0, atol=1e-10)
    assert rows_grads.keys() == full_grads.keys() and ("cls.seq_relationship.weight" in full_grads) == sop
    for key, grad in full_grads.items():
        torch.testing.assert_close(rows_grads[key], grad, rtol=0.0, atol=1e-10, msg=key)
    if name == "mlm_hc":  # the trainer counted the rows' corrections: the full head's counts, 大 -> 巨 among them
        full_counts = loss.correction_counts(model(**inputs).prediction_logits, labels, word_ids)
        assert trainer.corrections["hc"].totals.as_dict() == full_counts.as_dict() and full_counts.corrected == 1
