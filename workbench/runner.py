"""Papermill batch runner behind ``python -m workbench run``.

A run executes notebooks headless into a fresh ``outputs/<run-id>/`` folder:

    outputs/<run-id>/<notebook>/[<cell-slug>/]
        <notebook>.ipynb   executed notebook
        <notebook>.html    nbconvert HTML export
        params.yaml        the parameters injected by the runner
        metrics.json       written by the notebook itself (workbench.results.write_metrics)
        figures/           written by the notebook (workbench.viz.figures.show)
    outputs/<run-id>/summary.csv, summary_agg.csv, index.html

Parameters come from ``params/<set>/<notebook-stem>.yaml`` (a missing file
means the notebook's own defaults), then the ``--sweep`` grid and ``--seeds``,
then ``output_dir`` (always injected by the runner). Every name is checked
against the notebook's ``parameters`` cell before anything runs.
"""

from __future__ import annotations

import itertools
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import nbformat
import yaml

from workbench.results import numeric_metrics, read_metrics
from workbench.run_report import write_index, write_summaries

PARAMETERS_TAG = "parameters"
INJECTED_PARAMETERS_TAG = "injected-parameters"
OUTPUT_DIR_PARAMETER = "output_dir"
SEED_PARAMETER = "seed"
PARAMS_SETS = ("default", "smoke", "gpu")
WORKBENCH_KERNEL = "workbench"
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,-]")


@dataclass(frozen=True)
class Execution:
    """One notebook run: the injected parameters (without ``output_dir``) and its grid cell."""

    notebook: Path
    parameters: dict[str, Any]
    point: dict[str, Any]
    seed: int | None
    slug: str

    @property
    def name(self) -> str:
        return self.notebook.stem

    @property
    def point_slug(self) -> str:
        """The sweep point without the seed (the group that seeds are aggregated over)."""
        return cell_slug(self.point, None)


@dataclass
class Outcome:
    """What one execution produced; ``failed_cell`` indexes the source notebook's cells."""

    execution: Execution
    output_dir: Path
    status: str
    duration_s: float
    failed_cell: int | None = None
    error: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass
class RunReport:
    run_dir: Path
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.ok]


# ----------------------------------------------------------------------------- parsing


def parse_value(text: str) -> Any:
    """A sweep value as YAML reads it: ``0.1`` -> float, ``true`` -> bool, ``abc`` -> str."""
    return yaml.safe_load(text) if text.strip() else text


def parse_sweep(specs: Iterable[str]) -> dict[str, list[Any]]:
    """``["epsilon=0.1,0.2", "gamma=1"]`` -> ``{"epsilon": [0.1, 0.2], "gamma": [1]}``."""
    sweep: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ValueError(f"--sweep {spec!r}: expected key=v1,v2,... with at least one value")
        if key in sweep:
            raise ValueError(f"--sweep: parameter {key!r} given twice; list all its values in one key=v1,v2")
        sweep[key] = [parse_value(value.strip()) for value in values.split(",")]
    return sweep


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; raises ValueError for anything but comma-separated integers."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: each seed may appear once")
    return seeds


def cell_slug(point: dict[str, Any], seed: int | None) -> str:
    """Folder name of a grid cell, seed first: ``seed=1,epsilon=0.1`` (empty for no grid)."""
    items = ([(SEED_PARAMETER, seed)] if seed is not None else []) + list(point.items())
    return _SLUG_UNSAFE.sub("_", ",".join(f"{key}={value}" for key, value in items))


# ----------------------------------------------------------------------------- planning


def select_notebooks(notebooks_dir: str | Path, only: Sequence[str] | None = None) -> list[Path]:
    """All ``*.ipynb`` in ``notebooks_dir`` sorted, or those whose stem equals or starts with an ``only`` entry."""
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"notebooks_dir {str(notebooks_dir)!r} holds no *.ipynb notebooks")
    if not only:
        return notebooks
    selected = []
    for wanted in only:
        stem = wanted.removesuffix(".ipynb")
        matches = [nb for nb in notebooks if nb.stem == stem or nb.stem.startswith(stem)]
        if not matches:
            raise ValueError(
                f"--only {wanted!r} matches no notebook; available: {', '.join(nb.stem for nb in notebooks)}"
            )
        selected.extend(nb for nb in matches if nb not in selected)
    return sorted(selected)


