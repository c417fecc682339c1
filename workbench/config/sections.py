"""The section machinery every config section is built on: a field declared with its help and its check
(:func:`option`), the check itself (:func:`check_field`, through ``workbench.checks``), and :class:`Section`: built
from a mapping, unknown keys refused naming the allowed ones, copied with changes, written back as a plain dict."""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, TypeVar

from workbench.checks import INT_MAX, Bounds, check_bool, check_choice, check_text
from workbench.data_root import expand_data_root
from workbench.redaction import redact

__all__ = ["INT_MAX", "Bounds", "Section", "check_field", "option"]  # Bounds and INT_MAX live in workbench.checks

SectionT = TypeVar("SectionT", bound="Section")


UNBOUNDED = Bounds()


def option(
    default: Any = None,
    help: str = "",
    *,
    choices: Any = None,
    factory: Any = None,
    gt: float | None = None,
    ge: float | None = None,
    lt: float | None = None,
    le: float | None = None,
    bounds: Bounds | None = None,
) -> Any:
    """A dataclass field with its help and its check: one of ``choices``, or a number within :class:`Bounds`
    ``gt`` / ``ge`` / ``lt`` / ``le`` (``option(0.25, "...", gt=0, le=1)``: in (0, 1]), or within ``bounds`` declared
    elsewhere (a loss parameter's: ``bounds=SR_WEIGHT``)."""
    if bounds is None:
        bounds = Bounds(gt=gt, ge=ge, lt=lt, le=le)
    elif (gt, ge, lt, le) != (None, None, None, None):
        raise TypeError("option: give bounds or gt / ge / lt / le, not both")
    metadata = {"help": help, "check": {"bounds": bounds, "choices": choices}}
    return field(default_factory=factory, metadata=metadata) if factory else field(default=default, metadata=metadata)


def check_field(name: str, value: Any, hint: Any, bounds: Bounds | None = None, choices: Any = None) -> Any:
    """``value`` checked by its type ``hint`` (bool, int, float or str (a path too, ``$WORKBENCH_DATA/...`` expanded by
    :func:`workbench.data_root.expand_data_root`), each optionally ``| None``) with the ``workbench.checks`` check,
    within ``bounds`` (a :class:`Bounds`) or one of ``choices``."""
    options = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
    kinds = [kind for kind in options if kind is not type(None)]
    allow_none = type(None) in options
    if value is None and allow_none:
        return None
    bounds = bounds or UNBOUNDED
    if choices is not None:
        return check_choice(name, value, choices)
    if kinds == [bool]:
        return check_bool(name, value)
    if kinds == [int]:
        return bounds.check_int(name, value, allow_none)
    if kinds == [float]:
        bounds.check_number(name, value, allow_none)  # the value itself is kept (an int stays an int)
    if kinds == [str]:  # a path under the data root may be written $WORKBENCH_DATA/...
        text = check_text(name, os.fspath(value) if isinstance(value, os.PathLike) else value, allow_none=allow_none)
        return expand_data_root(text)
    return value


@cache
def _section_fields(cls: type) -> dict[str, Any]:
    """Field name -> its type hint."""
    return {item.name: typing.get_type_hints(cls)[item.name] for item in fields(cls)}


def _nested(cls: type, name: str) -> type | None:
    hint = _section_fields(cls).get(name)
    return hint if isinstance(hint, type) and issubclass(hint, Section) else None


def _unknown(cls: type, key: str) -> ValueError:
    where = f" in {cls.prefix}" if cls.prefix else ""
    return ValueError(f"unknown config key {key!r}; allowed keys{where}: {', '.join(sorted(_section_fields(cls)))}")


@dataclass(frozen=True)
class Section:
    """Base of every config section, each field checked on creation by :func:`check_field`: ``prefix`` is its key path
    (``model.tiny``), ``free_mappings`` names fields holding a free-form mapping (``loss.params``)."""

    prefix: ClassVar[str] = ""
    free_mappings: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, prefix: str = "", free_mappings: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.prefix = prefix
        cls.free_mappings = free_mappings

    def __post_init__(self) -> None:
        hints = _section_fields(type(self))
        for item in fields(self):
            value = check_field(
                self.key(item.name), getattr(self, item.name), hints[item.name], **item.metadata["check"]
            )
            object.__setattr__(self, item.name, value)

    def key(self, name: str) -> str:
        """The full key of field ``name`` (``training.seed``)."""
        return f"{self.prefix}.{name}" if self.prefix else name

    @classmethod
    def from_mapping(cls: type[SectionT], values: Mapping[str, Any] | SectionT | None) -> SectionT:
        """The section from a mapping (missing keys take their defaults), an instance, or None (all defaults)."""
        if values is None or isinstance(values, cls):
            return cls() if values is None else values
        allowed = _section_fields(cls)
        if not isinstance(values, Mapping):
            raise ValueError(
                f"{cls.prefix}: must be a mapping with keys {', '.join(sorted(allowed))}, got {redact(values)!r}"
            )
        for key in values:
            if key not in allowed:
                raise _unknown(cls, f"{cls.prefix}.{key}" if cls.prefix else key)
        return cls(
            **{key: _nested(cls, key).from_mapping(item) if _nested(cls, key) else item for key, item in values.items()}
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict (tuples as lists), ready for YAML or JSON."""
        return {item.name: _plain(getattr(self, item.name)) for item in fields(self)}

    def replace(self: SectionT, **changes: Any) -> SectionT:
        """A copy with ``changes``; nested sections may be given as mappings (merged over the current ones)."""
        for key, value in changes.items():
            if _nested(type(self), key) and isinstance(value, Mapping):
                changes[key] = getattr(self, key).merged(value)
        return dataclasses.replace(self, **changes)

    def merged(self: SectionT, changes: Mapping[str, Any]) -> SectionT:
        """A copy with the mapping ``changes`` merged over this section (nested mappings merged, not replaced),
        checked as a new section is."""
        return type(self).from_mapping(_merge(self.to_dict(), changes))


def _plain(value: Any) -> Any:
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if isinstance(value, list | tuple) else value


def _merge(base: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in update.items():
        both = isinstance(merged.get(key), Mapping) and isinstance(value, Mapping)
        merged[key] = _merge(merged[key], value) if both else value
    return merged
