"""workbench.studies.pcl: gradient check, the pair probe, the ablation grid and its tables."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from workbench.losses import QBQTC_LABEL_COUNTS, pcl_constants, pcl_weight_matrix
from workbench.studies import pcl as study
from workbench.vocab import load_tokenizer

EPSILON = 0.1
TINY = study.ProbeTraining(epochs=8, batch_size=16, lr=0.02, embedding_size=16, hidden_size=16, max_length=16)


@pytest.fixture(scope="module")
def splits():
    return study.relevance_splits(seed=0, n_train=240, n_eval=60)


@pytest.fixture(scope="module")
def ablation(splits):
    return study.run_ablation(splits, ["LS", "PCL reference", "PCL paper", "PCL weighted (global)"], seeds=[0, 1],
                              epsilon=EPSILON, training=TINY)


def _comparison_batch(seed: int = 0, batch_size: int = 64):
    generator = torch.Generator().manual_seed(seed)
    shares = torch.as_tensor(QBQTC_LABEL_COUNTS, dtype=torch.float64)
    labels = torch.multinomial(shares / shares.sum(), batch_size, replacement=True, generator=generator)
    logits = 2.0 * torch.randn(batch_size, 3, generator=generator, dtype=torch.float64)
    return logits.numpy(), labels.numpy()


# ----------------------------------------------------------------------------- gradients


def test_gradient_comparison_gradient_free_forms_equal_ls_bitwise():
    table = study.gradient_comparison(epsilon=EPSILON).set_index("setting")
    assert list(table.index) == list(study.PCL_SETTINGS)
    for setting in study.GRADIENT_FREE:
        assert table.loc[setting, "same_gradient"]
        assert table.loc[setting, "max_abs_grad_diff"] == 0.0
    for setting in set(study.PCL_SETTINGS) - {*study.GRADIENT_FREE, "LS"}:
        assert not table.loc[setting, "same_gradient"]
        assert table.loc[setting, "max_abs_grad_diff"] > 1e-4


def test_gradient_comparison_offsets_match_hand_computation():
    logits, labels = _comparison_batch()
    predicted = logits.argmax(axis=1)
    table = study.gradient_comparison(epsilon=EPSILON).set_index("setting")
    # eq. 4 as written: mean over the batch of +PCL+ (far), -PCL- (near), 0 (correct), PCL+ by eq. 2.
    pcl_plus, pcl_minus = pcl_constants(QBQTC_LABEL_COUNTS, "paper")
    far = ((labels == 0) & (predicted == 2)) | ((labels == 2) & (predicted == 0)) | ((labels == 1) & (predicted == 0))
    near = (labels != predicted) & ~far
    expected_paper = (pcl_plus * far - pcl_minus * near).mean()
    assert table.loc["PCL paper", "loss_minus_ls"] == pytest.approx(expected_paper, rel=1e-12)
    # released code: first C = 3 samples, eps * PCL+(code) / C whenever gold + predicted >= 2.
    code_plus, _ = pcl_constants(QBQTC_LABEL_COUNTS, "code")
    first = slice(0, 3)
    expected_reference = (EPSILON * code_plus / 3 * ((labels[first] + predicted[first]) >= 2)).sum()
    assert table.loc["PCL reference", "loss_minus_ls"] == pytest.approx(expected_reference, rel=1e-6)
    # and the library's paper matrix says the same per (gold, predicted)
    matrix = pcl_weight_matrix("paper", EPSILON).numpy()
    assert matrix[labels, predicted].mean() == pytest.approx(expected_paper, rel=1e-6)


@pytest.mark.parametrize(("kwargs", "match"), [({"batch_size": 0}, "batch_size"), ({"settings": ["nope"]}, "settings")])
def test_gradient_comparison_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        study.gradient_comparison(**kwargs)


# ----------------------------------------------------------------------------- probe


@pytest.mark.parametrize(
    ("field", "value"), [("epochs", 0), ("batch_size", -1), ("embedding_size", 1.5), ("max_length", True), ("lr", 0.0)]
)
def test_probe_training_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        study.ProbeTraining(**{field: value})


def test_fit_pair_probe_is_seeded_and_leaves_global_rng_alone(splits):
    tokenizer = load_tokenizer()
    encoded = study.encode_pairs(splits, tokenizer, TINY.max_length)
    loss = study.setting_loss("LS", EPSILON, splits["train"])
    state = torch.get_rng_state()
    first = study.fit_pair_probe(encoded, loss, 3, TINY, len(tokenizer))
    assert torch.equal(state, torch.get_rng_state())
    second = study.fit_pair_probe(encoded, loss, 3, TINY, len(tokenizer))
    np.testing.assert_array_equal(first["test_predictions"], second["test_predictions"])
    assert first["test_predictions"].shape == (60,)
    assert 1 <= first["best_epoch"] <= TINY.epochs


# ----------------------------------------------------------------------------- ablation


def test_run_ablation_table_shape_and_identical_predictions(ablation):
    runs = ablation.runs
    assert list(runs["setting"]) == ["LS"] * 2 + ["PCL reference"] * 2 + ["PCL paper"] * 2 + ["PCL weighted (global)"] * 2
    assert {"seed", *study.METRICS, "best_epoch", "validation_macro_f1", "identical_to_ls"} <= set(runs.columns)
    identical = runs.set_index(["setting", "seed"])["identical_to_ls"]
    # the gradient-free forms train exactly like LS with the same seed ...
    for setting in ("LS", "PCL reference", "PCL paper"):
        assert identical[setting].all()
        for seed in (0, 1):
            np.testing.assert_array_equal(ablation.predictions[(setting, seed)], ablation.predictions[("LS", seed)])
    # ... while the weighted form changes training
    assert not identical["PCL weighted (global)"].any()


def test_run_ablation_confusion_is_sum_over_seeds(ablation, splits):
    gold = np.asarray(splits["test"]["label"])
    for setting, matrix in ablation.confusion.items():
        expected = np.zeros((3, 3), dtype=int)
        for seed in (0, 1):
            np.add.at(expected, (gold, ablation.predictions[(setting, seed)]), 1)
        np.testing.assert_array_equal(matrix, expected)
    runs = ablation.runs.set_index(["setting", "seed"])
    accuracy = np.trace(ablation.confusion["LS"]) / ablation.confusion["LS"].sum()
    assert accuracy == pytest.approx(runs.loc["LS", "accuracy"].mean())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"settings": ["PCL paper"]}, "baseline"),
        ({"settings": ["LS", "PCL magic"]}, "unknown"),
        ({"seeds": []}, "seeds"),
    ],
)
def test_run_ablation_rejects_bad_input(splits, kwargs, match):
    with pytest.raises(ValueError, match=match):
        study.run_ablation(splits, **{"settings": ["LS"], "seeds": [0], "training": TINY, **kwargs})


def test_setting_loss_rejects_unknown_setting(splits):
    with pytest.raises(ValueError, match="setting"):
        study.setting_loss("PCL nope", EPSILON, splits["train"])


def test_setting_loss_global_counts_come_from_the_training_split(splits):
    loss = study.setting_loss("PCL weighted (global)", EPSILON, splits["train"])
    counts = np.bincount(np.asarray(splits["train"]["label"]), minlength=3)
    np.testing.assert_array_equal(loss.label_counts.numpy(), counts)


# ----------------------------------------------------------------------------- tables


def _synthetic_runs() -> pd.DataFrame:
    rows = [
        ("LS", 0, 0.5, 0.6, 0.1, True), ("LS", 1, 0.7, 0.8, 0.3, True),
        ("PCL paper", 0, 0.5, 0.6, 0.1, True), ("PCL paper", 1, 0.7, 0.8, 0.3, False),
        ("PCL weighted (batch)", 0, 0.9, 0.9, 0.0, False), ("PCL weighted (batch)", 1, 0.8, 0.9, 0.0, False),
        ("PCL expected_cost (global)", 0, 0.6, 0.7, 0.2, False),
    ]
    return pd.DataFrame(rows, columns=["setting", "seed", "macro_f1", "accuracy", "far_error_rate", "identical_to_ls"])


def test_ablation_table_mean_std_by_hand():
    table = study.ablation_table(_synthetic_runs())
    assert list(table.index) == ["LS", "PCL paper", "PCL weighted (batch)", "PCL expected_cost (global)"]
    std = np.std([0.5, 0.7], ddof=1)
    assert table.loc["LS", "macro_f1"] == f"0.600 ± {std:.3f}"
    assert table.loc["PCL weighted (batch)", "accuracy"] == "0.900 ± 0.000"
    assert table.loc["PCL expected_cost (global)", "macro_f1"] == "0.600"  # one seed: no spread
    assert table.loc["PCL paper", "identical predictions to LS"] == "1/2"


def test_headline_metrics_pick_best_gradient_bearing_setting():
    metrics = study.headline_metrics(_synthetic_runs())
    assert metrics["ls_macro_f1"] == pytest.approx(0.6)
    assert metrics["best_pcl_setting"] == "PCL weighted (batch)"
    assert metrics["best_pcl_macro_f1"] == pytest.approx(0.85)
    assert metrics["gradient_free_identical_share"] == pytest.approx(0.5)
    assert metrics["per_setting"]["LS"]["macro_f1_std"] == pytest.approx(np.std([0.5, 0.7], ddof=1))


def test_relevance_splits_sample_and_file(tmp_path):
    sample = study.relevance_splits(seed=1, n_train=50, n_eval=10)
    assert {name: len(split) for name, split in sample.items()} == {"train": 50, "validation": 10, "test": 10}
    path = tmp_path / "qbqtc.json"
    records = [{"id": i, "query": "感冒", "title": "感冒吃什么药", "label": str(i % 3)} for i in range(60)]
    path.write_text("\n".join(json.dumps(record, ensure_ascii=False) for record in records), encoding="utf-8")
    from_file = study.relevance_splits(str(path), seed=0)
    assert {name: len(split) for name, split in from_file.items()} == {"train": 48, "validation": 6, "test": 6}


# ----------------------------------------------------------------------------- the transformer path

CUE_CHARACTERS = ("冷", "温", "热")
FILLER = list("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种")
TINY_BERT = {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}}
TINY_BERT_TRAINING = {"epochs": 4, "batch_size": 16, "eval_batch_size": 64, "lr": 5e-3, "warmup_ratio": 0.0}
TRANSFORMER_SETTINGS = ["LS", "PCL reference", "PCL expected_cost (global)"]


def _cue_pairs(size: int, rng: np.random.Generator):
    """Pairs whose query ends in a label cue (the gold label's in 75% of cases, else a random one):
    learnable by a 1-layer BERT in a few epochs, yet not perfectly, so predictions carry information."""
    from datasets import ClassLabel, Dataset, Features, Value

    labels = rng.choice(3, size=size, p=[0.3, 0.4, 0.3])
    cues = np.where(rng.random(size) < 0.75, labels, rng.choice(3, size=size))
    return Dataset.from_dict(
        {"text": ["".join(rng.choice(FILLER, 6)) + CUE_CHARACTERS[cue] * 3 for cue in cues],
         "text_pair": ["".join(rng.choice(FILLER, 8)) for _ in labels], "label": labels.tolist()},
        features=Features({"text": Value("string"), "text_pair": Value("string"),
                           "label": ClassLabel(names=["irrelevant", "related", "highly_relevant"])}),
    )


@pytest.fixture(scope="module")
def cue_splits():
    from datasets import DatasetDict

    rng = np.random.default_rng(0)
    return DatasetDict(train=_cue_pairs(128, rng), validation=_cue_pairs(64, rng), test=_cue_pairs(64, rng))


@pytest.fixture(scope="module")
def transformer_ablation(cue_splits):
    return study.run_ablation(cue_splits, TRANSFORMER_SETTINGS, seeds=[0], epsilon=EPSILON, training=study.ProbeTraining(max_length=32),
                              model=TINY_BERT, model_training=TINY_BERT_TRAINING)


def test_transformer_ablation_pcl_reference_predicts_exactly_like_ls(transformer_ablation):
    runs = transformer_ablation.runs.set_index("setting")
    assert list(runs.index) == TRANSFORMER_SETTINGS
    assert {"seed", *study.METRICS, "best_epoch", "validation_macro_f1", "identical_to_ls"} <= set(runs.columns)
    ls = transformer_ablation.predictions[("LS", 0)]
    assert len(np.unique(ls)) == 3  # the model learned something: equality below is not the trivial "all majority"
    np.testing.assert_array_equal(transformer_ablation.predictions[("PCL reference", 0)], ls)
    assert runs.loc["PCL reference", "identical_to_ls"]
    assert runs.loc["PCL reference", "validation_macro_f1"] == runs.loc["LS", "validation_macro_f1"]
    assert runs["best_epoch"].between(1, TINY_BERT_TRAINING["epochs"]).all()
    assert study.ablation_table(transformer_ablation.runs).loc["PCL reference", "identical predictions to LS"] == "1/1"


def test_fit_transformer_matches_the_ablation_and_reports_the_kept_epoch(cue_splits, transformer_ablation):
    from workbench.metrics import classification_report
    from workbench.studies.finetuning import fit_transformer

    fit = fit_transformer(cue_splits, study.setting_loss("LS", EPSILON, cue_splits["train"]), 0, TINY_BERT, TINY_BERT_TRAINING, 32)
    np.testing.assert_array_equal(fit.test_predictions, transformer_ablation.predictions[("LS", 0)])  # seeded
    validation = classification_report(np.asarray(cue_splits["validation"]["label"]), fit.validation_predictions)
    assert fit.validation_macro_f1 == pytest.approx(validation["macro_f1"])
    ls = transformer_ablation.runs.set_index("setting").loc["LS"]
    assert (fit.best_epoch, fit.validation_macro_f1) == (ls["best_epoch"], pytest.approx(ls["validation_macro_f1"]))


def test_best_epoch_is_the_first_epoch_with_the_best_metric():
    from transformers import TrainerState

    from workbench.studies.finetuning import best_epoch

    state = TrainerState(best_metric=0.7, log_history=[
        {"loss": 1.0, "epoch": 0.5}, {"eval_macro_f1": 0.5, "epoch": 1.0}, {"eval_macro_f1": 0.7, "epoch": 2.0},
        {"eval_macro_f1": 0.7, "epoch": 3.0},
    ])
    assert best_epoch(state) == 2
    with pytest.raises(ValueError, match="state"):
        best_epoch(TrainerState(best_metric=0.9, log_history=state.log_history))


@pytest.mark.parametrize(
    ("options", "parameter"),
    [
        ({"model_training": {"epochs": 1}}, "model_training"),
        ({"model": "roberta"}, "model"),
        ({"model": TINY_BERT, "tokenizer": load_tokenizer()}, "tokenizer"),
    ],
)
def test_run_ablation_rejects_bad_model_options(splits, options, parameter):
    with pytest.raises(ValueError, match=parameter):
        study.run_ablation(splits, ["LS"], seeds=[0], training=TINY, **options)
