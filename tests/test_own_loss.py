"""Your own loss on the bench (issue 38): registration and its errors, the adapter that serves a user's loss to the
trainers, Poly-1 (the worked example) against a float64 hand computation, its curves against autograd, the loss
modules of configs, notebooks and the runner, the one named-settings table and the extra settings' rows."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from workbench.losses import (
    OwnLoss,
    available_losses,
    build_loss,
    check_loss_parameters,
    import_loss_modules,
    loss_parameters,
    register_loss,
    registry_restored,
)
from workbench.losses import registry as loss_registry

ROOT = Path(__file__).resolve().parents[1]
POLY1 = ROOT / "examples" / "poly1.py"


@pytest.fixture(autouse=True)
def registry_kept():
    """Whatever a test registers or imports is gone after it (the other tests see the workbench's own losses)."""
    with registry_restored():
        yield


class MeanSquaredProbability(nn.Module):
    """(1 - p_y)^2, the mean over the rows: a loss as a user writes it for plain torch."""

    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.scale = scale
        self.calls = []

    def forward(self, logits, target):
        self.calls.append((logits.shape, logits.dtype, target.tolist()))
        p = logits.softmax(-1).gather(-1, target[:, None]).squeeze(-1)
        return self.scale * ((1 - p) ** 2).mean()


class NeedsCounts(nn.Module):
    def __init__(self, label_counts, power: float = 1.0) -> None:
        super().__init__()
        self.weights = torch.as_tensor(label_counts, dtype=torch.float64) ** -power

    def forward(self, logits, target):
        return nn.functional.cross_entropy(logits, target, weight=self.weights.to(logits))


# ------------------------------------------------------------------------------------------------ registration


def test_a_registered_loss_is_listed_built_and_its_parameters_checked():
    assert register_loss("msp", MeanSquaredProbability) is MeanSquaredProbability
    assert "msp" in available_losses() and "ce" in available_losses()
    loss = build_loss("msp", scale=2.0)
    assert isinstance(loss, OwnLoss) and loss.loss.scale == 2.0
    assert loss_parameters("msp") == {"scale": False}
    with pytest.raises(ValueError, match=r"^parameters of 'msp': must be among \['scale'\], got \['gamma'\]"):
        build_loss("msp", gamma=1.0)
    register_loss("counted", NeedsCounts)
    with pytest.raises(ValueError, match=r"^parameters of 'counted': must give \['label_counts'\].*'power'"):
        build_loss("counted")
    check_loss_parameters("counted", {}, counts_supplied=True)  # the training split's counts come later


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: register_loss("x", lambda logits, target: logits.sum()), "loss_class"),  # not a class
        (lambda: register_loss("x", dict), "loss_class"),  # not an nn.Module
        (lambda: register_loss("x", type("NoForward", (nn.Module,), {})), "NoForward.forward"),
        (lambda: register_loss("x", type("OneArgument", (nn.Module,), {"forward": lambda self, x: x})), "OneArgument"),
        (
            lambda: register_loss("x", type("Three", (nn.Module,), {"forward": lambda self, a, b, c: a})),
            "Three.forward",
        ),
        (
            lambda: register_loss(
                "x",
                type("Loose", (nn.Module,), {"__init__": lambda self, **kw: None, "forward": lambda s, a, b: a}),
            ),
            "Loose.__init__",
        ),
    ],
)
def test_a_class_that_cannot_serve_is_a_type_error_naming_it(make, named):
    with pytest.raises(TypeError, match=rf"^{named}"):
        make()
    assert "x" not in available_losses()


def test_names_are_checked_and_taken_names_refused_unless_replace():
    for bad in ("", "two words", "1st", None):
        with pytest.raises(ValueError, match=r"^name: must be a letter"):
            register_loss(bad, MeanSquaredProbability)
    with pytest.raises(ValueError, match=r"^name: 'ce' is one of the workbench's own losses"):
        register_loss("ce", MeanSquaredProbability, replace=True)  # the notebooks compare against the real CE
    register_loss("msp", MeanSquaredProbability)
    register_loss("msp", MeanSquaredProbability)  # the same class again (a module re-imported): no error

    class Other(MeanSquaredProbability):
        pass

    with pytest.raises(ValueError, match=r"^name: 'msp' is already registered for .*MeanSquaredProbability"):
        register_loss("msp", Other)
    assert loss_registry.OWN_LOSSES["msp"] is MeanSquaredProbability  # nothing replaced silently
    register_loss("msp", Other, replace=True)
    assert type(build_loss("msp").loss) is Other


