"""Executing one planned notebook through papermill into its folder, and exporting it to HTML."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import secrets
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from workbench.metrics_file import read_metrics, record_parameters, write_atomically
from workbench.redaction import redact, scrub, secret_texts
from workbench.runs.export import export_html, readable_literal
from workbench.runs.notebook_cells import INJECTED_PARAMETERS_TAG, OUTPUT_DIR_PARAMETER
from workbench.runs.options import SLUG_UNSAFE
from workbench.runs.plan import Execution, secret_environment

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
        if self.status in ("ok", "interrupted"):
            return self.status
        where = f" at cell {self.failed_cell}" if self.failed_cell is not None else ""
        return f"FAILED{where}: {self.error}"


def _runs_this_python(kernel_name: str) -> bool:
    """Whether the kernelspec launches this interpreter (jupyter_client runs a bare ``python*`` as
    ``sys.executable``)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        executable = KernelSpecManager().get_kernel_spec(kernel_name).argv[0]
    except NoSuchKernel:
        return False
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    return executable in bare or os.path.abspath(executable) == os.path.abspath(sys.executable)


def ensure_kernel(kernel_name: str | None = None) -> str:
    """``kernel_name`` once checked (ValueError when unknown), else a kernelspec that runs this interpreter:
    ``python3`` when it does, else a ``workbench`` kernelspec installed into ``sys.prefix``."""
    from ipykernel.kernelspec import install
    from jupyter_client.kernelspec import KernelSpecManager

    if kernel_name is not None:
        available = KernelSpecManager().find_kernel_specs()
        if kernel_name not in available:
            raise ValueError(f"--kernel {kernel_name!r}: no such kernelspec; available: {', '.join(sorted(available))}")
        return kernel_name
    for name in ("python3", WORKBENCH_KERNEL):
        if _runs_this_python(name):
            return name
    install(kernel_name=WORKBENCH_KERNEL, display_name="Python (workbench)", prefix=sys.prefix)
    if not _runs_this_python(WORKBENCH_KERNEL):
        raise RuntimeError(
            f"kernelspec {WORKBENCH_KERNEL!r} in {sys.prefix} is shadowed; pass --kernel NAME running this Python"
        )
    return WORKBENCH_KERNEL


class RunningKernels:
    """The kernels a run starts, so that an interrupted run can stop them (thread-safe).

    :meth:`manager_class` is the kernel manager papermill is given: it records each kernel, starts
    none once :meth:`kill_all` was called, and starts each with this environment updated by ``env``.
    On POSIX it uses IPC sockets, each kernel its own path (jupyter_client's default ``kernel-ipc``
    in the working directory is shared by kernels started at once: "Invalid Signature").
    """

    def __init__(self) -> None:
        self._managers: list[Any] = []
        self._lock = threading.Lock()
        self._stopped = False

    def manager_class(self, env: dict[str, str] | None = None) -> type:
        from jupyter_client.localinterfaces import localhost
        from jupyter_client.manager import AsyncKernelManager
        from traitlets import default

        kernels = self

        class WorkbenchKernelManager(AsyncKernelManager):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                with kernels._lock:
                    if kernels._stopped:
                        raise RuntimeError("the run was interrupted: no new kernel starts")
                    kernels._managers.append(self)

            @default("transport")
            def _default_transport(self) -> str:
                return "ipc" if os.name == "posix" else "tcp"

            @default("ip")
            def _default_ip(self) -> str:
                ipc = os.path.join(tempfile.gettempdir(), f"workbench-kernel-{secrets.token_hex(8)}-ipc")
                return ipc if self.transport == "ipc" else localhost()

            async def start_kernel(self, **kw: Any) -> None:
                await super().start_kernel(**{**kw, "env": {**kw.get("env", os.environ), **(env or {})}})

        return WorkbenchKernelManager

    @property
    def stopped(self) -> bool:
        """Whether :meth:`kill_all` was called (the run is interrupted)."""
        return self._stopped

    def kill_all(self) -> None:
        """Kill every kernel (its process group) and start no new one: the executions using them end with a
        dead-kernel error, as a crashed kernel would. Returns once the processes have ended (the runner does not wait
        for its threads), at most a few seconds each. Through jupyter_client's public kernel manager API
        (``has_kernel``, ``signal_kernel``, ``is_alive``)."""
        from jupyter_core.utils import run_sync

        with self._lock:
            self._stopped = True
            managers = list(self._managers)
        run_sync(kill_kernels)(managers)


