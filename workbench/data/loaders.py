"""Readers of the real data sets' files (``.gz`` allowed): the named data sets' (:func:`load_qbqtc`, :func:`load_tnews`,
:func:`load_chnsenticorp`, :func:`load_lcqmc`, each a release's ``reader``) and any table (:func:`load_table`: CSV,
TSV, JSON lines), built on :func:`read_table`. Datasets hold ``text`` (and ``text_pair``) strings and an integer
ClassLabel ``label``; label values are compared as values (``1``, ``1.0``, ``"1"``: one class). Bad input raises
ValueError naming ``file:line`` (docs/data.md lists the cases; docs/architecture.md says why these readers are the
workbench's own rather than ``datasets.load_dataset``). A config's data section is read by
:func:`workbench.data.loading.load_splits` / :func:`~workbench.data.loading.load_texts`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from datasets import Dataset

from workbench.data.features import RELEVANCE_LABEL_NAMES, build_dataset
from workbench.text_files import read_lines

FORMATS = ("csv", "tsv", "jsonl")
_SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}
_CSV_FIELD_LIMIT_CAP = 2**31 - 1  # csv.field_size_limit takes a C long (32-bit on Windows)
MISSING_LABELS = ("na", "n/a", "#n/a", "<na>", "null", "none")  # how tables write a missing value (pandas' na_values)
TNEWS_LABELS = (  # ids 105 and 111 are unused
    ("100", "news_story"),
    ("101", "news_culture"),
    ("102", "news_entertainment"),
    ("103", "news_sports"),
    ("104", "news_finance"),
    ("106", "news_house"),
    ("107", "news_car"),
    ("108", "news_edu"),
    ("109", "news_tech"),
    ("110", "news_military"),
    ("112", "news_travel"),
    ("113", "news_world"),
    ("114", "news_stock"),
    ("115", "news_agriculture"),
    ("116", "news_game"),
)
"""CLUE TNEWS label ids and descriptions (the content of its labels.json)."""


def existing_file(path: str | Path, parameter: str = "path") -> Path:
    """``path`` as a Path; ValueError naming ``parameter`` when it is not a file."""
    if not Path(path).is_file():
        raise ValueError(f"{parameter}: no such file {str(path)!r}")
    return Path(path)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys and values as a dict; a key given twice is an error (json.loads keeps the last silently)."""
    record = dict(pairs)
    if len(record) < len(pairs):
        repeated = sorted({key for key, _ in pairs if [name for name, _ in pairs].count(key) > 1})
        raise ValueError(f"a key is given twice in the object: {repeated}; each key may appear once")
    return record


def _jsonl_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON lines file with their line numbers; ValueError naming ``file:line`` otherwise."""
    for line_no, line in read_lines(path):
        if line.strip():
            try:
                record = json.loads(line, object_pairs_hook=_unique_keys)
            except ValueError as error:  # json.JSONDecodeError too
                raise ValueError(f"{path}:{line_no}: not a JSON object ({getattr(error, 'msg', error)})") from None
            if not isinstance(record, dict):
                raise ValueError(f"{path}:{line_no}: not a JSON object")
            yield line_no, record


def _delimited_records(
    path: Path, delimiter: str, fieldnames: Sequence[str] | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a CSV/TSV (unquoted) file, its first line the header; with ``fieldnames`` (headerless) a
    first line with a field ``label`` is a header: its ``label`` column first, the others in order. A byte-order mark
    opening any line is dropped (files joined with ``cat``: their repeated header is then an error); a header naming a
    column twice and a CSV record running over several lines (a quote left open swallows the rows after it) are errors
    naming the line."""
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    # fields as long as the file
    previous_limit = csv.field_size_limit(min(path.stat().st_size + 1, _CSV_FIELD_LIMIT_CAP))
    lines = (line.removeprefix("\ufeff") for _, line in read_lines(path))  # a BOM opening any line: files joined
    reader = csv.reader(lines, delimiter=delimiter, quoting=quoting)
    columns = list(fieldnames) if fieldnames is not None else None
    start = 1  # the line a record begins on
    try:
        for row in reader:
            first, start = start, reader.line_num + 1
            if reader.line_num > first and any(row):
                raise ValueError(
                    f"{path}:{first}: a quoted field runs on to line {reader.line_num} (a quote left open?); a text "
                    'may hold no line break: close the quote, or double a quote inside a quoted text ("")'
                )
            names = [field.strip().lower() for field in row]
            if not any(names):
                continue
            if columns is None:
                columns = [field.strip() for field in row]
                _check_header(path, reader.line_num, columns)
            elif reader.line_num == 1 and fieldnames is not None and "label" in names:
                if len(names) != len(fieldnames):
                    raise ValueError(f"{path}:1: header: expected {len(fieldnames)} columns, got {row}")
                _check_header(path, 1, names)
                others = iter(name for name in fieldnames if name != "label")
                columns = ["label" if name == "label" else next(others) for name in names]
            elif fieldnames is None and [field.strip() for field in row] == columns:  # files joined with cat
                raise ValueError(f"{path}:{reader.line_num}: repeats the header line; remove it")
            elif len(row) != len(columns):
                raise ValueError(f"{path}:{reader.line_num}: expected {len(columns)} fields {columns}, got {len(row)}")
            else:
                yield reader.line_num, dict(zip(columns, row))
    except csv.Error as error:
        raise ValueError(f"{path}:{reader.line_num}: {error}") from None
    finally:
        csv.field_size_limit(previous_limit)


