"""workbench.train.probes: encoding, the bag-of-characters probe (texts and pairs), the seeded loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from datasets import Dataset

from workbench.config import ProbeConfig, TrainingConfig
from workbench.losses import build_loss
from workbench.metrics import classification_report
from workbench.train.probes import PAIR_COLUMNS, CharacterProbe, EncodedSplit, encode_split, fit_probe
from workbench.vocab import load_tokenizer

VOCAB = 12
QUICK = TrainingConfig.from_mapping(
    {"num_train_epochs": 6, "per_device_train_batch_size": 8, "learning_rate": 0.05, "weight_decay": 0.0}
)
PROBE = ProbeConfig(embedding_size=8, hidden_size=8)


def _texts_toy(n: int, seed: int) -> EncodedSplit:
    """Class 0 texts use characters {2, 3, 4}, class 1 texts {5, 6, 7}; lengths 1..4, padded with 0."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    ids = torch.zeros(n, 4, dtype=torch.long)
    for row, label in enumerate(labels.tolist()):
        length = int(torch.randint(1, 5, (1,), generator=generator))
        ids[row, :length] = torch.randint(2 + 3 * label, 5 + 3 * label, (length,), generator=generator)
    return EncodedSplit((ids,), labels)


def _pairs_toy(n: int, seed: int) -> EncodedSplit:
    """Label = the title's class (characters {2..6} -> 0, {7..11} -> 1); the query is noise."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 2
    query = torch.randint(2, VOCAB, (n, 3), generator=generator)
    title = torch.stack(
        [torch.randint(2 + 5 * label, 7 + 5 * label, (3,), generator=generator) for label in labels.tolist()]
    )
    return EncodedSplit((query, title), labels)


def _splits(make) -> dict[str, EncodedSplit]:
    return {"train": make(64, 0), "validation": make(24, 1), "test": make(24, 2)}


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


# ----------------------------------------------------------------------------- encoding


def test_encode_split_pads_with_zero_truncates_and_reads_labels(tokenizer):
    split = Dataset.from_dict({"text": ["好", "房间很好", "非常差的房间"], "label": [1, 0, 1]})
    encoded = encode_split(split, tokenizer, max_length=4)
    (ids,) = encoded.ids
    expected = [tokenizer(text, add_special_tokens=False)["input_ids"][:4] for text in split["text"]]
    assert ids.shape == (3, 4) and ids.dtype == torch.long
    for row, characters in enumerate(expected):
        assert ids[row, : len(characters)].tolist() == characters
        assert (ids[row, len(characters) :] == 0).all()
    assert encoded.labels.tolist() == [1, 0, 1] and not encoded.is_pair


def test_encode_split_pairs_and_selected_views(tokenizer):
    split = Dataset.from_dict(
        {"text": ["感冒", "发烧了", "头疼"], "text_pair": ["感冒吃什么药", "退烧", "头"], "label": [2, 0, 1]}
    )
    view = split.select([2, 0])
    encoded = encode_split(view, tokenizer, 8, PAIR_COLUMNS)
    assert encoded.is_pair and encoded.labels.tolist() == [1, 2]
    assert encoded.ids[0][0, :2].tolist() == tokenizer("头疼", add_special_tokens=False)["input_ids"]
    assert encoded.ids[1].shape == (2, len("感冒吃什么药"))


# ----------------------------------------------------------------------------- the model


def test_text_probe_is_fasttext_and_ignores_padding():
    torch.manual_seed(0)
    model = CharacterProbe(vocab_size=20, num_labels=2, embedding_size=4)
    padded = model(torch.tensor([[5, 7, 0, 0]]))
    expected = model.head(model.embedding.weight[[5, 7]].mean(0, keepdim=True))
    torch.testing.assert_close(padded, model(torch.tensor([[5, 7]])))
    torch.testing.assert_close(padded, expected)


def test_pair_probe_uses_infersent_features_and_ignores_padding():
    torch.manual_seed(0)
    model = CharacterProbe(vocab_size=20, num_labels=3, embedding_size=4, hidden_size=5, pair=True)
    query, title = torch.tensor([[5, 6, 7]]), torch.tensor([[8, 9]])
    logits = model(query, title)
    torch.testing.assert_close(logits, model(torch.nn.functional.pad(query, (0, 4)), title))
    torch.testing.assert_close(logits, model(query, torch.nn.functional.pad(title, (0, 2))))
    u = model.embedding.weight[[5, 6, 7]].mean(0, keepdim=True)
    v = model.embedding.weight[[8, 9]].mean(0, keepdim=True)
    torch.testing.assert_close(logits, model.head(torch.cat([u, v, u * v, (u - v).abs()], dim=-1)))


@pytest.mark.parametrize("columns", [("text",), PAIR_COLUMNS])
def test_batch_padding_does_not_change_a_row(tokenizer, columns):
    torch.manual_seed(1)
    model = CharacterProbe(len(tokenizer), 3, embedding_size=6, hidden_size=7, pair=len(columns) == 2)
    rows = {"text": ["好", "非常非常好的房间"], "text_pair": ["房间", "好"], "label": [0, 1]}
    together = encode_split(Dataset.from_dict(rows), tokenizer, 16, columns)
    alone = encode_split(Dataset.from_dict({key: value[:1] for key, value in rows.items()}), tokenizer, 16, columns)
    torch.testing.assert_close(model(*together.ids)[:1], model(*alone.ids))


# ----------------------------------------------------------------------------- training


@pytest.mark.parametrize("make", [_texts_toy, _pairs_toy])
def test_fit_probe_learns_a_separable_toy_set(make):
    encoded = _splits(make)
    fit = fit_probe(encoded, build_loss("ce"), QUICK.replace(num_train_epochs=15), PROBE, VOCAB, 2, seed=0)
    assert fit.test["accuracy"] == 1.0 and fit.validation["accuracy"] == 1.0
    assert fit.probabilities.shape == (24, 2)
    np.testing.assert_allclose(fit.probabilities.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(fit.predictions, fit.probabilities.argmax(1))
    assert fit.test == classification_report(encoded["test"].labels.numpy(), fit.predictions, num_labels=2)


def test_fit_probe_keeps_the_chosen_epochs_validation_probabilities():
    encoded = _splits(_texts_toy)
    fit = fit_probe(encoded, build_loss("ce"), QUICK, PROBE, VOCAB, 2, seed=0)
    assert fit.validation_probabilities.shape == (24, 2)
    np.testing.assert_array_equal(fit.validation_predictions, fit.validation_probabilities.argmax(1))


def _ordinal_toy(n: int, seed: int) -> EncodedSplit:
    """Three ordered classes: class k texts use characters {2 + 3k .. 4 + 3k}."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.arange(n) % 3
    ids = torch.stack([torch.randint(2 + 3 * k, 5 + 3 * k, (3,), generator=generator) for k in labels.tolist()])
    return EncodedSplit((ids,), labels)


