"""The studies' claim rows on synthetic fits (seconds): which comparisons each notebook records, that decisions are
tuned on validation only, that selections (the best PCL form, n*, the Tversky alpha) read validation scores, and that
identical predictions give the verdict "does not hold"."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from workbench.decisions import tuned_predictions
from workbench.evidence import DOES_NOT_HOLD
from workbench.studies import auxiliary, dice_claims, pcl, pcl_vs_dice
from workbench.studies.true_negatives import claims as tn_claims
from workbench.train import Fit

RNG = np.random.default_rng(0)


def _splits(k: int, n: int = 120) -> DatasetDict:
    features = Features({"text": Value("string"), "label": ClassLabel(names=[f"c{i}" for i in range(k)])})
    return DatasetDict(
        {
            name: Dataset.from_dict({"text": ["x"] * n, "label": list(RNG.integers(0, k, n))}, features=features)
            for name in ("train", "validation", "test")
        }
    )


def _fit(splits: DatasetDict, accuracy: float, seed: int) -> Fit:
    """A fit right on about ``accuracy`` of the examples, with probabilities that agree with its predictions."""
    rng = np.random.default_rng(seed)
    k = splits["train"].features["label"].num_classes

    def probabilities(split: str) -> np.ndarray:
        gold = np.asarray(splits[split]["label"])
        predicted = np.where(rng.random(gold.size) < accuracy, gold, rng.integers(0, k, gold.size))
        probs = rng.random((gold.size, k)) * 0.2
        probs[np.arange(gold.size), predicted] += 1.0
        return probs / probs.sum(1, keepdims=True)

    validation, test = probabilities("validation"), probabilities("test")
    return Fit(validation.argmax(1), test.argmax(1), test, 1, 0.5, [], validation)


def _ablation(splits: DatasetDict, accuracies: dict[str, float], seeds=(0, 1, 2)) -> pcl.Ablation:
    fits = {
        (setting, seed): _fit(splits, accuracy, 100 * seed + len(setting))
        for setting, accuracy in accuracies.items()
        for seed in seeds
    }
    fits.update({("PCL reference", seed): fits[("LS", seed)] for seed in seeds})  # the released PCL predicts as LS
    rows = [
        {"setting": setting, "seed": seed, "macro_f1": 0.5, "validation_macro_f1": accuracies.get(setting, 0.0)}
        for setting, seed in fits
    ]
    predictions = {key: fit.test_predictions for key, fit in fits.items()}
    return pcl.Ablation(pd.DataFrame(rows), predictions, {}, ["c0", "c1", "c2"], fits)


def test_pcl_rows_cover_table4_the_tuned_rule_and_the_fair_baselines():
    splits = _splits(3)
    accuracies = {
        "LS": 0.6,
        "PCL weighted (global)": 0.7,
        "PCL expected_cost (global)": 0.65,
        "CE": 0.6,
        "class-balanced CE": 0.55,
    }
    rows = pcl.claim_rows(_ablation(splits, accuracies), splits, "test (generated)", "probe", n_resamples=200)
    table4 = [(row["method"], row["metric"]) for row in rows if row["where"] == "Table 4" and "+" not in row["method"]]
    assert len(table4) == 3 * 3  # three PCL forms against LS, on macro-F1, accuracy and macro-MAE
    reference = [row for row in rows if row["method"] == "PCL reference"]
    assert all(row["verdict"] == DOES_NOT_HOLD and row["ci_low"] == row["ci_high"] == 0.0 for row in reference)
    tuned = [row for row in rows if row["method"].endswith("+ offsets")]
    assert [row["method"] for row in tuned] == ["PCL weighted (global) + offsets"]  # best validation macro-F1
    fair = {row["baseline"] for row in rows if row["where"].startswith("sec. 3.2")}
    assert fair == {"CE", "class-balanced CE", "CE + post-hoc logit adjustment", "CE + offsets tuned on validation"}
    assert all(row["method"] == "PCL weighted (global)" for row in rows if row["where"].startswith("sec. 3.2"))
    without = pcl.claim_rows(_ablation(splits, accuracies), splits, "t", "probe", fair_baselines=False, n_resamples=200)
    assert all(row["baseline"] in ("LS", "LS + offsets") for row in without)


def test_decision_rules_are_tuned_on_validation_alone():
    splits = _splits(3)
    fits = {seed: _fit(splits, 0.6, seed) for seed in range(2)}
    validation = np.asarray(splits["validation"]["label"])
    first = tuned_predictions(fits, validation, "macro_f1")
    # the test labels never enter: predictions come from the test probabilities under the validation's rule
    flipped = {
        seed: Fit(
            fit.validation_predictions,
            fit.test_predictions,
            fit.test_probabilities[::-1],
            1,
            0.5,
            [],
            fit.validation_probabilities,
        )
        for seed, fit in fits.items()
    }
    again = tuned_predictions(flipped, validation, "macro_f1")
    assert all(np.array_equal(first[seed][::-1], again[seed]) for seed in fits)


def test_walkthrough_dice_rows_compare_dsc_with_ce_argmax_and_tuned():
    splits = _splits(3)
    ablation = _ablation(splits, {"LS": 0.6, "CE": 0.6, "DSC": 0.62})
    rows = pcl_vs_dice.dice_rows(ablation, splits, "t", "probe", n_resamples=200)
    assert [(row["method"], row["baseline"], row["setting"]) for row in rows] == [
        ("DSC (released preset)", "CE", "probe, argmax"),
        ("DSC (released preset)", "CE", "probe, per-class offsets tuned on validation"),
    ]


def test_auxiliary_rows_pair_seeds_and_choose_n_on_validation():
    gold = RNG.integers(0, 3, 200)
    runs, predictions = [], {}
    for seed in (0, 1):
        for method, n, validation in (
            ("baseline", 0, 0.5),
            ("two_stage", 0, 0.5),
            ("two_stage", 2, 0.7),
            ("two_stage", 8, 0.4),
        ):
            runs.append({"method": method, "num_aux": n, "seed": seed, "validation_macro_f1": validation})
            predictions[(method, n, seed)] = (gold, np.where(RNG.random(200) < 0.5, gold, 0))
    rows = auxiliary.claim_rows(pd.DataFrame(runs), predictions, "test", "tnews", 3, n_resamples=200)
    assert [(row["method"], row["baseline"]) for row in rows] == [
        ("two stages, n = 0", "BERT (fine-tuning)"),
        ("two stages, n = 2", "BERT (fine-tuning)"),
        ("two stages, n = 8", "BERT (fine-tuning)"),
        ("two stages, n* = 2 (chosen on validation)", "two stages, n = 0"),
    ]
    assert all(row["metric"] == "accuracy" and row["n_seeds"] == 2 for row in rows)
    other = {key: (1 - gold % 2, pred) for key, (_, pred) in predictions.items()}
    other[("baseline", 0, 0)] = (gold, other[("baseline", 0, 0)][1])
    with pytest.raises(ValueError, match="^predictions: must hold every run's labels of one and the same test split"):
        auxiliary.claim_rows(pd.DataFrame(runs), other, "test", "tnews", 3)


def test_dice_rows_cover_table8_fair_baselines_table10_and_table9():
    splits = _splits(2)
    table8 = {
        (name, loss): {seed: _fit(splits, 0.7, seed + len(loss)) for seed in (0, 1)}
        for name in ("original", "+negative")
        for loss in ("CE", "DL", "DSC", "DSC reference", "class-balanced CE")
    }
    sweep = {("TL", alpha): {seed: _fit(splits, 0.7, seed) for seed in (0, 1)} for alpha in ("0.3", "0.5")}
    table9 = {
        ("balanced", loss): {seed: _fit(splits, 0.7, seed + len(loss)) for seed in (0, 1)} for loss in ("CE", "DL")
    }
    rows = dice_claims.claim_rows(splits, "t", "toy", table8, sweep, 0.3, table9, splits, n_resamples=200)
    table8_rows = [
        row for row in rows if row["setting"] in ("toy, original", "toy, +negative") and row["baseline"] == "CE"
    ]
    assert len(table8_rows) == 2 * 3  # DL, DSC and the released DSC against CE on both sets
    assert {
        row["baseline"] for row in rows if row["setting"] == "toy, +negative" and row["where"] == "Table 8, +negative"
    } == {"DL"}
    fair = {row["baseline"] for row in rows if row["setting"] == "toy, original, fair baselines"}
    assert fair == {"CE + threshold tuned on validation", "class-balanced CE", "CE + post-hoc logit adjustment"}
    tversky = [row for row in rows if row["where"] == "Table 10"]
    assert [row["method"] for row in tversky] == ["TL, alpha = 0.3 (chosen on validation)"]
    accuracy = [row for row in rows if row["where"] == "Table 9"]
    assert [(row["metric"], row["expected"]) for row in accuracy] == [("accuracy", "worse")]
    assert accuracy[0]["note"].startswith("Table 9, DL against CE: exact McNemar p per seed ")
    with pytest.raises(ValueError, match="binary"):
        dice_claims.claim_rows(_splits(3), "t", "toy", {})


def test_true_negatives_rows_rates_and_downstream():
    corrections = pd.DataFrame(
        [
            {
                "encoder": "wwm-hc_word",
                "level": "token",
                "corrected": 15,
                "wrong": 1000,
                "sequences": 300,
                "sequences_with_correction": 20,
            },
            {
                "encoder": "wwm-plain",
                "level": "token",
                "corrected": 0,
                "wrong": 10,
                "sequences": 3,
                "sequences_with_correction": 0,
            },
        ]
    )
    rates = tn_claims.rate_rows(corrections, "wwm-hc_word", "held-out texts")
    assert [(row["measure"].split(":")[0], row["paper_low"]) for row in rates] == [
        ("prediction level", 0.01),
        ("iteration level", 0.06),
    ]
    assert rates[0]["value"] == 0.015 and rates[1]["value"] == pytest.approx(20 / 300)
    assert [row["event_count"] for row in rates] == [15, 15] and not rates[0]["note"]
    gold = RNG.integers(0, 3, 100)
    encoders = ("wwm-plain", "wwm-hc_word", "wwm-sr", "wwm-hc_word@embedding")
    predictions = {(name, seed): (gold, RNG.integers(0, 3, 100)) for name in encoders for seed in (0, 1)}
    rows = tn_claims.downstream_rows(predictions, "wwm", "tnews", "test", 3, n_resamples=200)
    assert [(row["method"], row["baseline"]) for row in rows] == [
        ("wwm-hc_word", "wwm-plain"),
        ("wwm-sr", "wwm-plain"),
        ("wwm-hc_word", "wwm-hc_word@embedding"),
    ]


def test_true_negatives_flags_a_run_that_predicted_no_synonym():
    """The model never predicted a synonym of a gold word: Table 2's rates are 0 by absence of the event; every row
    says so (event_count 0, a note), and table2_events finds no correction on the held-out texts nor at a checkpoint."""
    counts = {"corrected": 0, "wrong": 2372, "sequences_with_correction": 0, "sequences": 300}
    corrections = pd.DataFrame([{"encoder": "wwm-hc_word", "level": level, **counts} for level in ("token", "word")])
    rates = tn_claims.rate_rows(corrections, "wwm-hc_word", "held-out texts")
    assert len(rates) == 4 and {row["event_count"] for row in rates} == {0}
    assert all(row["note"] and row["event"] == tn_claims.TABLE2_EVENT for row in rates)
    epochs = pd.DataFrame(
        {
            "encoder": "wwm-hc_word",
            "epoch": [1, 2, 3],
            "checkpoint": [100 / 3, 200 / 3, 100],
            "eval_corrected": [0, 0, 0],
            "eval_wrong": [499, 498, 497],
        }
    )
    events = tn_claims.table2_events(corrections, epochs, "wwm-hc_word")
    assert events["occurred"] is False and events["heldout"]["word"] == counts
    assert [(entry["epoch"], entry["wrong"]) for entry in events["checkpoints"]] == [(1, 499), (2, 498), (3, 497)]
    epochs.loc[1, "eval_corrected"] = 2  # one checkpoint corrected twice: the event occurred
    assert tn_claims.table2_events(corrections, epochs, "wwm-hc_word")["occurred"] is True
    with pytest.raises(ValueError, match=r"^encoder:"):
        tn_claims.table2_events(corrections, epochs, "wwm-plain")
