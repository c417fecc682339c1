"""ELECTRA pre-training (``pretrain_electra``): HC on the discriminator's targets and the generator's
loss (Zhang et al. App. A) on hand-built batches, the pair's sharing and sampling, its config
checks, and end-to-end tiny runs (marked slow) whose discriminator ``finetune`` loads."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml
from safetensors.torch import load_file
from transformers import BertForMaskedLM, TrainerCallback

from workbench.config import ElectraSpec, TrainingConfig, load_config
from workbench.losses import HardCorrectionLoss, MaskedLMLoss, SoftRegularizationLoss
from workbench.models import build_electra, build_sequence_classifier, tiny_bert_config
from workbench.synonyms import SynonymTable, synonym_matcher
from workbench.train import TASK_RUNNERS, finetune, pretrain_electra
from workbench.train.__main__ import main as cli_main
from workbench.train.electra import (
    ElectraPretrainingModel,
    ElectraTrainer,
    discriminator_loss,
    discriminator_targets,
    sample_replacements,
)
from workbench.train.trainer import training_arguments
from workbench.vocab import load_tokenizer

TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def table():
    return SynonymTable.default()


def ids(tokenizer, text):
    return tokenizer.convert_tokens_to_ids(list(text))


def peaked_logits(predicted: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Logits whose softmax puts all its mass (to float precision) on ``predicted``."""
    logits = torch.randn(*predicted.shape, vocab_size, generator=torch.Generator().manual_seed(0))
    return logits.scatter(-1, predicted.unsqueeze(-1), 100.0).requires_grad_()


def synonym_batch(tokenizer):
    """'[CLS] 我大看书 [SEP]' with 大 and 书 masked; the generator predicts 巨 (a synonym of 大 in the
    shipped lexicon) and 他 (not a synonym of 书). Words: 我 大 看 书, one token each."""
    cls, sep, mask = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    gold = torch.tensor([[cls, *ids(tokenizer, "我大看书"), sep]])
    labels = torch.full_like(gold, -100)
    labels[0, [2, 4]] = gold[0, [2, 4]]
    input_ids = torch.where(labels != -100, mask, gold)
    predicted = gold.clone()
    predicted[0, 2], predicted[0, 4] = ids(tokenizer, "巨")[0], ids(tokenizer, "他")[0]
    word_ids = torch.tensor([[-1, 0, 1, 2, 3, -1]])
    return gold, input_ids, labels, predicted, word_ids


def test_a_synonym_replacement_is_an_original_target_with_hc_and_a_replaced_one_without(tokenizer, table):
    gold, input_ids, labels, predicted, word_ids = synonym_batch(tokenizer)
    logits = peaked_logits(predicted, len(tokenizer))
    replaced = sample_replacements(logits, input_ids, labels)
    assert torch.equal(replaced, predicted)  # the originals restored, the masked positions sampled

    plain, counts = discriminator_targets(replaced, labels)
    assert counts is None and plain.tolist() == [[False, False, True, False, True, False]]
    hc = HardCorrectionLoss(synonym_matcher(tokenizer, table), level="token")
    corrected, counts = discriminator_targets(replaced, labels, hc, word_ids)
    assert corrected.tolist() == [[False, False, False, False, True, False]]  # 大 -> 巨 counts as original
    assert (counts.masked, counts.wrong, counts.corrected, counts.sequences_with_correction) == (2, 2, 1, 1)

    # the generator's HC loss (eq. 2) drops that position too: only 书's cross-entropy is left
    loss, items = hc.loss_and_items(logits, labels, word_ids=word_ids)
    assert items.item() == 1
    assert loss.item() == pytest.approx(-torch.log_softmax(logits.detach()[0, 4], dim=-1)[gold[0, 4]].item())
    plain_loss, plain_items = MaskedLMLoss().loss_and_items(logits, labels)
    assert plain_items.item() == 2 and plain_loss.item() > loss.item()


