"""Runner: planning/validation (no kernel), then two small real runs through papermill."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_notebook
from notebook_hygiene import check_notebook_clean

from workbench.__main__ import main
from workbench.metrics_file import metric_statistics, read_metrics, write_json, write_metrics
from workbench.runs import run
from workbench.runs.assets import inline_plotly_js
from workbench.runs.execute import ensure_kernel, new_run_dir
from workbench.runs.options import MAX_SLUG, cell_slug, parse_assignments, parse_seeds, parse_sweep
from workbench.runs.params_sets import load_params, select_notebooks
from workbench.runs.plan import check_paths, plan_executions

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
OK = FIXTURES / "ok_metrics.ipynb"
FAILS = FIXTURES / "fails_in_cell2.ipynb"


def _quiet() -> io.StringIO:
    """A stream for a run's status lines that the test does not read."""
    return io.StringIO()


def _write_notebook(path: Path, parameters_source: str, body: str = "pass") -> Path:
    notebook = new_notebook(
        cells=[new_code_cell(parameters_source, metadata={"tags": ["parameters"]}), new_code_cell(body)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(notebook, path)
    return path


# ----------------------------------------------------------------------------- parsing and planning


def _params(tmp_path: Path, files: dict[str, str] | None = None, name: str = "default") -> Path:
    """A params folder ``tmp_path/params`` with the set ``name`` holding ``files`` (stem -> YAML)."""
    folder = tmp_path / "params" / name
    folder.mkdir(parents=True, exist_ok=True)
    for stem, text in (files or {}).items():
        (folder / f"{stem}.yaml").write_text(text, encoding="utf-8")
    return tmp_path / "params"


def test_parse_sweep_reads_yaml_values():
    assert parse_sweep(["epsilon=0.1,0.2", "name=abc", "flag=true"]) == {
        "epsilon": [0.1, 0.2],
        "name": ["abc"],
        "flag": [True],
    }
    assert parse_sweep(["losses=[CE,DSC],[FL]", "lr=1e-3,2e-3"]) == {
        "losses": [["CE", "DSC"], ["FL"]],
        "lr": [1e-3, 2e-3],
    }
    assert parse_sweep(["flag=1,true"]) == {"flag": [1, True]}  # equal in Python, yet a count is no flag
    assert parse_sweep(["x=''", "path='a,b',c", "mixed=a: b,c"]) == {
        "x": [""],
        "path": ["a,b", "c"],
        "mixed": [{"a": "b"}, "c"],
    }


@pytest.mark.parametrize(
    ("specs", "names"),
    [
        (["epsilon"], "--sweep 'epsilon'"),
        (["=1,2"], "--sweep '=1,2'"),
        (["epsilon="], "--sweep 'epsilon='"),
        (["x=1", "x=2"], "--sweep: parameter 'x'"),
        (["epsilon=0.1,0.10"], "--sweep epsilon: the value 0.1"),
        (["x=true,True"], "--sweep x: the value True"),  # yes is a string (YAML as written)
        (["epsilon=.nan,.NaN"], "--sweep epsilon: the value nan"),  # NaN equals nothing, yet is one point
        (["x=[1],[1.0]"], "--sweep x: the value [1]"),
        (["x=0.1,,0.2"], "--sweep x:1:"),
        (["x=0.1,"], "--sweep x:"),  # an empty value: a typo, not the empty string
        (["x=a\udcffb"], "--sweep x:"),  # a byte the terminal's encoding could not read
        (["x=[1,2"], "--sweep x:1:"),  # invalid YAML, with its line
    ],
)
def test_parse_sweep_refuses_bad_specs_naming_the_key(specs, names):
    with pytest.raises(ValueError, match="^" + re.escape(names)):
        parse_sweep(specs)


@pytest.mark.parametrize("text", ["a,b", "1,1", "-1", str(2**32), "", "1,,2"])
def test_parse_seeds_refuses_anything_but_distinct_numpy_seeds(text):
    assert parse_seeds("1,2,3") == [1, 2, 3] and parse_seeds(str(2**32 - 1)) == [2**32 - 1]
    with pytest.raises(ValueError, match=r"^--seeds " + re.escape(repr(text))):
        parse_seeds(text)


def test_parse_assignments():
    assert parse_assignments(["timeout_min=60", "slurm_partition=gpu"], "--slurm") == {
        "timeout_min": 60,
        "slurm_partition": "gpu",
    }
    for specs in (["timeout_min"], ["=1"], ["a=1", "a=2"]):
        with pytest.raises(ValueError, match=r"^--slurm "):
            parse_assignments(specs, "--slurm")


def test_cell_slug_is_injective_and_bounded():
    assert cell_slug({"epsilon": 0.1, "gamma": 2}) == "epsilon=0.1,gamma=2"
    assert cell_slug({}) == ""
    sanitised = cell_slug({"path": "a/b c"})
    assert sanitised.startswith("path=a_b_c-") and sanitised != cell_slug({"path": "a_b_c"})
    assert cell_slug({"path": "a/b"}) != cell_slug({"path": "a_b"})
    assert cell_slug({"lr": 1e-05, "flag": True, "name": "abc"}) == "lr=1e-05,flag=True,name=abc"  # each reads back
    # texts that read back as another value (or split on their comma) get a hash of the typed point
    colliding = [
        ({"x": "0.1"}, {"x": 0.1}),
        ({"x": None}, {"x": "None"}),
        ({"x": "1"}, {"x": 1}),
        ({"a": "1,b=2", "b": 3}, {"a": 1, "b": "2,b=3"}),
    ]
    for first, second in colliding:
        assert cell_slug(first) != cell_slug(second), (first, second)
    assert cell_slug({"x": "0.1"}).startswith("x=0.1-") and cell_slug({"x": 0.1}) == "x=0.1"
    grid = parse_sweep(["x='0.1',0.1,'1',1,1.5,abc,null,'null',true,'true',[1],'[1]'"])["x"]
    assert len({cell_slug({"x": value}) for value in grid}) == len(grid) == 12
    # a value too long for a folder name (255 bytes): cut, with the hash that keeps points apart
    long_a, long_b = cell_slug({"x": "a" * 300 + "1"}), cell_slug({"x": "a" * 300 + "2"})
    assert long_a != long_b and len(long_a) <= MAX_SLUG + 9 and long_a.startswith("x=aaa")


def test_points_whose_folders_differ_only_in_case_get_a_hash(tmp_path):
    plan = plan_executions([OK], _params(tmp_path), "default", parse_sweep(["x=a,A,b"]))
    slugs = [execution.slug for execution in plan]
    assert len({slug.casefold() for slug in slugs}) == 3  # macOS and Windows would merge x=a and x=A
    assert slugs[2] == "x=b"


def test_select_notebooks_by_stem_and_prefix(tmp_path):
    for name in ("01_dice_loss", "02_pcl", "10_walkthrough"):
        _write_notebook(tmp_path / f"{name}.ipynb", "output_dir = None")
    assert [p.stem for p in select_notebooks(tmp_path)] == ["01_dice_loss", "02_pcl", "10_walkthrough"]
    assert [p.stem for p in select_notebooks(tmp_path, ["02_pcl.ipynb", "01"])] == ["01_dice_loss", "02_pcl"]
    for wanted in ("99", "", " "):  # an empty name is a prefix of every notebook: refused, not all of them
        with pytest.raises(ValueError, match=r"^--only " + re.escape(repr(wanted))):
            select_notebooks(tmp_path, [wanted])
    with pytest.raises(ValueError, match=r"^--notebooks-dir "):
        select_notebooks(tmp_path / "none")


def test_params_sets_are_folders_and_a_missing_file_means_notebook_defaults(tmp_path):
    params = _params(tmp_path, {"01_dice_loss": "gamma: 0.5\n", "bad": "- 1\n- 2\n", "broken": "x: 1\ny: [2\n"}, "mine")
    assert load_params(params, "mine", "01_dice_loss") == {"gamma": 0.5}  # any folder is a set
    assert load_params(params, "mine", "02_other") == {}
    with pytest.raises(ValueError, match=r"bad\.yaml"):
        load_params(params, "mine", "bad")
    with pytest.raises(ValueError, match=r"broken\.yaml:2:"):
        load_params(params, "mine", "broken")
    for name in ("smoke", "../params", "", "mine/.."):
        with pytest.raises(ValueError, match=r"^--params-set " + re.escape(repr(name))):
            load_params(params, name, "01_dice_loss")
    with pytest.raises(ValueError, match=r"^--params-dir "):
        load_params(tmp_path / "nope", "default", "01_dice_loss")


def test_plan_is_the_sweep_grid_and_seeds_set_the_seeds_list(tmp_path):
    params = _params(tmp_path, {"ok_metrics": "x: 5.0\n"})
    plan = plan_executions([OK], params, "default", {"x": [1, 2]}, [7, 8])
    assert [(e.point, e.slug) for e in plan] == [({"x": 1}, "x=1"), ({"x": 2}, "x=2")]
    assert plan[0].parameters == {"x": 1, "seeds": [7, 8]}  # the sweep overrides the params file; one seed list
    single = plan_executions([OK], params, "default")
    assert [(e.parameters, e.slug) for e in single] == [({"x": 5.0}, "")]


def test_plan_sets_interactive_false_and_refuses_it_true(tmp_path):
    notebook = _write_notebook(tmp_path / "widgets.ipynb", "interactive = True\noutput_dir = None")
    params = _params(tmp_path)
    [execution] = plan_executions([notebook], params, "default")
    assert execution.parameters == {"interactive": False}  # a missing params file no longer means live widgets
    with pytest.raises(ValueError, match=r"^--sweep: interactive=True"):
        plan_executions([notebook], params, "default", {"interactive": [True]})
    _params(tmp_path, {"widgets": "interactive: 1\n"})
    with pytest.raises(ValueError, match=r"^params file default/widgets.yaml: interactive=1"):
        plan_executions([notebook], params, "default")


@pytest.mark.parametrize(
    ("params_file", "sweep", "seeds", "names"),
    [
        ("gamma: 1\n", {}, None, "params file default/ok_metrics.yaml: unknown parameter 'gamma'"),
        ("", {"epsilon": [0.1]}, None, "--sweep: unknown parameter 'epsilon'"),
        ("output_dir: /tmp\n", {}, None, "params file default/ok_metrics.yaml: parameter 'output_dir'"),
        ("", {"seeds": [[1]]}, [1, 2], "--seeds:"),
        # seeds a notebook would refuse only once it runs
        ("seeds: [1, 1]\n", {}, None, "params file default/ok_metrics.yaml: seeds"),
        ("", {"seeds": [[0], [2, 2]]}, None, "--sweep: seeds"),
        ("", {"seeds": [[-1]]}, None, "--sweep: seeds"),
        ("seeds: 3\n", {}, None, "params file default/ok_metrics.yaml: seeds"),
    ],
)
def test_plan_refuses_bad_parameter_names(tmp_path, params_file, sweep, seeds, names):
    params = _params(tmp_path, {"ok_metrics": params_file})
    with pytest.raises(ValueError, match="^" + re.escape(names)):
        plan_executions([OK], params, "default", sweep, seeds)


def test_seeds_refused_for_notebook_without_seeds_parameter(tmp_path):
    notebook = _write_notebook(tmp_path / "no_seed.ipynb", "x = 1\noutput_dir = None")
    with pytest.raises(ValueError, match=r"^--seeds: .*no_seed\.ipynb"):
        plan_executions([notebook], _params(tmp_path), "default", None, [1, 2])


def test_notebook_without_output_dir_parameter_refused(tmp_path):
    notebook = _write_notebook(tmp_path / "no_output.ipynb", "x = 1")
    with pytest.raises(ValueError, match=r"^notebook no_output\.ipynb"):
        plan_executions([notebook], _params(tmp_path), "default")


PATHS_NOTEBOOK = (
    "data = {'source': 'sample_relevance', 'path': None}\n"
    "encoders = {'probe': {'kind': 'probe'}}\n"
    "extra_lexicons = {}\n"
    "output_dir = None\n"
)


@pytest.mark.parametrize(
    ("params_file", "sweep", "names"),
    [
        ("data: {source: table, path: ../own_data.csv}\n", None, ["params file default/paths.yaml", "data.path"]),
        ("data: {source: tnews, path: t.json, labels_path: no/labels.json}\n", None, ["data.labels_path"]),
        ("encoders: {scratch: {vocab_file: ../no/vocab.txt}}\n", None, ["encoders.scratch.vocab_file"]),
        ("encoders: {mini: {model_name_or_path: ../models/mini}}\n", None, ["encoders.mini.model_name_or_path"]),
        ("extra_lexicons: {wordnet: ../synsets.tsv}\n", None, ["extra_lexicons.wordnet"]),
        ("", {"data": [{"source": "corpus", "path": ["t.json", "gone.txt"]}]}, ["--sweep", "data.path[1]"]),
    ],
)
def test_every_file_and_folder_a_params_set_names_is_checked_before_a_kernel_starts(
    tmp_path, capsys, params_file, sweep, names
):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    notebook = _write_notebook(notebooks / "paths.ipynb", PATHS_NOTEBOOK)
    (notebooks / "t.json").write_text("{}", encoding="utf-8")
    executions = plan_executions([notebook], _params(tmp_path, {"paths": params_file}), "default", sweep)
    with pytest.raises(ValueError) as caught:
        check_paths(executions, "default")
    message = str(caught.value)
    missing = re.search(r"'([^']+)' \(", message)
    assert all(name in message for name in names) and missing, message
    assert not (notebooks / missing.group(1)).exists()
    # through the command line: one error line, exit 2, no run folder, no kernel started
    options = [f"--sweep=data={json.dumps(value[0])}" for value in (sweep or {}).values()]
    arguments = ["--notebooks-dir", str(notebooks), "--params-dir", str(tmp_path / "params")]
    assert main(["run", *arguments, "--outputs-dir", str(tmp_path / "outputs"), *options]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and names[-1] in error, error
    assert not (tmp_path / "outputs").exists()


def test_data_root_sections_and_paths_are_checked_through_the_data_root(tmp_path, monkeypatch):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    notebook = _write_notebook(
        notebooks / "root.ipynb",
        "data = {}\nfinetune_data = {}\nembedding = {}\nobjective = {}\noutput_dir = None\n",
    )
    root = tmp_path / "root"
    monkeypatch.setenv("WORKBENCH_DATA", str(root))

    def check(params: str) -> None:
        check_paths(plan_executions([notebook], _params(tmp_path, {"root": params}), "default"), "default")

    check("embedding: {source: corpus, k: 10}\n")  # a synonym source named like a data set: no data section
    with pytest.raises(
        ValueError, match=r"^params file default/root\.yaml: finetune_data\.source: qbqtc: .*data fetch"
    ):
        check("finetune_data: {source: qbqtc, max_length: 64}\n")
    with pytest.raises(
        ValueError, match=r"objective\.lexicon: no such file or folder: '\$WORKBENCH_DATA/cilin/c\.txt'"
    ):
        check("objective: {lexicon: $WORKBENCH_DATA/cilin/c.txt}\n")
    (root / "qbqtc").mkdir(parents=True)
    (root / "qbqtc" / "dev.json").write_text("", encoding="utf-8")  # one split's file: the others are cut from it
    (root / "cilin").mkdir()
    (root / "cilin" / "c.txt").write_text("", encoding="utf-8")
    check("data: {source: qbqtc}\nobjective: {lexicon: $WORKBENCH_DATA/cilin/c.txt}\n")
    check("data: {source: corpus, path: ../own.txt}\n".replace("../own.txt", str(root / "cilin" / "c.txt")))


def test_paths_that_exist_and_hub_names_pass_the_early_check(tmp_path):
    notebooks = tmp_path / "notebooks"
    (notebooks / "ckpt").mkdir(parents=True)
    notebook = _write_notebook(notebooks / "paths.ipynb", PATHS_NOTEBOOK)
    (tmp_path / "own.csv").write_text("text,label\n", encoding="utf-8")
    params = (
        "data: {source: table, path: ../own.csv}\n"
        "encoders: {a: {model_name_or_path: ckpt}, b: {model_name_or_path: hfl/chinese-roberta-wwm-ext}}\n"
        f"extra_lexicons: {{wordnet: {tmp_path / 'own.csv'}}}\n"
    )
    check_paths(plan_executions([notebook], _params(tmp_path, {"paths": params}), "default"), "default")


def _main(tmp_path: Path, *options: str) -> int:
    """``python -m workbench run`` on the fixture notebooks, with a params folder and outputs under ``tmp_path``."""
    return main(
        [
            "run",
            "--notebooks-dir",
            str(FIXTURES),
            "--params-dir",
            str(tmp_path / "params"),
            "--outputs-dir",
            str(tmp_path / "outputs"),
            *options,
        ]
    )


@pytest.mark.parametrize(
    ("options", "names"),
    [
        (["--sweep", "epsilon=0.1,0.2"], "--sweep: unknown parameter 'epsilon'"),
        (["--params-dir", "nope"], "--params-dir 'nope'"),
        (["--params-set", "gpu"], "--params-set 'gpu'"),
        (["--only", ""], "--only ''"),
        (["--only", "ok", "--sweep", "x=.nan,.NaN"], "--sweep x:"),
        (["--only", "ok", "--sweep", "x=0.1,"], "--sweep x:"),
        (["--only", "ok", "--sweep", "x=[1,2"], "--sweep x:1:"),
        (["--only", "ok", "--seeds", "1,1"], "--seeds '1,1'"),
        (["--only", "ok", "--seeds", ""], "--seeds ''"),
        (["--only", "ok", "--jobs", "0"], "jobs:"),
        (["--only", "ok", "--threads", "0"], "threads:"),
        (["--only", "ok", "--gpus", "0"], "--gpus '0'"),  # no GPU is visible here
        (["--only", "ok", "--gpus", ""], "--gpus ''"),
        (["--only", "ok", "--kernel", "no-such-kernel"], "--kernel 'no-such-kernel'"),
        (["--only", "ok", "--run-id", "../x"], "--run-id '../x'"),
        (["--only", "ok", "--run-id", "x" * 300], "--run-id 'xxx"),
        (["--only", "ok", "--executor", "local", "--slurm", "no_such=1"], "--slurm:"),
        (["--only", "ok", "--executor", "slurm"], "--slurm:"),  # no Slurm on this machine
        (["--only", "ok", "--slurm", "timeout_min=5"], "--executor 'threads'"),  # job parameters without jobs
    ],
)
def test_bad_runner_input_exits_2_with_one_line_before_anything_runs(tmp_path, capsys, monkeypatch, options, names):
    import workbench.runs

    monkeypatch.setattr(workbench.runs, "visible_gpus", lambda: [])
    _params(tmp_path, {"ok_metrics": "x: 1.0\n"})
    assert _main(tmp_path, *options) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: " + names) and error.count("\n") == 1, error
    assert not any((tmp_path / "outputs").glob("*"))  # no run folder


def test_repeated_list_options_add_up(tmp_path, capsys, monkeypatch):
    from workbench.__main__ import build_parser

    # the last --sweep / --only / --slurm silently replaced the earlier ones (a one-value option: the last wins, as
    # usual)
    parsed = build_parser().parse_args(["run", "--only", "01", "--only", "02", "--sweep", "x=1", "--sweep", "y=2,3"])
    assert parsed.only == ["01", "02"] and parsed.sweep == ["x=1", "y=2,3"]
    assert build_parser().parse_args(["run", "--slurm", "a=1", "--slurm", "b=2"]).slurm == ["a=1", "b=2"]
    monkeypatch.setattr("workbench.runs.visible_gpus", lambda: [])
    _params(tmp_path, {"ok_metrics": "x: 1.0\n"})
    assert _main(tmp_path, "--only", "ok", "--sweep", "x=1,2", "--sweep", "x=3") == 2
    assert capsys.readouterr().err.startswith("error: --sweep: parameter 'x'")
    assert not (tmp_path / "outputs").exists()


def test_a_params_file_that_names_no_notebook_is_refused(tmp_path, capsys):
    _params(
        tmp_path, {"ok_metrics": "x: 2.0\n", "ok_metric": "x: 3.0\n"}
    )  # a typo would run ok_metric's notebook on defaults
    assert _main(tmp_path, "--only", "ok") == 2
    assert capsys.readouterr().err.startswith("error: --params-set 'default': ok_metric.yaml")
    assert not (tmp_path / "outputs").exists()


def test_outputs_dir_that_cannot_hold_a_run_exits_2_naming_it(tmp_path, capsys):
    _params(tmp_path)
    (tmp_path / "outputs").write_text("a file, not a folder")
    assert _main(tmp_path, "--only", "ok") == 2
    assert capsys.readouterr().err.startswith("error: --outputs-dir ")
    assert (tmp_path / "outputs").read_text() == "a file, not a folder"


def test_bad_yaml_in_a_params_file_exits_2_naming_file_and_line(tmp_path, capsys):
    _params(tmp_path)
    for content, line in ((b"x: 1\nseeds: [2\n", 2), ("x: 1\n# 说明\n".encode("gbk"), 2)):
        (tmp_path / "params" / "default" / "ok_metrics.yaml").write_bytes(content)
        assert _main(tmp_path, "--only", "ok") == 2
        error = capsys.readouterr().err
        assert re.match(rf"error: \S*default/ok_metrics\.yaml:{line}: ", error) and "Traceback" not in error
    (tmp_path / "params" / "default" / "ok_metrics.yaml").write_text("x: 1\n")
    assert _main(tmp_path, "--only", "ok", "--sweep", "x=[1,2") == 2
    assert capsys.readouterr().err.startswith("error: --sweep x:1: ")
    assert not (tmp_path / "outputs").exists()


def test_a_missing_package_is_one_line_naming_it_and_the_install_command(tmp_path, capsys, monkeypatch):
    _params(tmp_path)
    monkeypatch.setitem(sys.modules, "papermill", None)  # `import papermill` now fails as if it were not installed
    assert _main(tmp_path, "--only", "ok") == 2
    error = capsys.readouterr().err
    assert error.startswith("error: package papermill") and error.count("\n") == 1
    assert f"{sys.executable} -m pip install papermill" in error


def test_existing_run_folder_is_never_reused(tmp_path):
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "keep.txt").write_text("earlier run")
    with pytest.raises(ValueError, match=r"^--run-id 'run1'"):
        run(
            only=["ok"],
            notebooks_dir=FIXTURES,
            params_dir=_params(tmp_path),
            outputs_dir=tmp_path,
            run_id="run1",
            stream=_quiet(),
        )
    assert [p.name for p in (tmp_path / "run1").iterdir()] == ["keep.txt"]
    with pytest.raises(ValueError, match=r"^--run-id '\.\./x'"):
        new_run_dir(tmp_path, "../x")
    first, second = new_run_dir(tmp_path), new_run_dir(tmp_path)
    assert first != second and first.is_dir() and second.is_dir()


def test_kernel_runs_this_interpreter():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(ensure_kernel())
    assert spec.argv[0] in {"python", "python3", sys.executable}


# ----------------------------------------------------------------------------- results helpers


def test_write_json_converts_numpy_and_torch(tmp_path):
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    path = write_json(
        tmp_path / "metrics.json",
        {
            "f1": np.float32(0.5),
            "n": np.int64(3),
            "loss": torch.tensor(0.25),
            "cm": np.eye(2, dtype=int),
            "bad": float("nan"),
            "ok": True,
            "name": "x",
        },
    )
    assert json.loads(path.read_text()) == {
        "f1": 0.5,
        "n": 3,
        "loss": 0.25,
        "cm": [[1, 0], [0, 1]],
        "bad": None,
        "ok": True,
        "name": "x",
    }
    assert [p.name for p in tmp_path.iterdir()] == ["metrics.json"]  # no temporary file left behind
    with pytest.raises(ValueError, match=r"^metrics"):
        write_json(tmp_path / "x.json", [1, 2])
    with pytest.raises(ValueError, match=r"^metrics: value <object"):
        write_json(tmp_path / "x.json", {"obj": object()})


def test_write_metrics_separates_metrics_from_details(tmp_path):
    path = write_metrics(
        tmp_path,
        {"f1": 0.5, "score": {"mean": 2.0, "std": 1.0, "n": 3}, "rate": None},
        parameters={"seeds": [1, 2, 3]},
        table=[{"a": 1}],
    )
    recorded = json.loads(path.read_text())
    assert recorded["parameters"] == {"seeds": [1, 2, 3]} and recorded["table"] == [{"a": 1}]
    assert metric_statistics(read_metrics(tmp_path)) == {
        "f1": {"mean": 0.5, "std": None, "n": 1},
        "score": {"mean": 2.0, "std": 1.0, "n": 3},
    }
    assert write_metrics(None, {"f1": 1.0}) is None
    with pytest.raises(ValueError, match=r"^metrics"):
        write_metrics(tmp_path, [1, 2])
    with pytest.raises(ValueError, match=r"^metrics: entry 'name'"):
        write_metrics(tmp_path, {"name": "x"})
    with pytest.raises(ValueError, match=r"^metrics: entry 'score'"):
        write_metrics(tmp_path, {"score": {"mean": 1.0}})
    for name in ("f1_std", "n_seeds"):  # summary_agg.csv listed n_seeds and *_std entries as metrics (issue 13)
        with pytest.raises(ValueError, match=rf"^metrics: entry '{name}'"):
            write_metrics(tmp_path, {"f1": 0.5, name: 2})


# ----------------------------------------------------------------------------- notebook hygiene


def test_check_notebook_clean(tmp_path):
    assert check_notebook_clean(OK) == []
    assert check_notebook_clean(FAILS) == []
    dirty = nbformat.read(OK, as_version=4)
    dirty.cells[1].outputs = [nbformat.v4.new_output("stream", text="hi")]
    dirty.cells[1].execution_count = 3
    dirty.cells[1].metadata["tags"] = ["parameters"]
    nbformat.write(dirty, tmp_path / "dirty.ipynb")
    problems = check_notebook_clean(tmp_path / "dirty.ipynb")
    assert any("cell 1 has outputs" in p for p in problems)
    assert any("cell 1 has an execution count" in p for p in problems)
    assert any("exactly one cell tagged 'parameters', found 2" in p for p in problems)
    (tmp_path / "broken.ipynb").write_text("{not json")
    assert "cannot be read" in check_notebook_clean(tmp_path / "broken.ipynb")[0]


# ----------------------------------------------------------------------------- real runs (papermill)


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("sweep")
    report = run(
        only=["ok_metrics"],
        sweep={"x": [1.0, 2.0]},
        seeds=[1, 2],
        notebooks_dir=FIXTURES,
        params_dir=_params(root),
        outputs_dir=root / "outputs",
        stream=_quiet(),
    )
    return report


@pytest.fixture(scope="module")
def mixed_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixed")
    stream = io.StringIO()
    report = run(
        notebooks_dir=FIXTURES,
        params_dir=_params(root),
        outputs_dir=root / "outputs",
        run_id="mixed",
        stream=stream,
        progress=False,
    )
    return report, stream.getvalue().splitlines()


@pytest.mark.slow
def test_sweep_writes_each_point_and_aggregates_over_the_seeds_list(sweep_run):
    run_dir = sweep_run.run_dir
    assert not sweep_run.failed
    cell = run_dir / "ok_metrics" / "x=1.0"
    for name in (
        "ok_metrics.ipynb",
        "ok_metrics.html",
        "params.yaml",
        "metrics.json",
        "figures/score_line.html",
        "figures/score_line.json",
    ):
        assert (cell / name).is_file(), name
    assert (run_dir / "assets" / "plotly.min.js").is_file()  # one plotly.js for the run, not one per figures/
    recorded = read_metrics(cell)
    assert recorded["metrics"]["score"]["mean"] == 10 * 1.0 + 1.5  # the fixture computes 10 * x + seed, seeds 1 and 2
    assert recorded["parameters"]["seeds"] == [1, 2]  # one execution holds the whole seeds list
    assert recorded["python_prefix"] == sys.prefix  # the kernel runs this environment

    summary = pd.read_csv(run_dir / "summary.csv")
    assert len(summary) == 2 and set(summary["status"]) == {"ok"}
    assert sorted(summary["metric.score"]) == [11.5, 21.5]
    aggregated = pd.read_csv(run_dir / "summary_agg.csv").set_index(["point", "metric"])
    assert set(aggregated.index.get_level_values("metric")) == {"score", "x_squared"}  # parameters are not metrics
    for x in (1.0, 2.0):
        scores = [10 * x + 1, 10 * x + 2]
        row = aggregated.loc[(f"x={x}", "score")]
        assert row["mean"] == pytest.approx(sum(scores) / 2)
        assert row["std"] == pytest.approx(abs(scores[1] - scores[0]) / 2**0.5)  # sample std of two values
        assert row["n"] == 2
        single = aggregated.loc[(f"x={x}", "x_squared")]
        assert single["n"] == 1 and pd.isna(single["std"])  # no spread shown for a single value

    index = (run_dir / "index.html").read_text()
    assert 'href="ok_metrics/x=2.0/figures/score_line.html"' in index
    assert index.count("A line up to the first seed&#x27;s score.") == 2  # the caption the notebook gave, per point
    assert 'href="ok_metrics/x=2.0/ok_metrics.html"' in index


def _sweep_figure_data(index: str) -> list[dict]:
    """The traces of every sweep figure in the index page (its JSON, which the page draws)."""
    traces = []
    for match in re.finditer(r'<script type="application/json" id="sweep-\d+">(.*?)</script>', index):
        traces.extend(json.loads(match.group(1).replace("<\\/", "</"))["data"])
    return traces


@pytest.mark.slow
def test_a_sweep_is_drawn_in_the_index_as_each_metric_against_the_swept_value(sweep_run):
    index = (sweep_run.run_dir / "index.html").read_text()
    assert inline_plotly_js() in index  # inlined: opens offline, copied alone too
    traces = _sweep_figure_data(index)
    assert len(traces) == 2  # score and x_squared, one line each
    score = next(trace for trace in traces if trace["y"][0] > 5)
    assert score["x"] == [1.0, 2.0] and score["y"] == [11.5, 21.5]
    assert score["error_y"]["array"] == pytest.approx([0.5**0.5, 0.5**0.5])  # std over seeds 1 and 2
    assert "<iframe" not in index and "<script src=" not in index  # one plotly.js draws every figure


def test_the_index_draws_several_swept_keys_as_lines_and_names_metric_descriptions(tmp_path):
    from workbench.runs.execute import Outcome
    from workbench.runs.plan import Execution
    from workbench.runs.report import write_report

    outcomes = []
    for loss, epsilon, mean in (("CE", 0.2, 3.0), ("CE", 0.1, 1.0), ("FL", 0.1, 2.0), ("FL", 0.2, 4.0)):
        point = {"epsilon": epsilon, "loss": loss}
        folder = tmp_path / "nb" / cell_slug(point)
        metrics = {
            "metrics": {"f1": {"mean": mean, "std": 0.5, "n": 3}},
            "descriptions": {"f1": "macro-F1 on the test split"},
        }
        outcomes.append(Outcome(Execution(OK, point, point, cell_slug(point)), folder, "ok", 1.0, metrics=metrics))
    outcomes.append(
        Outcome(Execution(OK, {}, {"epsilon": 0.3, "loss": "CE"}, "late"), tmp_path / "late", "interrupted", 0.0)
    )
    index = write_report(tmp_path, outcomes, ["epsilon", "loss"], interrupted=True).read_text()
    traces = {trace["name"]: trace for trace in _sweep_figure_data(index)}
    assert traces.keys() == {"CE", "FL"}  # one line per value of the second key
    assert traces["CE"]["x"] == [0.1, 0.2] and traces["CE"]["y"] == [1.0, 3.0]  # sorted along the swept value
    assert "<td>macro-F1 on the test split</td>" in index
    assert "Interrupted" in index and '<span class="failed">interrupted</span>' in index
    summary = pd.read_csv(tmp_path / "summary.csv")
    assert list(summary["status"]) == ["ok"] * 4 + ["interrupted"]


@pytest.mark.slow
def test_failing_notebook_is_reported_and_others_complete(mixed_run):
    report, lines = mixed_run
    by_name = {outcome.execution.name: outcome for outcome in report.outcomes}
    failed, ok = by_name["fails_in_cell2"], by_name["ok_metrics"]
    assert failed.status == "failed" and failed.failed_cell == 2
    assert failed.error == "ValueError: boom at x=1.0"
    assert ok.ok and ok.metrics["metrics"]["score"]["mean"] == 10.0
    assert [outcome.execution.name for outcome in report.outcomes] == ["fails_in_cell2", "ok_metrics"]  # plan order
    first, second = sorted(lines)  # one whole line per notebook, in the order they ended
    assert first.startswith("[1/2] fails_in_cell2 ... FAILED at cell 2: ValueError: boom at x=1.0 (")
    assert re.fullmatch(r"\[2/2\] ok_metrics \.\.\. ok \(\d+\.\d s\)", second)

    run_dir = report.run_dir
    assert (run_dir / "fails_in_cell2" / "fails_in_cell2.html").is_file()  # the partial notebook is exported
    summary = pd.read_csv(run_dir / "summary.csv").set_index("notebook")
    assert summary.loc["fails_in_cell2", "failed_cell"] == 2
    assert summary.loc["ok_metrics", "metric.score"] == 10.0
    index = (run_dir / "index.html").read_text()
    assert "cell 2: ValueError: boom at x=1.0" in index
    assert 'href="ok_metrics/ok_metrics.ipynb"' in index


@pytest.mark.slow
def test_rerunning_an_existing_run_id_is_refused(mixed_run, tmp_path):
    report, _ = mixed_run
    before = sorted(p.name for p in report.run_dir.iterdir())
    code = main(
        [
            "run",
            "--notebooks-dir",
            str(FIXTURES),
            "--outputs-dir",
            str(report.run_dir.parent),
            "--params-dir",
            str(_params(tmp_path)),
            "--run-id",
            "mixed",
        ]
    )
    assert code == 2
    assert sorted(p.name for p in report.run_dir.iterdir()) == before


@pytest.mark.slow
def test_cli_exit_code_is_nonzero_when_a_notebook_fails(tmp_path, capsys):
    _params(tmp_path)
    assert _main(tmp_path, "--only", "fails", "--run-id", "r1") == 1
    out = capsys.readouterr().out
    assert "[1/1] fails_in_cell2 ... FAILED at cell 2: ValueError: boom at x=1.0" in out
    assert "0/1 ok" in out


# ----------------------------------------------------------------------------- progress


def _two_notebooks(tmp_path: Path, bars: bool, interval: float, monkeypatch) -> str:
    """What the progress writes while ``[1/2] a`` (at cell 3 of 4) and ``[2/2] b`` (at cell 1) run and b ends first."""
    from workbench.runs import progress
    from workbench.runs.plan import Execution

    monkeypatch.setattr(progress, "LOG_INTERVAL_S", interval)
    monkeypatch.setattr(progress, "REDRAW_S", 0.0)
    notebooks = [
        _write_notebook(tmp_path / f"{name}.ipynb", "output_dir = None", "pass") for name in "ab"
    ]  # 2 cells + injected
    stream = io.StringIO()
    board = progress.Progress([Execution(notebook, {}, {}, "") for notebook in notebooks], stream, bars=bars)
    on_cell_a, on_cell_b = board.started(0), board.started(1)
    for index in range(3):
        on_cell_a(cell_index=index)
    on_cell_b(cell_index=0)
    board.finished(1, "ok (0.2 s)")
    board.finished(0, "FAILED at cell 3: ValueError: x (0.3 s)")
    return stream.getvalue()


def test_progress_in_a_log_writes_whole_lines_naming_notebook_and_cell(tmp_path, monkeypatch):
    lines = _two_notebooks(tmp_path, bars=False, interval=0.0, monkeypatch=monkeypatch).splitlines()
    assert lines == [
        "    [1/2] a: cell 1/3, 0 s",
        "    [1/2] a: cell 2/3, 0 s",
        "    [1/2] a: cell 3/3, 0 s",
        "    [2/2] b: cell 1/3, 0 s",
        "[2/2] b ... ok (0.2 s)",
        "[1/2] a ... FAILED at cell 3: ValueError: x (0.3 s)",
    ]


def test_progress_in_a_log_prints_only_the_status_of_a_short_notebook(tmp_path, monkeypatch):
    text = _two_notebooks(tmp_path, bars=False, interval=30.0, monkeypatch=monkeypatch)
    assert text == "[2/2] b ... ok (0.2 s)\n[1/2] a ... FAILED at cell 3: ValueError: x (0.3 s)\n"


def test_progress_on_a_terminal_shows_a_bar_per_running_notebook(tmp_path, monkeypatch):
    text = _two_notebooks(tmp_path, bars=True, interval=30.0, monkeypatch=monkeypatch)
    drawn = text.replace("\r", "\n")
    assert re.search(r"\n\[1/2\] a: [^\n]*\| 3/3 \[00:0", drawn)  # a's bar at its third cell, with the elapsed time
    assert re.search(r"\n\[2/2\] b: [^\n]*\| 1/3 \[00:0", drawn)
    assert "\n[2/2] b ... ok (0.2 s)\n" in drawn  # the status line stands on its own
    assert text.endswith("[1/2] a ... FAILED at cell 3: ValueError: x (0.3 s)\n")


def test_progress_without_ticking_writes_only_status_lines():
    from workbench.runs.plan import Execution
    from workbench.runs.progress import Progress

    stream = io.StringIO()
    board = Progress([Execution(OK, {}, {}, "")], stream, bars=True, ticking=False)
    assert board.started(0) is None
    board.finished(0, "ok (0.1 s)")
    assert stream.getvalue() == "[1/1] ok_metrics ... ok (0.1 s)\n"


# ----------------------------------------------------------------------------- kernels, GPUs, concurrency


def test_kernels_get_the_thread_count_in_their_environment(tmp_path):
    _write_notebook(
        tmp_path / "threads.ipynb",
        "output_dir = None",
        "import os\nfrom workbench.runs import write_metrics\n"
        "write_metrics(output_dir, {'omp_threads': int(os.environ['OMP_NUM_THREADS'])})",
    )
    report = run(
        notebooks_dir=tmp_path, params_dir=_params(tmp_path), outputs_dir=tmp_path / "out", threads=3, stream=_quiet()
    )
    assert not report.failed and read_metrics(report.outcomes[0].output_dir)["metrics"]["omp_threads"] == 3


def test_injected_parameters_and_params_yaml_read_as_written_and_the_kernel_gets_the_same_values(tmp_path):
    values = {
        "text": "这里的风景非常美丽，\"quoted\" 'single'",
        "data": {"路径": "数据/训练.tsv", "note": "tab\there", "line": "a\u2028b"},
        "names": ["美丽", "漂亮"],
        "n": 3,
    }
    _write_notebook(
        tmp_path / "chinese.ipynb",
        "output_dir = None\ntext = None\ndata = None\nnames = None\nn = None",
        "import json\nfrom pathlib import Path\n"
        "Path(output_dir, 'seen.json').write_text(json.dumps([text, data, names, n]), encoding='utf-8')",
    )
    params = _params(tmp_path, {"chinese": json.dumps(values, ensure_ascii=False)})
    report = run(notebooks_dir=tmp_path, params_dir=params, outputs_dir=tmp_path / "out", stream=_quiet())
    assert not report.failed, report.failed[0].status_text()
    folder = report.outcomes[0].output_dir
    seen = json.loads((folder / "seen.json").read_text(encoding="utf-8"))
    assert seen == [values["text"], values["data"], values["names"], values["n"]]
    executed = nbformat.read(folder / "chinese.ipynb", as_version=4)
    (injected,) = [cell for cell in executed.cells if "injected-parameters" in cell.metadata.get("tags", [])]
    assert "这里的风景非常美丽" in injected.source and "数据/训练.tsv" in injected.source
    assert "\\u8fd9" not in injected.source and "\\u2028" in injected.source  # a line separator stays escaped
    written = (folder / "params.yaml").read_text(encoding="utf-8")
    assert "这里的风景非常美丽" in written and "\\u8FD9" not in written.upper()
    assert {key: value for key, value in yaml.safe_load(written).items() if key in values} == values
    # issue 39: papermill's own python translator is left as it was for every other caller in the process
    from papermill.translators import PythonTranslator, papermill_translators

    assert papermill_translators.find_translator("python3", "python") is PythonTranslator


def test_the_runner_records_every_parameter_the_notebook_ran_with_in_its_metrics_json(tmp_path):
    # issue 39: the parameters cell's defaults and the injected values, so that a notebook lists none of them again
    _write_notebook(
        tmp_path / "recorded.ipynb",
        'seeds = [0]\nnote = "a # b"  # a comment\nsizes = {"hidden": 8}\ntraining = {"lr": 0.1}\n'
        "interactive = True\noutput_dir = None",
        "from workbench.runs import write_metrics\nwrite_metrics(output_dir, {'f1': 0.5})",
    )
    _write_notebook(
        tmp_path / "own.ipynb",
        "seeds = [0]\nx = 1.0\noutput_dir = None",
        "from workbench.runs import write_metrics\nwrite_metrics(output_dir, {'f1': 0.5}, parameters={'x': 'its own'})",
    )
    params = _params(tmp_path, {"recorded": "training: {lr: 0.5, hub_token: hf_secret}\ninteractive: false"})
    report = run(notebooks_dir=tmp_path, params_dir=params, outputs_dir=tmp_path / "out", stream=_quiet())
    assert not report.failed, [outcome.status_text() for outcome in report.failed]
    recorded = {outcome.execution.name: outcome.metrics["parameters"] for outcome in report.outcomes}
    assert recorded["recorded"] == {
        "seeds": [0],
        "note": "a # b",  # the cell as its kernel runs it (papermill's inspection would cut the text at "#")
        "sizes": {"hidden": 8},
        "training": {"lr": 0.5, "hub_token": "<HUB_TOKEN>"},  # injected, the secret redacted
        "interactive": False,
    }
    assert recorded["own"] == {"seeds": [0], "x": "its own"}  # what a notebook records itself is kept


def test_record_parameters_keeps_the_notebooks_own_entries_and_writes_no_metrics_json(tmp_path):
    from workbench.metrics_file import record_parameters

    assert record_parameters(tmp_path, {"x": 1}) is None and not (tmp_path / "metrics.json").exists()
    write_metrics(tmp_path, {"f1": 0.5}, parameters={"x": "own"}, table=[1])
    record_parameters(tmp_path, {"x": 1, "seeds": [0, 1], "training": {"hub_token": "hf_x"}})
    assert read_metrics(tmp_path) == {
        "metrics": {"f1": 0.5},
        "parameters": {"x": "own", "seeds": [0, 1], "training": {"hub_token": "<HUB_TOKEN>"}},
        "table": [1],
    }
    write_json(tmp_path / "metrics.json", {"metrics": {}, "parameters": ["a", "list"]})
    record_parameters(tmp_path, {"x": 1})
    assert read_metrics(tmp_path)["parameters"] == ["a", "list"]  # not the runner's kind of record: left as it is


def test_a_parameters_cell_that_fails_names_the_notebook_before_any_kernel(tmp_path):
    _write_notebook(tmp_path / "broken.ipynb", "seeds = [0]\nsize = undefined_name\noutput_dir = None")
    with pytest.raises(ValueError, match=r"^notebook broken.ipynb: its parameters cell fails \(NameError: "):
        run(notebooks_dir=tmp_path, params_dir=_params(tmp_path), outputs_dir=tmp_path / "out", stream=_quiet())
    assert not (tmp_path / "out").exists()


def test_a_default_json_cannot_hold_is_recorded_as_its_repr(tmp_path):
    from workbench.runs.notebook_cells import notebook_defaults

    notebook = _write_notebook(tmp_path / "odd.ipynb", "seeds = [0]\nletters = {'a'}\noutput_dir = None")
    assert notebook_defaults(notebook, ["seeds", "letters", "output_dir"]) == {"seeds": [0], "letters": "{'a'}"}


def test_the_kernels_are_stopped_through_jupyter_clients_public_api():
    # issue 39: no reading of the kernel provisioner's process (has_kernel, signal_kernel, is_alive instead)
    import inspect

    import workbench.runs.execute  # noqa: F401 - the module (the package's ``execute`` is the function)

    source = inspect.getsource(sys.modules["workbench.runs.execute"])
    assert "provisioner" not in source and ".process" not in source


def _marker_notebook(path: Path, mine: str, theirs: str) -> Path:
    """A notebook that writes ``mine`` (its working directory and CUDA_VISIBLE_DEVICES) and then waits up
    to 60 s for ``theirs``: two of them finish only when they run at the same time."""
    return _write_notebook(
        path,
        "output_dir = None\nmarkers = None",
        "import json, os, pathlib, time\n"
        "devices = os.environ.get('CUDA_VISIBLE_DEVICES')\n"
        f"pathlib.Path(markers, {mine!r}).write_text(json.dumps([os.getcwd(), devices]))\n"
        "deadline = time.monotonic() + 60\n"
        f"while not pathlib.Path(markers, {theirs!r}).exists():\n"
        "    assert time.monotonic() < deadline, 'the other notebook never started'\n"
        "    time.sleep(0.05)\n",
    )


def _two_waiting_notebooks(tmp_path: Path) -> Path:
    notebooks, markers = tmp_path / "notebooks", tmp_path / "markers"
    notebooks.mkdir(), markers.mkdir()
    _marker_notebook(notebooks / "a.ipynb", "a", "b")
    _marker_notebook(notebooks / "b.ipynb", "b", "a")
    _params(tmp_path, {name: f"markers: {str(markers)!r}\n" for name in "ab"})
    return markers


@pytest.mark.slow
def test_jobs_run_notebooks_at_the_same_time_and_keep_the_plan_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative folders, as `make run` gives them
    markers = _two_waiting_notebooks(tmp_path)
    report = run(
        notebooks_dir="notebooks",
        params_dir="params",
        outputs_dir="out",
        jobs=2,
        threads=1,
        stream=_quiet(),
        progress=False,
    )
    assert [outcome.execution.name for outcome in report.outcomes] == ["a", "b"]
    assert not report.failed, [outcome.status_text() for outcome in report.failed]
    assert Path.cwd() == tmp_path  # the runner never moves its own working directory
    assert {json.loads((markers / name).read_text())[0] for name in "ab"} == {str((tmp_path / "notebooks").resolve())}


@pytest.mark.slow
@pytest.mark.parametrize(
    "visible, gpus, expected",
    [
        (["0", "1"], None, ["0", "1"]),
        (["0", "1", "2", "3"], ["3", "1"], ["1", "3"]),
    ],  # default: every visible GPU; --gpus 3,1
)
def test_each_kernel_gets_its_own_gpu_and_jobs_default_to_one_per_gpu(tmp_path, monkeypatch, visible, gpus, expected):
    import workbench.runs

    monkeypatch.setattr(workbench.runs, "visible_gpus", lambda: visible)  # a box with several GPUs
    markers = _two_waiting_notebooks(tmp_path)  # they finish only when both run at once: jobs defaulted to 2
    report = run(
        notebooks_dir=tmp_path / "notebooks",
        params_dir=tmp_path / "params",
        outputs_dir=tmp_path / "out",
        gpus=gpus,
        stream=_quiet(),
    )
    assert not report.failed, [outcome.status_text() for outcome in report.failed]
    assert sorted(json.loads((markers / name).read_text())[1] for name in "ab") == expected


@pytest.mark.parametrize("jobs", [0, -1, 1.5])
def test_jobs_below_one_are_refused_before_anything_runs(tmp_path, jobs):
    with pytest.raises(ValueError, match=r"^jobs:"):
        run(only=["ok"], notebooks_dir=FIXTURES, params_dir=_params(tmp_path), outputs_dir=tmp_path / "out", jobs=jobs)
    assert not (tmp_path / "out").exists()


def test_default_jobs_fill_the_cores_with_kernels_of_the_given_threads(monkeypatch):
    from workbench import runs

    monkeypatch.setattr(runs, "usable_cores", lambda: 2)
    assert (runs.default_jobs(1), runs.default_jobs(2), runs.default_jobs(4)) == (2, 1, 1)
    monkeypatch.setattr(runs, "usable_cores", lambda: 16)
    assert (runs.default_jobs(8), runs.default_jobs(3)) == (2, 5)


@pytest.mark.slow
def test_the_submitit_local_executor_runs_each_point_as_a_job_into_the_same_layout(tmp_path):
    report = run(
        only=["ok"],
        sweep={"x": [1.0, 2.0]},
        notebooks_dir=FIXTURES,
        params_dir=_params(tmp_path),
        outputs_dir=tmp_path / "out",
        executor="local",
        stream=_quiet(),
    )
    assert not report.failed, [outcome.status_text() for outcome in report.failed]
    run_dir = report.run_dir
    assert [outcome.output_dir for outcome in report.outcomes] == [
        run_dir / "ok_metrics" / f"x={x}" for x in (1.0, 2.0)
    ]
    assert read_metrics(run_dir / "ok_metrics" / "x=2.0")["metrics"]["score"]["mean"] == 20.0
    assert sorted(pd.read_csv(run_dir / "summary.csv")["metric.score"]) == [10.0, 20.0]
    assert (run_dir / "index.html").is_file() and list(
        (run_dir / "submitit").glob("*")
    )  # the jobs' logs stay with the run


# ----------------------------------------------------------------------------- interruptions


def _sleeping_notebooks(tmp_path: Path) -> tuple[Path, Path]:
    """Notebooks a and b that write their kernel's pid into ``markers`` and then sleep 120 s."""
    notebooks, markers = tmp_path / "notebooks", tmp_path / "markers"
    notebooks.mkdir(), markers.mkdir()
    for name in ("a", "b"):
        _write_notebook(
            notebooks / f"{name}.ipynb",
            "output_dir = None",
            "import os, pathlib, time\n"
            f"pathlib.Path({str(markers)!r}, {name!r}).write_text(str(os.getpid()))\n"
            "time.sleep(120)",
        )
    _params(tmp_path)
    return notebooks, markers


def _wait_for(markers: Path, count: int) -> None:
    import time

    deadline = time.monotonic() + 300  # kernels start slowly on a loaded machine
    while len(list(markers.iterdir())) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def _assert_stopped(markers: Path) -> None:
    for marker in markers.iterdir():
        status = Path("/proc", marker.read_text(), "status")
        assert not status.exists() or "State:\tZ" in status.read_text(), f"kernel of {marker.name} still runs"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="reads kernel states from /proc (Linux)")
def test_ctrl_c_stops_the_running_kernels_and_the_run_and_marks_the_index(tmp_path):
    import os
    import signal
    import threading
    import time

    from workbench.runs import RunInterrupted

    notebooks, markers = _sleeping_notebooks(tmp_path)

    pressed = []

    def press_ctrl_c_once_both_run() -> None:
        _wait_for(markers, 2)
        pressed.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)  # a real signal: Ctrl-C in the terminal

    threading.Thread(target=press_ctrl_c_once_both_run, daemon=True).start()
    # Ctrl-C raises KeyboardInterrupt as in a terminal's foreground process: a job a script starts in the background
    # (`pytest &`) inherits SIGINT ignored, and then no Ctrl-C reaches it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(RunInterrupted) as interrupted:
            run(
                notebooks_dir=notebooks,
                params_dir=tmp_path / "params",
                outputs_dir=tmp_path / "out",
                jobs=2,
                threads=1,
                stream=_quiet(),
                progress=False,
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(list(markers.iterdir())) == 2  # both kernels ran when Ctrl-C came
    assert time.monotonic() - pressed[0] < 60  # not the notebooks' 120 s
    _assert_stopped(markers)
    run_dir = interrupted.value.report.run_dir
    assert list(pd.read_csv(run_dir / "summary.csv")["status"]) == ["interrupted", "interrupted"]
    assert "Interrupted" in (run_dir / "index.html").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="reads kernel states from /proc (Linux)")
