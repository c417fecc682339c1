"""The values of ``python -m workbench run``'s options, read and checked where they enter: ``--sweep`` (a grid of
parameter values), ``--seeds``, ``key=value`` options (``--slurm``), and the folder name of a sweep point
(:func:`cell_slug`), never shared by two points.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections.abc import Iterable
from typing import Any

from workbench.checks import MAX_SEED
from workbench.config import read_yaml
from workbench.redaction import is_secret

MAX_SLUG = 96  # characters of a sweep point's folder name before its hash (file systems allow 255 bytes)
SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,-]")


def parse_sweep(specs: Iterable[str]) -> dict[str, list[Any]]:
    """``["epsilon=0.1,0.2", "table8_losses=[CE,DSC],[FL]"]`` ->
    ``{"epsilon": [0.1, 0.2], "table8_losses": [["CE", "DSC"], ["FL"]]}``: the values read as one YAML flow list. Empty
    values, control characters and values equal after parsing (``0.1`` and ``0.10``) are refused."""
    sweep: dict[str, list[Any]] = {}
    for spec in specs:
        key, _, values = (part.strip() for part in spec.partition("="))
        if not key or not values:
            raise ValueError(f"--sweep {spec!r}: expected key=v1,v2,... with at least one value")
        if key in sweep:
            raise ValueError(f"--sweep: parameter {key!r} given twice; list all its values in one key=v1,v2")
        if is_secret(key):  # before its values are read: no message may quote them
            raise ValueError(f"--sweep: a secret ({key}) is not swept; give it in the params file")
        if not spec.isprintable() or values.endswith(","):  # a control character, a byte the terminal could not decode
            raise ValueError(f"--sweep {key}: values must be printable and not empty, got {values!r}")
        parsed = read_yaml(f"[{values}]", f"--sweep {key}")
        for a, b in itertools.combinations(parsed, 2):
            # equal after parsing: 0.1 and 0.10, NaN twice; but 1 and true are different values
            if (a == b and isinstance(a, bool) == isinstance(b, bool)) or repr(a) == repr(b):
                raise ValueError(f"--sweep {key}: the value {a!r} is given twice (equal after parsing)")
        sweep[key] = parsed
    return sweep


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``: distinct integers from 0 to ``workbench.checks.MAX_SEED`` (numpy's range)."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if any(not 0 <= seed <= MAX_SEED for seed in seeds):
        raise ValueError(f"--seeds {text!r}: seeds must be integers from 0 to {MAX_SEED}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: each seed may appear once")
    return seeds


def parse_assignments(specs: Iterable[str], option: str) -> dict[str, Any]:
    """``["timeout_min=60", "slurm_partition=gpu"]`` -> ``{"timeout_min": 60, "slurm_partition": "gpu"}``, the
    values read as YAML."""
    assignments: dict[str, Any] = {}
    for spec in specs:
        key, sep, value = (part.strip() for part in spec.partition("="))
        if not sep or not key or key in assignments:
            raise ValueError(f"{option} {spec!r}: expected key=value, each key once")
        assignments[key] = read_yaml(value, f"{option} {key}")
    return assignments


def _reads_back(value: Any) -> bool:
    """True when the text of ``value`` reads back as a ``--sweep`` value as that same value and type
    (the string ``'0.1'`` writes as ``0.1``, a float; ``1,b=2`` as two values)."""
    try:
        again = read_yaml(f"[{value}]", "a folder name")
    except ValueError:
        return False
    return again == [value] and type(again[0]) is type(value)


def cell_slug(point: dict[str, Any], hashed: bool = False) -> str:
    """Folder name of a sweep point, ``epsilon=0.1,gamma=2`` (empty for no sweep), never shared by two points:
    unsafe characters become ``_``, and when that changed the text, the text is over ``MAX_SLUG`` (it is cut),
    a value does not read back (:func:`_reads_back`) or ``hashed`` is set, a hash of the typed point is appended."""
    text = ",".join(f"{key}={value}" for key, value in point.items())
    safe = SLUG_UNSAFE.sub("_", text)
    if hashed or safe != text or len(safe) > MAX_SLUG or not all(_reads_back(value) for value in point.values()):
        safe = safe[:MAX_SLUG] + "-" + hashlib.sha1(repr(point).encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return safe