def load_params(params_dir: str | Path, params_set: str, notebook_stem: str) -> dict[str, Any]:
    """``params/<set>/<stem>.yaml`` as a dict; a missing file means the notebook's defaults (``{}``)."""
    if params_set not in PARAMS_SETS:
        raise ValueError(f"params_set must be one of {', '.join(PARAMS_SETS)}, got {params_set!r}")
    path = Path(params_dir) / params_set / f"{notebook_stem}.yaml"
    if not path.is_file():
        return {}
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"params file {path}: expected a mapping of parameter -> value, got {type(loaded).__name__}")
    return loaded


def notebook_parameters(notebook: str | Path) -> list[str]:
    """Names defined in the notebook's ``parameters`` cell (papermill.inspect_notebook)."""
    import papermill

    try:
        return list(papermill.inspect_notebook(str(notebook)))
    except ValueError as exc:  # e.g. no kernelspec in the notebook metadata
        raise ValueError(f"notebook {Path(notebook).name}: {exc}") from exc


def _check_names(notebook: Path, allowed: list[str], names: Iterable[str], source: str) -> None:
    for name in names:
        if name == OUTPUT_DIR_PARAMETER:
            raise ValueError(f"{source}: parameter {name!r} is set by the runner, not by the user")
        if name not in allowed:
            raise ValueError(
                f"{source}: unknown parameter {name!r} for notebook {notebook.name}; "
                f"allowed: {', '.join(allowed) or '(none)'}"
            )


def plan_executions(
    notebooks: Sequence[Path],
    params_dir: str | Path,
    params_set: str,
    sweep: dict[str, list[Any]] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[Execution]:
    """Every execution of the run, validated: unknown parameter names raise ValueError before anything runs.

    The grid is the cartesian product of the sweep values and the seeds.
    """
    sweep = sweep or {}
    if seeds and SEED_PARAMETER in sweep:
        raise ValueError("give seeds either with --seeds or with --sweep seed=..., not both")
    executions = []
    for notebook in notebooks:
        allowed = notebook_parameters(notebook)
        if OUTPUT_DIR_PARAMETER not in allowed:
            raise ValueError(
                f"notebook {notebook.name} has no {OUTPUT_DIR_PARAMETER!r} parameter; "
                "the runner injects it (add `output_dir = None` to the parameters cell)"
            )
        base = load_params(params_dir, params_set, notebook.stem)
        _check_names(notebook, allowed, base, f"params file {params_set}/{notebook.stem}.yaml")
        _check_names(notebook, allowed, sweep, "--sweep")
        if seeds:
            _check_names(notebook, allowed, [SEED_PARAMETER], "--seeds")
        grid = [dict(zip(sweep, values)) for values in itertools.product(*sweep.values())]
        for seed in seeds or [None]:
            for point in grid:
                parameters = {**base, **point, **({SEED_PARAMETER: seed} if seed is not None else {})}
                executions.append(Execution(notebook, parameters, point, seed, cell_slug(point, seed)))
    return executions


# ----------------------------------------------------------------------------- kernel


def _kernel_runs_current_python(kernel_name: str) -> bool:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel_name)
    except NoSuchKernel:
        return False
    executable = spec.argv[0]
    # jupyter_client launches a bare "python"/"python3"/"python3.X" as sys.executable.
    bare_names = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    return executable in bare_names or os.path.abspath(executable) == os.path.abspath(sys.executable)