def test_an_unknown_name_lists_the_registered_ones():
    register_loss("msp", MeanSquaredProbability)
    with pytest.raises(ValueError, match=r"^name: must be one of \[.*'msp'.*\].*register_loss.*got 'poly9'"):
        build_loss("poly9")


@pytest.mark.parametrize(
    ("returned", "what"),
    [
        (lambda logits: logits.sum(-1), r"shape \(4,\)"),  # per-row values
        (lambda logits: 1.5, "a float"),  # not a tensor
        (lambda logits: logits.argmax(), "dtype torch.int64"),  # an integer tensor has no gradient
    ],
)
def test_a_loss_that_does_not_return_a_scalar_is_named_at_first_use(returned, what):
    register_loss("bad", type("Bad", (nn.Module,), {"forward": lambda self, logits, target: returned(logits)}))
    loss = build_loss("bad")  # building it works: the value is seen at the first call
    with pytest.raises(ValueError, match=rf"^loss 'bad' \(Bad\.forward\): must return a floating-point scalar.*{what}"):
        loss(torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))


def test_a_subclass_of_imbalance_loss_is_built_as_it_is():
    from workbench.losses import LabelSmoothingLoss

    class Mine(LabelSmoothingLoss):
        pass

    register_loss("mine", Mine)
    assert type(build_loss("mine", epsilon=0.2)) is Mine


# ------------------------------------------------------------------------------------------------ the adapter


def test_the_adapter_drops_ignored_positions_and_flattens_tokens():
    register_loss("msp", MeanSquaredProbability)
    loss = build_loss("msp")
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 3, dtype=torch.float64, generator=generator, requires_grad=True)
    labels = torch.tensor([[0, 1, -100, 2, 1], [-100, -100, 2, 0, 1]])
    value = loss(logits, labels)
    kept = labels.reshape(-1) != -100
    p = logits.reshape(-1, 3)[kept].softmax(-1)[torch.arange(7), labels.reshape(-1)[kept]]
    torch.testing.assert_close(value, ((1 - p) ** 2).mean(), rtol=0, atol=1e-15)  # by hand, float64
    assert loss.loss.calls[-1] == (torch.Size([7, 3]), torch.float64, [0, 1, 2, 1, 2, 0, 1])  # what forward saw
    (gradient,) = torch.autograd.grad(value, logits)
    assert torch.all(gradient[labels == -100] == 0)  # an ignored position carries no gradient
    assert torch.autograd.gradcheck(lambda z: loss(z, labels), (logits,))


def test_the_adapter_computes_half_precision_in_float32_and_returns_the_logits_dtype():
    register_loss("msp", MeanSquaredProbability)
    loss = build_loss("msp")
    logits = torch.randn(6, 3).to(torch.bfloat16)
    labels = torch.tensor([0, 1, 2, 0, 1, 2])
    value = loss(logits, labels)
    assert value.dtype == torch.bfloat16 and loss.loss.calls[-1][1] == torch.float32
    torch.testing.assert_close(value.float(), MeanSquaredProbability()(logits.float(), labels), rtol=1e-2, atol=0)


def test_an_all_ignored_batch_gives_zero_without_calling_the_loss():
    register_loss("msp", MeanSquaredProbability)
    loss = build_loss("msp")
    logits = torch.full((3, 2), float("inf")).requires_grad_()
    value = loss(logits, torch.full((3,), -100))
    assert value.item() == 0 and loss.loss.calls == []
    assert torch.equal(torch.autograd.grad(value, logits)[0], torch.zeros(3, 2))


def test_the_adapter_checks_labels_as_every_loss_and_takes_the_classes_batch_level_flag():
    register_loss("msp", MeanSquaredProbability)
    with pytest.raises(ValueError, match=r"^labels: must lie in \[0, 3\)"):
        build_loss("msp")(torch.randn(2, 3), torch.tensor([0, 3]))
    assert build_loss("msp").is_batch_level is False  # a mean of per-row terms
    register_loss("setlevel", type("SetLevel", (MeanSquaredProbability,), {"is_batch_level": True}))
    assert build_loss("setlevel").is_batch_level is True


# ------------------------------------------------------------------------------------------------ Poly-1


@pytest.fixture
def poly1():
    import_loss_modules([POLY1])
    return build_loss


