"""docs/your_own_loss.md, step by step (not its prose): write a loss module, register it, build and check it, draw its
curves, and run it headless beside notebook 05's losses with ``loss_modules`` and ``extra_settings`` until its rows are
on the results page."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from workbench.evidence import assess
from workbench.losses import build_loss, import_loss_modules, registry_restored

ROOT = Path(__file__).resolve().parents[1]
OWN_LOSS_SET = ROOT / "params" / "own_loss" / "05_pcl_vs_dice_walkthrough.yaml"
SMOKE = {  # the smoke set's scale (params/smoke), two seeds so that the seed pairs resample
    "seeds": [0, 1],
    "data": {
        "source": "sample_relevance",
        "seed": 0,
        "max_train_samples": 300,
        "max_eval_samples": 100,
        "max_length": 32,
    },
    "training": {"num_train_epochs": 2, "per_device_train_batch_size": 64, "learning_rate": 0.01, "weight_decay": 0.0},
}


@pytest.fixture(autouse=True)
def registry_kept():
    """Whatever a test registers or imports is gone after it (the other tests see the workbench's own losses)."""
    with registry_restored():
        yield


@pytest.mark.slow
def test_the_walkthrough_from_a_loss_module_to_its_rows_on_the_results_page(tmp_path):
    from workbench.runs import run
    from workbench.viz import LinkedCurve, LossCurvePanel, figure_loss_curves, loss_curves

    # 1. write it: the example module, as a user's file of their own
    module = tmp_path / "my_losses" / "poly1.py"
    module.parent.mkdir()
    module.write_text((ROOT / "examples" / "poly1.py").read_text(encoding="utf-8"), encoding="utf-8")

    # 2. register and check it
    assert import_loss_modules([module]) == {str(module.resolve()): ["poly1"]}
    loss = build_loss("poly1", epsilon=1.0)
    logits = torch.randn(8, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0), requires_grad=True)
    target = torch.tensor([0, 1, 2, 1, 1, 0, 2, 1])
    p_t = logits.softmax(-1)[torch.arange(8), target]
    torch.testing.assert_close(loss(logits, target), (-p_t.log() + 1.0 * (1 - p_t)).mean())
    assert torch.autograd.gradcheck(lambda z: loss(z, target), (logits,))

    # 3. its curves, beside CE, LS, PCL and DSC, and in the slider panel
    curves = loss_curves("poly1", epsilon=1.0)
    positive = curves[curves["example"] == "positive"]
    np.testing.assert_allclose(positive["dloss_dp"], -1 / positive["p"] - 1.0, rtol=1e-9)
    figure = figure_loss_curves(
        [
            ("CE", "ce", {}),
            ("LS", "ls", {"epsilon": 0.1}),
            ("PCL expected_cost", "pcl", {"variant": "expected_cost", "label_counts": [48997, 125429, 25574]}),
            ("DSC", "dsc", {"preset": "paper"}),
            ("Poly-1", "poly1", {"epsilon": 1.0}),
        ],
        derivative=("dloss_dp", "dloss_dlogit"),
        num_classes=3,
    )
    assert len(figure.data) == 5 * 3  # five losses, three panels
    panel = LossCurvePanel(
        [LinkedCurve("ce", label="CE"), LinkedCurve("poly1", linked=("epsilon",), label="Poly-1")],
        slider_names=("epsilon",),
        slider_ranges={"epsilon": {"value": 1.0, "min": -1.0, "max": 4.0, "step": 0.5}},
        interactive=False,
    )
    assert panel.page_figure().layout.sliders[0].currentvalue.prefix == "epsilon = "

    # 4. run it headless beside notebook 05's losses: the shipped set at smoke scale, the module by its path
    parameters = {**yaml.safe_load(OWN_LOSS_SET.read_text(encoding="utf-8")), **SMOKE}
    parameters["loss_modules"] = [str(module)]
    assert parameters["evidence"] is True and list(parameters["extra_settings"]) == ["Poly-1"]
    (tmp_path / "params" / "mine").mkdir(parents=True)
    (tmp_path / "params" / "mine" / OWN_LOSS_SET.name).write_text(yaml.safe_dump(parameters), encoding="utf-8")
    report = run(
        params_set="mine",
        only=["05"],
        notebooks_dir=ROOT / "notebooks",
        params_dir=tmp_path / "params",
        outputs_dir=tmp_path / "out",
        run_id="mine",
        jobs=1,
        stream=io.StringIO(),
    )
    assert {o.execution.name: f"cell {o.failed_cell}: {o.error}" for o in report.failed} == {}
    record = json.loads((report.outcomes[0].output_dir / "metrics.json").read_text(encoding="utf-8"))
    assert {row["setting"] for row in record["runs"]} >= {"CE", "LS", "DSC reference", "Poly-1"}
    assert record["metrics"]["poly-1_macro_f1"]["n"] == 2
    rows = [row for row in record["evidence"]["claims"] if row["method"] == "Poly-1"]
    # against CE, LS and DSC as released on the notebook's macro-F1 (PCL as released trains as LS: no repeated rows)
    assert [(row["baseline"], row["metric"]) for row in rows] == [
        ("CE", "macro_f1"),
        ("LS", "macro_f1"),
        ("DSC reference", "macro_f1"),
    ]
    assert all(row["decision_rule"] == "argmax" and row["paper_difference"] is None for row in rows)
    claim = parameters["extra_settings"]["Poly-1"]["claim"]
    assert all((row["paper"], row["quote"]) == (claim["paper"], claim["quote"]) for row in rows)
    assert all(row["n_seeds"] == 2 and row["ci_low"] <= row["difference"] <= row["ci_high"] for row in rows)
    page = (report.run_dir / "results.md").read_text(encoding="utf-8")
    # on the page as every row: in the tested table, or among the rows not testable at this scale (smoke scale)
    judged = dict(zip(map(id, record["evidence"]["claims"]), assess(record["evidence"]["claims"])))
    for row in rows:
        if judged[id(row)]["verdict"] is not None:
            line = f"| probe, argmax | argmax | Poly-1 | {row['baseline']} | macro-F1 (claimed: better) |"
        else:
            line = f"probe, argmax: Poly-1 vs {row['baseline']} (macro-F1)"
        assert line in page, line
