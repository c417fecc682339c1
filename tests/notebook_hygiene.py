"""What keeps a notebook from being committed (a test helper).

A notebook is judged as git would commit it: through the clean filter its git attributes name (nbstripout, which
``make venv`` installs as a git filter), so a notebook saved with outputs in JupyterLab is committed without them and
passes; without a filter (a clean clone before ``make venv``, a file outside the repository), as it is on disk.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import nbformat

from workbench.runs.notebook_cells import INJECTED_PARAMETERS_TAG, PARAMETERS_TAG


def _git(path: Path, *arguments: str) -> str:
    """``git arguments`` run in ``path``'s folder; its output, or "" outside a repository or without git."""
    try:
        done = subprocess.run(["git", *arguments], cwd=path.parent, capture_output=True, text=True, timeout=60)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def committed_text(path: str | Path) -> str:
    """The notebook's text as ``git add`` would store it: passed through the clean filter of its ``filter`` attribute
    when one is configured (``git config filter.<name>.clean``), else the file as it is."""
    path = Path(path).resolve()
    text = path.read_text(encoding="utf-8")
    attribute = _git(path, "check-attr", "filter", "--", path.name).rpartition(": ")[2]
    command = _git(path, "config", "--get", f"filter.{attribute}.clean") if attribute not in ("", "unspecified") else ""
    if not command:
        return text
    command = command.replace("%f", shlex.quote(path.name))
    cleaned = subprocess.run(
        command, shell=True, cwd=path.parent, input=text, capture_output=True, text=True, check=True
    )
    return cleaned.stdout


def check_notebook_clean(path: str | Path) -> list[str]:
    """Problems that keep a notebook from being committed (as git would commit it, :func:`committed_text`): outputs,
    execution counts, or not exactly one ``parameters`` cell."""
    try:
        notebook = nbformat.reads(committed_text(path), as_version=4)
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