def test_fit_probe_with_corn_builds_k_minus_one_outputs_and_predicts_ranks():
    encoded = _splits(_ordinal_toy)
    fit = fit_probe(encoded, build_loss("corn"), QUICK.replace(num_train_epochs=15), PROBE, VOCAB, 3, seed=0)
    assert fit.probabilities.shape == (24, 3) and fit.validation_probabilities.shape == (24, 3)
    np.testing.assert_allclose(fit.probabilities.sum(1), 1.0, rtol=1e-6)
    above = 1 - np.cumsum(fit.probabilities, axis=1)[:, :2]  # P(y > 0), P(y > 1)
    np.testing.assert_array_equal(fit.predictions, (above > 0.5).sum(1))  # the rank rule
    assert fit.test["accuracy"] == 1.0


def test_fit_probe_is_seeded_and_leaves_global_rng_alone():
    encoded = _splits(_pairs_toy)
    state = torch.get_rng_state()
    first = fit_probe(encoded, build_loss("ce"), QUICK, PROBE, VOCAB, 2, seed=3)
    assert torch.equal(state, torch.get_rng_state())
    again = fit_probe(encoded, build_loss("ce"), QUICK, PROBE, VOCAB, 2, seed=3)
    other = fit_probe(encoded, build_loss("ce"), QUICK, PROBE, VOCAB, 2, seed=4)
    np.testing.assert_array_equal(first.probabilities, again.probabilities)
    assert (first.best_epoch, first.test) == (again.best_epoch, again.test)
    assert not np.array_equal(first.probabilities, other.probabilities)


def test_fit_probe_keeps_the_first_best_validation_epoch():
    encoded = _splits(_texts_toy)
    training = QUICK.replace(learning_rate=0.01)
    full = fit_probe(encoded, build_loss("ce"), training, PROBE, VOCAB, 2, seed=1)
    # a run of j epochs is the full run's prefix: its kept score is the running max over epochs 1..j,
    # so the first j whose running max reaches the overall max is the first best epoch
    prefixes = [
        fit_probe(encoded, build_loss("ce"), training.replace(num_train_epochs=j), PROBE, VOCAB, 2, seed=1)
        for j in range(1, training.num_train_epochs + 1)
    ]
    running_max = [prefix.validation["macro_f1"] for prefix in prefixes]
    assert running_max == sorted(running_max)
    assert full.validation["macro_f1"] == running_max[-1]
    assert full.best_epoch == 1 + running_max.index(running_max[-1])
    np.testing.assert_array_equal(full.probabilities, prefixes[full.best_epoch - 1].probabilities)


def test_fit_probe_never_selects_on_test():
    encoded = _splits(_texts_toy)
    flipped = {**encoded, "test": EncodedSplit(encoded["test"].ids, 1 - encoded["test"].labels)}
    training = QUICK.replace(learning_rate=0.01)
    plain = fit_probe(encoded, build_loss("ce"), training, PROBE, VOCAB, 2, seed=2)
    other = fit_probe(flipped, build_loss("ce"), training, PROBE, VOCAB, 2, seed=2)
    assert plain.best_epoch == other.best_epoch
    np.testing.assert_array_equal(plain.probabilities, other.probabilities)
    assert other.test["accuracy"] == pytest.approx(1.0 - plain.test["accuracy"])


