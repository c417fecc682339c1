"""Argument checks shared by the whole package: each returns the value or raises ``ValueError("<name>: must be
<what is allowed>, got <value>")``, naming the parameter or config key (``training.learning_rate``)."""

from __future__ import annotations

import math
import numbers
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.redaction import shown

IGNORE_INDEX = -100
"""The label of a position that carries no loss (torch's ``cross_entropy`` default ``ignore_index``)."""
MAX_SEED = 2**32 - 1
"""The largest seed: numpy's ``np.random.seed`` (which ``transformers.set_seed`` calls with ``training.seed``) refuses
any seed above 2**32 - 1; Python's ``random`` and torch take larger ones. Every seed the workbench takes (``seeds``,
``--seeds``, ``data.seed``, ``training.seed``, ``training.data_seed``) is checked against it where it enters."""

INT_MAX = 2**31 - 1
"""The largest int a bounded int check allows when no upper end is declared."""


def _fail(name: str, allowed: str, value: Any) -> ValueError:
    """The one message: ``name``, what it allows and the value (a secret as its mark: ``workbench.redaction``)."""
    return ValueError(f"{name}: must be {allowed}, got {shown(name, value)!r}")


def is_number(value: Any) -> bool:
    """True for real numbers: ints, floats, numpy scalars (bools excluded)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_int(value: Any) -> bool:
    """True for ints (bools excluded)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _end(value: Any) -> str:
    """An end of a range as written: an int in full (4294967295), a float short (1e-12, 0.5)."""
    return str(value) if is_int(value) else f"{value:g}"


def _allowed(kind: str, low: Any, high: Any, low_inclusive: bool = True, high_inclusive: bool = True) -> str:
    """What a bounded check allows: "a number in [0, 1)", "an int >= 1", "a number < 5", "a finite number"."""
    if low is not None and high is not None:
        return f"{kind} in {'[' if low_inclusive else '('}{_end(low)}, {_end(high)}{']' if high_inclusive else ')'}"
    if low is not None:
        return f"{kind} {'>=' if low_inclusive else '>'} {_end(low)}"
    if high is not None:
        return f"{kind} {'<=' if high_inclusive else '<'} {_end(high)}"
    return "a finite number" if kind == "a number" else kind


def check_number(
    name: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    *,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_none: bool = False,
) -> float | None:
    """``float(value)`` for a finite number within the bounds (None passes when ``allow_none``): "must be a number
    > 0", "must be in [0, 1)", "must be null or a number > 0"; NaN and +-inf never pass."""
    if value is None and allow_none:
        return None
    value = float(value) if is_number(value) and not isinstance(value, int) else value  # numpy scalars as Python floats
    too_low = is_number(value) and low is not None and (value < low if low_inclusive else value <= low)
    too_high = is_number(value) and high is not None and (value > high if high_inclusive else value >= high)
    finite = is_number(value) and abs(value) <= sys.float_info.max  # not NaN, not inf, not an int past a float
    if not finite or too_low or too_high:
        allowed = _allowed("a number", low, high, low_inclusive, high_inclusive)
        raise _fail(name, ("null or " if allow_none else "") + allowed, value)
    return float(value)


def check_int(
    name: str, value: Any, low: int | None = None, high: int | None = None, *, allow_none: bool = False
) -> int | None:
    """``value`` when it is an int in ``[low, high]`` (None passes when ``allow_none``): "must be an int >= 1"."""
    if value is None and allow_none:
        return None
    if not is_int(value) or (low is not None and value < low) or (high is not None and value > high):
        raise _fail(name, ("null or " if allow_none else "") + _allowed("an int", low, high), value)
    return value


def check_choice(name: str, value: Any, allowed: Sequence[Any]) -> Any:
    """``value`` when it is one of ``allowed``: "must be one of a, b, c"."""
    if value not in allowed:
        raise _fail(name, "one of " + ", ".join(str(choice) for choice in allowed), value)
    return value


