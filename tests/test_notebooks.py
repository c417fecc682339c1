"""Every notebook in notebooks/: committed clean, valid params in every set, and executes end to end.

The end-to-end test runs all notebooks once through the papermill runner with
the ``smoke`` parameter set, exactly as ``python -m workbench run`` does.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
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


@pytest.mark.parametrize("params_set", [*PARAMS_SETS, "own"])
def test_every_params_set_names_only_known_parameters(params_set):
    for notebook in NOTEBOOKS:
        assert (ROOT / "params" / params_set / f"{notebook.stem}.yaml").is_file(), (params_set, notebook.stem)
    executions = plan_executions(NOTEBOOKS, ROOT / "params", params_set)
    assert [execution.name for execution in executions] == EXPECTED
    for execution in executions:
        assert execution.parameters.get("interactive") is False, (params_set, execution.name)


def _cells(notebook: Path) -> list:
    return nbformat.read(str(notebook), as_version=4).cells


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_writes_its_method_in_plain_torch_checked_against_the_library(notebook):
    method = [cell for cell in _cells(notebook) if "method" in cell.metadata.get("tags", [])]
    assert method and all(cell.cell_type == "code" and "torch.testing.assert_close" in cell.source for cell in method)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_ends_with_exercises_whose_answers_are_solution_cells(notebook):
    cells = _cells(notebook)
    start = next(index for index, cell in enumerate(cells) if cell.source.startswith("## Exercises"))
    solutions = [index for index, cell in enumerate(cells) if "solution" in cell.metadata.get("tags", [])]
    assert 2 <= len(solutions) <= 3 and min(solutions) > start
    assert all("solution" not in cell.metadata.get("tags", []) for cell in cells[:start])


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_prints_its_run_from_the_study_and_cites_papers_not_folders(notebook):
    cells = _cells(notebook)
    code = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    assert "This run" not in code and ".this_run(" in code  # one study call, not an f-string in the notebook
    assert all("shared/papers" not in cell.source for cell in cells)
    first = cells[0].source
    assert "arXiv:" in first or "2022.coling-1.97" in first


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


def _values(params_set: str) -> dict[str, object]:
    """Every value of a params set by its dotted name (inside section mappings too)."""
    values = {}

    def walk(name: str, value) -> None:
        values[name] = value
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{name}.{key}", item)

    for file in sorted((ROOT / "params" / params_set).glob("*.yaml")):
        walk(file.stem, yaml.safe_load(file.read_text()) or {})
    return values


def test_the_gpu_set_reads_real_data_from_the_data_root_only():
    from workbench.data import RELEASES

    values = _values("gpu")
    outside = {name: path for name, path in _relative_paths("gpu").items() if "models" not in path.parts}
    assert not outside, f"relative paths outside the data root: {outside}"
    rooted = {name: value for name, value in values.items() if isinstance(value, str) and "WORKBENCH_DATA" in value}
    files = {file.path for release in RELEASES.values() for file in release.files}
    assert rooted and all(value.removeprefix("$WORKBENCH_DATA/") in files for value in rooted.values()), rooted
    sections = {name: value for name, value in values.items() if isinstance(value, dict) and "source" in value}
    named = {name: value["source"] for name, value in sections.items() if value["source"] in RELEASES}
    assert {"qbqtc", "chnsenticorp"} <= set(named.values()), sections
    assert all("path" not in sections[name] for name, source in named.items() if source != "corpus"), sections


@pytest.mark.slow
def test_notebook_01_runs_the_own_set_on_three_topics(tmp_path):
    from test_data_own_data import news_csv  # 300 Chinese headlines in 3 imbalanced topics (60 / 27 / 13 %)

    data = news_csv(tmp_path / "news_zh.csv")
    (tmp_path / "params" / "own").mkdir(parents=True)
    text = (ROOT / "params" / "own" / "01_dice_loss.yaml").read_text(encoding="utf-8")
    text = text.replace("../own_data.csv", str(data)).replace("seeds: [0, 1, 2]", "seeds: [0]")
    (tmp_path / "params" / "own" / "01_dice_loss.yaml").write_text(text, encoding="utf-8")
    report = run(
        params_set="own",
        only=["01"],
        notebooks_dir=ROOT / "notebooks",
        params_dir=tmp_path / "params",
        outputs_dir=tmp_path / "out",
        run_id="own01",
        jobs=1,
        stream=io.StringIO(),
    )
    assert {o.execution.name: f"cell {o.failed_cell}: {o.error}" for o in report.failed} == {}
    record = json.loads((report.outcomes[0].output_dir / "metrics.json").read_text())
    assert record["positive_class"] == "科技"  # the smallest topic, scored against the other two
    counts = {row["setting"]: row for row in record["table8_training_sets"]["sets"]}
    assert counts["+positive"]["positive"] == counts["+positive"]["negative"]  # the smallest topic grown to the rest
    assert all(0 <= value["mean"] <= 1 for value in record["metrics"].values() if isinstance(value, dict))


@pytest.mark.slow
def test_the_own_set_runs_on_a_file_the_user_names(tmp_path):
    from test_data_own_data import news_csv  # 300 Chinese headlines in 3 imbalanced topics, columns text,label

    data = news_csv(tmp_path / "news_zh.csv")
    (tmp_path / "params" / "own").mkdir(parents=True)
    for file in (ROOT / "params" / "own").glob("*.yaml"):
        text = file.read_text(encoding="utf-8").replace("../own_data.csv", str(data))
        (tmp_path / "params" / "own" / file.name).write_text(
            text.replace("seeds: [0, 1, 2]", "seeds: [0]"), encoding="utf-8"
        )
    report = run(
        params_set="own",
        only=["05"],
        notebooks_dir=ROOT / "notebooks",
        params_dir=tmp_path / "params",
        outputs_dir=tmp_path / "out",
        run_id="own",
        jobs=1,
        stream=io.StringIO(),
    )
    assert {o.execution.name: f"cell {o.failed_cell}: {o.error}" for o in report.failed} == {}
    metrics = json.loads((report.outcomes[0].output_dir / "metrics.json").read_text())
    assert (
        metrics["metrics"]["ce_macro_f1"]["mean"] > metrics["metrics"]["majority_macro_f1"]
    )  # more than the majority class
    assert "far_error_rate" not in json.dumps(metrics["runs"])  # topics are not ordered
    # the notebook says what it loaded from the data (not the sample's query-title pairs) and warns of small classes
    executed = nbformat.read(report.outcomes[0].output_dir / "05_pcl_vs_dice_walkthrough.ipynb", as_version=4)
    printed = "".join(
        output.get("text", "") for cell in executed.cells for output in cell.get("outputs", []) if output.get("text")
    )
    said = printed[printed.index("Data: ") :].splitlines()[0]
    assert "news_zh.csv" in said and "3 unordered classes" in said and "query-title" not in said
    assert "Warning: the test split holds fewer than 20 examples" in said  # 30 test headlines in 3 topics


def test_the_class_set_runs_notebook_05_with_its_sliders_before_any_training():
    (walkthrough,) = [notebook for notebook in NOTEBOOKS if notebook.stem.startswith("05")]
    assert sorted(path.name for path in (ROOT / "params" / "class").iterdir()) == [f"{walkthrough.stem}.yaml"]
    (execution,) = plan_executions([walkthrough], ROOT / "params", "class")
    assert execution.parameters["interactive"] is False and len(execution.parameters["seeds"]) >= 3
    cells = [cell.source for cell in _cells(walkthrough) if cell.cell_type == "code"]
    training = next(index for index, source in enumerate(cells) if "run_ablation(" in source)
    panels = [index for index, source in enumerate(cells) if ".display(" in source]
    assert panels and max(panels) < training  # the sliders come before the one training cell
    assert not any(re.search(r"\bcomparison\.", source) for source in cells[:training])  # needs no trained model


def test_run_help_lists_every_params_set_present(monkeypatch, capsys):
    from workbench.__main__ import main

    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    sets = [folder.name for folder in (ROOT / "params").iterdir() if folder.is_dir() and any(folder.glob("0*.yaml"))]
    assert {"own", "class"} <= set(sets)
    for name in sets:
        assert f" {name} (" in shown or f" {name}," in shown, name
    assert "examples" not in shown  # the trainer configs are no set


def ipykernel_spec() -> dict:
    """The kernelspec JupyterLab writes into a notebook run with the environment's own kernel (ipykernel's python3)."""
    from ipykernel.kernelspec import get_kernel_dict

    spec = get_kernel_dict()
    return {"display_name": spec["display_name"], "language": spec["language"], "name": "python3"}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebooks_are_committed_with_the_kernelspec_jupyterlab_writes(notebook):
    # JupyterLab rewrites the kernelspec on every save: committed as it writes it, a save leaves git status clean
    assert dict(nbformat.read(notebook, as_version=4).metadata.kernelspec) == ipykernel_spec()


def test_a_notebook_saved_with_outputs_is_committed_clean_through_the_nbstripout_filter(tmp_path):
    # make venv installs nbstripout as the repository's git filter: JupyterLab saves outputs into the file,
    # git stores the notebook without them, and the cleanliness check judges what git stores
    pytest.importorskip("nbstripout")
    if shutil.which("git") is None or shutil.which("make") is None:
        pytest.skip("needs git and make")
    notebook = tmp_path / "05.ipynb"
    notebook.write_bytes((ROOT / "notebooks" / "05_pcl_vs_dice_walkthrough.ipynb").read_bytes())

    def git(*arguments: str) -> str:
        identity = ["-c", "user.name=test", "-c", "user.email=test@example.org"]
        return subprocess.run(
            ["git", *identity, *arguments], cwd=tmp_path, capture_output=True, text=True, check=True
        ).stdout

    git("init", "-q")
    git("add", notebook.name)
    git("commit", "-q", "-m", "a clean notebook")
    make = ["make", "--no-print-directory", "-f", str(ROOT / "Makefile"), "notebook-filter", f"PY={sys.executable}"]
    subprocess.run(make, cwd=tmp_path, check=True, capture_output=True)  # what make venv runs
    assert git("status", "--porcelain") == ""  # the filter leaves a clean notebook as it is (cell ids kept)
    saved = nbformat.read(notebook, as_version=4)  # as JupyterLab 4 saves it after a run, with the environment's kernel
    for count, cell in enumerate((cell for cell in saved.cells if cell.cell_type == "code"), start=1):
        cell.execution_count = count
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="a result\n")]
        cell.metadata["execution"] = {"iopub.execute_input": "2026-11-28T10:00:00.000Z"}
        cell.metadata["jupyter"] = {"source_hidden": count == 2}
        cell.metadata["scrolled"] = True
    saved.metadata.kernelspec = ipykernel_spec()  # JupyterLab writes the kernel's own display name
    saved.metadata.language_info = {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.12.3",
    }
    saved.metadata.widgets = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    nbformat.write(saved, notebook)
    assert check_notebook_clean(notebook) == []  # judged as git stores it
    git("add", notebook.name)  # git add stores the notebook as the filter cleans it
    assert git("status", "--porcelain") == ""  # the same as committed: nothing to commit, the outputs never reach git
    git("config", "--unset", "filter.nbstripout.clean")  # without the filter the file itself is judged
    assert any("has outputs" in problem for problem in check_notebook_clean(notebook))


def test_the_run_commands_the_notebooks_give_plan_as_written_on_a_set_where_models_learn():
    # exercise 3 of notebook 05 sent students to the smoke set, the tests' set, where the models barely learn
    import shlex

    from workbench.__main__ import build_parser
    from workbench.runs.options import parse_sweep
    from workbench.runs.params_sets import select_notebooks

    commands = [
        " ".join(span.split())
        for notebook in NOTEBOOKS
        for cell in _cells(notebook)
        if cell.cell_type == "markdown"
        for span in re.findall(r"`(python -m workbench run [^`]*)`", cell.source)
    ]
    assert commands
    for command in commands:
        args = build_parser().parse_args(shlex.split(command)[3:])
        assert args.params_set != "smoke", command
        notebooks = select_notebooks(ROOT / args.notebooks_dir, args.only)
        assert plan_executions(notebooks, ROOT / args.params_dir, args.params_set, parse_sweep(args.sweep)), command
