"""The cells of a notebook the runner reads: the notebook itself (:func:`read_notebook`, the one reader of a notebook
file for the plan and the export), its ``parameters`` cell (the names it defines, and its defaults as it runs in this
process: :func:`notebook_defaults`) and its cells tagged ``checks`` (:func:`notebook_rules`), which
:func:`workbench.runs.plan.check_notebook_rules` runs before any kernel starts.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.metrics_file import to_jsonable

PARAMETERS_TAG = "parameters"
CHECKS_TAG = "checks"  # a notebook's cells that check its parameters; the runner runs them before any kernel starts
INJECTED_PARAMETERS_TAG = "injected-parameters"
OUTPUT_DIR_PARAMETER = "output_dir"


def read_notebook(notebook: Path, what: str = "NOTEBOOK") -> Any:
    """The notebook at ``notebook`` (nbformat 4, checked against nbformat's schema); ValueError naming ``what`` and the
    path when it is missing or not a notebook (not JSON, not UTF-8, a cell or output outside the schema)."""
    import nbformat

    if not notebook.is_file():
        raise ValueError(f"{what} {notebook}: no such file")
    try:
        invalid: dict[str, Exception] = {}  # read only warns of a cell or output outside nbformat's schema
        with warnings.catch_warnings():  # nbformat's warnings on the file's form: the error below says what is wrong
            warnings.simplefilter("ignore")
            read = nbformat.read(notebook, as_version=4, capture_validation_error=invalid)
        if invalid:
            raise invalid["ValidationError"]
        return read
    except (ValueError, TypeError, AttributeError, nbformat.ValidationError) as error:  # not JSON, UTF-8, a notebook
        reason = str(getattr(error, "message", None) or error).splitlines()[0][:200] or type(error).__name__
        path = getattr(error, "absolute_path", ())  # where in the notebook the schema fails: cells[0].source
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
        reason = f"{where.lstrip('.')}: {reason}" if where else reason
        raise ValueError(f"{what} {notebook}: not a Jupyter notebook ({reason})") from None


def notebook_parameters(notebook: str | Path) -> list[str]:
    """Names defined in the notebook's ``parameters`` cell (papermill.inspect_notebook), once
    :func:`read_notebook` has read it."""
    import papermill

    read_notebook(Path(notebook), "notebook")
    try:
        return list(papermill.inspect_notebook(str(notebook)))
    except ValueError as exc:  # e.g. no kernelspec in the notebook metadata
        raise ValueError(f"notebook {Path(notebook).name}: {exc}") from exc


def notebook_rules(notebook: Path) -> tuple[str, str] | None:
    """The source of ``notebook``'s parameters cell and of its cells tagged :data:`CHECKS_TAG` (the calls that check
    each parameter against its rule in the library), or None when it has no such cell."""
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    checks = [cell.source for cell in cells if cell.cell_type == "code" and CHECKS_TAG in cell.metadata.get("tags", [])]
    return (parameters_cell(notebook), "\n\n".join(checks)) if checks else None


def parameters_cell(notebook: Path) -> str:
    """The source of ``notebook``'s cell tagged :data:`PARAMETERS_TAG`."""
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    return "\n".join(cell.source for cell in cells if PARAMETERS_TAG in cell.metadata.get("tags", []))


def run_parameters_cell(notebook: Path, source: str) -> dict[str, Any]:
    """What ``source``, the notebook's parameters cell, defines when it runs in this process, as it runs first in the
    notebook's kernel: the notebook's defaults (and what the cell imports). A cell that fails is a ValueError naming
    the notebook: its kernel would stop there too."""
    namespace: dict[str, Any] = {}
    try:
        exec(compile(source, f"{notebook.name}: parameters", "exec"), namespace)
    except Exception as error:  # a syntax error, a name the cell does not define: any error of the notebook's code
        raise ValueError(
            f"notebook {notebook.name}: its parameters cell fails ({type(error).__name__}: {error})"
        ) from None
    return namespace


def notebook_defaults(notebook: Path, names: Sequence[str]) -> dict[str, Any]:
    """The defaults of the parameters ``names`` (``output_dir`` aside), as the notebook's parameters cell gives them
    (:func:`run_parameters_cell`): what the runner records beside the injected values. A value JSON cannot hold is
    recorded as its ``repr``."""
    namespace = run_parameters_cell(notebook, parameters_cell(notebook))
    defaults = {}
    for name in names:
        if name == OUTPUT_DIR_PARAMETER or name not in namespace:
            continue
        try:
            defaults[name] = to_jsonable(namespace[name])
        except ValueError:
            defaults[name] = repr(namespace[name])
    return defaults