def test_poly1_matches_a_float64_hand_computation_and_passes_gradcheck(poly1):
    logits = torch.tensor([[2.0, -1.0, 0.5], [0.1, 0.2, 0.3], [-3.0, 4.0, 0.0]], dtype=torch.float64)
    labels = torch.tensor([0, 2, 0])
    expected = []
    for row, gold in zip(logits.tolist(), labels.tolist()):
        p = np.exp(row[gold]) / np.exp(row).sum()
        expected.append(-np.log(p) + 0.7 * (1 - p))  # -log p_t + epsilon (1 - p_t)
    loss = poly1("poly1", epsilon=0.7)
    assert loss(logits, labels).item() == pytest.approx(np.mean(expected), rel=1e-14)
    assert poly1("poly1", epsilon=0.0)(logits, labels).item() == pytest.approx(
        torch.nn.functional.cross_entropy(logits, labels).item(), rel=1e-14
    )  # epsilon = 0 is cross-entropy
    assert torch.autograd.gradcheck(lambda z: loss(z, labels), (logits.clone().requires_grad_(),))
    again = pickle.loads(pickle.dumps(loss))  # a class of an imported file pickles (a dataloader worker, torch.save)
    assert again(logits, labels).item() == loss(logits, labels).item()
    with pytest.raises(ValueError, match=r"^epsilon: must be a number in \[-1, 1e\+12\], got -2"):
        poly1("poly1", epsilon=-2)  # the class checks its own parameter


def test_curves_of_a_registered_loss_are_autograd_s(poly1):
    from workbench.viz.curves import figure_loss_curves, loss_curves

    p = np.array([0.05, 0.3, 0.5, 0.8, 0.99])
    curves = loss_curves("poly1", p=p, num_classes=3, epsilon=2.0)
    positive = curves[curves["example"] == "positive"]
    np.testing.assert_allclose(positive["loss"], -np.log(p) + 2.0 * (1 - p), rtol=1e-12)
    np.testing.assert_allclose(positive["dloss_dp"], -1 / p - 2.0, rtol=1e-10)  # d/dp of -log p + eps (1 - p)
    figure = figure_loss_curves(
        [("CE", "ce", {}), ("LS", "ls", {"epsilon": 0.1}), ("DSC", "dsc", {}), ("Poly-1", "poly1", {"epsilon": 1.0})]
    )
    assert [trace.name for trace in figure.data if trace.showlegend] == ["CE", "LS", "DSC", "Poly-1"]


def test_the_loss_curve_panel_draws_a_registered_loss_with_its_own_slider_range(poly1):
    from workbench.viz import LinkedCurve, LossCurvePanel

    panel = LossCurvePanel(
        [LinkedCurve("ce", label="CE"), LinkedCurve("poly1", linked=("epsilon",), label="Poly-1")],
        slider_names=("epsilon",),
        slider_ranges={"epsilon": {"value": -1.0, "min": -1.0, "max": 3.0, "step": 0.5}},
        interactive=False,
    )
    drawn = panel.figure_for(epsilon=3.0)
    poly = next(trace for trace in drawn.data if trace.name == "Poly-1")
    p = np.asarray(poly.x)
    np.testing.assert_allclose(poly.y, -np.log(p) + 3.0 * (1 - p), rtol=1e-5)  # the slider's value reached it
    assert len(panel.page_figure().layout.sliders[0].steps) == 9  # -1 .. 3 in steps of 0.5
    with pytest.raises(ValueError, match=r"^slider_ranges:.*\['delta'\]"):
        LossCurvePanel([LinkedCurve("poly1")], slider_names=("epsilon",), slider_ranges={"delta": {}})
    with pytest.raises(ValueError, match=r"^name:.*'delta'"):
        LossCurvePanel([LinkedCurve("poly1", linked=("delta",))], slider_names=("delta",), interactive=False)


# ------------------------------------------------------------------------------------------------ loss modules


