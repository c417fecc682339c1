"""YAML as the workbench reads it (configs, params files, overrides, ``--sweep`` values; docs/training.md)."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import yaml

from workbench.redaction import shown

MAX_ALIASED_VALUES = 100_000
"""How many values aliases (``*name``) may add to a document: a 576-byte file of nested aliases expanded to millions
(a 30 MB notebook cell); beyond this a document is refused, naming its file and line."""


def _expanded_size(node: yaml.Node, sizes: dict[int, int], path: set[int]) -> int:
    """The number of values ``node`` stands for, every alias expanded (``sizes``: known sizes by node id; ``path``: the
    nodes being sized, where an alias to one of them is a recursive structure, an error)."""
    if id(node) in sizes:
        return sizes[id(node)]
    if id(node) in path:
        raise yaml.constructor.ConstructorError(None, None, "an alias refers to a value holding it", node.start_mark)
    path.add(id(node))
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    else:
        children = node.value if isinstance(node, yaml.SequenceNode) else []
    sizes[id(node)] = 1 + sum(_expanded_size(child, sizes, path) for child in children)
    path.discard(id(node))
    return sizes[id(node)]


class _YamlLoader(yaml.SafeLoader):
    """YAML as written: booleans only true / false, decimal numbers (``1e-4``, ``.inf``; ``1e400`` is an error), null;
    anything else (yes, off, 1:30, 0777, 2024-01-01) is a string. A repeated key is an error naming the file and line;
    so are aliases that expand beyond :data:`MAX_ALIASED_VALUES` values or refer to a value holding them."""

    yaml_implicit_resolvers: ClassVar[dict] = {}

    def construct_document(self, node: yaml.Node) -> Any:
        sizes: dict[int, int] = {}
        expanded = _expanded_size(node, sizes, set())
        if expanded - len(sizes) > MAX_ALIASED_VALUES:  # len(sizes): the values the text holds
            pairs = node.value if isinstance(node, yaml.MappingNode) else [(node, node)]
            largest = max(pairs, key=lambda pair: sizes[id(pair[1])])[0]  # the entry that holds the most
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"its aliases expand it to {expanded:,} values, more than {MAX_ALIASED_VALUES:,} beyond those written "
                "(nested aliases?); write the values out",
                largest.start_mark,
            )
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        merge = "tag:yaml.org,2002:merge"  # "<<: *base": the keys it merges may be given again, "<<" only once
        keys = [key.value if key.tag == merge else self.construct_object(key, deep=True) for key, _ in node.value]
        for index, key in enumerate(keys):
            if isinstance(key, typing.Hashable) and key in keys[:index]:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", node.value[index][0].start_mark
                )
        return super().construct_mapping(node, deep)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = super().construct_yaml_float(node)
        text = node.value.lower()
        if (abs(value) == float("inf") and "inf" not in text) or (value == 0 and text.split("e")[0].strip("+-0._")):
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value} is beyond a float's range", node.start_mark
            )
        return value


for _tag, _pattern, _first in (
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("int", r"[-+]?(?:0|[1-9][0-9_]*)", "-+0123456789"),
    ("float", r"[-+]?(?:[0-9][0-9_]*)?\.[0-9_]*(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+", "-+.0123456789"),
    ("float", r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)", "-+."),
    ("null", r"~|null|Null|NULL|", ["~", "n", "N", ""]),
    ("merge", r"<<", "<"),
):
    _YamlLoader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(rf"^(?:{_pattern})$"), list(_first))
_YamlLoader.add_constructor("tag:yaml.org,2002:float", _YamlLoader.construct_yaml_float)


def read_yaml(text: str, source: str) -> Any:
    """Parse YAML ``text`` (:class:`_YamlLoader`'s rules); errors name ``source`` (a file or an argument)
    and the line: ``ValueError("<source>:<line>: invalid YAML (<problem>)")``."""
    try:
        return yaml.load(text, Loader=_YamlLoader)  # noqa: S506 - a SafeLoader subclass
    except RecursionError:  # PyYAML composes nested collections recursively: some hundred levels
        raise ValueError(f"{source}: invalid YAML (nested too deeply to read)") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)  # at the end of the text: the last line
        where = f"{source}:{min(mark.line + 1, len(text.splitlines()) or 1)}" if mark is not None else source
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ValueError(f"{where}: invalid YAML ({problem})") from None


def read_yaml_file(path: str | Path, what: str) -> dict[str, Any]:
    """A YAML file holding a mapping (empty: ``{}``); errors name ``what`` (the file's role), the file and,
    for bad YAML or a byte that is not UTF-8, the line."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{what}: no such file {str(path)!r}")
    raw = path.read_bytes()
    try:
        loaded = read_yaml(raw.decode("utf-8"), str(path))
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        column = error.start - raw.rfind(b"\n", 0, error.start) - 1
        raise ValueError(
            f"{path}:{line}: {what} is not UTF-8 text ({error.reason} at byte {column}); save it as UTF-8"
        ) from None
    if not isinstance(loaded, Mapping | None):
        raise ValueError(f"{what}: {str(path)!r} must hold a mapping at top level, got {type(loaded).__name__}")
    return dict(loaded or {})


def parse_override(override: str) -> tuple[list[str], Any]:
    """Split ``"a.b.c=value"`` into (["a", "b", "c"], YAML-parsed value); an error shows a secret's value as its mark
    (``training.hub_token=<HUB_TOKEN>``, ``workbench.redaction``)."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"overrides: expected 'section.key=value', got {shown(key, override)!r}")
    written = f"{key}={shown(key, raw)}"
    try:
        return key.strip().split("."), read_yaml(raw, f"override {written!r}")
    except ValueError as error:
        problem = str(error) if written == override else "not YAML"
        raise ValueError(f"overrides: cannot parse the value of {written!r} as YAML: {problem}") from None
