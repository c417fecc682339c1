from __future__ import annotations

import pytest
import torch
from transformers import BertForMaskedLM, BertForSequenceClassification

from workbench.models import (
    FusionClassifier,
    build_aux_label_classifier,
    build_encoder,
    build_masked_lm,
    build_sequence_classifier,
    freeze_encoder,
    labelled_logits,
    mlm_head,
    replace_head,
    tiny_bert_config,
)
from workbench.vocab import load_tokenizer

TINY = {"hidden_size": 16, "num_heads": 2, "num_layers": 1, "max_position": 32}


def _batch():
    tok = load_tokenizer()
    return dict(
        tok(["小米手机多少钱", "今天很开心"], ["小米手机最新价格表", "北京"], padding=True, return_tensors="pt")
    )


def test_tiny_config_defaults():
    config = tiny_bert_config()
    assert config.vocab_size == len(load_tokenizer()) == 4500
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (2, 64, 2)
    assert config.intermediate_size == 256
    assert config.max_position_embeddings == 128
    assert tiny_bert_config(hidden_dropout_prob=0.0).hidden_dropout_prob == 0.0


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"hidden_size": 10, "num_heads": 3}, "hidden_size"),
        ({"num_layers": 0}, "num_layers"),
        ({"vocab_size": -1}, "vocab_size"),
        ({"num_heads": 0}, "num_heads"),
        ({"intermediate_size": 0}, "intermediate_size"),
        ({"max_position": 1.5}, "max_position"),
    ],
)
def test_tiny_config_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=rf"^{name}:"):
        tiny_bert_config(**kwargs)


def test_builders_bad_parameters(tmp_path):
    with pytest.raises(ValueError, match=r"^num_labels:"):
        build_sequence_classifier(0, tiny=TINY)
    with pytest.raises(ValueError, match=r"^num_aux:"):
        build_aux_label_classifier(3, 0, tiny=TINY)
    with pytest.raises(ValueError, match=r"^tiny:"):
        build_sequence_classifier(3, model_name_or_path=tmp_path, tiny=TINY)
    with pytest.raises(ValueError, match=r"^vocab_file:"):
        load_tokenizer(tmp_path, vocab_file=tmp_path / "vocab.txt")


def test_save_and_reload_gives_same_logits(tmp_path):
    torch.manual_seed(0)
    model = build_sequence_classifier(3, tiny=TINY).eval()
    tok = load_tokenizer()
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded = build_sequence_classifier(3, model_name_or_path=tmp_path).eval()
    assert isinstance(loaded, BertForSequenceClassification)
    batch = _batch()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, model(**batch).logits)
    reloaded_tok = load_tokenizer(tmp_path)
    assert reloaded_tok("小米手机")["input_ids"] == tok("小米手机")["input_ids"]


SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"


@pytest.mark.parametrize(
    ("data", "named"),
    [
        ((SPECIALS + "天\n气\n").encode("gbk"), r"vocab\.txt:6: "),  # was tokenizers' bare "Exception"
        (SPECIALS.encode() + bytes(range(128, 256)), r"vocab\.txt:6: "),
        ("天\n气\n".encode(), r"^vocab_file: .*\[UNK\]"),  # an unknown character failed later, mid-run
        (b"", r"^vocab_file: "),
        (
            (SPECIALS + "天\n气\n天\n").encode(),
            r"^vocab_file: .*distinct",
        ),  # a repeated token leaves an id no token has
    ],
)
def test_a_vocab_file_that_is_no_wordpiece_vocabulary_names_the_file(tmp_path, data, named):
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(data)
    with pytest.raises(ValueError, match=named):
        load_tokenizer(vocab_file=vocab)


@pytest.mark.parametrize("broken", ["model.safetensors", "tokenizer.json", "config.json"])
def test_a_checkpoint_with_a_truncated_file_names_the_checkpoint(tmp_path, broken):
    build_sequence_classifier(3, tiny=TINY).save_pretrained(tmp_path)
    load_tokenizer().save_pretrained(tmp_path)
    (tmp_path / broken).write_bytes((tmp_path / broken).read_bytes()[:50])  # a copy cut short
    key = r"^(model\.)?model_name_or_path"  # load_tokenizer names the config key
    with pytest.raises(ValueError, match=rf"{key}: '{tmp_path}'"):  # a SafetensorError traceback before
        load_tokenizer(tmp_path)
        build_sequence_classifier(3, model_name_or_path=tmp_path)


def test_mlm_checkpoint_feeds_sequence_classifier(tmp_path):
    torch.manual_seed(0)
    mlm = build_masked_lm(tiny=TINY)
    assert isinstance(mlm, BertForMaskedLM)
    mlm.save_pretrained(tmp_path)
    classifier = build_sequence_classifier(2, model_name_or_path=tmp_path)
    for name, value in mlm.bert.state_dict().items():
        torch.testing.assert_close(classifier.bert.state_dict()[name], value)
    assert classifier(**_batch()).logits.shape == (2, 2)


def test_encoder_shapes():
    assert build_encoder(tiny=TINY)(**_batch()).pooler_output.shape == (2, 16)


