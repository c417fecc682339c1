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
