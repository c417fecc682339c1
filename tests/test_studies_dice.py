"""The Dice-paper study functions on tiny settings (seconds)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from datasets import DatasetDict

from workbench.config import LossSpec, ModelConfig, TrainingConfig
from workbench.data import label_counts, label_names
from workbench.data.features import build_dataset
from workbench.losses import build_loss
from workbench.metrics import SMALL_TEST_CLASS
from workbench.stats import mean_std_table, summarize
from workbench.studies import dice
from workbench.train import ProbeFitter, TransformerFitter, build_fitter, loss_from_spec


def fitter_of(model: dict, training: dict, max_length: int):
    """``build_fitter`` on the validated sections of the ``model`` and ``training`` mappings (checked here, once)."""
    return build_fitter(ModelConfig.from_mapping(model), TrainingConfig.from_mapping(training), max_length)


TINY_TRAINING = {"num_train_epochs": 1, "per_device_train_batch_size": 32, "learning_rate": 0.02, "weight_decay": 0.0}
BOW = {"kind": "probe", "probe": {"embedding_size": 32, "hidden_size": None}}


@pytest.fixture(scope="module")
def fitter() -> ProbeFitter:
    return fitter_of(BOW, TINY_TRAINING, max_length=64)


def binary_dataset(n_negative: int, n_positive: int):
    labels = [0] * n_negative + [1] * n_positive
    texts = ["房间太差了" if label == 0 else "房间非常好" for label in labels]
    return build_dataset({"text": texts, "label": labels}, ("negative", "positive"))


def sample_data(n_train: int, n_eval: int) -> dict:
    return {"source": "sample_sentences", "seed": 0, "max_train_samples": n_train, "max_eval_samples": n_eval}


@pytest.fixture(scope="module")
def tiny_splits() -> DatasetDict:
    return dice.study_splits(sample_data(160, 60))


def test_table8_sets_have_the_five_settings_and_their_class_counts():
    # 40 negatives, 10 positives: +positive adds 30 positives, +negative 30 negatives (the size of
    # +positive), -negative drops 30 negatives, +positive & +negative keeps the 20% share at the size
    # of +positive: round(2 * 40 * 10 / 50) = 16 positives and 64 negatives.
    for augmentation in dice.AUGMENTATIONS:
        table8 = dice.table8_sets(binary_dataset(40, 10), seed=3, augmentation=augmentation)
        counts = {name: label_counts(ds) for name, ds in table8.sets.items()}
        assert (
            list(table8.sets)
            == list(dice.TABLE8_SETTINGS)
            == ["original", "+positive", "+negative", "-negative", "+positive & +negative"]
        )
        assert counts == {
            "original": [40, 10],
            "+positive": [40, 40],
            "+negative": [70, 10],
            "-negative": [10, 10],
            "+positive & +negative": [64, 16],
        }
        assert table8.augmentation == augmentation


def test_table8_synonyms_make_new_sentences_where_the_lexicon_allows_and_count_the_rest():
    # The tiny lexicon has 非常 (Ed01A18) and 好 (Ed01A03) but neither 房间 nor 太差: every added
    # positive is a new sentence, every added negative an unchanged copy.
    table8 = dice.table8_sets(binary_dataset(40, 10), seed=0, augmentation="synonyms")
    added_positives = table8.sets["+positive"].select(range(50, 80))["text"]
    assert all(text != "房间非常好" and text.startswith("房间") for text in added_positives)
    assert set(table8.sets["+negative"].select(range(50, 80))["text"]) == {"房间太差了"}
    assert (table8.calls, table8.unchanged) == (30 + 30 + 6 + 24, 30 + 24)
    counts = dice.table8_counts(table8)
    assert counts["added"].tolist() == [0, 30, 30, 0, 30]
    assert counts["added, same text as an original example"].tolist() == [0, 0, 30, 0, 24]
    assert counts.loc["+positive & +negative", "positive share"] == pytest.approx(0.2)
    copies = dice.table8_sets(binary_dataset(40, 10), seed=0, augmentation="copies")
    assert (copies.calls, copies.unchanged) == (0, 0)
    assert dice.table8_counts(copies)["added, same text as an original example"].tolist() == [0, 30, 30, 0, 30]


def test_table8_lexicon_path_replaces_the_shipped_lexicon(tmp_path):
    lexicon = tmp_path / "cilin.txt"
    lexicon.write_text("Zz01A01= 太差 很差 极差\n", encoding="utf-8")
    table8 = dice.table8_sets(binary_dataset(40, 10), seed=0, lexicon=str(lexicon))
    assert set(table8.sets["+negative"].select(range(50, 80))["text"]) <= {"房间很差了", "房间极差了"}
    assert set(table8.sets["+positive"].select(range(50, 80))["text"]) == {
        "房间非常好"
    }  # 非常, 好 are not in this lexicon
    assert table8.unchanged == 30 + 6


def test_table8_sets_refuse_a_single_class_and_unknown_augmentation():
    with pytest.raises(ValueError, match="train"):
        dice.table8_sets(binary_dataset(10, 0))
    with pytest.raises(ValueError, match=r"^augmentation:"):
        dice.table8_sets(binary_dataset(10, 2), augmentation="backtranslation")


def test_balanced_splits_equalise_every_split():
    splits = DatasetDict({"train": binary_dataset(30, 6), "test": binary_dataset(5, 9)})
    balanced = dice.balanced_splits(splits, seed=1)
    assert label_counts(balanced["train"]) == [6, 6] and label_counts(balanced["test"]) == [5, 5]


def test_study_splits_positive_share_downsamples_training_positives_only(tmp_path):
    plain = dice.study_splits(sample_data(400, 50))
    shifted = dice.study_splits(sample_data(400, 50), positive_share=0.1)
    negatives, positives = label_counts(shifted["train"])
    assert negatives == label_counts(plain["train"])[0]
    assert positives == round(0.1 / 0.9 * negatives)
    assert label_counts(shifted["test"]) == label_counts(plain["test"])
    with pytest.raises(ValueError, match=r"^positive_share:"):
        dice.study_splits(sample_data(100, 20), positive_share=0.7)
    table = tmp_path / "t.csv"
    table.write_text("text,label\n" + "".join(f"句{i},{i % 2}\n" for i in range(40)), encoding="utf-8")
    with pytest.raises(ValueError, match=r"^data:"):  # notebook 01 needs a test split
        dice.study_splits(
            {"source": "table", "path": str(table), "text": "text", "label": "label", "split": [0.8, 0.2, 0]}
        )


# ----------------------------------------------------------------------------- more than two classes (issue 32 item 5)


def three_topics(counts=(30, 50, 8)):
    labels = [label for label, count in enumerate(counts) for _ in range(count)]
    texts = [("手机很好用", "汽车跑得快", "房子非常大")[label] + str(i) for i, label in enumerate(labels)]
    return build_dataset({"text": texts, "label": labels}, ("phone", "car", "house"))


def test_the_scored_class_is_label_1_of_two_and_the_smallest_of_more():
    assert dice.scored_label(binary_dataset(10, 40)) == 1  # binary: label 1, even when it is the larger class
    assert dice.scored_label(three_topics((30, 50, 8))) == 2
    assert dice.scored_label(three_topics((8, 50, 8))) == 0  # a tie: the lowest id


def test_the_scored_class_line_warns_when_the_test_split_holds_few_of_it():
    # notebook 01 printed "F1 of the smallest class" on 4 test examples without the warning notebook 05 gives
    few = {"train": three_topics((30, 50, 8)), "test": three_topics((12, 20, 4))}
    line = dice.scored_class_line(few, dice.scored_label(few["train"]))
    assert "'house'" in line and "test 4" in line
    assert "Warning" in line and "'house' (4)" in line
    enough = {"train": three_topics((30, 50, 8)), "test": three_topics((30, 30, SMALL_TEST_CLASS))}
    assert "Warning" not in dice.scored_class_line(enough, 2)


def test_table8_sets_of_three_classes_are_the_smallest_against_the_rest():
    # positives: the 8 houses; negatives: the 80 phones and cars. +positive adds 72 houses, +negative 72 of the rest
    # (drawn from both classes), -negative keeps 8 of the rest, +positive & +negative: m = round(2*80*8/88) = 15.
    table8 = dice.table8_sets(three_topics(), seed=0, augmentation="copies")
    assert table8.positive_label == 2 and table8.smallest_class == "house"
    counts = dice.table8_counts(table8)
    assert counts["positive"].tolist() == [8, 80, 8, 8, 15]
    assert counts["negative"].tolist() == [80, 80, 152, 8, 145]
    assert label_counts(table8.sets["+positive"])[:2] == [30, 50]  # the rest untouched
    assert sum(label_counts(table8.sets["+negative"])[:2]) == 152 and label_counts(table8.sets["+negative"])[2] == 8


def test_balanced_splits_of_three_classes_equalise_every_class():
    splits = DatasetDict({"train": three_topics((30, 50, 8)), "test": three_topics((5, 9, 7))})
    balanced = dice.balanced_splits(splits, seed=1)
    assert label_counts(balanced["train"]) == [8, 8, 8] and label_counts(balanced["test"]) == [5, 5, 5]


def test_study_splits_take_three_classes_and_down_sample_the_smallest():
    data = {"source": "sample_relevance", "max_train_samples": 400, "max_eval_samples": 80}
    splits = dice.study_splits(data)
    assert label_names(splits["train"]) == ["irrelevant", "related", "highly_relevant"]
    assert dice.scored_label(splits["train"]) == 2  # highly_relevant, QBQTC's 12.6%
    shifted = dice.study_splits(data, positive_share=0.05)
    counts = label_counts(shifted["train"])
    assert counts[:2] == label_counts(splits["train"])[:2] and counts[2] == round(0.05 / 0.95 * sum(counts[:2]))


def test_three_classes_score_the_smallest_class_and_train_every_dice_loss(fitter):
    data = {"source": "sample_relevance", "max_train_samples": 300, "max_eval_samples": 60, "max_length": 32}
    splits = dice.study_splits(data)
    table = dice.run_grid({"original": splits}, dice.zoo("losses", ["CE", "DL", "TL", "DSC"]), [0], fitter)
    assert set(table["loss"]) == {"CE", "DL", "TL", "DSC"}
    assert ((table[list(dice.METRICS)] >= 0) & (table[list(dice.METRICS)] <= 1)).all().all()
    assert table[list(dice.METRICS)].notna().all().all()
    fit = fitter.fit(
        splits, loss_from_spec(dice.LOSS_ZOO["CE"], splits["train"]), 0
    )  # as fit_and_score fits it, seeded
    gold, predicted = np.asarray(splits["test"]["label"]), fit.test_predictions
    true_positive = np.sum((gold == 2) & (predicted == 2))
    f1 = 2 * true_positive / (np.sum(gold == 2) + np.sum(predicted == 2))  # F1 of the smallest class, by hand
    scores = dice.fit_and_score(splits, dice.LOSS_ZOO["CE"], 0, fitter)
    assert scores["f1_positive"] == pytest.approx(f1)


def test_fit_and_score_is_seeded_and_scores_in_range(tiny_splits, fitter):
    first = dice.fit_and_score(tiny_splits, dice.LOSS_ZOO["CE"], 1, fitter)
    again = dice.fit_and_score(tiny_splits, dice.LOSS_ZOO["CE"], 1, fitter)
    assert first == again
    assert set(first) == {"f1_positive", "macro_f1", "accuracy", "validation_f1_positive"}
    assert all(0.0 <= value <= 1.0 for value in first.values())


def test_tversky_half_half_trains_exactly_like_plain_dice_with_double_smoothing(tiny_splits, fitter):
    # TL(alpha = beta = 1/2, gamma) = 1 - (2py + 2 gamma)/(p + y + 2 gamma): DL without squares, smoothing 2 gamma.
    tversky = dice.fit_and_score(tiny_splits, LossSpec("tversky", {"alpha": 0.5, "beta": 0.5, "gamma": 0.5}), 2, fitter)
    plain_dice = dice.fit_and_score(tiny_splits, LossSpec("dice", {"gamma": 1.0, "square": False}), 2, fitter)
    assert tversky == pytest.approx(plain_dice)


def test_wce_gets_training_label_counts(tiny_splits, fitter):
    scores = dice.fit_and_score(tiny_splits, dice.LOSS_ZOO["WCE"], 0, fitter)
    assert 0.0 <= scores["f1_positive"] <= 1.0


@pytest.mark.parametrize(
    ("model", "training", "parameter"),
    [
        ({"kind": "cnn"}, TINY_TRAINING, "model.kind"),
        (BOW, {"num_train_epochs": 0}, "training.num_train_epochs"),
        (BOW, {"per_device_train_batch_size": 2.5}, "training.per_device_train_batch_size"),
    ],
)
def test_fitters_reject_bad_options(model, training, parameter):
    with pytest.raises(ValueError, match=parameter):
        fitter_of(model, training, max_length=64)


def test_fit_and_score_runs_the_transformer_trainer(tiny_splits):
    small = DatasetDict({name: split.select(range(32)) for name, split in tiny_splits.items()})
    transformer = fitter_of(
        {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}},
        {
            "num_train_epochs": 1,
            "per_device_train_batch_size": 16,
            "per_device_eval_batch_size": 32,
            "learning_rate": 1e-3,
        },
        max_length=32,
    )
    assert isinstance(transformer, TransformerFitter)
    scores = dice.fit_and_score(small, dice.LOSS_ZOO["DSC"], 0, transformer)
    assert set(scores) == {"f1_positive", "macro_f1", "accuracy", "validation_f1_positive"}
    assert all(0.0 <= value <= 1.0 for value in scores.values())


def test_the_transformer_fitter_builds_corn_s_head_and_predicts_by_its_rank_rule(tiny_splits):
    # issue 37: it refused CORN; the head has num_outputs(loss, K) = K - 1 outputs, predictions CORN's rank rule
    transformer = fitter_of({"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}}, TINY_TRAINING, 32)
    fit = transformer.fit(tiny_splits, build_loss("corn"), 0)
    classes = len(label_names(tiny_splits["train"]))
    for predictions, probabilities in (
        (fit.test_predictions, fit.test_probabilities),
        (fit.validation_predictions, fit.validation_probabilities),
    ):
        assert probabilities.shape[1] == classes
        np.testing.assert_allclose(probabilities.sum(1), 1.0)
        above = 1 - np.cumsum(probabilities, axis=1)[:, :-1]  # P(y > k)
        np.testing.assert_array_equal(predictions, (above > 0.5).sum(1))


def test_imbalance_study_and_sweep_tables(tiny_splits, fitter):
    table = dice.imbalance_study(tiny_splits, {"CE": dice.LOSS_ZOO["CE"]}, [0, 1], fitter)
    assert len(table) == 5 * 1 * 2
    assert list(table["setting"].unique()) == list(dice.TABLE8_SETTINGS)
    given = dice.table8_sets(tiny_splits["train"], seed=0, augmentation="copies")
    again = dice.imbalance_study(tiny_splits, {"CE": dice.LOSS_ZOO["CE"]}, [0], fitter, training_sets=given)
    by_hand = dice.fit_and_score(
        DatasetDict({**tiny_splits, "train": given.sets["+negative"]}), dice.LOSS_ZOO["CE"], 0, fitter
    )
    assert again.set_index("setting").loc["+negative", list(by_hand)].to_dict() == pytest.approx(by_hand)
    assert {"setting", "loss", "seed", *dice.METRICS, "validation_f1_positive"} <= set(table.columns)
    sweep = dice.tversky_sweep(tiny_splits, [0.2, 0.8], [0], fitter)
    assert sweep["alpha"].tolist() == [0.2, 0.8] and set(sweep["loss"]) == {"TL"}
    for alphas in ([1.5], [], [0.3, 0.3]):  # out of range, none, one alpha twice (its rows would mix)
        with pytest.raises(ValueError, match=r"^alphas:"):
            dice.tversky_sweep(tiny_splits, alphas, [0], fitter)
    with pytest.raises(ValueError, match=r"^seeds:"):
        dice.run_grid({"x": tiny_splits}, {"CE": dice.LOSS_ZOO["CE"]}, [], fitter)


def hand_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "setting": ["a", "a", "a", "b"],
            "loss": ["CE", "CE", "CE", "CE"],
            "seed": [0, 1, 2, 0],
            "f1_positive": [0.5, 0.7, 0.9, 0.4],
            "macro_f1": [0.6, 0.6, 0.6, 0.3],
            "accuracy": [0.8, 0.9, 1.0, 0.5],
        }
    )


def test_summarize_mean_sample_std_and_n_by_hand():
    summary = summarize(hand_table(), ["setting", "loss"], dice.METRICS)
    a = summary[summary["setting"] == "a"].iloc[0]
    assert a["f1_positive_mean"] == pytest.approx(0.7)
    assert a["f1_positive_std"] == pytest.approx(math.sqrt((0.04 + 0 + 0.04) / 2))
    assert a["macro_f1_std"] == pytest.approx(0.0) and a["n"] == 3
    b = summary[summary["setting"] == "b"].iloc[0]
    assert np.isnan(b["f1_positive_std"]) and b["n"] == 1
    with pytest.raises(ValueError, match=r"^by/metrics:"):
        summarize(hand_table(), ["model"], dice.METRICS)


def test_mean_std_table_formats_percent_with_spread():
    table = mean_std_table(
        summarize(hand_table(), ["setting", "loss"], dice.METRICS), rows="loss", columns="setting", metric="f1_positive"
    )
    assert table.loc["CE", "a"] == "70.0 ± 20.0"
    assert table.loc["CE", "b"] == "40.0"


def test_best_alpha_selects_on_validation_not_test():
    sweep = pd.DataFrame(
        {
            "alpha": [0.3, 0.3, 0.7, 0.7],
            "validation_f1_positive": [0.8, 0.9, 0.6, 0.7],
            "f1_positive": [0.5, 0.5, 0.9, 0.9],
            "macro_f1": [0.6, 0.6, 0.7, 0.7],
            "accuracy": [0.7, 0.7, 0.8, 0.8],
        }
    )
    assert dice.best_alpha(sweep) == {"alpha": 0.3, "test_f1_positive": 0.5, "test_macro_f1": 0.6, "test_accuracy": 0.7}


def test_headline_metrics_keys_per_loss():
    summary = summarize(hand_table().assign(setting="original"), ["setting", "loss"], dice.METRICS)
    metrics = dice.headline_metrics(summary)
    assert list(metrics) == ["f1_positive_ce_original"]
    assert metrics["f1_positive_ce_original"]["mean"] == pytest.approx(0.625)
    assert metrics["f1_positive_ce_original"]["n"] == 4
    with pytest.raises(ValueError, match=r"^table8_summary:"):
        dice.headline_metrics(summarize(hand_table(), ["setting", "loss"], dice.METRICS).query("setting == 'b'"))


def test_headline_descriptions_describe_every_headline_key():
    # issue 39: the description of each metrics.json entry beside the rule that names it
    table = pd.concat([hand_table().assign(setting="original"), hand_table().assign(setting="original", loss="DSC")])
    summary = summarize(table, ["setting", "loss"], dice.METRICS)
    descriptions = dice.headline_descriptions(summary)
    assert list(descriptions) == [
        *dice.headline_metrics(summary),
        "tversky_best_alpha",
        "tversky_best_test_f1_positive",
    ]
    assert descriptions["f1_positive_dsc_original"] == "test F1 of the positive class, DSC, Table 8's original set"


def test_saturation_check_released_code_nan_workbench_finite():
    table = dice.saturation_check()
    assert (table["p"] == 1.0).all()
    released = table.iloc[0]
    assert not released["gradient_finite"]
    assert table.iloc[1:]["gradient_finite"].all() and table["loss_finite"].all()
    with pytest.raises(ValueError, match=r"^logit_gap:"):
        dice.saturation_check(logit_gap=0.0)


def test_this_run_quotes_the_tables_numbers():
    table8 = pd.concat([hand_table().assign(setting=setting) for setting in dice.TABLE8_SETTINGS])
    table9 = hand_table().assign(setting="balanced")
    presets = pd.concat([hand_table().assign(loss=loss) for loss in ("DSC", "DSC reference")])
    sets = dice.Table8Sets(sets=None, augmentation="synonyms", calls=30, unchanged=10)
    line = dice.this_run(table8, table9, presets, sets, {"alpha": 0.3, "test_f1_positive": 0.5})
    # f1_positive of CE over the four rows: mean 0.625, sample std 0.2217 -> "62.5 ± 22.2"
    assert line.count("CE 62.5 ± 22.2") == 5 and "DSC presets on original: eq. 12 62.5 ± 22.2" in line
    assert "alpha = 0.3 chosen on validation, test F1 50.0" in line and "10 of 30 left unchanged" in line
    assert "accuracy: CE 80.0 ± 21.6" in line  # accuracies 0.8, 0.9, 1.0, 0.5: sample std 0.216


def test_zoo_gives_the_named_losses_and_names_the_notebook_parameter():
    assert dice.zoo("table8_losses", ["DSC", "CE"]) == {"DSC": dice.LOSS_ZOO["DSC"], "CE": dice.LOSS_ZOO["CE"]}
    for names in (
        ["CE", "XL"],
        ["CE", "CE"],
        [],
        "CE",
    ):  # unknown, twice (a table row would hide one), none, not a list
        with pytest.raises(ValueError, match=r"^table9_losses:"):
            dice.zoo("table9_losses", names)