def _check_header(path: Path, line_no: int, columns: Sequence[str]) -> None:
    """A header naming a column twice is an error naming ``path:line_no`` (a row would keep only the last one)."""
    twice = sorted({name for name in columns if name and columns.count(name) > 1})
    if twice:
        raise ValueError(f"{path}:{line_no}: the header names the column {twice[0]!r} twice; give each column once")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: must be a string, got {type(value).__name__} {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{where}: holds a lone surrogate {value[error.start]!r} (a broken \\u escape)") from None
    return value


def label_value(value: Any, where: str = "label") -> str:
    """A label as a value: numbers by their number (``1``, ``1.0``, ``"1"`` -> ``"1"``; ``"0.50"`` -> ``"0.5"``), other
    strings stripped; ValueError naming ``where`` for an empty cell, null, NaN, a list or a mapping."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{where}: label must be a string or a number, got {value!r}")
    text = _text(value, where).strip() if isinstance(value, str) else repr(value)
    try:
        number = Decimal(text)
    except InvalidOperation:
        number = None
    if not text or (number is not None and not number.is_finite()):
        raise ValueError(f"{where}: empty or missing label, got {value!r}")
    if number is None or number.adjusted() >= 30:  # text, or a number beyond any class id: as written
        return text
    return str(int(number)) if number == number.to_integral_value() else str(number.normalize())


def read_table(
    path: Path,
    format: str,
    columns: Mapping[str, str],
    fieldnames: Sequence[str] | None = None,
    optional: Sequence[str] = (),
) -> dict[str, list]:
    """Every record's ``columns`` (output name -> source column; ``label`` read by :func:`label_value`)
    and ``line`` (line numbers); a column named in ``optional`` may be absent (None). ValueError naming path:line for
    a bad record; ``<path>: no records``."""
    read: dict[str, list] = {name: [] for name in (*columns, "line")}
    records = (
        _jsonl_records(path)
        if format == "jsonl"
        else _delimited_records(path, "," if format == "csv" else "\t", fieldnames)
    )
    for line_no, record in records:
        for name, source in columns.items():
            if source not in record and name in optional:
                read[name].append(None)
                continue
            if source not in record:
                raise ValueError(f"{path}:{line_no}: missing column {source!r} (has {sorted(record)})")
            where = f"{path}:{line_no}: column {source!r}"
            read[name].append(label_value(record[source], where) if name == "label" else _text(record[source], where))
        read["line"].append(line_no)
    if not read["line"]:
        raise ValueError(f"{path}: no records")
    return read


def labelled(path: Path, read: dict[str, list], index: Mapping[str, int], names: Sequence[str]) -> Dataset:
    """The Dataset of :func:`read_table`'s columns, labels mapped by ``index`` (value -> class id);
    a value not in it raises ValueError naming path:line and the value."""
    for value, line_no in zip(read["label"], read["line"]):
        if value not in index:
            raise ValueError(f"{path}:{line_no}: unknown label value {value!r}; allowed {sorted(index)}")
    columns = {name: read[name] for name in read if name != "line"}
    return build_dataset({**columns, "label": [index[value] for value in read["label"]]}, names)


def class_values(values: Sequence[str]) -> list[str]:
    """Distinct label values in class order: by number when all are numbers, else as strings."""
    distinct = set(values)
    try:
        return sorted(distinct, key=Decimal)
    except InvalidOperation:
        return sorted(distinct)


def _load(
    path: str | Path, format: str, columns: dict[str, str], classes: dict[str, str], fields: Sequence[str] = ()
) -> Dataset:
    """A file of fixed ``classes`` (label value -> class name, in class order)."""
    path = existing_file(path)
    index = {label_value(value): k for k, value in enumerate(classes)}
    return labelled(path, read_table(path, format, columns, fields or None), index, list(classes.values()))


def load_qbqtc(path: str | Path) -> Dataset:
    """CLUE QBQTC JSON lines (id, query, title, label "0"/"1"/"2"): text=query, text_pair=title."""
    return _load(
        path,
        "jsonl",
        {"text": "query", "text_pair": "title", "label": "label"},
        dict(zip("012", RELEVANCE_LABEL_NAMES)),
    )


def load_tnews(path: str | Path, labels_path: str | Path | None = None) -> Dataset:
    """CLUE TNEWS JSON lines (label, label_desc, sentence): text=sentence; classes: the ids of
    ``labels_path`` (CLUE's labels.json; default :data:`TNEWS_LABELS`) in order, named by label_desc. A record whose
    ``label_desc`` is not its label's description there is a ValueError naming ``file:line`` (a labels file whose
    descriptions are swapped would rename the classes)."""
    classes = dict(TNEWS_LABELS)
    table = "TNEWS_LABELS (the workbench's table of CLUE's labels.json)"
    if labels_path is not None:
        read = read_table(
            existing_file(labels_path, "labels_path"), "jsonl", {"label": "label", "label_desc": "label_desc"}
        )
        descriptions = dict(zip(read["label"], read["label_desc"]))
        if len(descriptions) < len(read["label"]):  # a second description would silently replace the first
            raise ValueError(f"labels_path: {str(labels_path)!r} gives a label twice: {sorted(read['label'])}")
        classes = {value: descriptions[value] for value in class_values(read["label"])}
        table = str(labels_path)
    path = existing_file(path)
    columns = {"text": "sentence", "label": "label", "label_desc": "label_desc"}
    read = read_table(path, "jsonl", columns, optional=("label_desc",))
    index = {label_value(value): k for k, value in enumerate(classes)}
    dataset = labelled(path, {name: read[name] for name in ("text", "label", "line")}, index, list(classes.values()))
    for value, described, line_no in zip(read["label"], read.pop("label_desc"), read["line"]):
        if described is not None and described != classes[value]:
            raise ValueError(
                f"{path}:{line_no}: label {value!r} is described as {described!r} here but as {classes[value]!r} in "
                f"{table}; the labels file and the data disagree"
            )
    return dataset


def load_chnsenticorp(path: str | Path) -> Dataset:
    """ChnSentiCorp: ``text TAB label`` lines (0 negative, 1 positive); an optional header
    line naming a ``label`` column (e.g. ``label TAB text_a``) sets the column order."""
    fields = ("text", "label")
    return _load(path, "tsv", {name: name for name in fields}, {"0": "negative", "1": "positive"}, fields)


def load_lcqmc(path: str | Path) -> Dataset:
    """LCQMC: ``s1 TAB s2 TAB label`` lines (1 same intent, 0 not); optional header with ``label``."""
    fields = ("text", "text_pair", "label")
    return _load(path, "tsv", {name: name for name in fields}, {"0": "different", "1": "same"}, fields)


def table_format(path: Path, format: str | None = None) -> str:
    """``format`` checked, or inferred from the suffix (.csv, .tsv/.txt, .jsonl/.json; then .gz allowed)."""
    if format is None:
        format = _SUFFIX_FORMATS.get(
            path.with_suffix("").suffix.lower() if path.suffix == ".gz" else path.suffix.lower()
        )
        if format is None:
            raise ValueError(f"format: cannot infer from suffix {''.join(path.suffixes)!r}; pass one of {FORMATS}")
    if format not in FORMATS:
        raise ValueError(f"format: must be one of {FORMATS}, got {format!r}")
    return format


def load_table(
    path: str | Path,
    text: str = "text",
    text_pair: str | None = None,
    label: str = "label",
    label_names: Sequence[str] | None = None,
    format: str | None = None,
    classes: Sequence[str] | None = None,
    label_values: Sequence[Any] | None = None,
) -> Dataset:
    """A CSV/TSV (with a header line) or JSON-lines file (``format``: one of ``FORMATS``, default from the
    suffix) with columns ``text``, ``text_pair`` (optional) and ``label``. The classes: ``label_names`` (each label is
    a name, or, with ``label_values``, the file's value of the class at the same place: ``[1, 2, 3]`` for ratings
    from 1, ``[0, 1, 2]`` for indices), else ``classes`` (exact values, e.g. another split's), else the file's distinct
    values (:func:`class_values`; not a :data:`MISSING_LABELS` value). A number that is no name is never guessed to be
    an index: without ``label_values`` it is a ValueError naming the file, the line and ``label_values``."""
    path = existing_file(path)
    columns = {"text": text, "text_pair": text_pair, "label": label}
    read = read_table(path, table_format(path, format), {name: source for name, source in columns.items() if source})
    if label_names is not None:
        names = list(label_names)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"label_names: must be distinct and non-empty, got {names}")
        index = {label_value(name, "label_names"): k for k, name in enumerate(names)}
        if label_values is None:
            _check_no_number_read_as_index(path, read, index, names)
        else:
            index = _value_index(label_values, names, index)
        return labelled(path, read, index, names)
    if label_values is not None:
        raise ValueError(f"label_values: must come with label_names (the class of each value), got {label_values!r}")
    for value, line_no in zip(read["label"], read["line"]) if classes is None else ():
        if value.lower() in MISSING_LABELS:
            raise ValueError(
                f"{path}:{line_no}: label {value!r} reads as a missing value; a class? name it in label_names"
            )
    names = list(classes) if classes is not None else class_values(read["label"])
    return labelled(path, read, {value: k for k, value in enumerate(names)}, names)


def _value_index(label_values: Sequence[Any], names: Sequence[str], by_name: Mapping[str, int]) -> dict[str, int]:
    """Label -> class id: ``label_values`` (the file's value of each class of ``names``, in order) and the names
    themselves (``by_name``); a value that is another class's name is a ValueError (the label would be ambiguous)."""
    if isinstance(label_values, (str, bytes)) or not isinstance(label_values, Sequence):
        raise ValueError(f"label_values: must be a list of the file's label values, got {label_values!r}")
    values = [label_value(value, "label_values") for value in label_values]
    if len(values) != len(names) or len(set(values)) != len(values):
        raise ValueError(
            f"label_values: must be {len(names)} distinct values, one per entry of label_names {list(names)}, "
            f"got {list(label_values)!r}"
        )
    for k, value in enumerate(values):
        if by_name.get(value, k) != k:
            raise ValueError(
                f"label_values: {value!r} is the value of class {names[k]!r} and the name of class "
                f"{names[by_name[value]]!r}; a label would read two ways"
            )
    return {**by_name, **{value: k for k, value in enumerate(values)}}


def _check_no_number_read_as_index(
    path: Path, read: Mapping[str, list], index: Mapping[str, int], names: Sequence[str]
) -> None:
    """A numeric label that is none of ``names`` may be an index from 0 or a rating from 1: the reading is the
    caller's (``label_values``), never a guess."""
    for value, line_no in zip(read["label"], read["line"]):
        if value not in index and value.lstrip("-").isdigit():
            raise ValueError(
                f"{path}:{line_no}: label {value!r} is a number and none of label_names {list(names)}; give "
                f"label_values, the file's value of each class in that order (e.g. {list(range(len(names)))} for "
                f"indices from 0, {list(range(1, len(names) + 1))} for ratings from 1)"
            )
