"""Every notebook in notebooks/: committed clean, valid params in every set, and executes end to end.

The end-to-end test runs all notebooks once through the papermill runner with
the ``smoke`` parameter set, exactly as ``python -m workbench run`` does.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml
from notebook_hygiene import check_notebook_clean

from workbench.runs import PARAMS_SETS, run
from workbench.runs.plan import plan_executions

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
EXPECTED = [
    "01_dice_loss",
    "02_propensity_corrected_loss",
    "03_true_negatives",
    "04_auxiliary_labels",
    "05_pcl_vs_dice_walkthrough",
]


def test_the_five_notebooks_are_there():
    assert [path.stem for path in NOTEBOOKS] == EXPECTED


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_is_committed_clean(notebook):
    assert check_notebook_clean(notebook) == []


@pytest.mark.parametrize("params_set", PARAMS_SETS)
def test_every_params_set_names_only_known_parameters(params_set):
    for notebook in NOTEBOOKS:
        assert (ROOT / "params" / params_set / f"{notebook.stem}.yaml").is_file(), (params_set, notebook.stem)
    executions = plan_executions(NOTEBOOKS, ROOT / "params", params_set)
    assert [execution.name for execution in executions] == EXPECTED
    for execution in executions:
        assert execution.parameters.get("interactive") is False, (params_set, execution.name)


@pytest.mark.slow
def test_every_notebook_executes_with_the_smoke_set(tmp_path):
    report = run(
        params_set="smoke",
        notebooks_dir=ROOT / "notebooks",
        params_dir=ROOT / "params",
        outputs_dir=tmp_path,
        run_id="smoke",
        stream=io.StringIO(),
    )
    failures = {o.execution.name: f"cell {o.failed_cell}: {o.error}" for o in report.failed}
    assert failures == {}
    assert [o.execution.name for o in report.outcomes] == EXPECTED
    for outcome in report.outcomes:
        folder = outcome.output_dir
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics, outcome.execution.name
        assert (folder / f"{outcome.execution.name}.html").is_file()
        assert list((folder / "figures").glob("*.html")), f"{outcome.execution.name} saved no figure"
        # no red stderr boxes in a headless run (e.g. transformers' "mtime may not be reliable" warning)
        executed = json.loads((folder / f"{outcome.execution.name}.ipynb").read_text())
        stderr = [
            (index, "".join(output.get("text", ""))[:200])
            for index, cell in enumerate(executed["cells"])
            for output in cell.get("outputs", [])
            if output.get("name") == "stderr"
        ]
        assert not stderr, f"{outcome.execution.name} wrote to stderr: {stderr}"
    index = (report.run_dir / "index.html").read_text()
    for name in EXPECTED:
        assert name in index
    assert (report.run_dir / "summary.csv").is_file()
    # a run folder keeps results, not trained models (notebook 03 trains 30-odd: 55 MB of a 66 MB default run)
    weights = [
        path.relative_to(report.run_dir)
        for pattern in ("*.safetensors", "pytorch_model*.bin", "optimizer.pt")
        for path in report.run_dir.rglob(pattern)
    ]
    assert not weights, f"model weights left in the run folder: {weights[:5]}"


def _relative_paths(params_set: str) -> dict[str, Path]:
    """Every relative file path named in a params set (also inside section mappings), resolved from
    notebooks/ (their working directory)."""
    paths = {}

    def walk(name: str, value) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{name}.{key}", item)
        elif isinstance(value, str) and value.startswith("../"):
            paths[name] = (ROOT / "notebooks" / value).resolve()

    for file in sorted((ROOT / "params" / params_set).glob("*.yaml")):
        walk(file.stem, yaml.safe_load(file.read_text()) or {})
    return paths


def test_gpu_params_paths_resolve_from_the_notebooks_folder():
    paths = {name: path for name, path in _relative_paths("gpu").items() if "shared" in path.parts}
    assert paths, "the gpu set names real data files"
    present = {name: path.exists() for name, path in paths.items()}
    if not any(present.values()):
        pytest.skip("the real data sets are not beside this checkout")
    assert all(present.values()), {name: str(paths[name]) for name, ok in present.items() if not ok}
