"""workbench.studies.pcl_vs_dice: imbalance tables, the majority baseline, the five-loss comparison."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from datasets import DatasetDict

from workbench.config import DataConfig, ModelConfig, TrainingConfig
from workbench.data import load_splits
from workbench.metrics import SMALL_TEST_CLASS
from workbench.studies import pcl
from workbench.studies import pcl_vs_dice as study
from workbench.train import build_fitter, loss_from_spec


def fitter_of(model: dict, training: dict, max_length: int):
    """``build_fitter`` on the validated sections of the ``model`` and ``training`` mappings (checked here, once)."""
    return build_fitter(ModelConfig.from_mapping(model), TrainingConfig.from_mapping(training), max_length)


SEEDS = [0, 1]


@pytest.fixture(scope="module")
def fitter():
    return fitter_of(
        {"kind": "probe", "probe": {"embedding_size": 8, "hidden_size": 8}},
        {"num_train_epochs": 3, "per_device_train_batch_size": 16, "learning_rate": 0.02, "weight_decay": 0.0},
        max_length=16,
    )


@pytest.fixture(scope="module")
def splits() -> DatasetDict:
    return load_splits({"source": "sample_relevance", "seed": 0, "max_train_samples": 200, "max_eval_samples": 50})


def run_comparison(splits, fitter, settings=tuple(study.COMPARISON), seeds=SEEDS):
    return pcl.run_ablation(splits, study.comparison_specs(settings, 0.1), seeds, fitter)


@pytest.fixture(scope="module")
def comparison(splits, fitter):
    return run_comparison(splits, fitter)


# ----------------------------------------------------------------------------- imbalance


def test_label_table_counts_and_shares(splits):
    table = study.label_table(splits)
    assert list(table.index) == splits["train"].features["label"].names
    for split in ("train", "validation", "test"):
        labels = np.asarray(splits[split]["label"])
        expected = np.bincount(labels, minlength=3)
        np.testing.assert_array_equal(table[split].to_numpy(), expected)
        np.testing.assert_allclose(table[f"{split} share"].to_numpy(), expected / expected.sum())


def test_data_summary_says_what_was_loaded_from_the_data(splits):
    text = study.data_summary(DataConfig.from_mapping({"source": "sample_relevance"}), splits)
    counts = np.bincount(np.asarray(splits["train"]["label"]), minlength=3)
    names = splits["train"].features["label"].names
    assert "generated query-title pairs" in text and "3 ordered classes" in text
    for name, count in zip(names, counts):
        assert f"{name!r} {count} ({count / counts.sum():.0%})" in text
    assert "train 200, validation 50, test 50" in text


def test_data_summary_of_ones_own_table_names_its_file_and_warns_of_small_test_classes(tmp_path):
    from test_data_own_data import news_csv  # 300 Chinese headlines in 3 imbalanced topics, columns text,label

    data = DataConfig.from_mapping(
        {"source": "table", "path": str(news_csv(tmp_path / "news.csv")), "text": "text", "label": "label"}
    )
    own = load_splits(data)
    text = study.data_summary(data, own)
    assert "news.csv" in text and "3 unordered classes" in text and "query-title" not in text
    test = np.bincount(np.asarray(own["test"]["label"]), minlength=3)
    names = own["train"].features["label"].names
    small = [(name, count) for name, count in zip(names, test) if count < SMALL_TEST_CLASS]
    assert small and all(count < 20 for _, count in small)  # 10 % of 300 examples: every class below 20
    assert "Warning" in text and all(f"{name!r} ({count})" in text for name, count in small)
    even = {
        **data.to_dict(),
        "path": str(news_csv(tmp_path / "even.csv", shares=(0.5, 0.3, 0.2))),
        "split": [0.3, 0.1, 0.6],
    }
    large = load_splits(even)  # 180 test examples, the smallest class 36 of them
    assert min(np.bincount(large["test"]["label"])) >= 20
    assert "Warning" not in study.data_summary(DataConfig.from_mapping(even), large)


def test_majority_baseline_by_hand(splits):
    baseline = study.majority_baseline(splits)
    train = np.bincount(np.asarray(splits["train"]["label"]), minlength=3)
    test = np.asarray(splits["test"]["label"])
    majority = int(train.argmax())
    accuracy = float(np.mean(test == majority))
    assert baseline["majority_label"] == splits["train"].features["label"].names[majority]
    assert baseline["accuracy"] == pytest.approx(accuracy)
    # precision = accuracy, recall = 1 for the majority class; the other two classes score F1 = 0.
    assert baseline["macro_f1"] == pytest.approx(2 * accuracy / (1 + accuracy) / 3)
    assert baseline["macro_f1"] < baseline["accuracy"]


# ----------------------------------------------------------------------------- losses


def test_comparison_losses_match_torch(splits):
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(12, 3, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 3, (12,), generator=generator)
    specs = study.comparison_specs(list(study.COMPARISON), 0.1)
    ce = loss_from_spec(specs["CE"], splits["train"])(logits, labels)
    ls = loss_from_spec(specs["LS"], splits["train"])(logits, labels)
    torch.testing.assert_close(ce, torch.nn.functional.cross_entropy(logits, labels))
    torch.testing.assert_close(ls, torch.nn.functional.cross_entropy(logits, labels, label_smoothing=0.1))
    assert loss_from_spec(specs["DSC reference"], splits["train"]).preset == "reference"
    assert specs["CE"].params == {} and specs["PCL reference"].params["epsilon"] == 0.1


# ----------------------------------------------------------------------------- the comparison


def test_run_comparison_table_shape(comparison, splits):
    runs = comparison.runs
    assert list(runs["setting"].unique()) == list(study.COMPARISON)
    assert len(runs) == len(study.COMPARISON) * len(SEEDS)
    names = splits["train"].features["label"].names
    for column in (*pcl.METRICS, *(f"recall_{name}" for name in names), "best_epoch", "identical_to_ls"):
        assert column in runs.columns
    assert set(comparison.confusion) == set(study.COMPARISON)
    assert comparison.label_names == names


def test_pcl_reference_predicts_exactly_like_ls(comparison):
    runs = comparison.runs.set_index(["setting", "seed"])
    for seed in SEEDS:
        assert runs.loc[("PCL reference", seed), "identical_to_ls"]
        np.testing.assert_array_equal(
            comparison.predictions[("PCL reference", seed)], comparison.predictions[("LS", seed)]
        )
        assert runs.loc[("LS", seed), "identical_to_ls"]


def test_recalls_and_confusion_agree_with_predictions(comparison, splits):
    gold = np.asarray(splits["test"]["label"])
    runs = comparison.runs.set_index(["setting", "seed"])
    for setting in study.COMPARISON:
        total = np.zeros((3, 3), dtype=np.int64)
        for seed in SEEDS:
            predicted = comparison.predictions[(setting, seed)]
            np.add.at(total, (gold, predicted), 1)
            for label, name in enumerate(comparison.label_names):
                recall = np.mean(predicted[gold == label] == label)
                assert runs.loc[(setting, seed), f"recall_{name}"] == pytest.approx(recall)
            assert runs.loc[(setting, seed), "accuracy"] == pytest.approx(np.mean(predicted == gold))
        np.testing.assert_array_equal(comparison.confusion[setting], total)


def test_run_comparison_is_deterministic(splits, fitter):
    first = run_comparison(splits, fitter, ["LS", "CE"], [3])
    second = run_comparison(splits, fitter, ["LS", "CE"], [3])
    pd.testing.assert_frame_equal(first.runs, second.runs)


@pytest.mark.parametrize(
    ("settings", "seeds", "message"),
    [
        (["LS", "focal"], [0], r"^settings:"),
        (["CE", "DSC reference"], [0], r"^settings:"),  # no LS, the baseline the notebook compares with
        (["LS", "DSC reference"], [0], r"^settings:"),  # no CE, whose confusion and recall the notebook shows
        (["CE", "LS", "LS"], [0], r"^settings:"),  # a setting named twice would run once
        (["CE", "LS"], [], r"^seeds:"),
    ],
)
def test_run_comparison_rejects_bad_input(splits, fitter, settings, seeds, message):
    with pytest.raises(ValueError, match=message):
        run_comparison(splits, fitter, settings, seeds)


# ----------------------------------------------------------------------------- tables


def _hand_runs() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "setting": [
                "LS",
                "LS",
                "PCL reference",
                "PCL reference",
                "PCL expected_cost (global)",
                "PCL expected_cost (global)",
            ],
            "seed": [0, 1, 0, 1, 0, 1],
            "macro_f1": [0.5, 0.7, 0.5, 0.7, 0.6, 0.9],
            "accuracy": [0.8, 0.8, 0.8, 0.8, 0.7, 0.9],
            "far_error_rate": [0.0, 0.1, 0.0, 0.1, 0.0, 0.0],
            "recall_a": [0.2, 0.4, 0.2, 0.4, 1.0, 1.0],
            "recall_b": [0.9, 0.9, 0.9, 0.9, 0.5, 0.7],
            "identical_to_ls": [True, True, True, False, False, False],
        }
    )


def test_recall_table_mean_std_by_hand():
    table = study.recall_table(_hand_runs())
    assert list(table.index) == ["LS", "PCL reference", "PCL expected_cost (global)"]
    assert list(table.columns) == ["a", "b"]
    # LS recall_a: mean 0.3, sample std of (0.2, 0.4) = 0.1414; shown x100 with one decimal.
    assert table.loc["LS", "a"] == "30.0 ± 14.1"
    assert table.loc["PCL expected_cost (global)", "b"] == "60.0 ± 14.1"
    assert table.loc["PCL expected_cost (global)", "a"] == "100.0 ± 0.0"


def test_recall_table_needs_recall_columns():
    with pytest.raises(ValueError, match=r"^runs:"):
        study.recall_table(_hand_runs().drop(columns=["recall_a", "recall_b"]))


def test_headline_metrics_by_hand():
    metrics = study.headline_metrics(_hand_runs(), {"macro_f1": 0.27, "accuracy": 0.69})
    assert metrics["ls_macro_f1"]["mean"] == pytest.approx(0.6)
    assert metrics["pcl_reference_macro_f1"]["mean"] == pytest.approx(0.6)
    assert metrics["pcl_expected_cost_macro_f1"]["mean"] == pytest.approx(0.75)
    assert metrics["majority_macro_f1"] == 0.27 and metrics["majority_accuracy"] == 0.69
    assert metrics["pcl_reference_identical_share"] == pytest.approx(0.5)
    assert metrics["ls_macro_f1"]["n"] == 2  # the number of seeds travels with each metric
    assert metrics["pcl_expected_cost_macro_f1"]["std"] == pytest.approx(np.std([0.6, 0.9], ddof=1))


def test_this_run_quotes_the_runs_numbers():
    runs = _hand_runs().assign(recall_a=0.5).rename(columns={"recall_b": "recall_c"})
    runs = pd.concat([runs, runs[runs["setting"] == "LS"].assign(setting="CE")], ignore_index=True)
    line = study.this_run(runs, {"majority_label": "b", "accuracy": 0.69, "macro_f1": 0.27})
    assert line.startswith("This run (2 seed(s), test): always predicting 'b': accuracy 0.690, macro-F1 0.270.")
    assert "PCL expected_cost (global) 0.750 ± 0.212" in line  # macro-F1 0.6 and 0.9
    assert "Recall (%) of CE: a 50.0 ± 0.0, c 90.0 ± 0.0" in line and "PCL reference 1/2" in line
    assert "Far-error rate: LS 0.050 ± 0.071" in line
    assert "Far-error" not in study.this_run(
        runs.drop(columns="far_error_rate"), {"majority_label": "b", "accuracy": 0, "macro_f1": 0}
    )


def test_nominal_labels_need_a_cost_matrix_for_pcl(splits, fitter):
    with pytest.raises(ValueError, match=r"^cost_matrix: .*data\.ordinal"):
        pcl.run_ablation(
            splits, study.comparison_specs(["CE", "LS", "PCL expected_cost (global)"], 0.1), [0], fitter, ordinal=False
        )
    cost = [[0, 2, 1], [2, 0, 1], [1, 1, 0]]
    specs = study.comparison_specs(["CE", "LS", "PCL expected_cost (global)"], 0.1, cost_matrix=cost)
    assert specs["PCL expected_cost (global)"].params == {
        "variant": "expected_cost",
        "counts": "global",
        "epsilon": 0.1,
        "cost_matrix": cost,
    }
    assert "far_error_rate" not in study.majority_baseline(splits, ordinal=False)