def test_word_level_hc_relabels_every_position_of_a_synonym_word(tokenizer, table):
    # gold 美丽, sampled 漂亮: a synonym word (the workbench's word level); the paper's token level
    # leaves a two-token word alone (footnote 5)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    gold = torch.tensor([[cls, *ids(tokenizer, "她很美丽"), sep]])
    word_ids = torch.tensor([[-1, 0, 1, 2, 2, -1]])
    labels = torch.full_like(gold, -100)
    labels[0, 3:5] = gold[0, 3:5]
    replaced = gold.clone()
    replaced[0, 3:5] = torch.tensor(ids(tokenizer, "漂亮"))
    word, _ = discriminator_targets(
        replaced, labels, HardCorrectionLoss(synonym_matcher(tokenizer, table), level="word"), word_ids
    )
    token, _ = discriminator_targets(
        replaced, labels, HardCorrectionLoss(synonym_matcher(tokenizer, table), level="token"), word_ids
    )
    assert not word.any()
    assert token.tolist() == [[False, False, False, True, True, False]]


def test_a_sample_equal_to_the_original_is_original_and_the_loss_covers_real_tokens(tokenizer):
    gold, input_ids, labels, _, _ = synonym_batch(tokenizer)
    replaced = sample_replacements(peaked_logits(gold, len(tokenizer)), input_ids, labels)
    targets, _ = discriminator_targets(replaced, labels)
    assert torch.equal(replaced, gold) and not targets.any()
    logits = torch.tensor([[0.0, 1.0, -1.0, 2.0, 0.5, 0.0, 9.0]])  # the last token is padding
    targets = torch.tensor([[False, True, False, False, True, False, True]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 1, 0]])
    loss, count = discriminator_loss(logits, targets, mask)
    by_hand = torch.nn.functional.binary_cross_entropy_with_logits(logits[0, :6], targets[0, :6].float())
    assert count.item() == 6 and loss.item() == pytest.approx(by_hand.item())


def tiny_pair(tokenizer, generator_size=0.25):
    tiny = {**TINY, "vocab_size": len(tokenizer), "max_position": 128}
    return ElectraPretrainingModel(*build_electra(ElectraSpec(generator_size), tiny=tiny))


def test_the_pair_shares_embeddings_and_the_discriminator_sees_the_generators_samples(tokenizer, table):
    torch.manual_seed(0)
    model = tiny_pair(tokenizer)
    generator, discriminator = model.generator, model.discriminator
    assert generator.electra.embeddings is discriminator.electra.embeddings
    assert generator.generator_lm_head.weight is discriminator.electra.embeddings.word_embeddings.weight
    assert generator.config.hidden_size == 8 and generator.config.num_attention_heads == 1
    assert generator.config.intermediate_size == 32 and generator.config.num_hidden_layers == 1
    # a generator that always proposes 巨: the masked 大 becomes 巨 (a synonym), the masked 书 too (not one)
    with torch.no_grad():
        generator.generator_lm_head.bias.fill_(-1e4)
        generator.generator_lm_head.bias[ids(tokenizer, "巨")[0]] = 1e4
    gold, input_ids, labels, _, word_ids = synonym_batch(tokenizer)
    output = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), labels=labels)
    expected = gold.clone()
    expected[0, [2, 4]] = ids(tokenizer, "巨")[0]
    assert torch.equal(output.replaced_ids, expected)
    targets, _ = discriminator_targets(
        output.replaced_ids, labels, HardCorrectionLoss(synonym_matcher(tokenizer, table)), word_ids
    )
    assert targets.tolist() == [[False, False, False, False, True, False]]
    # no gradient through the sampling: D's loss reaches the shared embeddings, not G's own layers
    loss, _ = discriminator_loss(output.discriminator_logits, targets, torch.ones_like(input_ids))
    loss.backward()
    assert discriminator.electra.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    assert generator.generator_predictions.dense.weight.grad is None
    assert generator.electra.encoder.layer[0].attention.self.query.weight.grad is None


