"""The params sets of a run: ``<params-dir>/<set>/<notebook stem>.yaml`` (a missing file: the notebook's defaults),
the sets a run takes and what the project's are for, and the notebooks a run selects (``--only``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workbench.config import read_yaml_file

PARAMS_SETS = ("default", "smoke", "gpu", "results")  # sets with a file per notebook; any folder of --params-dir too
SET_PURPOSES = {  # what the sets the project ships are for (python -m workbench run --help lists every set present)
    "default": "CPU, minutes: make run",
    "smoke": "seconds: the tests'",
    "gpu": "real data and an encoder, bf16",
    "results": "each paper's claim on real data at CPU scale, 5 seeds: results.md",
    "own": "your own_data.csv",
    "class": "notebook 05 for a class, under a minute: --only 05",
    "own_loss": "your own loss (Poly-1) beside notebook 05's, with evidence: --only 05",
}


def select_notebooks(notebooks_dir: str | Path, only: Sequence[str] | None = None) -> list[Path]:
    """All ``*.ipynb`` in ``notebooks_dir`` sorted, or those whose stem equals or starts with an ``only`` entry."""
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"--notebooks-dir {str(notebooks_dir)!r}: holds no *.ipynb notebooks")
    if not only:
        return notebooks
    selected = []
    for wanted in only:
        stem = wanted.strip().removesuffix(".ipynb")
        matches = [nb for nb in notebooks if stem and (nb.stem == stem or nb.stem.startswith(stem))]
        if not matches:
            raise ValueError(
                f"--only {wanted!r}: matches no notebook; available: {', '.join(nb.stem for nb in notebooks)}"
            )
        selected.extend(nb for nb in matches if nb not in selected)
    return sorted(selected)


def runnable_sets(params_dir: str | Path, notebooks_dir: str | Path) -> list[str]:
    """The sets a run takes: the folders of ``params_dir`` whose every ``*.yaml`` names a notebook of
    ``notebooks_dir`` (an empty folder too: every notebook on its defaults), not the trainer configs of ``examples/``
    or ``pretrain/``, which a run refuses."""
    stems = {notebook.stem for notebook in Path(notebooks_dir).glob("*.ipynb")}
    folders = sorted(path for path in Path(params_dir).glob("*") if path.is_dir() and not path.name.startswith("."))
    return [folder.name for folder in folders if {file.stem for file in folder.glob("*.yaml")} <= stems]


def params_folder(params_dir: str | Path, params_set: str, notebooks_dir: str | Path | None = None) -> Path:
    """``<params_dir>/<params_set>``: any folder there is a set; a missing one is an error naming it and the sets a
    run takes (:func:`runnable_sets` of ``notebooks_dir``; without it, every folder)."""
    if not Path(params_dir).is_dir():
        raise ValueError(f"--params-dir {str(params_dir)!r}: no such folder")
    folder = Path(params_dir) / params_set
    if not params_set or Path(params_set).name != params_set or params_set == ".." or not folder.is_dir():
        if notebooks_dir is None:
            available = sorted(path.name for path in Path(params_dir).iterdir() if path.is_dir())
        else:
            available = runnable_sets(params_dir, notebooks_dir)
        raise ValueError(
            f"--params-set {params_set!r}: no folder {folder}; available: {', '.join(available) or '(none)'}"
        )
    return folder


def describe_sets(params_dir: str | Path, notebooks_dir: str | Path) -> str:
    """The sets in ``params_dir`` a run takes (:func:`runnable_sets`), each with its purpose where the project says it
    (``default (CPU, minutes: make run), ..., results``); the shipped sets alone when the folders are not there."""
    names = runnable_sets(params_dir, notebooks_dir) if Path(params_dir).is_dir() else []
    return ", ".join(
        f"{name} ({SET_PURPOSES[name]})" if name in SET_PURPOSES else name for name in names or SET_PURPOSES
    )


def load_params(
    params_dir: str | Path, params_set: str, notebook_stem: str, notebooks_dir: str | Path | None = None
) -> dict[str, Any]:
    """``<params_dir>/<set>/<stem>.yaml`` as a dict; a missing file means the notebook's defaults (``{}``)."""
    path = params_folder(params_dir, params_set, notebooks_dir) / f"{notebook_stem}.yaml"
    return read_yaml_file(path, "params file") if path.is_file() else {}