def ensure_kernel() -> str:
    """Name of a kernelspec that runs this interpreter (the project .venv).

    Uses ``python3`` when it already does; otherwise installs a ``workbench``
    kernelspec into ``sys.prefix`` pointing at ``sys.executable``.
    """
    if _kernel_runs_current_python("python3"):
        return "python3"
    if not _kernel_runs_current_python(WORKBENCH_KERNEL):
        from ipykernel.kernelspec import install

        install(kernel_name=WORKBENCH_KERNEL, display_name="Python (workbench)", prefix=sys.prefix)
        if not _kernel_runs_current_python(WORKBENCH_KERNEL):
            raise RuntimeError(
                f"installed kernelspec {WORKBENCH_KERNEL!r} into {sys.prefix} but another one shadows it; "
                "pass --kernel NAME of a kernel that runs this environment"
            )
    return WORKBENCH_KERNEL


# ----------------------------------------------------------------------------- execution


def new_run_dir(outputs_dir: str | Path, run_id: str | None = None) -> Path:
    """Create ``outputs/<run-id>`` (timestamp + short random suffix by default); never reuse a folder."""
    if run_id is not None and (not run_id or _SLUG_UNSAFE.search(run_id) or run_id in {".", ".."}):
        raise ValueError(f"run_id {run_id!r}: use letters, digits and ._=+,- only")
    run_id = run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    run_dir = Path(outputs_dir) / run_id
    if run_dir.exists():
        raise ValueError(f"run_id {run_id!r}: {run_dir} already exists; runs are never overwritten")
    run_dir.mkdir(parents=True)
    return run_dir


def _source_cell_index(executed_notebook: Path, executed_index: int) -> int:
    """Map a cell index of the executed notebook to the source notebook (skipping injected cells)."""
    cells = nbformat.read(executed_notebook, as_version=4).cells[:executed_index]
    return executed_index - sum(INJECTED_PARAMETERS_TAG in cell.metadata.get("tags", []) for cell in cells)


def export_html(notebook: Path) -> Path:
    """nbconvert HTML export next to the executed notebook."""
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_filename(str(notebook))
    target = notebook.with_suffix(".html")
    target.write_text(body, encoding="utf-8")
    return target


def _local_kernel_transport() -> dict[str, Any]:
    """On POSIX, talk to the kernel over IPC (Unix sockets) instead of unencrypted loopback TCP,
    which ipykernel warns about on every start."""
    if os.name != "posix":
        return {}
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IpcKernelManager(AsyncKernelManager):
        @default("transport")
        def _default_transport(self) -> str:
            return "ipc"

    return {"kernel_manager_class": IpcKernelManager}