@pytest.mark.parametrize("objective", ["plain", "hc", "sr"])
def test_the_generator_head_at_the_masked_rows_gives_the_full_heads_loss_gradients_and_samples(
    tokenizer, table, objective
):
    torch.manual_seed(0)
    model = tiny_pair(tokenizer).double().eval()
    with torch.no_grad():  # G favours 巨: 大 -> 巨 is an HC correction
        model.generator.generator_lm_head.bias[ids(tokenizer, "巨")[0]] += 30.0
    loss = {
        "plain": MaskedLMLoss(),
        "hc": HardCorrectionLoss(synonym_matcher(tokenizer, table)),
        "sr": SoftRegularizationLoss(0.5),
    }[objective]
    gold, input_ids, labels, _, word_ids = synonym_batch(tokenizer)
    inputs = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}
    full_logits = model.generator(**inputs).logits
    output = model(**inputs, labels=labels, sampler=torch.Generator().manual_seed(3))
    assert torch.equal(
        output.replaced_ids, sample_replacements(full_logits, input_ids, labels, torch.Generator().manual_seed(3))
    )
    results = []
    for logits in (full_logits, output.generator_logits):
        model.zero_grad()
        value, items = loss.loss_and_items(logits, labels, model=model.generator, word_ids=word_ids, **inputs)
        value.backward(retain_graph=True)
        counts = loss.correction_counts(logits, labels, word_ids) if objective == "hc" else None
        results.append(
            (
                value.detach(),
                int(items),
                {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None},
                counts,
            )
        )
    (full, full_items, full_grads, full_counts), (rows, rows_items, rows_grads, rows_counts) = results
    torch.testing.assert_close(rows, full, rtol=0.0, atol=1e-10)
    assert rows_items == full_items and full_grads.keys() == rows_grads.keys()
    for key, grad in full_grads.items():
        torch.testing.assert_close(rows_grads[key], grad, rtol=0.0, atol=1e-10, msg=key)
    if objective == "hc":
        assert torch.equal(rows_counts.labels, full_counts.labels) and full_counts.corrected == 1
        assert rows_counts.as_dict() == full_counts.as_dict()


def test_the_trainers_hc_loss_relabels_a_synonym_replacement_and_counts_it(tokenizer, table, tmp_path):
    torch.manual_seed(0)
    model = tiny_pair(tokenizer)
    with torch.no_grad():  # G proposes 巨 everywhere: 大 -> 巨 is a synonym replacement, 书 -> 巨 is not
        model.generator.generator_lm_head.bias.fill_(-1e4)
        model.generator.generator_lm_head.bias[ids(tokenizer, "巨")[0]] = 1e4
    hc = HardCorrectionLoss(synonym_matcher(tokenizer, table))
    trainer = ElectraTrainer(
        model=model,
        args=training_arguments(TrainingConfig(quiet=True), str(tmp_path), evaluate=False),
        loss=hc,
        discriminator_weight=50.0,
    )
    trainer.current_gradient_accumulation_steps = 1
    gold, input_ids, labels, _, word_ids = synonym_batch(tokenizer)
    batch = {
        "input_ids": input_ids,
        "attention_mask": torch.ones_like(input_ids),
        "token_type_ids": torch.zeros_like(input_ids),
        "labels": labels,
        "word_ids": word_ids,
    }
    torch.manual_seed(1)
    loss, output = trainer.compute_loss(model, batch, return_outputs=True, num_items_in_batch=torch.tensor(2))
    expected_targets = torch.tensor([[0, 0, 0, 0, 1, 0]])  # 大's replacement counts as original
    disc, _ = discriminator_loss(output.discriminator_logits, expected_targets, batch["attention_mask"])
    generator, kept = hc.loss_and_items(output.generator_logits, labels, word_ids=word_ids)
    assert kept.item() == 1  # G's loss dropped the position its argmax 巨 answered with a synonym
    assert loss.item() == pytest.approx((generator * kept / 2 + 50.0 * disc).item(), rel=1e-5)
    for name in ("hc", "disc_hc"):
        counts = trainer.corrections[name].totals
        assert (counts.masked, counts.wrong, counts.corrected) == (2, 2, 1), name


def test_the_pair_saves_each_model_loadable_and_reads_them_back(tokenizer, tmp_path):
    torch.manual_seed(0)
    model = tiny_pair(tokenizer)
    model.save_pretrained(tmp_path)
    disc, gen = (
        load_file(str(tmp_path / "model.safetensors")),
        load_file(str(tmp_path / "generator" / "model.safetensors")),
    )
    assert torch.equal(
        disc["electra.embeddings.word_embeddings.weight"], gen["electra.embeddings.word_embeddings.weight"]
    )
    # a checkpoint reloads as the pair: the generator from <folder>/generator (not a new one of size 0.5), sharing again
    other = ElectraPretrainingModel(*build_electra(ElectraSpec(0.5), model_name_or_path=tmp_path))
    for name, value in model.state_dict().items():
        assert torch.equal(value, other.state_dict()[name]), name
    assert other.generator.config.hidden_size == 8
    assert other.generator.electra.embeddings is other.discriminator.electra.embeddings
    assert other.generator.generator_lm_head.weight is other.discriminator.electra.embeddings.word_embeddings.weight


