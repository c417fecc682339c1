"""Run results on disk: the ``metrics.json`` a notebook writes, and reading it back.

Notebooks call :func:`write_metrics` with their ``output_dir`` parameter; the
runner (:mod:`workbench.runner`) reads the file back with :func:`read_metrics`
and tabulates the numeric top-level entries (:func:`numeric_metrics`).
"""

from __future__ import annotations

import json
import math
import numbers
from pathlib import Path
from typing import Any, Mapping

METRICS_FILE = "metrics.json"


def to_jsonable(value: Any) -> Any:
    """Convert numpy / torch scalars and arrays, paths and tuples to plain JSON types.

    Non-finite floats (NaN, +-inf) become ``None`` so the file stays strict JSON.
    Raises ValueError for a value of a type JSON cannot hold.
    """
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(item) for item in value]
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy scalars/arrays, torch tensors
        return to_jsonable(value.tolist())
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        return number if math.isfinite(number) else None
    raise ValueError(
        f"metrics: value {value!r} of type {type(value).__name__} is not JSON-serialisable; "
        "allowed: numbers, strings, bools, None, lists, dicts, numpy/torch scalars or arrays"
    )


def write_metrics(output_dir: str | Path | None, metrics: Mapping[str, Any]) -> Path | None:
    """Write ``metrics`` as ``<output_dir>/metrics.json`` and return the path.

    ``output_dir=None`` (a notebook run by hand, outside the runner) writes
    nothing and returns None. Raises ValueError when ``metrics`` is not a mapping.
    """
    if not isinstance(metrics, Mapping):
        raise ValueError(f"metrics must be a dict of name -> value, got {type(metrics).__name__}")
    if output_dir is None:
        return None
    path = Path(output_dir) / METRICS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_jsonable(metrics), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return path


def read_metrics(output_dir: str | Path) -> dict[str, Any]:
    """The metrics a notebook wrote into ``output_dir``; an empty dict when it wrote none."""
    path = Path(output_dir) / METRICS_FILE
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def numeric_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The top-level entries that are numbers (bools excluded), as floats."""
    return {
        name: float(value)
        for name, value in metrics.items()
        if isinstance(value, numbers.Real) and not isinstance(value, bool)
    }