async def kill_kernels(managers: list[Any], timeout_s: float = 5.0) -> None:
    """SIGKILL (SIGTERM where there is none) the process group of each manager's running kernel; wait until each has
    ended, at most ``timeout_s`` seconds each."""
    import signal

    running = [manager for manager in managers if manager.has_kernel and await manager.is_alive()]
    for manager in running:
        with contextlib.suppress(RuntimeError, ProcessLookupError):  # it ended meanwhile
            await manager.signal_kernel(getattr(signal, "SIGKILL", signal.SIGTERM))
    for manager in running:
        deadline = time.monotonic() + timeout_s
        while await manager.is_alive() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)


def new_run_dir(outputs_dir: str | Path, run_id: str | None = None) -> Path:
    """Create ``outputs/<run-id>`` (timestamp + short random suffix by default); never reuse a folder.
    A bad run id or a folder that cannot be created raises ValueError naming the option."""
    if run_id is not None and (not run_id or SLUG_UNSAFE.search(run_id) or run_id in {".", ".."} or len(run_id) > 200):
        raise ValueError(f"--run-id {run_id!r}: use up to 200 letters, digits and ._=+,- only")
    run_dir = Path(outputs_dir) / (run_id or f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}")
    if run_dir.exists():
        raise ValueError(f"--run-id {run_dir.name!r}: {run_dir} already exists; runs are never overwritten")
    try:
        run_dir.mkdir(parents=True)
    except OSError as error:  # a file in the way, no permission, a full disk, a race
        raise ValueError(f"--outputs-dir {str(outputs_dir)!r}: cannot create {run_dir} ({error.strerror})") from None
    return run_dir


def _source_cell_index(executed_notebook: Path, executed_index: int) -> int:
    """Map a cell index of the executed notebook to the source notebook (skipping injected cells)."""
    import nbformat

    cells = nbformat.read(executed_notebook, as_version=4).cells[:executed_index]
    return executed_index - sum(INJECTED_PARAMETERS_TAG in cell.metadata.get("tags", []) for cell in cells)


WORKBENCH_LANGUAGE = "python-workbench"
"""The language papermill is told the runner's notebooks are in: papermill picks its parameter translator by it, so
the workbench's translator is registered under this name of its own and papermill's ``python`` one stays as it is for
every other caller in the process."""


@functools.cache
def _readable_injected_parameters() -> str:
    """Register, once, a papermill translator that writes the injected parameters' strings as ``repr`` writes them
    (``"美丽"``, not papermill's ``"\\u7f8e\\u4e3d"``): the kernel gets the same values, and the executed notebook
    reads as params.yaml does. Returns the language to hand papermill (:data:`WORKBENCH_LANGUAGE`)."""
    from papermill.translators import PythonTranslator, papermill_translators

    class ReadablePythonTranslator(PythonTranslator):
        @classmethod
        def translate_str(cls, val: str) -> str:
            return readable_literal(val)

    papermill_translators.register(WORKBENCH_LANGUAGE, ReadablePythonTranslator)
    return WORKBENCH_LANGUAGE


TEXT_SUFFIXES = (".ipynb", ".json", ".html", ".txt", ".csv", ".yaml", ".yml", ".md", ".log")
"""The files of an execution folder the runner reads for a secret the kernel held (the kernel's own writing)."""


def _scrub_folder(folder: Path, hidden: list[str]) -> None:
    """Rewrite each text file under ``folder`` (:data:`TEXT_SUFFIXES`: the executed notebook, metrics.json, figure
    pages, captions) with each secret text of ``hidden``, as written or JSON-escaped, replaced by ``<SECRET>``
    (``workbench.redaction.scrub``): an output, a record or a traceback that quoted the kernel's token."""
    escaped = [json.dumps(secret)[1:-1] for secret in hidden]
    texts = sorted({*hidden, *escaped}, key=len, reverse=True)
    for path in folder.rglob("*"):
        if path.suffix.lower() not in TEXT_SUFFIXES or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):  # not the kernel's text
            continue
        cleaned = scrub(text, texts)
        if cleaned != text:
            write_atomically(path, cleaned)


