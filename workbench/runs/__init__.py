"""The papermill batch runner behind ``python -m workbench run`` (docs/runner.md).

A run executes notebooks headless into a fresh ``outputs/<run-id>/`` folder:

    outputs/<run-id>/<notebook>/[<sweep-point>/]
        <notebook>.ipynb   executed notebook
        <notebook>.html    nbconvert HTML export
        params.yaml        the parameters injected by the runner
        metrics.json       written by the notebook itself (:func:`write_metrics`)
        figures/           written by the notebook (workbench.viz.figures.show)
    outputs/<run-id>/summary.csv, summary_agg.csv, index.html

:mod:`~workbench.runs.plan` plans and checks the executions, :mod:`~workbench.runs.execute`
runs one, :mod:`~workbench.runs.report` writes the summaries and the index page, and
:mod:`workbench.records` is the metrics.json format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from workbench.runs.assets import ensure_assets
from workbench.runs.execute import Outcome, RunningKernels, ensure_kernel, execute, kernel_environment_set, new_run_dir
from workbench.records import read_metrics, write_metrics
from workbench.runs.plan import PARAMS_SETS, Execution, parse_seeds, parse_sweep, plan_executions, select_notebooks
from workbench.runs.progress import Progress
from workbench.threads import default_threads, usable_cores

__all__ = ["PARAMS_SETS", "RunReport", "default_jobs", "parse_seeds", "parse_sweep", "read_metrics", "run", "write_metrics"]


@dataclass
class RunReport:
    run_dir: Path
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.ok]


def default_jobs(threads: int) -> int:
    """How many notebooks run at once by default: as many kernels of ``threads`` threads as the
    usable cores hold, at least 1 (two on any machine with two or more cores and the default threads)."""
    return max(1, usable_cores() // threads)


def _label(number: int, total: int, execution: Execution) -> str:
    return f"[{number}/{total}] {execution.name}" + (f" {execution.slug}" if execution.slug else "")


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
    threads: int | None = None,
    jobs: int | None = None,
    stream: IO[str] | None = None,
    progress: bool = True,
) -> RunReport:
    """Execute the selected notebooks over the sweep grid; write summaries and index.html.

    ``seeds`` sets every notebook's ``seeds`` parameter; ``threads`` the CPU threads of every
    kernel (None: ``workbench.threads.default_threads``); ``jobs`` how many notebooks run at
    once (None: :func:`default_jobs`, so that jobs x threads fills the cores without
    oversubscribing them). Each notebook's status line goes to ``stream`` (stdout) when it ends;
    ``progress`` also shows the running notebooks' current cells and elapsed times
    (``runs.progress``). Outcomes keep the plan's order. Validation errors (unknown parameter,
    bad run id, existing run folder, threads or jobs < 1) raise ValueError before any folder is
    created or notebook runs.
    """
    notebooks = select_notebooks(notebooks_dir, only)
    executions = plan_executions(notebooks, params_dir, params_set, sweep, seeds)
    threads = default_threads() if threads is None else threads
    if not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads: must be an int >= 1, got {threads!r}")
    jobs = default_jobs(threads) if jobs is None else jobs
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: must be an int >= 1 (notebooks run at once), got {jobs!r}")
    kernel_name = kernel_name or ensure_kernel()
    run_dir = new_run_dir(outputs_dir, run_id)
    ensure_assets(run_dir)  # once, before concurrent exports look for them
    kernels = RunningKernels()  # every kernel the run starts, to stop them on Ctrl-C

    def execute_numbered(numbered: tuple[int, Execution]) -> Outcome:
        number, execution = numbered
        label = _label(number, len(executions), execution)
        output_dir = run_dir / execution.name / execution.slug if execution.slug else run_dir / execution.name
        cells = len(json.loads(execution.notebook.read_text(encoding="utf-8"))["cells"]) + 1  # + the injected cell
        outcome = execute(execution, output_dir, kernel_name, on_cell_start=board.started(label, cells), kernels=kernels)
        board.finished(label, f"{outcome.status_text()} ({outcome.duration_s:.1f} s)")
        return outcome

    with (
        kernel_environment_set(threads),
        Progress(stream, ticking=progress) as board,
        ThreadPoolExecutor(max_workers=min(jobs, len(executions)), thread_name_prefix="notebook") as pool,
    ):
        futures = [pool.submit(execute_numbered, numbered) for numbered in enumerate(executions, start=1)]
        try:
            outcomes = [future.result() for future in futures]
        except KeyboardInterrupt:  # Ctrl-C reaches only this thread: stop the kernels the workers wait on
            for future in futures:
                future.cancel()
            kernels.kill_all()
            raise
    from workbench.runs.report import write_index, write_summaries  # pandas: imported when a run ends

    summary, aggregated = write_summaries(run_dir, outcomes, list(sweep or {}))
    write_index(run_dir, summary, aggregated)
    return RunReport(run_dir, outcomes)
