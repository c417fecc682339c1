"""The studies' claim rows on synthetic fits (seconds): which comparisons each notebook records (only claims the papers
make, each beside the paper's own difference), that a decision rule is tuned for both sides of a row or for neither and
on validation only, that selections (the best PCL form, n*, the Tversky alpha) read validation scores, and that a loss
equal to its baseline by construction is an identity row, not a verdict."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from workbench.decisions import tuned_predictions
from workbench.evidence import IDENTICAL, NOT_TESTABLE, why_not_tested
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
    table4 = [
        (row["method"], row["metric"]) for row in rows if row["kind"] == "comparison" and row["where"] == "Table 4"
    ]
    assert sorted(table4) == sorted(  # two PCL forms against LS on the paper's two metrics (no macro-MAE: not claimed)
        [
            (form, metric)
            for form in ("PCL weighted (global)", "PCL expected_cost (global)")
            for metric in ("macro_f1", "accuracy")
        ]
        + [("PCL weighted (global) + offsets", "macro_f1")]  # the best validation macro-F1, offsets tuned for both
    )
    assert all(row["paper_difference"] for row in rows if row["where"] == "Table 4" and row["kind"] == "comparison")
    reference = [row for row in rows if row["method"] == "PCL reference"]
    assert [(row["kind"], row["verdict"], row["identical_seeds"]) for row in reference] == [("identity", IDENTICAL, 3)]
    fair = {(row["method"], row["baseline"]) for row in rows if row["where"].startswith("sec. 3.2")}
    assert fair == {
        ("PCL weighted (global)", "CE"),
        ("PCL weighted (global)", "class-balanced CE"),
        ("PCL weighted (global)", "CE + post-hoc logit adjustment (fixed by the training prior)"),
        ("PCL weighted (global) + offsets", "CE + offsets"),  # never an argmax method against a tuned baseline
    }
    for row in rows:
        if row["kind"] == "comparison":
            tuned = "+ offsets" in row["method"]
            assert tuned == ("+ offsets" in row["baseline"]) == ("tuned" in row["decision_rule"]), row
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


def test_extra_settings_rows_leave_out_the_references_identical_to_ls():
    # PCL as released trains as LS: a row against it would repeat the LS row (issue 36: one finding, one row)
    splits = _splits(3)
    extra = {"Mine": {"loss": "ce", "params": {}}}
    ablation = _ablation(splits, {"LS": 0.6, "CE": 0.6, "DSC reference": 0.62, "Mine": 0.7})
    rows = pcl_vs_dice.extra_setting_rows(ablation, splits, "t", "probe", extra, n_resamples=200)
    assert [(row["method"], row["baseline"], row["metric"]) for row in rows] == [
        ("Mine", "CE", "macro_f1"),
        ("Mine", "LS", "macro_f1"),
        ("Mine", "DSC reference", "macro_f1"),
    ]
    rows = pcl.extra_setting_rows(ablation, splits, "t", "probe", extra, n_resamples=200)
    assert [(row["method"], row["baseline"], row["metric"]) for row in rows] == [
        ("Mine", baseline, metric) for baseline in ("LS", "CE") for metric in ("macro_f1", "accuracy")
    ]
    prior = np.bincount(np.asarray(splits["train"]["label"]), minlength=3) / len(splits["train"])
    test_shares = np.bincount(np.asarray(splits["test"]["label"]), minlength=3) / len(splits["test"])
    for row in rows:  # argmax on both sides; no paper's difference
        assert row["decision_rule"] == "argmax" and row["paper_difference"] is None
    # the trivial baseline guesses by the training split's prior: accuracy sum_c test share_c x prior_c, by hand
    accuracy = next(row for row in rows if row["metric"] == "accuracy")
    assert accuracy["trivial"]["prior"] == pytest.approx(float(test_shares @ prior))


def test_walkthrough_dice_rows_compare_dsc_with_ce_argmax_and_tuned():
    splits = _splits(3)
    ablation = _ablation(splits, {"LS": 0.6, "CE": 0.6, "DSC reference": 0.62})
    rows = pcl_vs_dice.dice_rows(ablation, splits, "t", "probe", n_resamples=200)
    assert [(row["method"], row["baseline"], row["setting"]) for row in rows] == [
        ("DSC (released preset)", "CE", "probe, argmax"),
        ("DSC (released preset)", "CE", "probe, per-class offsets tuned on each side's validation"),
    ]
    assert [row["decision_rule"] for row in rows] == ["argmax", "per-class offsets tuned on each side's validation"]


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
    rows = auxiliary.claim_rows(pd.DataFrame(runs), predictions, "test", "tnews", 3, [70, 70, 60], n_resamples=200)
    # sec. 4.3's two stages against fine-tuning only: Figure 3 (auxiliary labels) is about KBQA, not TNEWS
    assert [(row["method"], row["baseline"]) for row in rows] == [("two stages, n = 0", "BERT (fine-tuning)")]
    assert rows[0]["metric"] == "accuracy" and rows[0]["n_seeds"] == 2
    assert rows[0]["paper_difference"] == pytest.approx(sorted([(56.87 - 56.09) / 100, (57.40 - 56.77) / 100]))
    other = {key: (1 - gold % 2, pred) for key, (_, pred) in predictions.items()}
    other[("baseline", 0, 0)] = (gold, other[("baseline", 0, 0)][1])
    with pytest.raises(ValueError, match="^predictions: must hold every run's labels of one and the same test split"):
        auxiliary.claim_rows(pd.DataFrame(runs), other, "test", "tnews", 3, [70, 70, 60])


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
    dl = sorted(row["paper_difference"][0] for row in table8_rows if row["method"] == "DL")
    assert dl == pytest.approx([0.0014, 0.0062])  # Table 8's (+0.14) on +negative and (+0.62) on original
    assert {
        row["baseline"] for row in rows if row["setting"] == "toy, +negative" and row["where"] == "Table 8, +negative"
    } == {"DL"}
    fair = {(row["method"], row["baseline"]) for row in rows if row["setting"] == "toy, original, fair baselines"}
    assert fair == {
        (method, baseline)
        for form in ("DSC (eq. 12)", "DSC (released preset)")
        for method, baseline in (
            (form, "class-balanced CE"),
            (form, "CE + post-hoc logit adjustment"),
            (f"{form} + threshold", "CE + threshold"),  # a tuned threshold on both sides, never on one
        )
    }
    tversky = [row for row in rows if row["where"] == "Table 10"]
    assert [row["method"] for row in tversky] == ["TL, alpha = 0.3 (chosen on validation)"]
    accuracy = [row for row in rows if row["where"] == "Table 9"]
    assert [(row["metric"], row["expected"]) for row in accuracy] == [("accuracy", "worse")]
    assert accuracy[0]["note"].startswith("Table 9, DL against CE: exact McNemar p per seed ")
    half = dice_claims.claim_rows(splits, "t", "toy", table8, sweep, 0.5, n_resamples=200)
    assert [(row["kind"], row["verdict"]) for row in half if row["where"] == "Table 10"] == [("identity", IDENTICAL)]
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
    assert all(row["event"] == tn_claims.TABLE2_EVENT and row["verdict"] != NOT_TESTABLE for row in rates)
    gold = RNG.integers(0, 3, 100)
    encoders = ("wwm-plain", "wwm-hc_word", "wwm-sr", "wwm-hc_word@embedding")
    predictions = {(name, seed): (gold, RNG.integers(0, 3, 100)) for name in encoders for seed in (0, 1)}
    note = tn_claims.CONFOUNDED.format(seed=0)
    rows = tn_claims.downstream_rows(predictions, "wwm", "tnews", "test", 3, [40, 30, 30], n_resamples=200, note=note)
    assert [(row["method"], row["baseline"]) for row in rows] == [
        ("wwm-hc_word", "wwm-plain"),
        ("wwm-sr", "wwm-plain"),
        ("wwm-hc_word", "wwm-hc_word@embedding"),
    ]
    assert [row["paper_difference"] for row in rows][-1] == pytest.approx([(81.4 - 80.6) / 100])
    assert {row["note"] for row in rows} == {note}


def test_true_negatives_flags_a_run_that_predicted_no_synonym():
    """The model never predicted a synonym of a gold word: Table 2's rates are 0 by absence of the event, so every row
    is not testable (its reason names the event), and table2_events counts the event on the held-out texts and at every
    checkpoint."""
    counts = {"corrected": 0, "wrong": 2372, "sequences_with_correction": 0, "sequences": 300}
    corrections = pd.DataFrame([{"encoder": "wwm-hc_word", "level": level, **counts} for level in ("token", "word")])
    rates = tn_claims.rate_rows(corrections, "wwm-hc_word", "held-out texts")
    assert len(rates) == 4 and {row["verdict"] for row in rates} == {NOT_TESTABLE}
    assert {why_not_tested(row) for row in rates} == {
        f"{tn_claims.TABLE2_EVENT} never occurs (0 of 2,372)",
        f"{tn_claims.TABLE2_EVENT} never occurs (0 of 300)",
    }
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
    assert events["heldout"]["word"] == counts and events["event"] == tn_claims.TABLE2_EVENT
    assert [(entry["epoch"], entry["wrong"]) for entry in events["checkpoints"]] == [(1, 499), (2, 498), (3, 497)]
    assert {entry["corrected"] for entry in events["checkpoints"]} == {0}
    epochs.loc[1, "eval_corrected"] = 2  # one checkpoint corrected twice
    checkpoints = tn_claims.table2_events(corrections, epochs, "wwm-hc_word")["checkpoints"]
    assert [entry["corrected"] for entry in checkpoints] == [0, 2, 0]
    with pytest.raises(ValueError, match=r"^encoder:"):
        tn_claims.table2_events(corrections, epochs, "wwm-plain")


def _same_rows(a, b) -> bool:
    """Rows equal as JSON writes them (a NaN equals a NaN)."""
    import json

    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


def test_dice_evidence_record_holds_the_rows_the_size_of_one_original_fit_and_the_scale():
    # issue 39: notebook 01's evidence cell in the study; the same rows as claim_rows and extra_setting_rows
    from types import SimpleNamespace

    from workbench.evidence import fit_size

    splits = _splits(2)
    splits.provenance = {"generated": "sample_sentences", "splits": {}}
    table8 = {
        (name, loss): {seed: _fit(splits, 0.7, seed + len(loss)) for seed in (0, 1)}
        for name in ("original", "+negative")
        for loss in ("CE", "DSC", "Mine")
    }
    first = table8[("original", "CE")][0] = replace(table8[("original", "CE")][0], num_parameters=1234, steps=60)
    sweep = {("TL", alpha): {seed: _fit(splits, 0.7, seed) for seed in (0, 1)} for alpha in ("0.3", "0.5")}
    table9 = {
        ("balanced", loss): {seed: _fit(splits, 0.7, seed + len(loss)) for seed in (0, 1)} for loss in ("CE", "DL")
    }
    config = SimpleNamespace(data=SimpleNamespace(source="toy"), model=SimpleNamespace(kind="probe"))
    extra = {"Mine": {"loss": "ce"}}
    options = dict(sweep=sweep, chosen_alpha=0.3, table9=table9, balanced=splits, extra_settings=extra)
    entry = dice_claims.evidence_record(
        splits,
        table8,
        **options,
        config=config,
        seeds=[0, 1],
        training_examples=120,
        hyperparameters={"fixed": {"learning rate": 0.02}, "chosen": {"epoch": "on validation"}},
        calibration=[{"setting": "CE", "ece": {"mean": 0.1, "std": None, "n": 2}}],
        reliability={"CE": {"confidence": [0.5], "accuracy": [0.4], "count": [10.0]}},
        sections={"model": {"kind": "probe"}, "positive_share": None},
        n_resamples=200,
    )
    test = "test (generated)"
    rows = dice_claims.claim_rows(splits, test, "toy", table8, sweep, 0.3, table9, splits, n_resamples=200)
    rows += dice_claims.extra_setting_rows(splits, test, "toy", table8, extra, n_resamples=200)
    assert _same_rows(entry["claims"], rows) and any(row["method"] == "Mine" for row in rows)
    assert entry["title"] == dice_claims.TITLE and entry["seeds"] == [0, 1]
    assert entry["scale"] == 'model {"kind": "probe"}; positive_share null.'
    assert entry["sizes"] == [fit_size("probe", first, 120)] and entry["sizes"][0]["steps"] == 60
    assert entry["paper_scale"] == dice_claims.PAPER_SCALE and entry["fixed"] == {"learning rate": 0.02}
    assert entry["calibration"][0]["setting"] == "CE" and entry["reliability"]["CE"]["accuracy"] == [0.4]
    assert "character probe" in entry["comment"]
    encoder = dice_claims.evidence_record(
        splits,
        table8,
        **options,
        config=SimpleNamespace(data=config.data, model=SimpleNamespace(kind="transformer")),
        seeds=[0, 1],
        training_examples=120,
        hyperparameters={"fixed": {}, "chosen": {}},
        calibration=[],
        reliability={},
        sections={"model": {"model_name_or_path": "bert"}},
        n_resamples=200,
    )
    assert "probe" not in encoder["comment"]
    without = {key: cell for key, cell in table8.items() if key[0] != "original"}
    with pytest.raises(ValueError, match=r"^table8: has no fit on the 'original' training set"):
        dice_claims.evidence_record(
            splits,
            without,
            **options,
            config=config,
            seeds=[0, 1],
            training_examples=120,
            hyperparameters={"fixed": {}, "chosen": {}},
            calibration=[],
            reliability={},
            sections={"model": {}},
        )


def test_pcl_evidence_record_holds_every_encoder_s_rows_and_names_calibration_per_encoder():
    # issue 39: notebook 02's evidence cell in the study
    from workbench.config import load_config

    splits = _splits(3)
    splits.provenance = {"generated": "sample_relevance", "splits": {}}
    accuracies = {"LS": 0.6, "PCL weighted (global)": 0.7, "Mine": 0.65}
    ablations = {"probe": _ablation(splits, accuracies), "tiny": _ablation(splits, accuracies, seeds=(0, 1))}
    for ablation in ablations.values():  # the first fit gives the size
        key = next(iter(ablation.fits))
        ablation.fits[key] = replace(ablation.fits[key], num_parameters=99, steps=7)
    encoders = pcl.EncoderAblation(pd.DataFrame(), ablations)
    calibrations = {name: [{"setting": "LS", "ece": {"mean": 0.1, "std": None, "n": 3}}] for name in ablations}
    training = load_config({"training": {"learning_rate": 0.01}}).training
    specs = pcl.setting_specs(["LS", "PCL weighted (global)"], 0.1)
    extra = {"Mine": {"loss": "ce"}}
    entry = pcl.evidence_record(
        encoders,
        splits,
        ordinal=True,
        extra_settings=extra,
        calibrations=calibrations,
        reliability={"probe: LS": {"confidence": [0.5], "accuracy": [0.5], "count": [3.0]}},
        seeds=[0, 1, 2],
        training=training,
        specs=specs,
        sections={"epsilon": 0.1},
        n_resamples=200,
    )
    test = "test (generated)"
    rows = [row for name, a in ablations.items() for row in pcl.claim_rows(a, splits, test, name, n_resamples=200)]
    for name, ablation in ablations.items():  # yours after every encoder's claims
        rows += pcl.extra_setting_rows(ablation, splits, test, name, extra, n_resamples=200)
    assert _same_rows(entry["claims"], rows) and {row["setting"].split(",")[0] for row in rows} == {"probe", "tiny"}
    assert [row["setting"] for row in entry["calibration"]] == ["probe: LS", "tiny: LS"]
    assert entry["sizes"] == pcl.sizes(ablations, splits) and entry["sizes"][0]["parameters"] == 99
    assert entry["title"] == pcl.TITLE and entry["scale"] == "epsilon 0.1."
    assert entry["fixed"] == pcl.hyperparameters(training, specs, splits["train"])["fixed"]
    assert entry["fixed"]["learning rate"] == 0.01 and set(entry["chosen"]) == {"epoch", "PCL form", "decision rule"}
