"""Held-out evaluation: the block split, fixed eval masks, eval loss / perplexity and HC rates."""

from __future__ import annotations

import math

import datasets
import pytest
import torch
import torch.nn.functional as F
from transformers import BertConfig, BertForMaskedLM

from workbench.data import sample_corpus
from workbench.losses.mlm import CorrectionCounts, HardCorrectionLoss
from workbench.masking import JiebaSegmenter, RandomMaskCollator, WholeWordMaskCollator, count_tokens, pack_documents
from workbench.synonyms import SynonymTable, synonym_matcher
from workbench.train.pretraining import evaluate_masked_lm, fixed_mask_batches, split_heldout
from workbench.vocab import load_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def blocks(tokenizer):
    sentences = sample_corpus(n_sentences=60, seed=2)
    documents = [" ".join(sentences[i : i + 3]) for i in range(0, 60, 3)]
    return datasets.Dataset.from_list(pack_documents(tokenizer, documents, JiebaSegmenter(), max_length=32))


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
    )
    return BertForMaskedLM(config).train()


def test_split_holds_out_a_fraction_at_least_one_block(blocks):
    total = len(blocks)
    train, held = split_heldout(blocks, 0.01, seed=0)
    assert len(held) == 1 and len(train) == total - 1
    train, held = split_heldout(blocks, 0.5, seed=1)
    assert len(held) == round(total / 2)

    def ids(part):
        return [tuple(row) for row in part["input_ids"]]

    assert sorted(ids(train) + ids(held)) == sorted(ids(blocks)) and not set(ids(train)) & set(ids(held))
    order = {row: index for index, row in enumerate(ids(blocks))}
    assert [order[row] for row in ids(held)] == sorted(order[row] for row in ids(held))  # order kept
    assert ids(split_heldout(blocks, 0.5, seed=1)[1]) == ids(held)
    assert ids(split_heldout(blocks, 0.5, seed=2)[1]) != ids(held)
    assert count_tokens(train) + count_tokens(held) == count_tokens(blocks) == sum(map(len, blocks["input_ids"]))
    assert count_tokens(held) == sum(map(len, held["input_ids"]))


def test_text_tokens_leave_out_cls_sep_and_document_separators(tokenizer):
    special = {tokenizer.cls_token_id, tokenizer.sep_token_id}

    def text_tokens(part):
        return sum(token not in special for ids in part["input_ids"] for token in ids)

    blocks = datasets.Dataset.from_list(
        pack_documents(tokenizer, sample_corpus(n_sentences=40, seed=3), JiebaSegmenter(), 64)
    )
    assert any(ids.count(tokenizer.sep_token_id) > 1 for ids in blocks["input_ids"])  # blocks span documents
    train, held = split_heldout(blocks, 0.3, seed=0)
    for part in (blocks, train, held):
        assert count_tokens(part, text_only=True) == text_tokens(part) < count_tokens(part)
    assert count_tokens(blocks, text_only=True) == count_tokens(train, text_only=True) + count_tokens(
        held, text_only=True
    )


def test_split_rejects_bad_fractions_and_too_few_blocks(blocks):
    for bad in (0, 0.0, -0.1, 0.51, 1.0, "0.1", True, float("nan")):
        with pytest.raises(ValueError, match=r"^eval_fraction:"):
            split_heldout(blocks, bad)
    with pytest.raises(ValueError, match=r"^blocks:"):
        split_heldout(blocks.select([0]), 0.5)


def test_fixed_masks_are_the_same_for_the_same_seed(tokenizer, blocks):
    first = fixed_mask_batches(blocks, WholeWordMaskCollator(tokenizer, seed=7, return_word_ids=True), batch_size=8)
    second = fixed_mask_batches(
        list(blocks), WholeWordMaskCollator(tokenizer, seed=7, return_word_ids=True), batch_size=8
    )
    other = fixed_mask_batches(blocks, WholeWordMaskCollator(tokenizer, seed=8, return_word_ids=True), batch_size=8)
    assert [len(batch["labels"]) for batch in first] == [8] * (len(blocks) // 8) + (
        [len(blocks) % 8] if len(blocks) % 8 else []
    )
    assert all(torch.equal(a[key], b[key]) for a, b in zip(first, second) for key in a)
    assert not all(torch.equal(a["labels"], b["labels"]) for a, b in zip(first, other))
    with pytest.raises(ValueError, match=r"^batch_size:"):
        fixed_mask_batches(blocks, RandomMaskCollator(tokenizer), batch_size=0)
    with pytest.raises(ValueError, match=r"^blocks:"):
        fixed_mask_batches([], RandomMaskCollator(tokenizer))


def test_eval_loss_is_the_token_mean_and_perplexity_its_exp(tokenizer, blocks, model):
    batches = fixed_mask_batches(blocks, RandomMaskCollator(tokenizer, seed=1), batch_size=5)
    result = evaluate_masked_lm(model, batches)
    assert model.training  # the mode is restored
    total, count = 0.0, 0
    model.eval()
    with torch.no_grad():
        for batch in batches:
            logits = model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                token_type_ids=batch["token_type_ids"],
            ).logits
            total += F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), batch["labels"].flatten(), reduction="sum"
            ).item()
            count += int((batch["labels"] != -100).sum())
    model.train()
    assert result["eval_masked_tokens"] == count
    assert result["eval_loss"] == pytest.approx(total / count, rel=1e-6)
    assert result["perplexity"] == pytest.approx(math.exp(result["eval_loss"]), rel=1e-12)
    assert evaluate_masked_lm(model, batches) == result  # fixed masks: the same value every time


def test_eval_reports_hard_correction_rates(tokenizer, blocks, model):
    batches = fixed_mask_batches(blocks, WholeWordMaskCollator(tokenizer, seed=1, return_word_ids=True), batch_size=8)
    correction = HardCorrectionLoss(synonym_matcher(tokenizer, SynonymTable.default()), level="word")
    result = evaluate_masked_lm(model, batches, correction=correction)
    stats = CorrectionCounts()  # from the full head's logits
    model.eval()
    with torch.no_grad():
        for batch in batches:
            logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            stats.update(correction.correction_counts(logits, batch["labels"], batch["word_ids"]))
    model.train()
    assert {key: result[f"hc_{key}"] for key in stats.as_dict()} == stats.as_dict()
    assert result["hc_masked"] == result["eval_masked_tokens"] and result["hc_sequences"] == len(blocks)


def test_eval_rejects_empty_input(tokenizer, blocks, model):
    with pytest.raises(ValueError, match=r"^batches:"):
        evaluate_masked_lm(model, [])
    batch = RandomMaskCollator(tokenizer)(list(blocks.select([0])))
    batch["labels"][:] = -100
    with pytest.raises(ValueError, match=r"^batches:"):
        evaluate_masked_lm(model, [batch])