def execute(execution: Execution, output_dir: Path, kernel_name: str) -> Outcome:
    """Run one notebook into ``output_dir``; a failure is recorded, never raised."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    output_dir.mkdir(parents=True, exist_ok=True)
    parameters = {**execution.parameters, OUTPUT_DIR_PARAMETER: str(output_dir.resolve())}
    (output_dir / "params.yaml").write_text(yaml.safe_dump(parameters, sort_keys=False), encoding="utf-8")
    executed = output_dir / execution.notebook.name
    failed_cell, error = None, None
    start = time.perf_counter()
    try:
        papermill.execute_notebook(
            str(execution.notebook),
            str(executed),
            parameters=parameters,
            kernel_name=kernel_name,
            cwd=str(execution.notebook.parent),
            progress_bar=False,
            **_local_kernel_transport(),
        )
    except PapermillExecutionError as exc:
        failed_cell = _source_cell_index(executed, exc.cell_index)
        error = f"{exc.ename}: {exc.evalue}"
    except Exception as exc:  # kernel died, notebook unreadable, ...: report it, keep running the others
        error = f"{type(exc).__name__}: {exc}"
    duration = time.perf_counter() - start
    if executed.is_file():
        try:
            export_html(executed)
        except Exception as exc:  # the run's own status is what matters; note the export problem
            error = error or f"HTML export failed: {type(exc).__name__}: {exc}"
    return Outcome(
        execution=execution,
        output_dir=output_dir,
        status="failed" if error else "ok",
        duration_s=duration,
        failed_cell=failed_cell,
        error=error,
        metrics=read_metrics(output_dir),
    )


def _status_text(outcome: Outcome) -> str:
    if outcome.ok:
        return "ok"
    where = f" at cell {outcome.failed_cell}" if outcome.failed_cell is not None else ""
    return f"FAILED{where}: {outcome.error}"


def summary_row(outcome: Outcome, run_dir: Path) -> dict[str, Any]:
    """One summary.csv row: identity, sweep values, status and every numeric top-level metric."""
    execution = outcome.execution
    return {
        "notebook": execution.name,
        "cell": execution.slug,
        "point": execution.point_slug,
        "seed": execution.seed,
        **execution.point,
        "status": outcome.status,
        "failed_cell": outcome.failed_cell,
        "error": outcome.error,
        "duration_s": round(outcome.duration_s, 2),
        "folder": outcome.output_dir.relative_to(run_dir).as_posix(),
        **{f"metric.{name}": value for name, value in numeric_metrics(outcome.metrics).items()},
    }


def run(
    params_set: str = "default",
    only: Sequence[str] | None = None,
    sweep: dict[str, list[Any]] | None = None,
    seeds: Sequence[int] | None = None,
    notebooks_dir: str | Path = "notebooks",
    params_dir: str | Path = "params",
    outputs_dir: str | Path = "outputs",
    run_id: str | None = None,
    kernel_name: str | None = None,
    log=print,
) -> RunReport:
    """Execute the selected notebooks over the sweep x seeds grid; write summaries and index.html.

    Validation errors (unknown parameter, bad run id, existing run folder)
    raise ValueError before any folder is created or notebook runs.
    """
    notebooks = select_notebooks(notebooks_dir, only)
    executions = plan_executions(notebooks, params_dir, params_set, sweep, seeds)
    kernel_name = kernel_name or ensure_kernel()
    run_dir = new_run_dir(outputs_dir, run_id)
    outcomes = []
    for number, execution in enumerate(executions, start=1):
        label = f"[{number}/{len(executions)}] {execution.name}" + (f" {execution.slug}" if execution.slug else "")
        log(f"{label} ...", end=" ", flush=True)
        output_dir = run_dir / execution.name / execution.slug if execution.slug else run_dir / execution.name
        outcome = execute(execution, output_dir, kernel_name)
        log(f"{_status_text(outcome)} ({outcome.duration_s:.1f} s)", flush=True)
        outcomes.append(outcome)
    rows = [summary_row(outcome, run_dir) for outcome in outcomes]
    summary, aggregated = write_summaries(run_dir, rows, list(sweep or {}))
    write_index(run_dir, summary, aggregated)
    return RunReport(run_dir, outcomes)


# ----------------------------------------------------------------------------- notebook hygiene


def check_notebook_clean(path: str | Path) -> list[str]:
    """Problems that keep a notebook from being committed: outputs, execution counts, not exactly one ``parameters`` cell."""
    try:
        notebook = nbformat.read(str(path), as_version=4)
    except Exception as exc:
        return [f"{path}: cannot be read as a notebook ({type(exc).__name__}: {exc})"]
    problems = []
    parameter_cells = []
    for index, cell in enumerate(notebook.cells):
        tags = cell.metadata.get("tags", [])
        if PARAMETERS_TAG in tags:
            parameter_cells.append(index)
            if cell.cell_type != "code":
                problems.append(f"{path}: cell {index} is tagged {PARAMETERS_TAG!r} but is not a code cell")
        if INJECTED_PARAMETERS_TAG in tags:
            problems.append(f"{path}: cell {index} is a papermill {INJECTED_PARAMETERS_TAG!r} cell")
        if cell.cell_type == "code" and cell.get("outputs"):
            problems.append(f"{path}: cell {index} has outputs")
        if cell.cell_type == "code" and cell.get("execution_count") is not None:
            problems.append(f"{path}: cell {index} has an execution count")
    if len(parameter_cells) != 1:
        problems.append(
            f"{path}: expected exactly one cell tagged {PARAMETERS_TAG!r}, found {len(parameter_cells)}"
            + (f" (cells {parameter_cells})" if parameter_cells else "")
        )
    return problems