def test_aux_label_head_and_replace_head_keeps_encoder():
    torch.manual_seed(0)
    model = build_aux_label_classifier(3, 4, tiny=TINY)
    assert model(**_batch()).logits.shape == (2, 7)
    assert (model.config.num_task_labels, model.config.num_aux_labels) == (3, 4)
    encoder_before = {k: v.clone() for k, v in model.bert.state_dict().items()}
    replace_head(model, 3, seed=0)
    assert model(**_batch()).logits.shape == (2, 3)
    assert (model.config.num_labels, model.config.num_aux_labels) == (3, 0)
    assert torch.count_nonzero(model.classifier.bias) == 0
    for name, value in model.bert.state_dict().items():
        assert torch.equal(value, encoder_before[name])
    other = replace_head(build_aux_label_classifier(3, 4, tiny=TINY), 3, seed=0)
    assert torch.equal(other.classifier.weight, model.classifier.weight)


def test_replace_head_rejects_model_without_linear_head():
    with pytest.raises(ValueError, match=r"^model:"):
        replace_head(build_masked_lm(tiny=TINY), 3)
    with pytest.raises(ValueError, match=r"^num_labels:"):
        replace_head(build_sequence_classifier(2, tiny=TINY), 0)


def test_freeze_encoder_freezes_every_encoder_parameter_only():
    model = freeze_encoder(build_aux_label_classifier(2, 2, tiny=TINY))
    assert all(not p.requires_grad for p in model.bert.parameters())
    assert all(p.requires_grad for p in model.classifier.parameters())
    model.classifier.zero_grad()
    model(**_batch()).logits.sum().backward()
    assert model.classifier.weight.grad is not None
    assert all(p.grad is None for p in model.bert.parameters())


@pytest.mark.parametrize("representation", ["cls", "pooled"])
def test_fusion_forward_concatenates_two_encoders(representation):
    torch.manual_seed(0)
    encoder_a = build_encoder(tiny=TINY)
    encoder_b = build_encoder(tiny={**TINY, "hidden_size": 8})
    fusion = FusionClassifier(encoder_a, encoder_b, num_labels=3, representation=representation, dropout=0.0).eval()
    batch = _batch()
    output = fusion(**batch, labels=torch.tensor([0, 2]))
    assert output.logits.shape == (2, 3)
    assert fusion.classifier.in_features == 24
    key = "last_hidden_state" if representation == "cls" else "pooler_output"
    a, b = encoder_a(**batch)[key], encoder_b(**batch)[key]
    if representation == "cls":
        a, b = a[:, 0], b[:, 0]
    expected = fusion.classifier(torch.cat([a, b], dim=-1))
    torch.testing.assert_close(output.logits, expected)
    torch.testing.assert_close(output.loss, torch.nn.functional.cross_entropy(expected, torch.tensor([0, 2])))


def test_fusion_bad_parameters():
    encoder = build_encoder(tiny=TINY)
    with pytest.raises(ValueError, match=r"^representation:"):
        FusionClassifier(encoder, encoder, 2, representation="mean")
    with pytest.raises(ValueError, match=r"^num_labels:"):
        FusionClassifier(encoder, encoder, 0)
    with pytest.raises(ValueError, match=r"^dropout:"):
        FusionClassifier(encoder, encoder, 2, dropout=1.0)


def _masked_lms():
    from transformers import (
        BertForPreTraining,
        DistilBertConfig,
        DistilBertForMaskedLM,
        ElectraForMaskedLM,
        RobertaConfig,
        RobertaForMaskedLM,
    )

    from workbench.models import tiny_electra_config

    vocab = len(load_tokenizer())
    sizes = {"vocab_size": vocab, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 32}
    return {
        "bert": BertForMaskedLM(tiny_bert_config(vocab, **TINY)),
        "bert-sop": BertForPreTraining(tiny_bert_config(vocab, **TINY)),
        "electra": ElectraForMaskedLM(tiny_electra_config(vocab, **TINY)),
        "roberta": RobertaForMaskedLM(RobertaConfig(num_hidden_layers=1, max_position_embeddings=40, **sizes)),
        "distilbert (no known head: runs whole)": DistilBertForMaskedLM(
            DistilBertConfig(vocab_size=vocab, dim=16, n_heads=2, n_layers=1, hidden_dim=32)
        ),
    }


@pytest.mark.parametrize("kind", list(_masked_lms()))
def test_labelled_logits_are_the_full_logits_at_the_labelled_positions(kind):
    torch.manual_seed(0)
    model = _masked_lms()[kind].double().eval()
    batch = _batch()
    if kind.startswith("distilbert"):
        batch.pop("token_type_ids")
    labels = torch.full_like(batch["input_ids"], -100)
    labels[0, [1, 4]], labels[1, 2] = 7, 9
    logits, sop_logits = labelled_logits(model, labels, **batch)
    with torch.no_grad():
        full = model(**batch)
    expected = full.logits if "logits" in full else full.prediction_logits
    torch.testing.assert_close(logits, expected[labels != -100], rtol=0.0, atol=1e-12)
    assert (mlm_head(model) is None) == kind.startswith("distilbert")
    if kind == "bert-sop":
        torch.testing.assert_close(sop_logits, full.seq_relationship_logits, rtol=0.0, atol=1e-12)
    else:
        assert sop_logits is None
