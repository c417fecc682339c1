"""Epsilon from a params file to the loss (issue 14's "Done means"): at most 4 hops, validated once.

The path a notebook 05 run takes, hop by hop:

1. ``params/<set>/05_pcl_vs_dice_walkthrough.yaml`` (or ``--sweep epsilon=...``) -> the notebook's
   ``epsilon`` parameter (``workbench.runs.plan_executions``, injected by papermill);
2. the notebook -> ``pcl_vs_dice.comparison_specs(settings, epsilon)``: ``LossSpec.params["epsilon"]``;
3. ``pcl.run_ablation`` -> ``workbench.train.loss_from_spec(spec, train_split)``;
4. ``loss_from_spec`` -> ``build_loss("pcl" | "ls", **params)`` -> the loss's constructor, the one range check.

The same ``epsilon`` reaches ``PclWeightsPanel`` (which checks it once, where it enters, and redraws with the
slider's values) and the other figures of notebooks 02 and 05.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from workbench.data import load_splits
from workbench.losses import LabelSmoothingLoss, PropensityCorrectedLoss
from workbench.runs import plan_executions
from workbench.studies import pcl, pcl_vs_dice
from workbench.train import Fit, loss_from_spec
from workbench.viz import PclWeightsPanel

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "05_pcl_vs_dice_walkthrough.ipynb"
EPSILON_NOTEBOOKS = ("02_propensity_corrected_loss.ipynb", "05_pcl_vs_dice_walkthrough.ipynb")
SAMPLE = {"source": "sample_relevance", "max_train_samples": 60, "max_eval_samples": 30}
TAKES_EPSILON = {"PclWeightsPanel", "pcl_vs_ls_figure", "gradient_comparison", "comparison_specs", "setting_specs"}


class RecordingFitter:
    """A fitter that records the loss it is given and predicts the majority class."""

    def __init__(self) -> None:
        self.losses = []

    def fit(self, splits, loss, seed):
        self.losses.append(loss)
        test = np.ones(len(splits["test"]), dtype=np.int64)
        return Fit(np.ones(len(splits["validation"]), dtype=np.int64), test, np.eye(3)[test], 1, 0.0, [])


def _code(notebook: Path) -> ast.Module:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ast.parse("\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"))


def _called(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


@pytest.mark.parametrize("source", ["params", "sweep"])
def test_epsilon_goes_from_a_params_file_to_the_loss(tmp_path, source):
    (tmp_path / "default").mkdir()
    given = {"params": {"epsilon": 0.25}, "sweep": {}}[source]
    (tmp_path / "default" / f"{NOTEBOOK.stem}.yaml").write_text(json.dumps(given), encoding="utf-8")
    sweep = {"sweep": {"epsilon": [0.25]}, "params": None}[source]
    [execution] = plan_executions([NOTEBOOK], tmp_path, "default", sweep=sweep)  # hop 1
    epsilon = execution.parameters["epsilon"]
    assert epsilon == 0.25

    specs = pcl_vs_dice.comparison_specs(["CE", "LS", "PCL reference", "PCL expected_cost (global)"], epsilon)  # hop 2
    splits = load_splits(SAMPLE)
    fitter = RecordingFitter()
    pcl.run_ablation(splits, specs, [0], fitter)  # hops 3 and 4: loss_from_spec -> build_loss -> the loss
    ce, *taking = fitter.losses
    assert [type(loss) for loss in taking] == [LabelSmoothingLoss, PropensityCorrectedLoss, PropensityCorrectedLoss]
    assert [loss.epsilon for loss in taking] == [0.25, 0.25, 0.25] and not hasattr(ce, "epsilon")


def test_epsilon_is_validated_once_by_the_loss():
    specs = pcl_vs_dice.comparison_specs(["CE", "LS", "PCL reference"], 1.5)  # passed on unchecked
    assert specs["PCL reference"].params["epsilon"] == 1.5
    assert pcl.setting_specs(["PCL reference"], 1.5)["PCL reference"].params["epsilon"] == 1.5
    with pytest.raises(ValueError, match=r"^epsilon:"):
        loss_from_spec(specs["PCL reference"], load_splits(SAMPLE)["train"])


@pytest.fixture
def epsilon_checks(monkeypatch):
    """The epsilon values that ``check_number`` checks anywhere in the package during the test."""
    from workbench.checks import check_number

    checked = []

    def counting(name, value, *args, **kwargs):
        if name == "epsilon":
            checked.append(value)
        return check_number(name, value, *args, **kwargs)

    for module in list(sys.modules.values()):  # workbench.checks too: a declared range (Bounds) calls its check_number
        if getattr(module, "check_number", None) is check_number:
            monkeypatch.setattr(module, "check_number", counting)
    return checked


def test_epsilon_is_checked_once_by_each_loss_it_reaches(epsilon_checks):
    specs = pcl_vs_dice.comparison_specs(["CE", "LS", "PCL reference", "PCL expected_cost (global)"], 0.25)
    pcl.run_ablation(load_splits(SAMPLE), specs, [0], RecordingFitter())
    assert epsilon_checks == [0.25, 0.25, 0.25]  # the constructors of LS, PCL reference, PCL expected_cost


def test_the_pcl_panel_checks_its_epsilon_once_however_often_it_draws(epsilon_checks):
    panel = PclWeightsPanel(variants=("paper", "weighted"), interactive=False, epsilon=0.25)
    panel.page_figure()  # every slider step drawn
    assert epsilon_checks == [0.25]


@pytest.mark.parametrize("name", EPSILON_NOTEBOOKS)
def test_notebooks_hand_their_epsilon_to_every_epsilon_taking_call(name):
    calls = [node for node in ast.walk(_code(ROOT / "notebooks" / name)) if isinstance(node, ast.Call)]
    taking = [node for node in calls if _called(node) in TAKES_EPSILON]
    assert {"PclWeightsPanel", "pcl_vs_ls_figure", "gradient_comparison"} <= {_called(node) for node in taking}
    for node in taking:
        arguments = [*node.args, *(keyword.value for keyword in node.keywords if keyword.arg == "epsilon")]
        assert any(isinstance(argument, ast.Name) and argument.id == "epsilon" for argument in arguments), (
            f"{name}: {_called(node)}(...) does not get the notebook's epsilon"
        )
