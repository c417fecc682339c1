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
:mod:`~workbench.runs.metrics` is the metrics.json format.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.runs.execute import Outcome, ensure_kernel, execute, new_run_dir
from workbench.runs.metrics import read_metrics, write_metrics
from workbench.runs.plan import PARAMS_SETS, parse_seeds, parse_sweep, plan_executions, select_notebooks
from workbench.runs.progress import Progress
from workbench.threads import default_threads

__all__ = ["PARAMS_SETS", "RunReport", "parse_seeds", "parse_sweep", "read_metrics", "run", "write_metrics"]


@dataclass
class RunReport:
    run_dir: Path
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.ok]


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
    log: Callable[..., None] = print,
    progress: bool = True,
) -> RunReport:
    """Execute the selected notebooks over the sweep grid; write summaries and index.html.

    ``seeds`` sets every notebook's ``seeds`` parameter; ``threads`` the CPU threads of every
    kernel (None: ``workbench.threads.default_threads``). ``progress`` shows the current cell
    and the elapsed time while a notebook runs (``runs.progress``). Validation errors (unknown
    parameter, bad run id, existing run folder) raise ValueError before any folder is created or
    notebook runs.
    """
    notebooks = select_notebooks(notebooks_dir, only)
    executions = plan_executions(notebooks, params_dir, params_set, sweep, seeds)
    threads = default_threads() if threads is None else threads
    if threads < 1:
        raise ValueError(f"threads: must be an int >= 1, got {threads!r}")
    kernel_name = kernel_name or ensure_kernel()
    run_dir = new_run_dir(outputs_dir, run_id)
    outcomes = []
    for number, execution in enumerate(executions, start=1):
        label = f"[{number}/{len(executions)}] {execution.name}" + (f" {execution.slug}" if execution.slug else "")
        log(f"{label} ...", end=" ", flush=True)
        output_dir = run_dir / execution.name / execution.slug if execution.slug else run_dir / execution.name
        if progress:
            cells = len(json.loads(execution.notebook.read_text(encoding="utf-8"))["cells"]) + 1  # + the injected cell
            with Progress(label, cells, continues_line=True) as ticker:
                outcome = execute(execution, output_dir, kernel_name, threads, ticker)
        else:
            outcome = execute(execution, output_dir, kernel_name, threads)
        log(f"{outcome.status_text()} ({outcome.duration_s:.1f} s)", flush=True)
        outcomes.append(outcome)
    from workbench.runs.report import write_index, write_summaries  # pandas: imported when a run ends

    summary, aggregated = write_summaries(run_dir, outcomes, list(sweep or {}))
    write_index(run_dir, summary, aggregated)
    return RunReport(run_dir, outcomes)
