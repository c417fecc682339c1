"""The papermill batch runner behind ``python -m workbench run`` (docs/runner.md).

:mod:`~workbench.runs.plan` plans and checks the executions, :mod:`~workbench.runs.execute` runs one
(in a thread here, one kernel each, or as a job of a Slurm array through submitit),
:mod:`~workbench.runs.report` writes ``summary.csv``, ``summary_agg.csv`` and ``index.html``.
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from workbench.metrics_file import add_details, read_metrics, write_metrics
from workbench.runs.assets import ensure_assets
from workbench.runs.execute import Outcome, RunningKernels, ensure_kernel, execute, new_run_dir
from workbench.runs.options import parse_assignments, parse_seeds, parse_sweep
from workbench.runs.params_sets import PARAMS_SETS, params_folder, select_notebooks
from workbench.runs.plan import Execution, check_devices, check_paths, plan_executions, secret_environment
from workbench.runs.progress import Progress
from workbench.runs.results import finish_record, start_record, write_results
from workbench.threads import default_threads, kernel_environment, usable_cores

__all__ = [
    "PARAMS_SETS",
    "add_details",
    "parse_assignments",
    "parse_seeds",
    "parse_sweep",
    "plan_executions",
    "read_metrics",
    "write_metrics",
]
EXECUTORS = ("threads", "slurm", "local")  # local: submitit's local executor, the Slurm path on this machine


@dataclass
class RunReport:
    run_dir: Path
    outcomes: list[Outcome]

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if not outcome.ok]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped the run; ``report`` holds what ran (index.html says "interrupted")."""

    def __init__(self, report: RunReport) -> None:
        super().__init__(str(report.run_dir))
        self.report = report


