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
from nbformat.v4 import new_code_cell, new_notebook
from notebook_hygiene import check_notebook_clean

from workbench.__main__ import main
from workbench.runs import run
from workbench.runs.execute import ensure_kernel, new_run_dir
from workbench.records import metric_statistics, read_metrics, write_json, write_metrics
from workbench.runs.plan import (
    cell_slug,
    load_params,
    parse_seeds,
    parse_sweep,
    plan_executions,
    select_notebooks,
)

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


def test_parse_sweep_reads_yaml_values():
    assert parse_sweep(["epsilon=0.1,0.2", "name=abc", "flag=true"]) == {
        "epsilon": [0.1, 0.2],
        "name": ["abc"],
        "flag": [True],
    }


@pytest.mark.parametrize("spec", ["epsilon", "=1,2", "epsilon="])
def test_parse_sweep_rejects_malformed(spec):
    with pytest.raises(ValueError, match="--sweep"):
        parse_sweep([spec])


def test_parse_sweep_rejects_repeated_key():
    with pytest.raises(ValueError, match="'x' given twice"):
        parse_sweep(["x=1", "x=2"])


def test_parse_sweep_reads_bracketed_lists_and_refuses_equal_values():
    assert parse_sweep(["losses=[CE,DSC],[FL]", "lr=1e-3,2e-3"]) == {"losses": [["CE", "DSC"], ["FL"]], "lr": [1e-3, 2e-3]}
    with pytest.raises(ValueError, match=r"--sweep epsilon: values '0.1' and '0.10' are equal after parsing"):
        parse_sweep(["epsilon=0.1,0.10"])
    with pytest.raises(ValueError, match=r"--sweep x:1: invalid YAML"):
        parse_sweep(["x=[1,2"])
    assert parse_sweep(["flag=1,true"]) == {"flag": [1, True]}  # equal in Python, yet a count is no flag
    with pytest.raises(ValueError, match=r"--sweep x: values 'true' and 'True' are equal after parsing \(True\)"):
        parse_sweep(["x=true,True"])


def test_parse_seeds():
    assert parse_seeds("1,2,3") == [1, 2, 3]
    with pytest.raises(ValueError, match="--seeds 'a,b'"):
        parse_seeds("a,b")
    with pytest.raises(ValueError, match="once"):
        parse_seeds("1,1")
    with pytest.raises(ValueError, match=">= 0"):
        parse_seeds("-1")


def test_cell_slug_is_injective():
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


def test_select_notebooks_by_stem_and_prefix(tmp_path):
    for name in ("01_dice_loss", "02_pcl", "10_walkthrough"):
        _write_notebook(tmp_path / f"{name}.ipynb", "output_dir = None")
    assert [p.stem for p in select_notebooks(tmp_path)] == ["01_dice_loss", "02_pcl", "10_walkthrough"]
    assert [p.stem for p in select_notebooks(tmp_path, ["02_pcl.ipynb", "01"])] == ["01_dice_loss", "02_pcl"]
    with pytest.raises(ValueError, match="--only '99' matches no notebook; available: 01_dice_loss"):
        select_notebooks(tmp_path, ["99"])


def test_missing_params_file_means_notebook_defaults(tmp_path):
    assert load_params(tmp_path, "smoke", "01_dice_loss") == {}
    (tmp_path / "smoke").mkdir()
    (tmp_path / "smoke" / "01_dice_loss.yaml").write_text("gamma: 0.5\n")
    assert load_params(tmp_path, "smoke", "01_dice_loss") == {"gamma": 0.5}
    (tmp_path / "smoke" / "bad.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match="expected a mapping"):
        load_params(tmp_path, "smoke", "bad")
    (tmp_path / "smoke" / "broken.yaml").write_text("x: 1\ny: [2\n")
    with pytest.raises(ValueError, match=r"broken.yaml:\d+: invalid YAML"):
        load_params(tmp_path, "smoke", "broken")
    with pytest.raises(ValueError, match="params_set must be one of default, smoke, gpu"):
        load_params(tmp_path, "large", "01_dice_loss")


def test_plan_is_the_sweep_grid_and_seeds_set_the_seeds_list(tmp_path):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "ok_metrics.yaml").write_text("x: 5.0\n")
    plan = plan_executions([OK], tmp_path, "default", {"x": [1, 2]}, [7, 8])
    assert [(e.point, e.slug) for e in plan] == [({"x": 1}, "x=1"), ({"x": 2}, "x=2")]
    assert plan[0].parameters == {"x": 1, "seeds": [7, 8]}  # the sweep overrides the params file; one seed list
    single = plan_executions([OK], tmp_path, "default")
    assert [(e.parameters, e.slug) for e in single] == [({"x": 5.0}, "")]