@pytest.mark.parametrize(
    "override, match",
    [
        ({"electra": {"generator_size": 0}}, r"^electra.generator_size:"),
        ({"electra": {"generator_size": 1.5}}, r"^electra.generator_size:"),
        ({"electra": {"generator_size": "small"}}, r"^electra.generator_size:"),
        ({"electra": {"discriminator_weight": 0}}, r"^electra.discriminator_weight:"),
        ({"electra": {"discriminator_weight": -50}}, r"^electra.discriminator_weight:"),
        ({"electra": {"lambda": 50}}, "electra.lambda"),
    ],
)
def test_bad_electra_values_raise_naming_the_key(override, match):
    with pytest.raises(ValueError, match=match):
        load_config({"task": "pretrain_electra", **override})


def test_electra_refuses_sop_a_generator_of_size_zero_and_a_bert_checkpoint(tmp_path, tokenizer):
    with pytest.raises(ValueError, match=r"^objective.sop:"):
        pretrain_electra({"output_dir": str(tmp_path / "x"), "objective": {"sop": True}})
    with pytest.raises(ValueError, match=r"^electra.generator_size:"):
        build_electra(ElectraSpec(0.01), tiny={**TINY, "vocab_size": len(tokenizer)})
    with pytest.raises(ValueError, match=r"^electra: must be a validated ElectraSpec"):  # checked once, by the section
        build_electra(0.25, tiny={**TINY, "vocab_size": len(tokenizer)})
    BertForMaskedLM(tiny_bert_config(len(tokenizer), **TINY)).save_pretrained(tmp_path / "bert")
    with pytest.raises(ValueError, match=r"^model.model_name_or_path:"):
        build_electra(ElectraSpec(0.25), model_name_or_path=tmp_path / "bert")
    assert "pretrain_electra" in TASK_RUNNERS


# --- end-to-end runs ------------------------------------------------------------------------------


def test_the_trainers_own_resume_loads_every_weight_of_the_pair(tokenizer, tmp_path):
    # issue 39: no private Trainer method overridden; a checkpoint is the pair's save_pretrained, and the Trainer
    # resumes by loading its model.safetensors into Trainer.model with load_state_dict(state, strict=False)
    assert "_load_from_checkpoint" not in ElectraTrainer.__dict__
    torch.manual_seed(0)
    saved = tiny_pair(tokenizer)
    saved.save_pretrained(tmp_path)
    torch.manual_seed(1)
    resumed = tiny_pair(tokenizer)
    result = resumed.load_state_dict(load_file(str(tmp_path / "model.safetensors")), strict=False)
    # the only keys not in the file are G's shared embeddings (D's, saved once): the Trainer ties them, no warning
    assert set(result.missing_keys) == set(resumed._keys_to_ignore_on_save) and not result.unexpected_keys
    assert any(".word_embeddings." in key for key in resumed._keys_to_ignore_on_save)
    resumed.tie_weights()
    for name, value in saved.state_dict().items():
        assert torch.equal(value, resumed.state_dict()[name]), name
    assert resumed.generator.electra.embeddings is resumed.discriminator.electra.embeddings