def execute(
    execution: Execution,
    output_dir: Path,
    kernel_name: str,
    env: dict[str, str] | None = None,
    on_cell_start: Callable[..., None] | None = None,
    kernels: RunningKernels | None = None,
) -> Outcome:
    """Run one notebook into ``output_dir``; a failure is recorded, never raised.

    The kernel starts in the notebook's folder with this process's environment updated by ``env``;
    ``on_cell_start`` is called before each cell (nbclient's hook); ``kernels`` records the kernel
    so the caller can stop it. Safe to call from several threads at once (nothing changes this
    process's working directory) and in a submitit job. The notebook's metrics.json gets every parameter it ran
    with (``workbench.metrics_file.record_parameters``); no file of the folder keeps a secret the kernel held.
    """
    folder = output_dir.absolute()  # papermill's file writes chdir the process to a cwd another run may have left
    executed = folder / execution.notebook.name
    start = time.perf_counter()
    kernel_manager = (kernels or RunningKernels()).manager_class  # its environment: env and the secrets
    failed_cell, error = _run_notebook(execution, folder, kernel_name, env, on_cell_start, kernel_manager)
    duration = time.perf_counter() - start
    try:
        record_parameters(folder, execution.recorded_parameters)
    except ValueError as exc:  # a metrics.json that is not JSON, a full disk
        error = error or f"recording the parameters in metrics.json failed: {exc}"
    hidden = secret_texts(execution.parameters)  # the hub token the kernel got: no file or message may show it
    if hidden:
        _scrub_folder(folder, hidden)
    if executed.is_file() and not (kernels is not None and kernels.stopped):  # an interrupted run exports nothing
        try:
            export_html(executed)
        except Exception as exc:  # the run's own status is what matters; note the export problem
            error = error or f"HTML export failed: {type(exc).__name__}: {exc}"
    if error:  # summary.csv and index.html print it: a secret the kernel's message quoted is not
        error = scrub(error, hidden)
    return Outcome(
        execution, output_dir, "failed" if error else "ok", duration, failed_cell, error, read_metrics(folder)
    )


def _run_notebook(
    execution: Execution,
    folder: Path,
    kernel_name: str,
    env: dict[str, str] | None,
    on_cell_start: Callable[..., None] | None,
    kernel_manager: Callable[[dict[str, str]], type],
) -> tuple[int | None, str | None]:
    """papermill's run of the notebook into ``folder`` (its params.yaml first), the kernel started by
    ``kernel_manager(environment)`` in the notebook's folder: (None, None) when every cell ran, else the source
    notebook's failed cell (None when no cell failed: the kernel died, a file could not be written) and the error."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    executed = folder / execution.notebook.name
    try:  # secrets: redacted in what is written, handed to the kernel through its environment
        parameters = redact({**execution.parameters, OUTPUT_DIR_PARAMETER: str(folder.resolve())})
        env = {**(env or {}), **secret_environment(execution.parameters)}
        write_atomically(folder / "params.yaml", yaml.safe_dump(parameters, sort_keys=False, allow_unicode=True))
        papermill.execute_notebook(  # absolute paths: papermill resolves relative ones against a process-wide
            str(execution.notebook.resolve()),  # setting that notebooks running at once overwrite
            str(executed.resolve()),
            parameters=parameters,
            kernel_name=kernel_name,
            language=_readable_injected_parameters(),  # the workbench's translator; papermill's "python" stays
            # the kernel starts in the notebook's folder; papermill's own ``cwd`` would chdir this
            # whole process, under the feet of the notebooks running beside this one
            resources={"metadata": {"path": str(execution.notebook.parent.resolve())}},
            progress_bar=False,
            kernel_manager_class=kernel_manager(env),
            on_cell_start=on_cell_start,
        )
    except PapermillExecutionError as exc:
        return _source_cell_index(executed, exc.cell_index), f"{exc.ename}: {exc.evalue}"
    except Exception as exc:  # kernel died, notebook unreadable, a full disk, ...: report it, keep running the others
        return None, f"{type(exc).__name__}: {exc}"
    return None, None
