"""Planning a run: which notebooks, with which parameters, in which folders; all checked before anything runs.

Parameters come from ``params/<set>/<notebook-stem>.yaml`` (a missing file means the
notebook's own defaults), then one ``--sweep`` grid point, then ``--seeds`` (the notebook's
``seeds`` list parameter), then ``output_dir`` (always injected by the runner). Every name
is checked against the notebook's ``parameters`` cell.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.config import read_yaml, read_yaml_file

PARAMETERS_TAG = "parameters"
INJECTED_PARAMETERS_TAG = "injected-parameters"
OUTPUT_DIR_PARAMETER = "output_dir"
SEEDS_PARAMETER = "seeds"
PARAMS_SETS = ("default", "smoke", "gpu")
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,-]")
_BRACKETS = {"[": "]", "{": "}", "(": ")"}


@dataclass(frozen=True)
class Execution:
    """One notebook run: its parameters (without ``output_dir``), its sweep point and folder name."""

    notebook: Path
    parameters: dict[str, Any]
    point: dict[str, Any]
    slug: str

    @property
    def name(self) -> str:
        return self.notebook.stem


# ----------------------------------------------------------------------------- parsing


def split_values(text: str) -> list[str]:
    """Split a ``--sweep`` value list on the commas outside brackets and quotes:
    ``"[CE,DSC],[FL]"`` -> ``["[CE,DSC]", "[FL]"]``."""
    parts, depth, quote, start = [], [], None, 0
    for index, character in enumerate(text):
        if quote:
            quote = None if character == quote else quote
        elif character in "'\"":
            quote = character
        elif character in _BRACKETS:
            depth.append(_BRACKETS[character])
        elif depth and character == depth[-1]:
            depth.pop()
        elif character == "," and not depth:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts]


def parse_sweep(specs: Iterable[str]) -> dict[str, list[Any]]:
    """``["epsilon=0.1,0.2", "losses=[CE,DSC],[FL]"]`` -> ``{"epsilon": [0.1, 0.2], "losses": [["CE", "DSC"], ["FL"]]}``.

    Values are read as YAML (``1e-3`` is a float); a list value is written in brackets. Values
    equal after parsing (``0.1`` and ``0.10``) are refused: they would be one grid point twice.
    """
    sweep: dict[str, list[Any]] = {}
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise ValueError(f"--sweep {spec!r}: expected key=v1,v2,... with at least one value")
        if key in sweep:
            raise ValueError(f"--sweep: parameter {key!r} given twice; list all its values in one key=v1,v2")
        raw = split_values(values)
        parsed = [read_yaml(value, f"--sweep {key}") if value else value for value in raw]
        for (first, a), (second, b) in itertools.combinations(zip(raw, parsed), 2):
            if a == b and isinstance(a, bool) == isinstance(b, bool):  # 1 == True, yet a count is no flag
                raise ValueError(
                    f"--sweep {key}: values {first!r} and {second!r} are equal after parsing ({a!r}); give each value once"
                )
        sweep[key] = parsed
    return sweep


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``; raises ValueError for anything but distinct comma-separated integers >= 0."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if any(seed < 0 for seed in seeds):
        raise ValueError(f"--seeds {text!r}: seeds must be integers >= 0")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: each seed may appear once")
    return seeds


def _reads_back(value: Any) -> bool:
    """True when the text of ``value`` in a folder name reads back, as a ``--sweep`` value, as that
    same value: no comma (which separates the keys) and the same YAML value and type
    (the string ``'0.1'`` writes as ``0.1``, which reads back as a float)."""
    text = str(value)
    if "," in text:
        return False
    try:
        again = read_yaml(text, "a folder name")
    except ValueError:
        return False
    return type(again) is type(value) and again == value


def cell_slug(point: dict[str, Any]) -> str:
    """Folder name of a sweep point, ``epsilon=0.1,gamma=2`` (empty for no sweep); different points
    never share a folder.

    Characters other than letters, digits and ``._=+,-`` become ``_``; when that changed the
    text, or a value's text does not read back as that value (:func:`_reads_back`), a short hash
    of the point (its values with their types) is appended: ``path=a/b`` and ``path=a_b``, or the
    string ``'0.1'`` and the number ``0.1``, get different names.
    """
    text = ",".join(f"{key}={value}" for key, value in point.items())
    safe = _SLUG_UNSAFE.sub("_", text)
    if safe != text or not all(_reads_back(value) for value in point.values()):
        safe += "-" + hashlib.sha1(repr(point).encode("utf-8")).hexdigest()[:6]
    return safe


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
            raise ValueError(f"--only {wanted!r} matches no notebook; available: {', '.join(nb.stem for nb in notebooks)}")
        selected.extend(nb for nb in matches if nb not in selected)
    return sorted(selected)


def load_params(params_dir: str | Path, params_set: str, notebook_stem: str) -> dict[str, Any]:
    """``params/<set>/<stem>.yaml`` as a dict; a missing file means the notebook's defaults (``{}``)."""
    if params_set not in PARAMS_SETS:
        raise ValueError(f"params_set must be one of {', '.join(PARAMS_SETS)}, got {params_set!r}")
    path = Path(params_dir) / params_set / f"{notebook_stem}.yaml"
    if not path.is_file():
        return {}
    try:
        return read_yaml_file(path, "params file")
    except ValueError as error:
        raise ValueError(str(error).replace("must hold a mapping", "expected a mapping of parameter -> value")) from None


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
                f"{source}: unknown parameter {name!r} for notebook {notebook.name}; allowed: {', '.join(allowed) or '(none)'}"
            )


def plan_executions(
    notebooks: Sequence[Path],
    params_dir: str | Path,
    params_set: str,
    sweep: dict[str, list[Any]] | None = None,
    seeds: Sequence[int] | None = None,
) -> list[Execution]:
    """Every execution of the run, validated: unknown parameter names raise ValueError before anything runs.

    Args:
        notebooks: the notebooks to run (:func:`select_notebooks`).
        params_dir: the folder of the params sets (``params/``).
        params_set: ``default``, ``smoke`` or ``gpu``: ``<params_dir>/<set>/<stem>.yaml``.
        sweep: parameter -> values (:func:`parse_sweep`); one execution per point of their product.
        seeds: sets each notebook's ``seeds`` list parameter (the notebook repeats over them and
            reports mean and spread), so no two executions overlap in seeds; refused together with
            a ``seeds`` sweep.

    Returns:
        One :class:`Execution` per notebook and sweep point, parameters merged (params file, sweep
        point, seeds).
    """
    sweep = sweep or {}
    if seeds and SEEDS_PARAMETER in sweep:
        raise ValueError(f"give seeds either with --seeds or with --sweep {SEEDS_PARAMETER}=..., not both")
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
            _check_names(notebook, allowed, [SEEDS_PARAMETER], "--seeds")
        for values in itertools.product(*sweep.values()):
            point = dict(zip(sweep, values))
            parameters = {**base, **point, **({SEEDS_PARAMETER: list(seeds)} if seeds else {})}
            executions.append(Execution(notebook, parameters, point, cell_slug(point)))
    return executions
