"""What keeps a notebook from being committed (a test helper)."""

from __future__ import annotations

from pathlib import Path

import nbformat

from workbench.runs.plan import INJECTED_PARAMETERS_TAG, PARAMETERS_TAG


def check_notebook_clean(path: str | Path) -> list[str]:
    """Problems that keep a notebook from being committed: outputs, execution counts, or not exactly one
    ``parameters`` cell."""
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