@pytest.mark.parametrize("stop", ["SIGTERM", "SIGHUP"])  # a CI cancel or `timeout`; a closed terminal
def test_sigterm_stops_the_run_and_its_index_says_interrupted(tmp_path, stop):
    import signal
    import subprocess

    notebooks, markers = _sleeping_notebooks(tmp_path)
    command = [
        sys.executable,
        "-m",
        "workbench",
        "run",
        "--notebooks-dir",
        str(notebooks),
        "--params-dir",
        str(tmp_path / "params"),
    ]
    command += ["--outputs-dir", str(tmp_path / "out"), "--run-id", "cut", "--jobs", "1", "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for(markers, 1)
    process.send_signal(getattr(signal, stop))
    _, error = process.communicate(timeout=60)
    assert process.returncode == 130 and error.splitlines()[-1].startswith("interrupted:"), error
    _assert_stopped(markers)
    assert list(pd.read_csv(tmp_path / "out" / "cut" / "summary.csv")["status"]) == ["interrupted", "interrupted"]
    assert "Interrupted" in (tmp_path / "out" / "cut" / "index.html").read_text()


def test_a_stopped_kernel_registry_refuses_new_kernels():
    from workbench.runs.execute import RunningKernels

    kernels = RunningKernels()
    manager_class = kernels.manager_class()
    manager_class(kernel_name="python3")  # recorded
    kernels.kill_all()  # none had started a process
    with pytest.raises(RuntimeError, match=r"^the run was interrupted"):
        manager_class(kernel_name="python3")


def test_worker_threads_write_through_absolute_paths(tmp_path, monkeypatch):
    # papermill's file writes chdir the process to the cwd a concurrent run may have left in its local handler:
    # a relative path written from a worker thread meanwhile (the HTML export) missed its folder
    execute_module = sys.modules["workbench.runs.execute"]  # the package's `execute` is the function
    exported = []
    monkeypatch.setattr(execute_module, "export_html", exported.append)
    monkeypatch.chdir(tmp_path)
    report = run(only=["ok"], notebooks_dir=FIXTURES, params_dir=_params(tmp_path), outputs_dir="out", stream=_quiet())
    assert not report.failed, [outcome.status_text() for outcome in report.failed]
    assert len(exported) == 1 and exported[0].is_absolute() and exported[0].is_file(), exported


def test_an_unknown_params_set_lists_only_the_sets_a_run_takes(tmp_path, capsys):
    _params(tmp_path, {"ok_metrics": "x: 2.0\n"}, "mine")
    _params(tmp_path, {}, "empty")  # every notebook on its defaults: a set
    _params(tmp_path, {"finetune_qbqtc": "task: finetune\n"}, "examples")  # trainer configs: a run refuses them
    assert _main(tmp_path, "--params-set", "nosuch") == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --params-set 'nosuch'") and error.count("\n") == 1
    assert error.rstrip().endswith("available: empty, mine")
    assert _main(tmp_path, "--params-set", "examples") == 2  # what it would have listed is refused
    assert "finetune_qbqtc.yaml names no notebook" in capsys.readouterr().err


# ----------------------------------------------------------------------------- the notebooks' own rules, before kernels


def _checked_notebook(path: Path, checks: str) -> Path:
    """A notebook whose parameters are x and model, with a cell tagged checks holding ``checks``."""
    notebook = new_notebook(
        cells=[
            new_code_cell(
                "x = 0.5\nmodel = {'model_name_or_path': None}\noutput_dir = None", metadata={"tags": ["parameters"]}
            ),
            new_code_cell(checks, metadata={"tags": ["checks"]}),
            new_code_cell("raise RuntimeError('a kernel ran')"),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(notebook, path)
    return path


def test_a_notebooks_checks_cell_refuses_a_value_before_any_kernel_naming_where_it_was_given(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _checked_notebook(notebooks / "01_x.ipynb", "from workbench.checks import check_number\ncheck_number('x', x, 0, 1)")
    _params(tmp_path, {"01_x": "x: 0.25\n"})
    folders = ["--notebooks-dir", str(notebooks), "--params-dir", str(tmp_path / "params")]
    outputs = ["--outputs-dir", str(tmp_path / "outputs")]
    assert main(["run", *folders, *outputs, "--sweep", "x=0.5,1.5"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: --sweep x=1.5: notebook 01_x.ipynb: x: must be") and error.count("\n") == 1
    _params(tmp_path, {"01_x": "x: 2.5\n"})  # the params file's value is to blame, whatever the sweep
    assert main(["run", *folders, *outputs, "--sweep", "model={model_name_or_path: null}"]) == 2
    assert capsys.readouterr().err.startswith("error: params file default/01_x.yaml: notebook 01_x.ipynb: x:")
    assert not (tmp_path / "outputs").exists()  # no run folder, no params.yaml


def test_a_notebooks_checks_see_paths_from_the_notebooks_folder_as_its_kernel_does(tmp_path):
    notebooks = tmp_path / "notebooks"
    (tmp_path / "models" / "mine").mkdir(parents=True)
    notebooks.mkdir()
    checks = (
        "import os\n"
        "if not os.path.isdir(model['model_name_or_path']):\n"
        "    raise ValueError('model.model_name_or_path: not seen from ' + os.getcwd())"
    )
    notebook = _checked_notebook(notebooks / "01_x.ipynb", checks)
    _params(tmp_path, {"01_x": "model: {model_name_or_path: ../models/mine}\n"})
    (execution,) = plan_executions([notebook], tmp_path / "params", "default")  # this process runs elsewhere
    assert execution.parameters["model"] == {"model_name_or_path": "../models/mine"}  # the kernel gets it as written


@pytest.mark.parametrize(
    ("sweep", "names"),
    [
        ("epsilon=0.1,1.5", "--sweep epsilon=1.5: notebook 05_pcl_vs_dice_walkthrough.ipynb: epsilon: must be"),
        ("settings=[CE,NOPE]", "--sweep settings=[CE, NOPE]: notebook 05_pcl_vs_dice_walkthrough.ipynb: settings:"),
    ],
)
def test_the_walkthroughs_own_rules_refuse_a_sweep_before_any_kernel_starts(tmp_path, capsys, sweep, names):
    # both failed inside the kernel (exit 1, 15-17 s), leaving a run folder
    folders = ["--notebooks-dir", str(ROOT / "notebooks"), "--params-dir", str(ROOT / "params")]
    argv = ["run", "--params-set", "class", "--only", "05", "--sweep", sweep, "--outputs-dir", str(tmp_path / "o")]
    assert main([*argv, *folders]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: " + names) and error.count("\n") == 1, error
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("sweep", ["embedding={k: 10, source: corpus}", "extra_lexicons={embedding: x.txt}"])
def test_notebook_03s_synonym_sources_are_checked_before_any_pre_training(tmp_path, capsys, sweep):
    # a missing embedding key was a KeyError after every pre-training run, a typo silently ignored
    folders = ["--notebooks-dir", str(ROOT / "notebooks"), "--params-dir", str(ROOT / "params")]
    argv = ["run", "--params-set", "smoke", "--only", "03", "--sweep", sweep, "--outputs-dir", str(tmp_path / "o")]
    assert main([*argv, *folders]) == 2
    error = capsys.readouterr().err
    parameter = sweep.split("=")[0]
    names = f"error: --sweep {sweep}: notebook 03_true_negatives.ipynb: {parameter}: "
    assert error.startswith(names) and error.count("\n") == 1, error
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("notebook", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda path: path.stem)
def test_every_notebook_checks_its_parameters_in_a_checks_cell_right_after_its_parameters(notebook):
    from workbench.runs.notebook_cells import CHECKS_TAG, notebook_rules

    cells = nbformat.read(notebook, as_version=4).cells
    tagged = [index for index, cell in enumerate(cells) if CHECKS_TAG in cell.metadata.get("tags", [])]
    parameters = next(index for index, cell in enumerate(cells) if "parameters" in cell.metadata.get("tags", []))
    assert tagged == [parameters + 1]  # papermill's injected cell goes in between: the checks see the run's values
    assert notebook_rules(notebook) is not None