def default_jobs(threads: int) -> int:
    """How many notebooks run at once by default on CPUs: as many kernels of ``threads`` threads as the
    usable cores hold, at least 1 (two on any machine with two or more cores and the default threads)."""
    return max(1, usable_cores() // threads)


def visible_gpus() -> list[str]:
    """The GPUs this process sees: ``CUDA_VISIBLE_DEVICES`` when set, else ``0 .. torch.cuda.device_count() - 1``."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [gpu.strip() for gpu in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if gpu.strip()]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())]


def _check_count(name: str, value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name}: must be an int >= 1 ({what}), got {value!r}")
    return value


def _in_threads(executions, folders, kernel_name, env, jobs, gpus, board) -> Iterator[tuple[int, Outcome]]:
    """Run the executions in ``jobs`` daemon threads, each kernel on its own GPU of ``gpus`` (cycled when ``jobs``
    exceeds them); yields (index, outcome) as they end. Ctrl-C or SIGTERM kills the running kernels and returns at once:
    an HTML export still running in a thread is abandoned (its page is written whole or not at all), not waited for."""
    kernels = RunningKernels()
    free = queue.SimpleQueue()
    waiting = queue.SimpleQueue()
    ended = queue.SimpleQueue()
    for slot in range(jobs):
        free.put({"CUDA_VISIBLE_DEVICES": gpus[slot % len(gpus)]} if gpus else {})
    for index in range(len(executions)):
        waiting.put(index)

    def work() -> None:
        while not kernels.stopped:
            try:
                index = waiting.get_nowait()
            except queue.Empty:
                return
            gpu = free.get()
            try:
                outcome = execute(
                    executions[index], folders[index], kernel_name, {**env, **gpu}, board.started(index), kernels
                )
                ended.put((index, outcome, None))
            except BaseException as error:  # reported in the main thread
                ended.put((index, None, error))
            finally:
                free.put(gpu)

    for number in range(min(jobs, len(executions))):
        threading.Thread(target=work, name=f"notebook-{number}", daemon=True).start()
    try:
        for _ in range(len(executions)):
            while True:
                try:  # a timeout: Ctrl-C and SIGTERM reach this thread between two waits
                    index, outcome, error = ended.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            if error is not None:
                raise error
            yield index, outcome
    except BaseException:  # Ctrl-C (only this thread gets it) or close(): start nothing more, kill the kernels
        kernels.kill_all()
        raise


def _on_submitit(executor, executions, folders, kernel_name, env) -> Iterator[tuple[int, Outcome]]:
    """Submit every execution as one job of an array; yields (index, outcome) as jobs end."""
    import submitit

    with executor.batch():
        jobs = [
            executor.submit(execute, execution, folder, kernel_name, env)
            for execution, folder in zip(executions, folders)
        ]
    try:
        for job in submitit.helpers.as_completed(jobs, poll_frequency=1):
            index = jobs.index(job)
            try:
                yield index, job.result()
            except Exception as error:  # the job died (time limit, node failure, cancelled)
                yield index, Outcome(executions[index], folders[index], "failed", 0.0, error=str(error).splitlines()[0])
    except BaseException:  # Ctrl-C or close()
        for job in jobs:
            job.cancel(check=False)
        raise


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
    gpus: Sequence[str] | None = None,
    executor: str = "threads",
    slurm: dict[str, Any] | None = None,
    stream: IO[str] | None = None,
    progress: bool = True,
    command: str | None = None,
    encoder: str | None = None,
) -> RunReport:
    """Execute the selected notebooks over the sweep grid; write summaries and index.html (docs/runner.md).

    ``threads`` per kernel (default: half the cores, or the cores over the GPUs); ``jobs`` at once (default: one
    per GPU, else :func:`default_jobs`); ``gpus``: one per running kernel (default: every visible one); ``executor``:
    ``threads`` here, ``slurm`` (a Slurm array through submitit, ``slurm`` its job parameters) or ``local``
    (submitit's local executor). Bad input raises ValueError before any notebook runs; Ctrl-C stops the run,
    writes the report with unfinished executions "interrupted" and raises :class:`RunInterrupted`. ``run.json``
    records ``command`` (default: this process's command line), the dates and the machine; ``results.md`` the claim
    rows the notebooks recorded (:mod:`~workbench.runs.results`). ``encoder`` (a checkpoint folder or hub name) replaces
    every ``model_name_or_path`` of the notebooks' parameters (:func:`~workbench.runs.plan.plan_executions`).
    """
    executions = _plan(params_set, only, sweep, seeds, notebooks_dir, params_dir, encoder)
    resources = _check_resources(executions, params_set, executor, slurm, kernel_name, threads, jobs, gpus)
    run_dir = new_run_dir(outputs_dir, run_id)
    cluster = _submitit_executor(run_dir, resources, slurm) if executor != "threads" else None
    folders = _start_run_folder(run_dir, outputs_dir, executions, command, params_set, resources)
    board = Progress(executions, stream, ticking=progress)
    outcomes, interrupted = _execute_all(executions, folders, resources, cluster, board)
    report = _write_reports(run_dir, executions, folders, outcomes, list(sweep or {}), interrupted)
    if interrupted:
        raise RunInterrupted(report)
    return report


@dataclass(frozen=True)
class _Resources:
    """How a run's executions run: the executor, the kernel, threads per kernel, notebooks at once, the GPUs (one per
    running kernel; none on CPUs or off this machine)."""

    executor: str
    kernel_name: str
    threads: int
    jobs: int
    gpus: list[str]


def _plan(
    params_set: str,
    only: Sequence[str] | None,
    sweep: dict[str, list[Any]] | None,
    seeds: Sequence[int] | None,
    notebooks_dir: str | Path,
    params_dir: str | Path,
    encoder: str | None,
) -> list[Execution]:
    """The plan: the selected notebooks, each point of the sweep, every value checked against its notebook's rules
    (its checks cell: loss modules of yours imported, every loss setting checked), in this process, before any kernel
    starts (:func:`~workbench.runs.plan.plan_executions`). A params file naming no notebook is refused (a typo would
    run on the defaults)."""
    notebooks = select_notebooks(notebooks_dir, only)
    stems = {notebook.stem for notebook in select_notebooks(notebooks_dir)}
    for stray in sorted(
        path.name
        for path in params_folder(params_dir, params_set, notebooks_dir).glob("*.yaml")
        if path.stem not in stems
    ):
        raise ValueError(
            f"--params-set {params_set!r}: {stray} names no notebook in {notebooks_dir} (a typo runs on defaults)"
        )
    return plan_executions(notebooks, params_dir, params_set, sweep, seeds, encoder)


def _check_resources(
    executions: Sequence[Execution],
    params_set: str,
    executor: str,
    slurm: dict[str, Any] | None,
    kernel_name: str | None,
    threads: int | None,
    jobs: int | None,
    gpus: Sequence[str] | None,
) -> _Resources:
    """The checks of the machine before anything is written: the executor, each training section's precision against
    this machine's devices (kernels that run here), every file and encoder the parameters name, the GPUs, threads and
    jobs, the kernel, and no secret for a job file. Returns the resources the run uses."""
    if executor not in EXECUTORS or (slurm and executor == "threads"):
        raise ValueError(
            f"--executor {executor!r}: must be one of {', '.join(EXECUTORS)} (--slurm parameters: not threads)"
        )
    if executor == "threads":  # kernels on this machine: bf16 needs its CUDA device (a Slurm job runs elsewhere)
        check_devices(executions, params_set)
    check_paths(executions, params_set)  # a missing data file or encoder: now, not in a kernel later
    gpus = _check_gpus(gpus, visible_gpus() if executor == "threads" else [])
    threads, jobs = _threads_and_jobs(threads, jobs, gpus)
    kernel_name = ensure_kernel(kernel_name)
    if executor != "threads" and any(secret_environment(execution.parameters) for execution in executions):
        raise ValueError(
            f"--executor {executor}: a hub_token parameter would be written into the job files; export HF_TOKEN "
            "before submitting instead (the jobs inherit it)"
        )
    return _Resources(executor, kernel_name, threads, jobs, gpus)


def _check_gpus(gpus: Sequence[str] | None, visible: list[str]) -> list[str]:
    """``gpus`` when they are distinct visible GPUs; every visible one when None."""
    if gpus is not None and (not gpus or not set(gpus) <= set(visible) or len(set(gpus)) < len(gpus)):
        raise ValueError(
            f"--gpus {','.join(gpus)!r}: must name distinct visible GPUs; visible: {', '.join(visible) or 'none'}"
        )
    return visible if gpus is None else list(gpus)


def _threads_and_jobs(threads: int | None, jobs: int | None, gpus: list[str]) -> tuple[int, int]:
    """Threads per kernel and notebooks at once, checked: on GPUs one kernel per GPU, the cores shared among the
    kernels; on CPUs the default threads and as many kernels as the cores hold."""
    if gpus:
        jobs = _check_count("jobs", len(gpus) if jobs is None else jobs, "notebooks run at once")
        threads = _check_count("threads", max(1, usable_cores() // jobs) if threads is None else threads, "per kernel")
    else:
        threads = _check_count("threads", default_threads() if threads is None else threads, "per kernel")
        jobs = _check_count("jobs", default_jobs(threads) if jobs is None else jobs, "notebooks run at once")
    return threads, jobs


def _submitit_executor(run_dir: Path, resources: _Resources, slurm: dict[str, Any] | None) -> Any:
    """submitit's executor (Slurm, or its local one) with the run's parameters; ValueError naming ``--slurm`` when
    submitit refuses them (no Slurm here, an unknown or mistyped parameter): nothing ran, so no run folder is left."""
    import submitit

    try:
        cluster = submitit.AutoExecutor(folder=run_dir / "submitit", cluster=resources.executor)
        defaults = {
            "timeout_min": 24 * 60,
            "cpus_per_task": resources.threads,
            "slurm_array_parallelism": resources.jobs,
        }
        cluster.update_parameters(**{**defaults, **(slurm or {})})
    except (RuntimeError, NameError, AssertionError, TypeError) as error:
        shutil.rmtree(run_dir)
        raise ValueError(f"--slurm: {str(error).splitlines()[0]}") from None
    return cluster


def _start_run_folder(
    run_dir: Path,
    outputs_dir: str | Path,
    executions: Sequence[Execution],
    command: str | None,
    params_set: str,
    resources: _Resources,
) -> list[Path]:
    """Each execution's folder (its notebook's, and the sweep point's below it), run.json's first record and the run's
    one plotly.js (before concurrent exports look for it). A full disk: nothing ran, no run folder is left."""
    folders = [run_dir / execution.name / execution.slug for execution in executions]  # slug "": the notebook's folder
    try:
        relative = [folder.relative_to(run_dir).as_posix() for folder in folders]
        start_record(run_dir, command, params_set, resources.jobs, resources.threads, relative)
        ensure_assets(run_dir, mathjax=False)
    except ValueError as error:
        shutil.rmtree(run_dir, ignore_errors=True)
        raise ValueError(f"--outputs-dir {str(outputs_dir)!r}: {error}") from None
    return folders


def _execute_all(
    executions: Sequence[Execution], folders: list[Path], resources: _Resources, cluster: Any, board: Progress
) -> tuple[list[Outcome | None], bool]:
    """Every execution, in threads here or as submitit jobs (``cluster``); the outcomes (None for one that did not end)
    and whether Ctrl-C or SIGTERM interrupted the run (what still ran is stopped)."""
    env = kernel_environment(resources.threads)
    if cluster is None:
        ending = _in_threads(executions, folders, resources.kernel_name, env, resources.jobs, resources.gpus, board)
    else:
        ending = _on_submitit(cluster, executions, folders, resources.kernel_name, env)
    outcomes: list[Outcome | None] = [None] * len(executions)
    try:
        for index, outcome in ending:
            outcomes[index] = outcome
            board.finished(index, f"{outcome.status_text()} ({outcome.duration_s:.1f} s)")
    except KeyboardInterrupt:
        ending.close()  # stops what still runs (the generator's own handler), also when Ctrl-C came between two yields
        return outcomes, True
    return outcomes, False


def _write_reports(
    run_dir: Path,
    executions: Sequence[Execution],
    folders: list[Path],
    outcomes: list[Outcome | None],
    sweep_keys: list[str],
    interrupted: bool,
) -> RunReport:
    """run.json's end, results.md and index.html (written even when a notebook's evidence cannot be printed); an
    execution that did not end is "interrupted"."""
    from workbench.runs.report import write_report  # pandas: imported when a run ends

    stopped = [Outcome(execution, folder, "interrupted", 0.0) for execution, folder in zip(executions, folders)]
    report = RunReport(run_dir, [outcome or stop for outcome, stop in zip(outcomes, stopped)])
    finish_record(run_dir)
    try:
        write_results(run_dir)
    finally:
        write_report(run_dir, report.outcomes, sweep_keys, interrupted)
    return report