@pytest.mark.parametrize(
    ("params_file", "sweep", "seeds", "message"),
    [
        (
            "gamma: 1\n",
            {},
            None,
            r"params file default/ok_metrics.yaml: unknown parameter 'gamma' for notebook ok_metrics.ipynb; allowed: seeds, x, output_dir",
        ),
        ("", {"epsilon": [0.1]}, None, r"--sweep: unknown parameter 'epsilon' for notebook ok_metrics.ipynb"),
        ("output_dir: /tmp\n", {}, None, r"'output_dir' is set by the runner"),
        ("", {"seeds": [[1]]}, [1, 2], r"either with --seeds or with --sweep seeds"),
    ],
)
def test_plan_refuses_bad_parameter_names(tmp_path, params_file, sweep, seeds, message):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "ok_metrics.yaml").write_text(params_file)
    with pytest.raises(ValueError, match=message):
        plan_executions([OK], tmp_path, "default", sweep, seeds)


def test_seeds_refused_for_notebook_without_seeds_parameter(tmp_path):
    notebook = _write_notebook(tmp_path / "no_seed.ipynb", "x = 1\noutput_dir = None")
    with pytest.raises(ValueError, match="--seeds: unknown parameter 'seeds' for notebook no_seed.ipynb; allowed: x, output_dir"):
        plan_executions([notebook], tmp_path, "default", None, [1, 2])


def test_notebook_without_output_dir_parameter_refused(tmp_path):
    notebook = _write_notebook(tmp_path / "no_output.ipynb", "x = 1")
    with pytest.raises(ValueError, match="no_output.ipynb has no 'output_dir' parameter"):
        plan_executions([notebook], tmp_path, "default")


def test_unknown_parameter_refused_before_anything_runs(tmp_path, capsys):
    outputs = tmp_path / "outputs"
    code = main(
        [
            "run",
            "--notebooks-dir",
            str(FIXTURES),
            "--params-dir",
            str(tmp_path),
            "--outputs-dir",
            str(outputs),
            "--sweep",
            "epsilon=0.1,0.2",
        ]
    )
    assert code == 2
    assert "unknown parameter 'epsilon' for notebook" in capsys.readouterr().err
    assert not outputs.exists()


@pytest.mark.parametrize(
    ("params_file", "sweep", "message"),
    [
        (b"", "x=[1,2", r"error: --sweep x:1: invalid YAML \(expected ',' or '\]', but got '<stream end>'\)"),
        (b"", "x=1.0,1.00", r"error: --sweep x: values '1.0' and '1.00' are equal after parsing"),
        (b"x: 1\nseeds: [2\n", "x=1", r"error: \S*default/ok_metrics.yaml:2: invalid YAML"),
        ("x: 1\n# 说明\n".encode("gbk"), "x=1", r"error: \S*default/ok_metrics.yaml:2: params file is not UTF-8 text"),
    ],
)
def test_bad_yaml_in_a_params_file_or_a_sweep_exits_2_naming_it(tmp_path, capsys, params_file, sweep, message):
    (tmp_path / "default").mkdir()
    (tmp_path / "default" / "ok_metrics.yaml").write_bytes(params_file)
    outputs = tmp_path / "outputs"
    code = main(
        [
            "run",
            "--only",
            "ok",
            "--notebooks-dir",
            str(FIXTURES),
            "--params-dir",
            str(tmp_path),
            "--outputs-dir",
            str(outputs),
            "--sweep",
            sweep,
        ]
    )
    error = capsys.readouterr().err
    assert code == 2 and re.search(message, error) and "Traceback" not in error
    assert not outputs.exists()


def test_existing_run_folder_is_never_reused(tmp_path):
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "keep.txt").write_text("earlier run")
    with pytest.raises(ValueError, match="run_id 'run1'.*already exists"):
        run(only=["ok"], notebooks_dir=FIXTURES, params_dir=tmp_path, outputs_dir=tmp_path, run_id="run1", stream=_quiet())
    assert [p.name for p in (tmp_path / "run1").iterdir()] == ["keep.txt"]
    with pytest.raises(ValueError, match="run_id '../x'"):
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
    with pytest.raises(ValueError, match="metrics must be a dict"):
        write_json(tmp_path / "x.json", [1, 2])
    with pytest.raises(ValueError, match="not JSON-serialisable"):
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
    with pytest.raises(ValueError, match="metrics must be a dict"):
        write_metrics(tmp_path, [1, 2])
    with pytest.raises(ValueError, match="entry 'name' must be a number"):
        write_metrics(tmp_path, {"name": "x"})
    with pytest.raises(ValueError, match="entry 'score' must be a number or a mapping with keys mean, std, n"):
        write_metrics(tmp_path, {"score": {"mean": 1.0}})
    for name in ("f1_std", "n_seeds"):  # summary_agg.csv listed n_seeds and *_std entries as metrics (issue 13)
        with pytest.raises(ValueError, match=f"entry '{name}' is a spread or a count of runs"):
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
        params_dir=root / "params",
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
        params_dir=root / "params",
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
    assert 'src="ok_metrics/x=2.0/figures/score_line.html"' in index
    assert 'href="ok_metrics/x=2.0/ok_metrics.html"' in index


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
            str(tmp_path),
            "--run-id",
            "mixed",
        ]
    )
    assert code == 2
    assert sorted(p.name for p in report.run_dir.iterdir()) == before


