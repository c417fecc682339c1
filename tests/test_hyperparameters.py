"""What a study names as fixed and as chosen on validation (issue 36, item 6): each loss's hyperparameters as it
trains (its defaults under the spec's params, a preset resolved, the training split's counts left out), the optimiser
settings, and the one listing the results page prints."""

from __future__ import annotations

import pytest

from workbench.config import LossSpec, load_config
from workbench.data import sample_sentence_splits
from workbench.evidence import check_record, record
from workbench.runs.page_section import notebook_section
from workbench.train import fixed_hyperparameters, loss_hyperparameters

TRAINING = {"learning_rate": 0.02, "num_train_epochs": 5, "per_device_train_batch_size": 64, "weight_decay": 0.0}


@pytest.fixture(scope="module")
def train():
    return sample_sentence_splits(seed=0)["train"]


def test_a_loss_s_hyperparameters_are_its_defaults_under_the_spec_s_params(train):
    assert loss_hyperparameters(LossSpec("focal", {"gamma": 1.5})) == {"gamma": 1.5, "alpha": None}
    assert loss_hyperparameters(LossSpec("ls")) == {"epsilon": 0.1}
    assert loss_hyperparameters(LossSpec("wce"), train) == {"K": 1.0}  # the counts come from the split
    assert loss_hyperparameters(LossSpec("class_balanced", {"beta": 0.99}), train) == {"beta": 0.99}
    assert loss_hyperparameters(LossSpec("ce")) == {"weight": None}
    paper = loss_hyperparameters(LossSpec("dsc", {"preset": "paper"}))  # the preset's values, as the loss holds them
    reference = loss_hyperparameters(LossSpec("dsc", {"preset": "reference"}))
    assert (paper["alpha"], paper["class_reduction"]) == (1.0, "mean") and reference["alpha"] == 0.01
    with pytest.raises(ValueError, match=r"^train_split:"):
        loss_hyperparameters(LossSpec("wce"))


def test_fixed_lists_the_optimiser_settings_and_each_loss_s_numbers(train):
    specs = {"CE": LossSpec("ce"), "FL": LossSpec("focal", {"gamma": 2.0}), "DSC": LossSpec("dsc", {"preset": "paper"})}
    fixed = fixed_hyperparameters({**TRAINING, "seed": 3}, specs, train, **{"TL beta": "1 - alpha"})
    assert {key: value for key, value in fixed.items() if not key.startswith("DSC")} == {
        "learning rate": 0.02,
        "num train epochs": 5,
        "per device train batch size": 64,
        "weight decay": 0.0,
        "FL gamma": 2.0,  # CE's weight and FL's alpha are None: no number
        "TL beta": "1 - alpha",
    }
    assert fixed["DSC alpha"] == 1.0 and "DSC class_reduction" not in fixed  # a variant's name is the setting's
    # a validated section gives its defaults too (the probe's AdamW reads weight_decay)
    section = load_config({"training": {"learning_rate": 1e-3}}).training
    assert fixed_hyperparameters(section)["weight decay"] == section.weight_decay
    assert fixed_hyperparameters({**TRAINING, "learning_rate": 1e-3}, hub_token="hf_secret")["hub_token"] != "hf_secret"


def test_each_study_names_what_it_fixes_and_what_validation_chooses(train):
    from workbench.studies import auxiliary, dice, pcl, pcl_vs_dice

    section = load_config({"training": TRAINING}).training
    zoo = dice.zoo("losses", ["CE", "FL", "WCE"])
    named = dice.hyperparameters(section, zoo, train, tversky_alphas=[0.3, 0.5])
    assert named["fixed"]["FL gamma"] == 2.0 and named["fixed"]["WCE K"] == 1.0
    assert named["fixed"]["learning rate"] == 0.02 and set(named["chosen"]) == {"epoch", "TL alpha"}
    assert set(dice.hyperparameters(section, zoo, train)["chosen"]) == {"epoch"}
    named = pcl.hyperparameters(section, pcl.setting_specs(["LS", "PCL paper"], 0.2), train)
    assert named["fixed"]["LS epsilon"] == 0.2 and named["fixed"]["PCL paper epsilon"] == 0.2
    assert set(named["chosen"]) == {"epoch", "PCL form", "decision rule"}
    specs = pcl_vs_dice.comparison_specs(["CE", "LS", "DSC reference"], 0.1)
    assert pcl_vs_dice.hyperparameters(section, specs, train)["fixed"]["DSC reference alpha"] == 0.01
    config = load_config(
        {"training": {"learning_rate": 1e-3, "num_train_epochs": 3}, "aux": {"stage2_lr": 1e-2}}, task="two_stage"
    )
    named = auxiliary.hyperparameters(config)
    assert named["fixed"]["learning rate"] == 1e-3 and named["fixed"]["stage 2 learning rate"] == 1e-2
    assert named["fixed"]["stage 2 epochs"] == 3  # null: the training section's epochs
    assert set(named["chosen"]) == {"epoch"}


def test_the_page_prints_what_the_study_records(train):
    from workbench.studies import pcl_vs_dice

    section = load_config({"training": TRAINING}).training
    named = pcl_vs_dice.hyperparameters(section, pcl_vs_dice.comparison_specs(["CE", "LS"], 0.1), train)
    entry = record("T", "s.", [0], [], {}, fixed=named["fixed"], chosen=named["chosen"])
    check_record(entry)
    text = "\n".join(notebook_section("05_x", entry, [], ["05_x"], {}))
    assert "learning rate 0.02" in text and "LS epsilon 0.1" in text
    assert all(f"{name}: {how}" in text for name, how in named["chosen"].items())
    with pytest.raises(ValueError, match=r"^chosen\['epoch'\]"):
        record("T", "s.", [0], [], {}, chosen={"epoch": ""})
    with pytest.raises(ValueError, match=r"^evidence\.chosen"):
        check_record({**entry, "chosen": ["epoch"]})