def _module(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_loss_modules_import_once_and_again_when_edited(tmp_path):
    body = "from torch import nn\nfrom workbench.losses import register_loss\n\nRUNS = []\n"
    body += "class Sq(nn.Module):\n    def forward(self, logits, target):\n        return (logits ** 2).mean()\n"
    path = _module(tmp_path, "sq.py", body + "register_loss('sq', Sq)\n")
    assert import_loss_modules([path.name], tmp_path) == {str(path.resolve()): ["sq"]}  # relative to the folder
    first = loss_registry.OWN_LOSSES["sq"]
    import_loss_modules([path])
    assert loss_registry.OWN_LOSSES["sq"] is first  # unchanged: not run again
    path.write_text(body + "Sq.edited = True\nregister_loss('sq', Sq)\n", encoding="utf-8")
    import_loss_modules([path])
    assert loss_registry.OWN_LOSSES["sq"].edited  # edited: run again, the same class replaces itself


@pytest.mark.parametrize(
    ("paths", "message"),
    [
        ("poly1.py", r"^loss_modules: must be a list of \.py files, got 'poly1.py'"),
        (["missing.py"], r"^loss_modules\[0\]: no such file: 'missing.py' \(.*missing.py\)"),
        (["losses.txt"], r"^loss_modules\[0\]: must be a \.py file, got 'losses.txt'"),
        ([3], r"^loss_modules\[0\]: must be the path of a \.py file, got 3"),
    ],
)
def test_loss_modules_that_cannot_be_read_are_named(tmp_path, paths, message):
    with pytest.raises(ValueError, match=message):
        import_loss_modules(paths, tmp_path)


@pytest.mark.parametrize(
    ("text", "line", "error"),
    [
        ("import torch\n\nx = (\n", 3, "SyntaxError"),
        ("import torch\n\n\nraise RuntimeError('boom')\n", 4, "RuntimeError: boom"),
        ("import no_such_package_here\n", 1, "ModuleNotFoundError"),
        (
            "from torch import nn\nfrom workbench.losses import register_loss\n\n\nclass W(nn.Module):\n"
            "    def forward(self, logits):\n        return logits.mean()\n\n\nregister_loss('w', W)\n",
            10,
            r"TypeError: W\.forward: must take \(logits, target\)",
        ),
    ],
)
def test_a_module_that_fails_to_import_is_one_line_naming_file_and_line(tmp_path, text, line, error):
    path = _module(tmp_path, "mine.py", text)
    with pytest.raises(ValueError, match=rf"^loss_modules: {path.resolve()}:{line}: importing it failed: {error}") as e:
        import_loss_modules([path])
    assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------------------------ trainer config


def _config(tmp_path: Path, **changes) -> Path:
    import yaml

    config = yaml.safe_load((ROOT / "params" / "examples" / "finetune_qbqtc_sample_pcl.yaml").read_text())
    config.update(output_dir=str(tmp_path / "run"), **changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"loss_modules": ["missing.py"]}, r"loss_modules\[0\]: no such file: 'missing.py'"),
        ({"loss": {"name": "poly9"}}, r"loss\.name: must be one of \[.*\].*got 'poly9'"),
        (
            {"loss_modules": [str(POLY1)], "loss": {"name": "poly1", "params": {"eps": 1}}},
            r"loss\.params: parameters of 'poly1': must be among \['epsilon'\], got \['eps'\]",
        ),
        ({"loss_modules": "poly1.py"}, r"loss_modules: must be a list of \.py files"),
    ],
)
def test_the_trainer_command_line_says_what_is_wrong_in_one_line_before_any_run_folder(
    tmp_path, capsys, changes, message
):
    from workbench.train.__main__ import main

    assert main([str(_config(tmp_path, **changes))]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("error: ")
    assert re.search(message, error), error
    assert not (tmp_path / "run").exists()  # checked before the run folder is claimed


@pytest.mark.slow
def test_finetune_trains_with_a_registered_loss_from_the_config(tmp_path):
    from workbench.train import finetune

    config = _config(
        tmp_path,
        loss_modules=[str(POLY1)],
        loss={"name": "poly1", "params": {"epsilon": 1.0}},
        data={"source": "sample_relevance", "max_length": 32, "max_train_samples": 200, "max_eval_samples": 60},
        training={"num_train_epochs": 1, "seed": 0, "quiet": True},
    )
    result = finetune(str(config))
    metrics = json.loads((result.output_dir / "metrics.json").read_text())
    assert metrics["loss"] == {"name": "poly1", "params": {"epsilon": 1.0}}
    assert 0 <= metrics["macro_f1"] <= 1


# ------------------------------------------------------------------------------------------------ settings


def test_one_table_gives_every_notebook_its_settings():
    from workbench.studies import dice, pcl, pcl_vs_dice
    from workbench.train import LOSS_SETTINGS

    for offered in (pcl.PCL_SETTINGS, pcl.BASELINES, pcl_vs_dice.COMPARISON, dice.LOSS_ZOO):
        assert all(offered[label] is LOSS_SETTINGS[label] for label in offered)
    # epsilon reaches LS and PCL (not CE, DSC); the cost matrix every PCL form but the released one
    cost = [[0, 1, 1], [1, 0, 1], [1, 1, 0]]
    specs = pcl_vs_dice.comparison_specs(list(pcl_vs_dice.COMPARISON), 0.3, cost)
    assert {label: spec.params.get("epsilon") for label, spec in specs.items()} == {
        "CE": None,
        "LS": 0.3,
        "DSC reference": None,
        "PCL reference": 0.3,
        "PCL expected_cost (global)": 0.3,
    }
    assert [label for label, spec in specs.items() if "cost_matrix" in spec.params] == ["PCL expected_cost (global)"]
    assert dice.zoo("table8_losses", ["DSC"])["DSC"].params == {"preset": "paper"}  # one meaning per label


def test_extra_settings_are_added_as_written_and_checked_before_anything_runs(poly1):
    from workbench.studies import dice, pcl, pcl_vs_dice

    extra = {"Poly-1": {"loss": "poly1", "params": {"epsilon": 1.0}}, "CE (eps)": {"loss": "ce"}}
    specs = pcl.setting_specs(["LS"], 0.2, extra_settings={"Poly-1": extra["Poly-1"]})
    assert list(specs) == ["LS", "Poly-1"] and specs["Poly-1"].params == {"epsilon": 1.0}  # no notebook epsilon
    assert list(dice.zoo("table8_losses", ["CE"], extra)) == ["CE", "Poly-1", "CE (eps)"]
    bad = [
        ({"Poly-1": {"loss": "poly9"}}, r"^extra_settings\['Poly-1'\]\.loss: must be one of"),
        ({"Poly-1": {"loss": "poly1", "params": {"eps": 1}}}, r"^extra_settings\['Poly-1'\]\.params: parameters of"),
        ({"Poly-1": {"name": "poly1"}}, r"^extra_settings\['Poly-1'\]: must be a mapping \{loss"),
        ({"Poly-1": {"loss": "poly1", "weight": 1}}, r"^extra_settings\['Poly-1'\]: keys must be among"),
        ({"Poly-1": {"loss": "poly1", "claim": {"paper": "x"}}}, r"^extra_settings\['Poly-1'\]\.claim: must be"),
        ({"LS": {"loss": "poly1"}}, r"^extra_settings: labels must differ from the notebook's named settings"),
        (["poly1"], r"^extra_settings: must be a mapping"),
    ]
    for extra_settings, message in bad:
        with pytest.raises(ValueError, match=message):
            pcl.setting_specs(["LS"], 0.1, extra_settings=extra_settings)
    with pytest.raises(ValueError, match=r"^settings: 'CE' and 'CE \(eps\)' would share the metrics.json key"):
        pcl_vs_dice.comparison_specs(["CE", "LS"], 0.1, extra_settings={"CE (eps)": {"loss": "ce"}})


def test_a_checks_cell_builds_every_setting_naming_an_extra_setting_s_refused_value(poly1):
    from workbench.studies import pcl_vs_dice
    from workbench.train import check_settings_values

    extra = {"Poly-1": {"loss": "poly1", "params": {"epsilon": -2.0}}, "F": {"loss": "focal"}}
    specs = pcl_vs_dice.comparison_specs(["CE", "LS"], 0.1, extra_settings=extra)  # names only: built later
    with pytest.raises(ValueError, match=r"^extra_settings\['Poly-1'\]\.params\.epsilon: must be a number in \[-1"):
        check_settings_values(specs, extra)  # your class's own rule
    with pytest.raises(ValueError, match=r"^extra_settings\['F'\]\.params\.gamma: must be"):
        check_settings_values(
            pcl_vs_dice.comparison_specs(
                ["CE", "LS"], 0.1, extra_settings={"F": {"loss": "focal", "params": {"gamma": -1}}}
            ),
            {"F": {"loss": "focal", "params": {"gamma": -1}}},
        )
    with pytest.raises(ValueError, match=r"^epsilon: must be a number in \[0, 1\), got 1\.5"):  # the notebook's own
        check_settings_values(pcl_vs_dice.comparison_specs(["CE", "LS"], 1.5))
    costs = [[0, 1], [1, 0]]  # 2 x 2 beside a PCL form's own rule: built with stand-in counts per row
    fine = pcl_vs_dice.comparison_specs(
        ["CE", "LS", "PCL expected_cost (global)"], 0.1, costs, {"F": {"loss": "focal"}}
    )
    assert check_settings_values(fine, {"F": {"loss": "focal"}}) == fine


def test_a_loss_requiring_label_counts_gets_the_training_split_s():
    from workbench.data import load_splits
    from workbench.train import LossSpec, loss_from_spec, needs_label_counts

    register_loss("counted", NeedsCounts)
    splits = load_splits({"source": "sample_relevance", "max_train_samples": 60, "max_eval_samples": 20})
    assert needs_label_counts(LossSpec("counted")) and not needs_label_counts(
        LossSpec("counted", {"label_counts": [1]})
    )
    loss = loss_from_spec(LossSpec("counted", {"power": 1.0}), splits["train"])
    counts = np.bincount(np.asarray(splits["train"]["label"]), minlength=3)
    torch.testing.assert_close(loss.loss.weights, torch.as_tensor(1 / counts, dtype=torch.float64))


def test_extra_rows_are_the_evidence_rows_of_compare():
    from workbench.evidence import Claim, compare
    from workbench.train import extra_rows

    rng = np.random.default_rng(0)
    gold = rng.integers(0, 3, 120)
    predictions = {
        (label, seed): np.where(rng.random(120) < share, gold, rng.integers(0, 3, 120))
        for label, share in (("CE", 0.6), ("LS", 0.6), ("Poly-1", 0.7))
        for seed in (0, 1)
    }
    extra = {"Poly-1": {"loss": "poly1", "params": {"epsilon": 1.0}}}
    counts = [40, 40, 40]
    rows = extra_rows(
        extra,
        predictions,
        ("CE", "LS", "PCL reference"),  # PCL reference did not run: no row
        y_true=gold,
        train_counts=counts,
        test="test",
        setting="probe, argmax",
        metrics=("macro_f1", "macro_mae"),
        num_labels=3,
        n_resamples=200,
    )
    assert [(row["method"], row["baseline"], row["metric"]) for row in rows] == [
        ("Poly-1", "CE", "macro_f1"),
        ("Poly-1", "CE", "macro_mae"),
        ("Poly-1", "LS", "macro_f1"),
        ("Poly-1", "LS", "macro_mae"),
    ]
    first = rows[0]
    assert first["paper"] == "extra_settings (no paper's claim)" and first["where"] == 'Poly-1: poly1 {"epsilon": 1.0}'
    by_seed = {label: {seed: predictions[label, seed] for seed in (0, 1)} for label in ("CE", "Poly-1")}
    direct = compare(
        Claim(first["paper"], first["where"], first["quote"]),
        setting="probe, argmax",
        method="Poly-1",
        baseline="CE",
        metric="macro_f1",
        y_true=gold,
        method_predictions=by_seed["Poly-1"],
        baseline_predictions=by_seed["CE"],
        test="test",
        num_labels=3,
        train_counts=counts,
        n_resamples=200,
    )
    assert first == direct  # the same statistics as every other row
    # one decision rule for both sides, the trivial baseline of the training prior, no paper's difference
    assert (first["decision_rule"], first["paper_difference"]) == ("argmax", None)
    assert first["trivial"] == direct["trivial"] and first["verdict"] == direct["verdict"]
    claimed = {"Poly-1": {**extra["Poly-1"], "claim": {"paper": "arXiv 2204.12511", "where": "abstract", "quote": "q"}}}
    rows = extra_rows(
        claimed,
        predictions,
        ("CE",),
        y_true=gold,
        train_counts=counts,
        test="t",
        setting="s",
        metrics=("macro_f1",),
        num_labels=3,
        n_resamples=200,
    )
    assert (rows[0]["paper"], rows[0]["where"], rows[0]["quote"]) == ("arXiv 2204.12511", "abstract", "q")


def test_an_extra_setting_that_trains_as_a_named_one_is_an_identity_row_as_the_built_in_ones():
    from workbench.evidence import IDENTICAL, assess
    from workbench.train import LossSpec, extra_rows

    rng = np.random.default_rng(1)
    gold = rng.integers(0, 3, 150)
    ls = {seed: np.where(rng.random(150) < 0.6, gold, rng.integers(0, 3, 150)) for seed in (0, 1)}
    ce = {seed: np.where(rng.random(150) < 0.6, gold, rng.integers(0, 3, 150)) for seed in (0, 1)}
    other = {seed: np.where(rng.random(150) < 0.7, gold, rng.integers(0, 3, 150)) for seed in (0, 1)}
    extra = {
        "LS again": {"loss": "ls", "params": {"epsilon": 0.1}},  # the named LS's loss and epsilon: trains as LS
        "LS by default": {"loss": "ls"},  # epsilon left at its default, 0.1: the same
        "PCL as released": {"loss": "pcl", "params": {"variant": "reference", "epsilon": 0.1}},  # LS + constants
        "LS 0.2": {"loss": "ls", "params": {"epsilon": 0.2}},  # another epsilon: a test
        "PCL weighted": {"loss": "pcl", "params": {"variant": "weighted", "epsilon": 0.1}},  # a gradient of its own
    }
    predictions = {("LS", seed): ls[seed] for seed in ls} | {("CE", seed): ce[seed] for seed in ce}
    for label in extra:
        same = label in ("LS again", "LS by default", "PCL as released")
        predictions |= {(label, seed): (ls if same else other)[seed] for seed in (0, 1)}
    specs = {"CE": LossSpec("ce"), "LS": LossSpec("ls", {"epsilon": 0.1})}  # as the notebook trained them
    common = {"y_true": gold, "train_counts": [50, 50, 50], "test": "t", "setting": "s", "num_labels": 3}
    rows = extra_rows(extra, predictions, ("CE", "LS"), metrics=("macro_f1",), n_resamples=200, specs=specs, **common)
    against_ls = {row["method"]: row for row in rows if row["baseline"] == "LS"}
    for label in ("LS again", "LS by default", "PCL as released"):
        row = against_ls[label]
        assert (row["kind"], row["verdict"]) == ("identity", IDENTICAL), label
        assert (row["n_seeds"], row["identical_seeds"], row["n_test"]) == (2, 2, 150)
        assert assess([row])[0]["status"] == IDENTICAL  # set apart from the tested family, as the built-in ones
    assert {against_ls[label]["kind"] for label in ("LS 0.2", "PCL weighted")} == {"comparison"}
    assert {row["kind"] for row in rows if row["baseline"] == "CE"} == {"comparison"}  # against CE: tests
    assert len(rows) == len(extra) * 2  # one identity row, or one row per metric, for each pair
    unknown = extra_rows(extra, predictions, ("LS",), metrics=("macro_f1",), n_resamples=200, **common)
    assert {row["kind"] for row in unknown} == {"comparison"}  # without the references' specs nothing is decided


def test_identical_by_construction_is_the_rule_of_the_built_in_identities_and_agrees_with_autograd():
    from workbench.studies.pcl import GRADIENT_FREE, PCL_SETTINGS, gradient_comparison
    from workbench.train import LossSpec, identical_by_construction

    def rule(a: LossSpec, b: LossSpec) -> bool:
        return bool(identical_by_construction("a", a, "b", b))

    assert rule(LossSpec("focal", {"gamma": 2.0}), LossSpec("focal", {"gamma": 2.0}))
    assert not rule(LossSpec("focal", {"gamma": 2.0}), LossSpec("focal", {"gamma": 1.0}))
    assert rule(LossSpec("ls"), LossSpec("ls", {"epsilon": 0.1}))  # a default written out is the same parameter
    assert not rule(LossSpec("ls", {"epsilon": 0.0}), LossSpec("ce"))  # equal in value, another loss: not decided
    assert rule(LossSpec("pcl", {"variant": "paper", "epsilon": 0.2}), LossSpec("ls", {"epsilon": 0.2}))
    assert not rule(LossSpec("pcl", {"variant": "paper", "epsilon": 0.2}), LossSpec("ls", {"epsilon": 0.1}))
    assert rule(LossSpec("ls", {"epsilon": 0.2}), LossSpec("pcl", {"variant": "reference", "epsilon": 0.2}))
    assert not rule(LossSpec("pcl", {"variant": "expected_cost"}), LossSpec("ls"))
    # the notebooks' own identity rows (PCL as printed and as released against LS) come from the same rule, and it
    # marks exactly the settings whose gradient autograd finds equal to LS's
    table = gradient_comparison(epsilon=0.1)
    same = set(table.loc[table["same_gradient"], "setting"]) - {"LS"}
    assert set(GRADIENT_FREE) == same == {"PCL reference", "PCL paper"}
    assert all(setting in PCL_SETTINGS for setting in GRADIENT_FREE)


# ------------------------------------------------------------------------------------------------ the runner


def _params(tmp_path: Path, **parameters) -> Path:
    folder = tmp_path / "params" / "mine"
    folder.mkdir(parents=True)
    (folder / "05_pcl_vs_dice_walkthrough.yaml").write_text(json.dumps(parameters), encoding="utf-8")
    return tmp_path / "params"


GIVEN = r"params file mine/05_pcl_vs_dice_walkthrough\.yaml: notebook 05_pcl_vs_dice_walkthrough\.ipynb: "


@pytest.mark.parametrize(
    ("parameters", "message"),
    [
        (
            {"loss_modules": ["../nope.py"]},
            rf"{GIVEN}loss_modules\[0\]: no such file: '{re.escape(str(ROOT))}/nope\.py'",
        ),
        (
            {"loss_modules": ["../examples/poly1.py"], "extra_settings": {"P": {"loss": "poly9"}}},
            rf"{GIVEN}extra_settings\['P'\]\.loss: must be one of",
        ),
        (
            {"loss_modules": ["../examples/poly1.py"], "extra_settings": {"P": {"loss": "poly1", "params": {"e": 1}}}},
            rf"{GIVEN}extra_settings\['P'\]\.params: parameters of 'poly1': must be among",
        ),
        ({"extra_settings": {"P": {"loss": "poly1"}}}, rf"{GIVEN}extra_settings\['P'\]\.loss: must be one of"),
        (  # a workbench loss's number outside its declared range (workbench.losses.FOCAL_GAMMA)
            {"extra_settings": {"F": {"loss": "focal", "params": {"gamma": -1.0}}}},
            rf"{GIVEN}extra_settings\['F'\]\.params\.gamma: must be",
        ),
        (  # a value your class refuses when it is built
            {
                "loss_modules": ["../examples/poly1.py"],
                "extra_settings": {"P": {"loss": "poly1", "params": {"epsilon": -2}}},
            },
            rf"{GIVEN}extra_settings\['P'\]\.params\.epsilon: must be",
        ),
    ],
)
def test_the_runner_checks_loss_modules_and_extra_settings_before_any_kernel(tmp_path, parameters, message):
    from workbench.runs import run

    # the notebook's checks cell, run by the runner in its own process (one pre-kernel check)
    with pytest.raises(ValueError, match="^" + message):
        run(
            params_set="mine",
            only=["05"],
            notebooks_dir=ROOT / "notebooks",
            params_dir=_params(tmp_path, **parameters),
            outputs_dir=tmp_path / "out",
        )
    assert not (tmp_path / "out").exists()


def test_the_runner_checks_each_notebook_s_modules_alone(tmp_path):
    from workbench.runs.plan import plan_executions

    text = (
        "from torch import nn\nfrom workbench.losses import register_loss\n\n\nclass L(nn.Module):\n"
        "    def forward(self, logits, target):\n        return logits.mean() * {}\n\n\nregister_loss('mine', L)\n"
    )
    for folder, scale in (("a", 1), ("b", 2)):  # two files registering one name, one per notebook
        (tmp_path / folder).mkdir()
        _module(tmp_path / folder, "mine.py", text.format(scale))
    params = tmp_path / "params" / "mine"
    params.mkdir(parents=True)
    for stem, folder in (("02_propensity_corrected_loss", "a"), ("05_pcl_vs_dice_walkthrough", "b")):
        parameters = {"loss_modules": [str(tmp_path / folder / "mine.py")], "extra_settings": {"M": {"loss": "mine"}}}
        (params / f"{stem}.yaml").write_text(json.dumps(parameters), encoding="utf-8")
    notebooks = [
        ROOT / "notebooks" / f"{stem}.ipynb" for stem in ("02_propensity_corrected_loss", "05_pcl_vs_dice_walkthrough")
    ]
    # each notebook's checks cell imports its own module: no "already registered"
    assert len(plan_executions(notebooks, tmp_path / "params", "mine")) == 2
    assert "mine" not in available_losses()  # the check leaves the runner's registry as it found it


def test_a_pretraining_config_naming_a_loss_of_yours_is_refused_not_ignored(tmp_path):
    from workbench.train import pretrain_mlm

    config = {"loss_modules": [str(POLY1)], "loss": {"name": "poly1"}, "output_dir": str(tmp_path / "run")}
    with pytest.raises(ValueError, match=r"^loss\.name: pretrain_mlm trains with its objective section.*'poly1'"):
        pretrain_mlm(config)
    assert not (tmp_path / "run").exists()


def test_notebook_01_compares_an_extra_setting_with_ce_and_dsc_on_each_training_set():
    from types import SimpleNamespace

    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    from workbench.studies import dice_claims

    rng = np.random.default_rng(1)
    gold = rng.integers(0, 2, 80)
    features = Features({"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])})
    test = Dataset.from_dict({"text": ["x"] * 80, "label": gold.tolist()}, features=features)
    splits = DatasetDict({"train": test, "validation": test, "test": test})
    table8 = {
        (training_set, loss): {
            seed: SimpleNamespace(test_predictions=np.where(rng.random(80) < 0.7, gold, 1 - gold)) for seed in (0, 1)
        }
        for training_set in ("original", "+negative")
        for loss in ("CE", "DSC", "Poly-1")
    }
    extra = {"Poly-1": {"loss": "poly1"}}
    rows = dice_claims.extra_setting_rows(splits, "test", "sample", table8, extra, n_resamples=100)
    assert [(row["setting"], row["baseline"], row["metric"]) for row in rows] == [
        ("sample, original", "CE", "f1_positive"),
        ("sample, original", "DSC", "f1_positive"),
        ("sample, +negative", "CE", "f1_positive"),
        ("sample, +negative", "DSC", "f1_positive"),
    ]
    assert all(row["method"] == "Poly-1" and row["n_seeds"] == 2 for row in rows)
    assert dice_claims.extra_setting_rows(splits, "test", "sample", table8, {}) == []  # no extra setting, no row
