"""workbench.studies.pcl: gradient check, the ablation grid through both fitters, and its tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from workbench.config import ModelConfig, TrainingConfig
from workbench.data import load_splits
from workbench.losses import QBQTC_LABEL_COUNTS, pcl_constants, pcl_weight_matrix
from workbench.studies import pcl as study
from workbench.train import ProbeFitter, TransformerFitter, build_fitter, loss_from_spec
from workbench.train.finetuning import best_epoch


def fitter_of(model: dict, training: dict, max_length: int):
    """``build_fitter`` on the validated sections of the ``model`` and ``training`` mappings (checked here, once)."""
    return build_fitter(ModelConfig.from_mapping(model), TrainingConfig.from_mapping(training), max_length)


EPSILON = 0.1
PROBE = {"kind": "probe", "probe": {"embedding_size": 16, "hidden_size": 16}}
TINY_TRAINING = {"num_train_epochs": 8, "per_device_train_batch_size": 16, "learning_rate": 0.02, "weight_decay": 0.0}


@pytest.fixture(scope="module")
def fitter() -> ProbeFitter:
    return fitter_of(PROBE, TINY_TRAINING, max_length=16)


@pytest.fixture(scope="module")
def splits():
    return load_splits({"source": "sample_relevance", "seed": 0, "max_train_samples": 240, "max_eval_samples": 60})


@pytest.fixture(scope="module")
def ablation(splits, fitter):
    specs = study.setting_specs(["LS", "PCL reference", "PCL paper", "PCL weighted (global)"], EPSILON)
    return study.run_ablation(splits, specs, [0, 1], fitter)


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
    # eq. 4 as written: mean over the batch of +PCL+ (far), -PCL- (near), 0 (correct), with eq. 2-3's
    # scaling ratio eps: PCL+ = eps n0 / (n1 + n2), PCL- = eps (n0 + n2) / n1.
    ratio_plus, ratio_minus = pcl_constants(QBQTC_LABEL_COUNTS, "paper")
    pcl_plus, pcl_minus = EPSILON * ratio_plus, EPSILON * ratio_minus
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


@pytest.mark.parametrize(
    ("kwargs", "match"), [({"batch_size": 0}, r"^batch_size:"), ({"settings": ["nope"]}, r"^settings:")]
)
def test_gradient_comparison_rejects_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        study.gradient_comparison(**kwargs)


# ----------------------------------------------------------------------------- probe


@pytest.mark.parametrize(
    ("model", "training", "max_length", "match"),
    [
        (PROBE, {"num_train_epochs": 0}, 16, "training.num_train_epochs"),
        (PROBE, {"per_device_train_batch_size": -1}, 16, "training.per_device_train_batch_size"),
        ({"kind": "probe", "probe": {"embedding_size": 1.5}}, {}, 16, "model.probe.embedding_size"),
        (PROBE, {}, True, "max_length"),
        (PROBE, {"learning_rate": 0.0}, 16, "training.learning_rate"),
    ],
)
def test_fitter_rejects_bad_values(model, training, max_length, match):
    with pytest.raises(ValueError, match=match):
        fitter_of(model, training, max_length)


def test_a_fitter_takes_validated_sections_not_raw_mappings():
    # issue 39: the sections are checked once, when the config is loaded; a fitter does not check them again
    model, training = ModelConfig.from_mapping(PROBE), TrainingConfig.from_mapping(TINY_TRAINING)
    with pytest.raises(ValueError, match=r"^training: must be a validated TrainingConfig"):
        build_fitter(model, TINY_TRAINING, 16)
    with pytest.raises(ValueError, match=r"^model: must be a validated ModelConfig"):
        build_fitter(PROBE, training, 16)
    with pytest.raises(ValueError, match=r"^training:"):
        study.encoder_fitters({"probe": PROBE}, TINY_TRAINING, max_length=16)
    assert build_fitter(model, training, 16).training is training


def test_pair_probe_fit_is_seeded_and_leaves_global_rng_alone(splits, fitter):
    loss = loss_from_spec(study.setting_specs(["LS"], EPSILON)["LS"], splits["train"])
    state = torch.get_rng_state()
    first = fitter.fit(splits, loss, 3)
    assert torch.equal(state, torch.get_rng_state())
    second = fitter.fit(splits, loss, 3)
    np.testing.assert_array_equal(first.test_predictions, second.test_predictions)
    assert first.test_predictions.shape == (60,) and first.validation_predictions.shape == (60,)
    assert 1 <= first.best_epoch <= TINY_TRAINING["num_train_epochs"]
    assert first.history[first.best_epoch - 1]["validation_macro_f1"] == first.validation_score


# ----------------------------------------------------------------------------- ablation


def test_run_ablation_table_shape_and_identical_predictions(ablation):
    runs = ablation.runs
    assert (
        list(runs["setting"]) == ["LS"] * 2 + ["PCL reference"] * 2 + ["PCL paper"] * 2 + ["PCL weighted (global)"] * 2
    )
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
    ("settings", "seeds", "match"),
    [
        (["PCL paper"], [0], r"^losses:"),
        (["LS", "PCL paper", "PCL paper"], [0], r"^settings:"),
        (["LS"], [], r"^seeds:"),
    ],
)
def test_run_ablation_rejects_bad_input(splits, fitter, settings, seeds, match):
    with pytest.raises(ValueError, match=match):
        study.run_ablation(splits, study.setting_specs(settings, EPSILON), seeds, fitter)


def test_setting_specs_rejects_unknown_setting():
    with pytest.raises(ValueError, match=r"^settings:"):
        study.setting_specs(["LS", "PCL nope"], EPSILON)


def test_setting_specs_carry_epsilon_and_global_counts_come_from_the_training_split(splits):
    spec = study.setting_specs(["PCL weighted (global)"], EPSILON)["PCL weighted (global)"]
    assert spec.params == {"variant": "weighted", "counts": "global", "epsilon": EPSILON}
    loss = loss_from_spec(spec, splits["train"])
    counts = np.bincount(np.asarray(splits["train"]["label"]), minlength=3)
    np.testing.assert_array_equal(loss.label_counts.numpy(), counts)
    assert loss.epsilon == EPSILON


# ----------------------------------------------------------------------------- the encoder axis (Table 4)


SMALL_PROBE = {"kind": "probe", "probe": {"embedding_size": 8, "hidden_size": None}}


def test_encoder_fitters_build_one_fitter_per_model_section():
    fitters = study.encoder_fitters(
        {"probe": PROBE, "scratch": {"tiny": {"num_layers": 1, "hidden_size": 16, "num_heads": 2}}},
        TrainingConfig.from_mapping(TINY_TRAINING),
        max_length=16,
    )
    assert list(fitters) == ["probe", "scratch"]
    assert isinstance(fitters["probe"], ProbeFitter) and isinstance(fitters["scratch"], TransformerFitter)
    assert fitters["scratch"].model.tiny.hidden_size == 16
    for bad in ({}, None, {"": PROBE}):
        with pytest.raises(ValueError, match=r"^encoders:"):
            study.encoder_fitters(bad, TrainingConfig.from_mapping(TINY_TRAINING), max_length=16)
    with pytest.raises(ValueError, match="model.kind"):
        study.encoder_fitters({"x": {"kind": "cnn"}}, TrainingConfig.from_mapping(TINY_TRAINING), max_length=16)


def test_run_encoder_ablation_gives_one_block_of_rows_per_encoder(splits, fitter, ablation):
    small = fitter_of(SMALL_PROBE, TINY_TRAINING, max_length=16)
    settings = ["LS", "PCL reference", "PCL paper", "PCL weighted (global)"]
    result = study.run_encoder_ablation(
        splits, study.setting_specs(settings, EPSILON), [0, 1], {"probe": fitter, "small": small}
    )
    runs = result.runs
    assert runs.columns[0] == "encoder"
    assert list(runs["encoder"]) == ["probe"] * 8 + ["small"] * 8
    # each block is that encoder's own ablation, LS baseline included
    pd.testing.assert_frame_equal(
        runs[runs["encoder"] == "probe"].drop(columns="encoder").reset_index(drop=True), ablation.runs
    )
    alone = study.run_ablation(splits, study.setting_specs(settings, EPSILON), [0, 1], small)
    pd.testing.assert_frame_equal(
        runs[runs["encoder"] == "small"].drop(columns="encoder").reset_index(drop=True), alone.runs
    )
    assert set(result.ablations) == {"probe", "small"}
    np.testing.assert_array_equal(result.ablations["small"].predictions[("PCL paper", 1)], alone.predictions[("LS", 1)])
    table = study.ablation_table(runs)
    assert list(table.index) == [(encoder, setting) for encoder in ("probe", "small") for setting in settings]
    assert table.loc[("small", "PCL reference"), "identical predictions to LS"] == "2/2"
    shaped = study.table4(runs)
    assert list(shaped.index) == ["probe", "small"]
    assert list(shaped.columns) == [(setting, metric) for setting in settings for metric in study.TABLE4_METRICS]
    with pytest.raises(ValueError, match=r"^fitters:"):
        study.run_encoder_ablation(splits, study.setting_specs(["LS"], EPSILON), [0], {})


def test_table4_by_hand():
    runs = _synthetic_runs()
    two = pd.concat(
        [
            runs.assign(encoder="a"),
            runs[runs["setting"].isin(["LS", "PCL weighted (batch)"])].assign(encoder="b", macro_f1=0.1),
        ]
    )
    table = study.table4(two)
    std = np.std([0.5, 0.7], ddof=1)
    assert table.loc["a", ("LS", "macro_f1")] == f"0.600 ± {std:.3f}"
    assert table.loc["a", ("PCL weighted (batch)", "macro_f1")] == "0.850 ± 0.071 (+0.250)"
    assert table.loc["a", ("PCL weighted (batch)", "accuracy")] == "0.900 ± 0.000 (+0.200)"
    assert table.loc["b", ("PCL weighted (batch)", "macro_f1")] == "0.100 ± 0.000 (+0.000)"
    assert table.loc["b", ("PCL paper", "macro_f1")] == ""  # not run for encoder b
    assert list(study.table4(runs).index) == ["encoder"]  # runs of one fitter: one row


def test_headline_metrics_per_encoder_are_prefixed():
    runs = _synthetic_runs()
    one = study.headline_metrics(runs.assign(encoder="probe"))
    assert one == study.headline_metrics(runs)  # one encoder: the plain keys
    two = study.headline_metrics(pd.concat([runs.assign(encoder="scratch"), runs.assign(encoder="workbench-zh-mini")]))
    assert set(two) == {f"{prefix}_{key}" for prefix in ("scratch", "workbench_zh_mini") for key in one}
    assert two["workbench_zh_mini_ls_macro_f1"] == one["ls_macro_f1"]
    with pytest.raises(ValueError, match=r"^runs:"):
        study.best_gradient_bearing(pd.concat([runs.assign(encoder="a"), runs.assign(encoder="b")]))


# ----------------------------------------------------------------------------- tables


def _synthetic_runs() -> pd.DataFrame:
    rows = [
        ("LS", 0, 0.5, 0.6, 0.1, True),
        ("LS", 1, 0.7, 0.8, 0.3, True),
        ("PCL paper", 0, 0.5, 0.6, 0.1, True),
        ("PCL paper", 1, 0.7, 0.8, 0.3, False),
        ("PCL weighted (batch)", 0, 0.9, 0.9, 0.0, False),
        ("PCL weighted (batch)", 1, 0.8, 0.9, 0.0, False),
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
    assert metrics["ls_macro_f1"]["mean"] == pytest.approx(0.6)
    assert (
        metrics["ls_macro_f1"]["std"] == pytest.approx(np.std([0.5, 0.7], ddof=1)) and metrics["ls_macro_f1"]["n"] == 2
    )
    assert study.best_gradient_bearing(_synthetic_runs()) == "PCL weighted (batch)"
    assert metrics["best_pcl_macro_f1"]["mean"] == pytest.approx(0.85)
    assert metrics["gradient_free_identical_share"] == pytest.approx(0.5)


def test_nominal_labels_run_pcl_only_with_a_cost_matrix_and_report_no_far_errors(splits, fitter):
    with pytest.raises(ValueError, match=r"^cost_matrix: .*data\.ordinal"):  # both keys a notebook's params name
        study.run_ablation(
            splits, study.setting_specs(["LS", "PCL weighted (global)"], EPSILON), [0], fitter, ordinal=False
        )
    cost = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    with pytest.raises(ValueError, match=r"^cost_matrix:"):  # the released form hard-codes QBQTC's order
        study.run_ablation(
            splits, study.setting_specs(["LS", "PCL reference"], EPSILON, cost), [0], fitter, ordinal=False
        )
    specs = study.setting_specs(["LS", "PCL weighted (global)"], EPSILON, cost)
    assert specs["PCL weighted (global)"].params["cost_matrix"] == cost and "cost_matrix" not in specs["LS"].params
    runs = study.run_ablation(splits, specs, [0], fitter, ordinal=False).runs
    assert "far_error_rate" not in runs.columns and "far_error_rate" not in study.ablation_table(runs).columns
    assert set(study.headline_metrics(runs)) == {"ls_macro_f1", "best_pcl_macro_f1"}
    assert "far-error" not in study.this_run(runs)


def test_this_run_quotes_the_ablation_table(ablation):
    table = study.ablation_table(ablation.runs)
    line = study.this_run(ablation.runs)
    assert line.startswith("This run (2 seed(s), test): encoder: macro-F1 LS ")
    for setting in table.index:
        assert f"{setting} {table.loc[setting, 'macro_f1']}" in line
    assert f"PCL reference {table.loc['PCL reference', 'identical predictions to LS']}" in line
    assert f"far-error rate LS {table.loc['LS', 'far_error_rate']}" in line


# ----------------------------------------------------------------------------- the transformer path

CUE_CHARACTERS = ("冷", "温", "热")
FILLER = list("的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种")
TINY_BERT = {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}}
TINY_BERT_TRAINING = {
    "num_train_epochs": 4,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "learning_rate": 5e-3,
    "warmup_steps": 0.0,
}
TRANSFORMER_SETTINGS = ["LS", "PCL reference", "PCL expected_cost (global)"]


def _cue_pairs(size: int, rng: np.random.Generator):
    """Pairs whose query ends in a label cue (the gold label's in 75% of cases, else a random one):
    learnable by a 1-layer BERT in a few epochs, yet not perfectly, so predictions carry information."""
    from datasets import ClassLabel, Dataset, Features, Value

    labels = rng.choice(3, size=size, p=[0.3, 0.4, 0.3])
    cues = np.where(rng.random(size) < 0.75, labels, rng.choice(3, size=size))
    return Dataset.from_dict(
        {
            "text": ["".join(rng.choice(FILLER, 6)) + CUE_CHARACTERS[cue] * 3 for cue in cues],
            "text_pair": ["".join(rng.choice(FILLER, 8)) for _ in labels],
            "label": labels.tolist(),
        },
        features=Features(
            {
                "text": Value("string"),
                "text_pair": Value("string"),
                "label": ClassLabel(names=["irrelevant", "related", "highly_relevant"]),
            }
        ),
    )


@pytest.fixture(scope="module")
def cue_splits():
    from datasets import DatasetDict

    rng = np.random.default_rng(0)
    return DatasetDict(train=_cue_pairs(128, rng), validation=_cue_pairs(64, rng), test=_cue_pairs(64, rng))


@pytest.fixture(scope="module")
def transformer_fitter() -> TransformerFitter:
    return fitter_of(TINY_BERT, TINY_BERT_TRAINING, max_length=32)


@pytest.fixture(scope="module")
def transformer_ablation(cue_splits, transformer_fitter):
    return study.run_ablation(cue_splits, study.setting_specs(TRANSFORMER_SETTINGS, EPSILON), [0], transformer_fitter)


def test_transformer_ablation_pcl_reference_predicts_exactly_like_ls(transformer_ablation):
    runs = transformer_ablation.runs.set_index("setting")
    assert list(runs.index) == TRANSFORMER_SETTINGS
    assert {"seed", *study.METRICS, "best_epoch", "validation_macro_f1", "identical_to_ls"} <= set(runs.columns)
    ls = transformer_ablation.predictions[("LS", 0)]
    assert len(np.unique(ls)) == 3  # the model learned something: equality below is not the trivial "all majority"
    np.testing.assert_array_equal(transformer_ablation.predictions[("PCL reference", 0)], ls)
    assert runs.loc["PCL reference", "identical_to_ls"]
    assert runs.loc["PCL reference", "validation_macro_f1"] == runs.loc["LS", "validation_macro_f1"]
    assert runs["best_epoch"].between(1, TINY_BERT_TRAINING["num_train_epochs"]).all()
    assert study.ablation_table(transformer_ablation.runs).loc["PCL reference", "identical predictions to LS"] == "1/1"


def test_transformer_fit_matches_the_ablation_and_reports_the_kept_epoch(
    cue_splits, transformer_ablation, transformer_fitter
):
    from workbench.metrics import classification_report

    loss = loss_from_spec(study.setting_specs(["LS"], EPSILON)["LS"], cue_splits["train"])
    fit = transformer_fitter.fit(cue_splits, loss, 0)
    np.testing.assert_array_equal(fit.test_predictions, transformer_ablation.predictions[("LS", 0)])  # seeded
    validation = classification_report(np.asarray(cue_splits["validation"]["label"]), fit.validation_predictions)
    assert fit.validation_score == pytest.approx(validation["macro_f1"])
    ls = transformer_ablation.runs.set_index("setting").loc["LS"]
    assert (fit.best_epoch, fit.validation_score) == (ls["best_epoch"], pytest.approx(ls["validation_macro_f1"]))
    assert [entry["epoch"] for entry in fit.history] == list(range(1, TINY_BERT_TRAINING["num_train_epochs"] + 1))


def test_best_epoch_is_the_epoch_of_the_kept_checkpoint():
    from transformers import TrainerState

    history = [
        {"loss": 1.0, "epoch": 0.5, "step": 4},
        {"eval_macro_f1": 0.5, "epoch": 1.0, "step": 8},
        {"eval_macro_f1": 0.7, "epoch": 2.0, "step": 16},
        {"eval_macro_f1": 0.7, "epoch": 3.0, "step": 24},
    ]
    state = TrainerState(best_metric=0.7, best_model_checkpoint="/tmp/run/checkpoint-16", log_history=history)
    assert best_epoch(state) == 2
    with pytest.raises(ValueError, match="state"):
        best_epoch(TrainerState(best_metric=0.9, best_model_checkpoint="/tmp/run/checkpoint-5", log_history=history))
    with pytest.raises(ValueError, match="state"):
        best_epoch(TrainerState(best_metric=0.9, log_history=history))
