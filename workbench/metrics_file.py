"""The ``metrics.json`` of a run folder (JSON-safe, atomic, mode 0644 under the umask, secrets redacted by
``workbench.redaction.redact``) for the runner and the trainers: a notebook's ``{"metrics": {...}, <details>...}``
(:func:`write_metrics`; the runner aggregates ``metrics`` and adds the notebook's ``parameters``,
:func:`record_parameters`), a trainer's own (:func:`write_json`)."""

from __future__ import annotations

import json
import math
import numbers
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workbench.redaction import redact

METRICS_FILE = "metrics.json"
STAT_KEYS = ("mean", "std", "n")


def to_jsonable(value: Any) -> Any:
    """``value`` in plain JSON types (numpy / torch scalars and arrays, paths, tuples converted; NaN and +-inf as
    None, so the file stays strict JSON); ValueError for a type JSON cannot hold."""
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


def write_atomically(path: str | Path, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename: ``path`` is whole or absent (its old content
    kept), never half-written. A write that fails (a full disk) leaves no temporary file and raises ValueError naming
    ``path`` and the reason. Readable as the umask allows (0644 under the usual 022)."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except BaseException as error:  # a full disk, Ctrl-C or SIGTERM mid-write: no temporary file is left
        temporary.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise ValueError(f"{path}: cannot be written ({error.strerror or error})") from None
        raise
    return path


def write_json(path: str | Path, data: Mapping[str, Any]) -> Path:
    """Write ``data`` (:func:`redact`-ed) as indented JSON to ``path`` by :func:`write_atomically`."""
    if not isinstance(data, Mapping):
        raise ValueError(f"metrics must be a dict of name -> value, got {type(data).__name__}")
    return write_atomically(path, json.dumps(to_jsonable(redact(data)), indent=2, sort_keys=True) + "\n")


def _check_metric(name: str, value: Any) -> None:
    if name.endswith("_std") or name in ("n", "n_seeds", "seeds"):  # summary_agg.csv would list them as metrics
        raise ValueError(
            f"metrics: entry {name!r} is a spread or a count of runs, not a metric: record the metric as "
            "{'mean', 'std', 'n'} (workbench.stats.describe) and other values as details (write_metrics(..., "
            "name=value)); the runner records the notebook's parameters itself"
        )
    if value is None:  # not measured in this run (e.g. a rate with no run to average over)
        return
    if isinstance(value, Mapping):
        if set(value) != set(STAT_KEYS):
            raise ValueError(
                f"metrics: entry {name!r} must be a number or a mapping with keys mean, std, n, got {dict(value)!r}"
            )
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) and not hasattr(value, "item"):
        raise ValueError(f"metrics: entry {name!r} must be a number or {{mean, std, n}}, got {value!r}")


def write_metrics(output_dir: str | Path | None, metrics: Mapping[str, Any], **details: Any) -> Path | None:
    """Write a notebook run's ``<output_dir>/metrics.json``: ``{"metrics": metrics, **details}``; ``metrics`` maps names
    to numbers, ``{"mean", "std", "n"}`` or None (not measured), ``details`` are never aggregated. The notebook's
    parameters are no detail it lists: the runner adds them (:func:`record_parameters`). ``output_dir=None`` (a
    notebook run by hand) writes nothing."""
    if not isinstance(metrics, Mapping):
        raise ValueError(f"metrics must be a dict of name -> value, got {type(metrics).__name__}")
    for name, value in metrics.items():
        _check_metric(name, value)
    if output_dir is None:
        return None
    return write_json(Path(output_dir) / METRICS_FILE, {"metrics": dict(metrics), **details})


def read_metrics(output_dir: str | Path) -> dict[str, Any]:
    """The ``metrics.json`` in ``output_dir`` as a dict; an empty dict when there is none."""
    path = Path(output_dir) / METRICS_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def metric_statistics(recorded: Mapping[str, Any]) -> dict[str, dict[str, float | int | None]]:
    """``{name: {"mean", "std", "n"}}`` of the ``metrics`` mapping of a :func:`read_metrics` result;
    a plain number counts as one run (std None)."""
    statistics = {}
    for name, value in (recorded.get("metrics") or {}).items():
        if isinstance(value, Mapping):
            statistics[name] = {key: value.get(key) for key in STAT_KEYS}
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            statistics[name] = {"mean": float(value), "std": None, "n": 1}
    return statistics


def add_details(output_dir: str | Path | None, **details: Any) -> Path | None:
    """Add ``details`` (never aggregated) to the ``metrics.json`` that :func:`write_metrics` wrote in ``output_dir``,
    keeping its other entries (atomic, as :func:`write_json`); a detail already there is replaced only when it is
    named again. ``output_dir=None`` (a notebook run by hand) writes nothing; no metrics.json there is a ValueError."""
    if output_dir is None:
        return None
    if "metrics" in details:
        raise ValueError("details: 'metrics' is the aggregated entry; write it with write_metrics")
    path = Path(output_dir) / METRICS_FILE
    if not path.is_file():
        raise ValueError(f"output_dir: {str(output_dir)!r} has no {METRICS_FILE}; write_metrics writes it first")
    return write_json(path, {**json.loads(path.read_text(encoding="utf-8")), **details})


def record_parameters(output_dir: str | Path, parameters: Mapping[str, Any]) -> Path | None:
    """Record ``parameters``, every parameter a notebook ran with, as the detail ``parameters`` of the metrics.json it
    wrote in ``output_dir`` (the runner's record, redacted as :func:`write_json` writes; atomic). An entry the notebook
    recorded there itself (``write_metrics(..., parameters={...})``) is kept as it wrote it; a ``parameters`` detail
    that is not a mapping is left as it is (the injected values stay in params.yaml). No metrics.json (the notebook
    wrote none): nothing is written, None."""
    path = Path(output_dir) / METRICS_FILE
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8"))
    own = recorded.get("parameters", {}) if isinstance(recorded, dict) else None
    if not isinstance(own, Mapping):  # not the file write_metrics writes, or the notebook's own kind of record
        return path
    return write_json(path, {**recorded, "parameters": {**parameters, **own}})