@pytest.mark.slow
def test_cli_exit_code_is_nonzero_when_a_notebook_fails(tmp_path, capsys):
    code = main(
        [
            "run",
            "--only",
            "fails",
            "--notebooks-dir",
            str(FIXTURES),
            "--params-dir",
            str(tmp_path),
            "--outputs-dir",
            str(tmp_path / "outputs"),
            "--run-id",
            "r1",
        ]
    )
    assert code == 1
    out = capsys.readouterr().out
    assert "[1/1] fails_in_cell2 ... FAILED at cell 2: ValueError: boom at x=1.0" in out
    assert "0/1 ok" in out


# ----------------------------------------------------------------------------- progress


def _two_notebooks_on_the_board(interactive: bool) -> str:
    """What a board writes while ``[1/2] a`` (at cell 3/9) and ``[2/2] b`` (at cell 1/4) run and b ends first."""
    import time

    from workbench.runs.progress import Progress

    stream = io.StringIO()
    with Progress(stream, interactive=interactive, interval=0.05) as board:
        board.started("[1/2] a", total_cells=9)(cell_index=2)
        board.started("[2/2] b", total_cells=4)(cell_index=0)
        time.sleep(0.18)
        board.finished("[2/2] b", "ok (0.2 s)")
        time.sleep(0.12)
        board.finished("[1/2] a", "FAILED at cell 3: ValueError: x (0.3 s)")
    return stream.getvalue()


def test_progress_in_a_log_adds_a_line_per_running_notebook_and_interval():
    lines = _two_notebooks_on_the_board(interactive=False).splitlines()
    status = lines.index("[2/2] b ... ok (0.2 s)")
    assert lines[-1] == "[1/2] a ... FAILED at cell 3: ValueError: x (0.3 s)"
    ticks_a = [line for line in lines if line.startswith("    [1/2] a: still running, cell 3/9, ")]
    ticks_b = [line for line in lines if line.startswith("    [2/2] b: still running, cell 1/4, ")]
    assert 2 <= len(ticks_b) <= 4 and all(i < status for i, line in enumerate(lines) if line in ticks_b)  # none after b ended
    assert len(ticks_a) > len(ticks_b)
    assert all(line in ticks_a + ticks_b or " ... " in line for line in lines)  # every line whole: a tick or a status


def test_progress_in_a_log_prints_only_the_status_of_a_short_notebook():
    from workbench.runs.progress import Progress

    stream = io.StringIO()
    with Progress(stream, interactive=False, interval=30.0) as board:
        board.started("[1/5] nb", total_cells=3)
        board.finished("[1/5] nb", "ok (0.1 s)")
    assert stream.getvalue() == "[1/5] nb ... ok (0.1 s)\n"


def test_progress_on_a_terminal_redraws_one_line_naming_every_running_notebook():
    text = _two_notebooks_on_the_board(interactive=True)
    before, _, after = text.partition("\r\033[K[2/2] b ... ok (0.2 s)\n")  # the status replaces the drawn line
    assert after, text
    assert re.search(r"\rrunning: \[1/2\] a cell 3/9, \d+ s \| \[2/2\] b cell 1/4, \d+ s\033\[K", before)
    assert "\n" not in before and "[2/2] b" not in after
    assert re.search(r"\rrunning: \[1/2\] a cell 3/9, \d+ s\033\[K", after)
    assert after.endswith("\r\033[K[1/2] a ... FAILED at cell 3: ValueError: x (0.3 s)\n")


def test_progress_without_ticking_writes_only_status_lines():
    import time

    from workbench.runs.progress import Progress

    stream = io.StringIO()
    with Progress(stream, interactive=False, interval=0.01, ticking=False) as board:
        board.started("[1/1] nb", total_cells=3)
        time.sleep(0.05)
        board.finished("[1/1] nb", "ok (0.1 s)")
    assert stream.getvalue() == "[1/1] nb ... ok (0.1 s)\n"


def test_kernels_get_the_thread_count_in_their_environment(tmp_path):
    notebook = _write_notebook(
        tmp_path / "threads.ipynb",
        "output_dir = None",
        "import os\nfrom workbench.runs import write_metrics\n"
        "write_metrics(output_dir, {'omp_threads': int(os.environ['OMP_NUM_THREADS'])})",
    )
    report = run(notebooks_dir=tmp_path, params_dir=tmp_path, outputs_dir=tmp_path / "out", threads=3, stream=_quiet())
    assert not report.failed and read_metrics(report.outcomes[0].output_dir)["metrics"]["omp_threads"] == 3
    assert notebook.is_file()