def check_bool(name: str, value: Any) -> bool:
    """``value`` when it is True or False: "must be true or false"."""
    if not isinstance(value, bool):
        raise _fail(name, "true or false", value)
    return value


def check_text(name: str, value: Any, *, allow_none: bool = False) -> str | None:
    """A non-empty string (a path or a name) without a lone surrogate (``"\\ud800"``); None passes when
    ``allow_none``."""
    if value is None and allow_none:
        return None
    if not isinstance(value, str) or not value or any("\ud800" <= char <= "\udfff" for char in value):
        raise _fail(name, ("null or " if allow_none else "") + "a non-empty string", value)
    return value


def check_seeds(name: str, seeds: Any) -> list[int]:
    """A non-empty list of distinct ints in [0, :data:`MAX_SEED`] (the seeds a study repeats over)."""
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise _fail(name, f"a non-empty list of distinct ints in [0, {MAX_SEED}]", seeds)
    for seed in seeds:
        check_int(f"{name} entry", seed, 0, MAX_SEED)
    if len(set(seeds)) != len(seeds):
        raise _fail(name, "a list of distinct seeds", list(seeds))
    return list(seeds)


def check_names(
    name: str, values: Any, allowed: Sequence[str], required: Sequence[str] = (), distinct: bool = True
) -> list[str]:
    """A non-empty list of ``allowed`` names (each once when ``distinct``) holding every ``required`` one."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise _fail(name, "a non-empty list of names from " + ", ".join(allowed), values)
    for value in values:
        check_choice(name, value, allowed)
    if distinct and len(set(values)) != len(values):
        raise _fail(name, "a list naming each once", list(values))
    if not set(required) <= set(values):
        raise _fail(name, "a list including " + ", ".join(required), list(values))
    return list(values)


@dataclass(frozen=True)
class Bounds:
    """A number's allowed range, declared once beside what it bounds (a config field, a loss parameter) as pydantic's
    ``Field(gt=0, le=1)`` is: ``gt`` or ``ge`` its lower end (open or closed), ``lt`` or ``le`` its upper end; an end
    not given is unbounded (an int's upper end is :data:`INT_MAX`). Every number must be finite as well
    (:func:`check_number`). A loss's ``EPSILON = Bounds(ge=0, lt=1)`` checks its argument, the widget's slider and the
    runner's check before any kernel starts."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    def __post_init__(self) -> None:
        if self.gt is not None and self.ge is not None or self.lt is not None and self.le is not None:
            raise TypeError(f"Bounds: give gt or ge, and lt or le, not both, got {self!r}")

    @property
    def low(self) -> float | None:
        """The lower end (None: unbounded), open when ``gt`` is given."""
        return self.ge if self.gt is None else self.gt

    @property
    def high(self) -> float | None:
        """The upper end (None: unbounded), open when ``lt`` is given."""
        return self.le if self.lt is None else self.lt

    def check_number(self, name: str, value: Any, allow_none: bool = False) -> float | None:
        """``value`` a finite number within the bounds, as a float: "must be a number in (0, 1]"."""
        ends = {"low_inclusive": self.gt is None, "high_inclusive": self.lt is None}
        return check_number(name, value, self.low, self.high, **ends, allow_none=allow_none)

    def check_int(self, name: str, value: Any, allow_none: bool = False) -> int | None:
        """``value`` an int within the bounds, an open end read as the next int in: "must be an int in [1, 512]"."""
        low = self.ge if self.gt is None else math.floor(self.gt) + 1
        high = self.le if self.lt is None else math.ceil(self.lt) - 1
        return check_int(name, value, low, INT_MAX if high is None else high, allow_none=allow_none)

    def contains(self, value: float) -> bool:
        """Whether the number ``value`` lies within the bounds (a slider's positions are kept to these)."""
        above = self.gt is None or value > self.gt
        above = above and (self.ge is None or value >= self.ge)
        below = self.lt is None or value < self.lt
        return above and below and (self.le is None or value <= self.le)