def electra_config(output_dir, cache_dir, **sections) -> dict:
    config = {
        "output_dir": str(output_dir),
        "data": {"source": "sample_corpus", "n_sentences": 64, "max_length": 32, "cache_dir": str(cache_dir)},
        "model": {"tiny": TINY},
        "training": {
            "num_train_epochs": 1,
            "per_device_train_batch_size": 16,
            "learning_rate": 1e-3,
            "quiet": True,
            "logging_steps": 2,
            "dataloader_num_workers": 0,
        },
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


@pytest.mark.slow
@pytest.mark.parametrize("objective", [{"name": "plain"}, {"name": "hc"}, {"name": "sr", "weight": 0.5}])
def test_pretrain_electra_writes_both_models_and_metrics_and_finetune_loads_it(tmp_path, objective):
    masking = {"strategy": "kdm" if objective["name"] == "hc" else "wwm"}
    pretrain_electra(electra_config(tmp_path / "pre", tmp_path / "cache", objective=objective, masking=masking))
    out = tmp_path / "pre"
    for folder in (out, out / "generator"):
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= {path.name for path in folder.iterdir()}
    assert not list(out.glob("checkpoint-*"))
    assert json.loads((out / "config.json").read_text())["architectures"] == ["ElectraForPreTraining"]
    assert json.loads((out / "generator" / "config.json").read_text())["architectures"] == ["ElectraForMaskedLM"]
    disc, gen = load_file(str(out / "model.safetensors")), load_file(str(out / "generator" / "model.safetensors"))
    torch.testing.assert_close(
        disc["electra.embeddings.word_embeddings.weight"],
        gen["electra.embeddings.word_embeddings.weight"],
        rtol=0,
        atol=0,
    )  # shared while training

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["task"] == "pretrain_electra" and metrics["objective"] == objective["name"]
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["eval_loss"]))
    assert 0.0 <= metrics["eval_disc_accuracy"] <= 1.0 and metrics["eval_disc_loss"] > 0
    weight = metrics["electra"]["discriminator_weight"]
    assert weight == 50.0
    total = metrics["train_generator_loss"] + weight * metrics["train_discriminator_loss"]
    if objective["name"] == "hc":  # G's mean over the kept positions is scaled by kept / masked
        assert metrics["train_loss"] <= total + 1e-4
    else:
        assert metrics["train_loss"] == pytest.approx(total, rel=1e-4)
    epoch = metrics["epochs"][0]
    assert {"eval_loss", "eval_disc_accuracy", "eval_disc_precision", "eval_disc_recall", "eval_replaced_share"} <= set(
        epoch
    )
    logged = [entry for entry in metrics["history"] if "loss" in entry]
    assert logged and all("generator_loss" in entry and "discriminator_loss" in entry for entry in logged)
    blocks = metrics["blocks"]["train"]
    if objective["name"] == "hc":
        assert metrics["correction"]["sequences"] == metrics["discriminator_correction"]["sequences"] == blocks
        assert epoch["train_disc_hc_sequences"] == blocks and "eval_disc_hc_prediction_rate" in epoch
        assert all(0.0 <= entry["disc_hc_prediction_rate"] <= 1.0 for entry in logged)
    else:
        assert "correction" not in metrics and "train_disc_hc_sequences" not in epoch

    classifier = build_sequence_classifier(3, model_name_or_path=out)
    assert type(classifier).__name__ == "ElectraForSequenceClassification"
    torch.testing.assert_close(
        classifier.electra.embeddings.word_embeddings.weight.detach(), disc["electra.embeddings.word_embeddings.weight"]
    )
    tuned = finetune(
        {
            "output_dir": str(tmp_path / "ft"),
            "model": {"model_name_or_path": str(out)},
            "data": {"source": "sample_relevance", "max_train_samples": 32, "max_eval_samples": 16, "max_length": 32},
            "training": {
                "num_train_epochs": 1,
                "per_device_train_batch_size": 16,
                "learning_rate": 1e-3,
                "quiet": True,
            },
        }
    )
    assert 0.0 <= tuned.metrics["macro_f1"] <= 1.0


class _StopAfterFirstCheckpoint(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise KeyboardInterrupt("simulated interruption after epoch 1's checkpoint")


@pytest.mark.slow
def test_an_interrupted_electra_run_resumes_from_its_checkpoint_through_the_cli(tmp_path):
    config = electra_config(
        tmp_path / "pre",
        tmp_path / "cache",
        objective={"name": "hc"},
        training={"num_train_epochs": 2, "save_total_limit": 2},
    )
    with pytest.raises(KeyboardInterrupt):
        pretrain_electra(config, callbacks=[_StopAfterFirstCheckpoint()])
    (checkpoint,) = (tmp_path / "pre").glob("checkpoint-*")
    assert (checkpoint / "model.safetensors").is_file() and (checkpoint / "generator" / "model.safetensors").is_file()
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "pretrain_electra", **config}), encoding="utf-8")
    assert cli_main([str(path), "training.resume=true"]) == 0
    metrics = json.loads((tmp_path / "pre" / "metrics.json").read_text())
    assert [record["epoch"] for record in metrics["epochs"]] == [2.0]  # epoch 1 ran before the interruption
    assert metrics["history"][-1]["step"] == 2 * int(checkpoint.name.split("-")[1])
