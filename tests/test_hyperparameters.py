"""What a study names as fixed (issue 36, item 6): each loss's hyperparameters as it trains (its defaults under the
spec's params, the training split's counts left out) and the optimiser settings."""

from __future__ import annotations

import pytest

from workbench.config import LossSpec
from workbench.data import sample_sentence_splits
from workbench.train import fixed_hyperparameters, loss_hyperparameters


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


def test_a_study_s_record_names_the_fixed_values_and_what_validation_chose(train):
    specs = {"CE": LossSpec("ce"), "FL": LossSpec("focal", {"gamma": 2.0})}
    training = {"learning_rate": 0.02, "num_train_epochs": 5, "per_device_train_batch_size": 64, "seed": 3}
    record = fixed_hyperparameters(specs, training, train, epoch="best validation macro-F1")
    assert record["fixed"] == {
        "learning_rate": 0.02,
        "num_train_epochs": 5,
        "per_device_train_batch_size": 64,
        "losses": {"CE": {"weight": None}, "FL": {"gamma": 2.0, "alpha": None}},
    }
    assert record["chosen_on_validation"] == {"epoch": "best validation macro-F1"}


def test_each_probe_study_names_its_losses_and_what_validation_chose(train):
    from workbench.studies import dice, pcl, pcl_vs_dice

    training = {"learning_rate": 0.02, "num_train_epochs": 5, "per_device_train_batch_size": 64, "weight_decay": 0.0}
    record = dice.hyperparameters(["CE", "FL", "CE", "WCE"], training, train, tversky_alphas=[0.3, 0.5])
    assert record["fixed"]["losses"] == {"CE": {"weight": None}, "FL": {"gamma": 2.0, "alpha": None}, "WCE": {"K": 1.0}}
    assert record["fixed"]["learning_rate"] == 0.02 and set(record["chosen_on_validation"]) == {"epoch", "TL alpha"}
    assert set(dice.hyperparameters(["CE"], training, train)["chosen_on_validation"]) == {"epoch"}
    specs = pcl.setting_specs(["LS", "PCL paper"], 0.2)
    record = pcl.hyperparameters(specs, training, train)
    assert (
        record["fixed"]["losses"]["LS"] == {"epsilon": 0.2} and record["fixed"]["losses"]["PCL paper"]["epsilon"] == 0.2
    )
    record = pcl_vs_dice.hyperparameters(pcl_vs_dice.comparison_specs(["CE", "LS", "DSC"], 0.1), training, train)
    assert record["fixed"]["losses"]["DSC"]["preset"] == "reference"


def test_the_auxiliary_study_names_both_stages():
    from workbench.config import load_config
    from workbench.studies import auxiliary

    config = load_config(
        {"training": {"learning_rate": 1e-3, "num_train_epochs": 3}, "aux": {"stage2_epochs": 2, "stage2_lr": 1e-2}},
        task="two_stage",
    )
    record = auxiliary.hyperparameters(config)
    assert record["fixed"]["learning_rate"] == 1e-3 and record["fixed"]["num_train_epochs"] == 3
    assert record["fixed"]["stage2"] == {"num_train_epochs": 2, "learning_rate": 1e-2}
    assert record["fixed"]["losses"] == {"loss": {"weight": None}} and "num_aux" in record["chosen_on_validation"]
