"""Executing one planned notebook through papermill into its folder, and exporting it to HTML."""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.runs.assets import ensure_assets, export_offline_html, link_figures, run_dir_of
from workbench.records import read_metrics
from workbench.runs.plan import _SLUG_UNSAFE, INJECTED_PARAMETERS_TAG, OUTPUT_DIR_PARAMETER, Execution
from workbench.threads import kernel_environment

WORKBENCH_KERNEL = "workbench"


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

    def status_text(self) -> str:
        if self.ok:
            return "ok"
        where = f" at cell {self.failed_cell}" if self.failed_cell is not None else ""
        return f"FAILED{where}: {self.error}"


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


class RunningKernels:
    """The kernels a run starts, so that an interrupted run can stop them (thread-safe).

    :meth:`manager_class` is the jupyter_client kernel manager papermill is given: it records
    every kernel it manages, and refuses to start one once :meth:`kill_all` was called. On POSIX
    it talks to the kernel over IPC (Unix sockets) instead of unencrypted loopback TCP, which
    ipykernel warns about on every start, and gives each kernel its own socket path prefix in
    the temporary folder: jupyter_client's default (``kernel-ipc`` in the working directory) is
    shared by kernels started at once, which then pick the same sockets and reject each other's
    messages ("Invalid Signature").
    """

    def __init__(self) -> None:
        self._managers: list[Any] = []
        self._lock = threading.Lock()
        self._stopped = False

    def manager_class(self) -> type:
        from jupyter_client.localinterfaces import localhost
        from jupyter_client.manager import AsyncKernelManager
        from traitlets import default

        kernels = self

        class WorkbenchKernelManager(AsyncKernelManager):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                kernels._register(self)

            @default("transport")
            def _default_transport(self) -> str:
                return "ipc" if os.name == "posix" else "tcp"

            @default("ip")
            def _default_ip(self) -> str:
                if self.transport != "ipc":
                    return localhost()
                return os.path.join(tempfile.gettempdir(), f"workbench-kernel-{secrets.token_hex(8)}-ipc")

        return WorkbenchKernelManager

    def _register(self, manager: Any) -> None:
        with self._lock:
            if self._stopped:
                raise RuntimeError("the run was interrupted: no new kernel starts")
            self._managers.append(manager)

    def kill_all(self) -> int:
        """Kill every kernel process still running and start no new one; returns how many were killed.
        The executions using them then end with a dead-kernel error, as a crashed kernel would."""
        with self._lock:
            self._stopped = True
            processes = [getattr(getattr(manager, "provisioner", None), "process", None) for manager in self._managers]
        killed = 0
        for process in processes:
            if process is not None and process.poll() is None:
                process.kill()
                killed += 1
        return killed


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
    import nbformat

    cells = nbformat.read(executed_notebook, as_version=4).cells[:executed_index]
    return executed_index - sum(INJECTED_PARAMETERS_TAG in cell.metadata.get("tags", []) for cell in cells)


def export_html(notebook: Path, run_dir: Path | None = None) -> Path:
    """HTML export next to the executed notebook that opens offline, sharing the run's assets.

    plotly.js and MathJax are copied once into ``<run_dir>/assets/`` (workbench.runs.assets)
    and referenced relatively from the export; the figure pages under the notebook's
    ``figures/`` are pointed at the same plotly.js. ``run_dir`` defaults to the run folder
    of the runner's layout (``assets.run_dir_of``), or the notebook's folder outside it.
    """
    shared = ensure_assets(run_dir_of(notebook) if run_dir is None else run_dir)
    figures_dir = notebook.parent / "figures"
    if figures_dir.is_dir():
        link_figures(figures_dir, shared)
    return export_offline_html(notebook, notebook.with_suffix(".html"), shared)


@contextmanager
def kernel_environment_set(threads: int) -> Iterator[None]:
    """Inside the block, kernels started by this process get ``threads`` CPU threads
    (``workbench.threads.kernel_environment`` set in ``os.environ``; restored after)."""
    variables = kernel_environment(threads)
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def execute(
    execution: Execution,
    output_dir: Path,
    kernel_name: str,
    on_cell_start: Callable[..., None] | None = None,
    kernels: RunningKernels | None = None,
) -> Outcome:
    """Run one notebook into ``output_dir``; a failure is recorded, never raised.

    The kernel starts in the notebook's folder and inherits this process's environment (the
    runner sets its threads with :func:`kernel_environment_set`); ``on_cell_start`` is called
    before each cell (nbclient's hook); ``kernels`` records the kernel so the caller can stop it.
    Safe to call from several threads at once: nothing changes this process's working directory.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError

    output_dir.mkdir(parents=True, exist_ok=True)
    parameters = {**execution.parameters, OUTPUT_DIR_PARAMETER: str(output_dir.resolve())}
    (output_dir / "params.yaml").write_text(yaml.safe_dump(parameters, sort_keys=False), encoding="utf-8")
    executed = output_dir / execution.notebook.name
    failed_cell, error = None, None
    start = time.perf_counter()
    hooks = {"on_cell_start": on_cell_start} if on_cell_start is not None else {}
    try:
        papermill.execute_notebook(  # absolute paths: papermill resolves relative ones against a process-wide
            str(execution.notebook.resolve()),  # setting that notebooks running at once overwrite
            str(executed.resolve()),
            parameters=parameters,
            kernel_name=kernel_name,
            # the kernel starts in the notebook's folder; papermill's own ``cwd`` would chdir this
            # whole process, under the feet of the notebooks running beside this one
            resources={"metadata": {"path": str(execution.notebook.parent.resolve())}},
            progress_bar=False,
            kernel_manager_class=(kernels or RunningKernels()).manager_class(),
            **hooks,
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
