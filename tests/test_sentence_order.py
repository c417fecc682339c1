"""Sentence-order prediction: blocks cut at a word boundary, halves swapped with p = 0.5, and the
pre-training objective that learns it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from workbench.masking import JiebaSegmenter, build_collator, encode_words
from workbench.masking.sentence_order import sentence_order, sentence_order_batch
from workbench.train import pretrain_mlm
from workbench.vocab import load_tokenizer

TEXT = "张伟昨天在北京参观了清华大学，那里的风景非常美丽。"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def feature(tokenizer):
    return encode_words(tokenizer, [TEXT], JiebaSegmenter())[0]


def test_in_order_keeps_every_token_and_marks_the_second_segment(tokenizer, feature):
    ordered = sentence_order(feature, swap=False, cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id)
    inner = feature["input_ids"][1:-1]
    ids = ordered["input_ids"]
    cut = ids.index(tokenizer.sep_token_id)
    assert ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id
    assert ids[1:cut] + ids[cut + 1 : -1] == inner  # same tokens, same order, one [SEP] more
    assert ordered["token_type_ids"] == [0] * (cut + 1) + [1] * (len(ids) - cut - 1)
    word_ids = feature["word_ids"][1:-1]
    assert word_ids[cut - 2] != word_ids[cut - 1]  # the cut falls between two jieba words
    assert abs((cut - 1) - len(inner) / 2) <= max(len(word) for word in feature["words"])  # near the middle


def test_swapped_puts_the_second_half_first(tokenizer, feature):
    ordered = sentence_order(feature, False, tokenizer.cls_token_id, tokenizer.sep_token_id)["input_ids"]
    swapped = sentence_order(feature, True, tokenizer.cls_token_id, tokenizer.sep_token_id)
    cut = ordered.index(tokenizer.sep_token_id)
    first, second = ordered[1:cut], ordered[cut + 1 : -1]
    assert swapped["input_ids"] == [
        tokenizer.cls_token_id,
        *second,
        tokenizer.sep_token_id,
        *first,
        tokenizer.sep_token_id,
    ]
    assert len(swapped["word_ids"]) == len(swapped["input_ids"]) == len(swapped["word_pos"])


def test_batch_labels_follow_a_fair_seeded_coin(tokenizer, feature):
    features = [feature] * 400
    _, labels = sentence_order_batch(features, np.random.default_rng(0), tokenizer.cls_token_id, tokenizer.sep_token_id)
    _, again = sentence_order_batch(features, np.random.default_rng(0), tokenizer.cls_token_id, tokenizer.sep_token_id)
    assert np.array_equal(labels, again) and 0.4 < labels.mean() < 0.6


def test_collator_returns_sop_labels_and_masks_the_reordered_blocks(tokenizer, feature):
    collator = build_collator({"strategy": "wwm"}, tokenizer, seed=3, sentence_order=True)
    batch = collator([feature] * 8)
    assert batch["sop_labels"].shape == (8,) and set(batch["sop_labels"].tolist()) <= {0, 1}
    assert batch["input_ids"].shape[1] == len(feature["input_ids"]) + 1
    assert (batch["token_type_ids"].sum(dim=1) > 0).all()


@pytest.mark.slow
def test_pretraining_with_sop_trains_both_heads(tmp_path):
    result = pretrain_mlm(
        {
            "output_dir": str(tmp_path / "sop"),
            "data": {"source": "sample_corpus", "n_sentences": 64, "max_length": 32},
            "model": {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}},
            "objective": {"sop": True},
            "training": {
                "num_train_epochs": 1,
                "per_device_train_batch_size": 16,
                "learning_rate": 1e-3,
                "quiet": True,
                "dataloader_num_workers": 0,
            },
        }
    )
    assert result.metrics["sop"] is True and result.metrics["train_loss"] > 0
    from transformers import BertForPreTraining

    model = BertForPreTraining.from_pretrained(str(tmp_path / "sop"))
    assert model.cls.seq_relationship.out_features == 2
    from transformers import AutoModelForMaskedLM

    assert (
        type(AutoModelForMaskedLM.from_pretrained(str(tmp_path / "sop"))).__name__ == "BertForMaskedLM"
    )  # a plain folder
    assert torch.isfinite(torch.tensor(result.metrics["eval_loss"]))