def test_weight_decay_changes_training():
    encoded = _splits(_texts_toy)
    plain = fit_probe(encoded, build_loss("ce"), QUICK, PROBE, VOCAB, 2, seed=0)
    decayed = fit_probe(encoded, build_loss("ce"), QUICK.replace(weight_decay=5.0), PROBE, VOCAB, 2, seed=0)
    assert not np.array_equal(plain.probabilities, decayed.probabilities)


# ----------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        (TrainingConfig, "num_train_epochs", 0),
        (TrainingConfig, "per_device_train_batch_size", 2.5),
        (ProbeConfig, "embedding_size", True),
        (ProbeConfig, "hidden_size", 0),
        (TrainingConfig, "learning_rate", 0.0),
        (TrainingConfig, "learning_rate", True),
        (TrainingConfig, "weight_decay", -0.1),
    ],
)
def test_probe_settings_reject_bad_values(section, field, value):
    with pytest.raises(ValueError, match=rf"^{section.prefix}.{field}:"):
        section.from_mapping({field: value})


def test_fit_probe_needs_whole_epochs_and_reports_its_history():
    encoded = _splits(_texts_toy)
    with pytest.raises(ValueError, match=r"^training.num_train_epochs:"):
        fit_probe(encoded, build_loss("ce"), QUICK.replace(num_train_epochs=1.5), PROBE, VOCAB, 2)
    fit = fit_probe(encoded, build_loss("ce"), QUICK, PROBE, VOCAB, 2, seed=0)
    assert [entry["epoch"] for entry in fit.history] == list(range(1, 7))
    assert fit.history[fit.best_epoch - 1]["validation_macro_f1"] == fit.validation["macro_f1"]
    assert fit.validation == classification_report(
        encoded["validation"].labels.numpy(), fit.validation_predictions, num_labels=2
    )


class _NanLoss(torch.nn.Module):
    def forward(self, logits, labels):
        return logits.sum() * float("nan")


def test_fit_probe_stops_loudly_when_training_diverges():
    with pytest.raises(FloatingPointError, match="diverged.*epoch 1"):
        fit_probe(_splits(_texts_toy), _NanLoss(), QUICK, PROBE, VOCAB, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"vocab_size": 0}, "vocab_size"),
        ({"num_labels": 1}, "num_labels"),
        ({"embedding_size": 0}, "embedding_size"),
        ({"hidden_size": 1.5}, "hidden_size"),
    ],
)
def test_character_probe_rejects_bad_sizes(kwargs, match):
    with pytest.raises(ValueError, match=rf"^{match}:"):
        CharacterProbe(**{"vocab_size": 10, "num_labels": 2, **kwargs})


def test_character_probe_rejects_the_wrong_number_of_inputs():
    ids = torch.tensor([[2, 3]])
    with pytest.raises(ValueError, match=r"^pair_ids:"):
        CharacterProbe(10, 2)(ids, ids)
    with pytest.raises(ValueError, match=r"^pair_ids:"):
        CharacterProbe(10, 2, pair=True)(ids)


def test_encoded_split_and_encode_split_reject_bad_input(tokenizer):
    with pytest.raises(ValueError, match=r"^ids:"):
        EncodedSplit((), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"^ids:"):
        EncodedSplit((torch.zeros(3, 2, dtype=torch.long),), torch.tensor([0, 1]))
    split = Dataset.from_dict({"text": ["好"], "label": [0]})
    with pytest.raises(ValueError, match=r"^split:"):
        encode_split(split, tokenizer, 8, PAIR_COLUMNS)
    with pytest.raises(ValueError, match=r"^columns:"):
        encode_split(split, tokenizer, 8, ("text", "text", "text"))
    with pytest.raises(ValueError, match=r"^max_length:"):
        encode_split(split, tokenizer, 0)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda e, a: ({k: v for k, v in e.items() if k != "validation"}, a), "encoded"),
        (lambda e, a: ({**e, "test": _pairs_toy(8, 5)}, a), "encoded"),
        (lambda e, a: (e, {**a, "num_labels": 1}), "num_labels"),
        (lambda e, a: (e, {**a, "vocab_size": 5}), "vocab_size"),
        (lambda e, a: (e, {**a, "training": {"num_train_epochs": 1}}), "training"),
        (lambda e, a: (e, {**a, "seed": -1}), "seed"),
        (lambda e, a: (e, {**a, "label_names": ["only one"]}), "label_names"),
    ],
)
def test_fit_probe_rejects_bad_input(change, match):
    encoded, arguments = change(
        _splits(_texts_toy), {"training": QUICK, "probe": PROBE, "vocab_size": VOCAB, "num_labels": 2}
    )
    with pytest.raises(ValueError, match=rf"^{match}:"):
        fit_probe(encoded, build_loss("ce"), **arguments)