def _marker_notebook(path: Path, mine: str, theirs: str) -> Path:
    """A notebook that writes ``mine`` and then waits up to 60 s for ``theirs``: two of them
    finish only when they run at the same time."""
    return _write_notebook(
        path,
        "output_dir = None\nmarkers = None",
        "import os, pathlib, time\n"
        f"pathlib.Path(markers, {mine!r}).write_text(os.getcwd())\n"
        "deadline = time.monotonic() + 60\n"
        f"while not pathlib.Path(markers, {theirs!r}).exists():\n"
        "    assert time.monotonic() < deadline, 'the other notebook never started'\n"
        "    time.sleep(0.05)\n",
    )


@pytest.mark.slow
def test_jobs_run_notebooks_at_the_same_time_and_keep_the_plan_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative folders, as `make run` gives them
    notebooks, markers = tmp_path / "notebooks", tmp_path / "markers"
    notebooks.mkdir(), markers.mkdir()
    _marker_notebook(notebooks / "a.ipynb", "a", "b")
    _marker_notebook(notebooks / "b.ipynb", "b", "a")
    (tmp_path / "params" / "default").mkdir(parents=True)
    for name in ("a", "b"):
        (tmp_path / "params" / "default" / f"{name}.yaml").write_text(f"markers: {str(markers)!r}\n")
    report = run(
        notebooks_dir="notebooks", params_dir="params", outputs_dir="out", jobs=2, threads=1, stream=_quiet(), progress=False
    )
    assert [outcome.execution.name for outcome in report.outcomes] == ["a", "b"]
    assert not report.failed, [outcome.status_text() for outcome in report.failed]
    assert Path.cwd() == tmp_path  # the runner never moves its own working directory
    assert {(markers / name).read_text() for name in "ab"} == {str(notebooks.resolve())}  # each kernel's own


@pytest.mark.parametrize("jobs", [0, -1, 1.5])
def test_jobs_below_one_are_refused_before_anything_runs(tmp_path, jobs):
    with pytest.raises(ValueError, match=r"jobs: must be an int >= 1 \(notebooks run at once\)"):
        run(only=["ok"], notebooks_dir=FIXTURES, params_dir=tmp_path, outputs_dir=tmp_path / "out", jobs=jobs, stream=_quiet())
    assert not (tmp_path / "out").exists()


def test_default_jobs_fill_the_cores_with_kernels_of_the_given_threads(monkeypatch):
    from workbench import runs

    monkeypatch.setattr(runs, "usable_cores", lambda: 2)
    assert (runs.default_jobs(1), runs.default_jobs(2), runs.default_jobs(4)) == (2, 1, 1)
    monkeypatch.setattr(runs, "usable_cores", lambda: 16)
    assert (runs.default_jobs(8), runs.default_jobs(3)) == (2, 5)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="reads kernel states from /proc (Linux)")
def test_ctrl_c_stops_the_running_kernels_and_the_run(tmp_path):
    import os
    import signal
    import threading
    import time

    notebooks, markers = tmp_path / "notebooks", tmp_path / "markers"
    notebooks.mkdir(), markers.mkdir()
    for name in ("a", "b"):
        _write_notebook(
            notebooks / f"{name}.ipynb",
            "output_dir = None",
            f"import os, pathlib, time\npathlib.Path({str(markers)!r}, {name!r}).write_text(str(os.getpid()))\ntime.sleep(120)",
        )

    def press_ctrl_c_once_both_run() -> None:
        deadline = time.monotonic() + 60
        while len(list(markers.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)  # a real signal: Ctrl-C in the terminal

    threading.Thread(target=press_ctrl_c_once_both_run, daemon=True).start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run(
            notebooks_dir=notebooks,
            params_dir=tmp_path,
            outputs_dir=tmp_path / "out",
            jobs=2,
            threads=1,
            stream=_quiet(),
            progress=False,
        )
    assert time.monotonic() - start < 60  # not the notebooks' 120 s
    for marker in markers.iterdir():
        status = Path("/proc", marker.read_text(), "status")
        assert not status.exists() or "State:\tZ" in status.read_text(), f"kernel of {marker.name} still runs"


def test_a_stopped_kernel_registry_refuses_new_kernels():
    from workbench.runs.execute import RunningKernels

    kernels = RunningKernels()
    manager_class = kernels.manager_class()
    manager_class(kernel_name="python3")  # recorded
    assert kernels.kill_all() == 0  # none had started a process
    with pytest.raises(RuntimeError, match="the run was interrupted: no new kernel starts"):
        manager_class(kernel_name="python3")
