"""Readers of the real datasets' files (``.gz`` allowed) and :func:`load_splits` / :func:`load_texts`
for a config's ``data`` section. Datasets hold ``text`` (and ``text_pair``) strings and an integer
ClassLabel ``label``; label values are compared as values (``1``, ``1.0``, ``"1"``: one class). Bad
input raises ValueError naming ``file:line`` (docs/data.md lists the cases; docs/architecture.md says
why these readers are the workbench's own rather than ``datasets.load_dataset``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict

from workbench.config import LABELLED_SOURCES, DataConfig
from workbench.data.features import RELEVANCE_LABEL_NAMES, build_dataset, label_names
from workbench.data.releases import RELEASES, release
from workbench.data.root_files import checked_statuses, present_files, warn_once
from workbench.data.samples import sample_corpus, sample_relevance_splits, sample_sentence_splits
from workbench.data.splits import (
    NORMALISATION,
    ONCE_IN,
    PRIORITY,
    deduplicate_splits,
    stratified_sample,
    stratified_split,
    unique_texts,
)
from workbench.data_root import data_root
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


# ----------------------------------------------------------------------------- a config's data section

SPLIT_NAMES = ("train", "validation", "test")


class Splits(DatasetDict):
    """The splits of :func:`load_splits`, a ``DatasetDict`` with ``provenance``: a JSON-ready record of where each
    split came from (docs/data.md): ``source``, ``duplicates`` (what :func:`deduplicate_splits` removed: ``removed``,
    per split ``shared``, ``repeated`` and ``of``), ``splits`` (per split: ``file``, ``cut`` when it was cut from a
    file, ``examples``) and, for a data set read from the data root, ``data_root`` and ``missing`` (its absent
    files)."""

    provenance: dict[str, Any] | None = None


def _paths(data: DataConfig, key: str = "path") -> list[Path]:
    value = getattr(data, key)
    if value is None:
        raise ValueError(f"data.{key}: source {data.source!r} needs a file path")
    return [existing_file(item, f"data.{key}") for item in (value if isinstance(value, list) else [value])]


def _read_file(data: DataConfig, path: Path, classes: list[str] | None = None, labels_path: Path | None = None):
    """The labelled file ``path`` of ``data.source``; a table's labels must be among ``classes`` when given."""
    if data.source == "table":
        if data.label is None or data.text is None:
            raise ValueError(
                f"data.text / data.label: must name the table's columns, got {data.text!r} / {data.label!r}"
            )
        columns = {"text": data.text, "text_pair": data.text_pair, "label": data.label}
        classes_of = {"label_names": data.label_names, "label_values": data.label_values, "classes": classes}
        return load_table(path, **columns, **classes_of)
    return release(data.source).read(path, labels_path=labels_path if labels_path is not None else data.labels_path)


def check_ordinal_order(data: DataConfig, names: Sequence[str]) -> None:
    """Ordinal labels (``data.is_ordinal``) need an order: a table's classes ``names`` read from its file are in it only
    when every label is a number (text labels sort by name: ``high, low, mid``); else ValueError naming
    ``data.label_names``, the file and the labels."""
    if data.source != "table" or not data.is_ordinal or data.label_names is not None:
        return
    try:
        [Decimal(name) for name in names]
    except InvalidOperation:
        raise ValueError(
            f"data.label_names: data.ordinal is true but the labels of {str(data.path)!r} are text, {list(names)} "
            "(sorted by name, not by rank): list them from lowest to highest in data.label_names"
        ) from None


def check_training_file(train: Dataset, parameter: str, file: str | Path | Sequence[str]) -> None:
    """The file the training split is read (or cut) from must hold two or more classes and some text: else ValueError
    naming ``parameter`` (``data.path``; ``data.source`` for a data set of the data root), the ``file`` and its one
    label (a classifier of one class learns nothing) or the empty text column. The one rule for every labelled
    source."""
    present = sorted(set(train["label"]))
    if len(present) < 2:
        name = label_names(train)[present[0]] if present else None
        raise ValueError(
            f"{parameter}: {str(file)!r} holds one class, {name!r}, on every line; a classifier needs two or more"
        )
    columns = [column for column in ("text", "text_pair") if column in train.column_names]
    if not any(text.strip() for column in columns for text in train[column]):
        raise ValueError(
            f"{parameter}: every text of {str(file)!r} is empty (columns {columns}); nothing to learn from"
        )


def warn_one_class_splits(splits: Mapping[str, Dataset]) -> None:
    """A warning (once per process) for each split whose labels hold one class, naming the split and the class: a
    classifier learns nothing from such a training split, a rule tuned on such a validation split stays the argmax
    (``workbench.decisions.tune_rule``) and scores on such a test split say little about the other classes."""
    for name, split in splits.items():
        present = sorted(set(split["label"]))
        if len(present) == 1:
            warn_once(
                f"data: the {name} split holds one class, {label_names(split)[present[0]]!r}, in all its "
                f"{len(split)} examples; scores on it and anything tuned on it say nothing of the other classes"
            )


def _cut(data: DataConfig, ds: Dataset, fractions: dict[str, float], name: str) -> DatasetDict:
    """``ds`` (the file ``name``) cut by :func:`stratified_split` into ``fractions`` (renormalised), seeded by
    ``data.seed``; ValueError naming ``data.split`` when a part would be empty."""
    total = sum(fractions.values())
    shares = {split: fraction / total for split, fraction in fractions.items()}
    try:
        return stratified_split(ds, shares, seed=data.seed)
    except ValueError as error:
        raise ValueError(f"data.split: cannot cut {name} into {list(data.split)!r}: {error}") from None


def _cut_record(name: str, fractions: dict[str, float], seed: int) -> dict[str, Any]:
    total = sum(fractions.values())
    shares = {split: round(fraction / total, 6) for split, fraction in fractions.items()}
    return {"from": name, "method": "stratified_split", "shares": shares, "seed": seed}


def _file_splits(data: DataConfig) -> tuple[DatasetDict, dict[str, Any]]:
    train_path = _paths(data, "path")[0]
    train = _read_file(data, train_path)
    check_ordinal_order(data, label_names(train))
    check_training_file(train, "data.path", data.path)
    if data.source in RELEASES and RELEASES[data.source].labels_file is not None:
        _check_every_class(train, str(train_path), data.labels_path)
    if data.validation_path is not None:  # one label vocabulary: train's (or data.label_names)
        others = {"validation": "validation_path", "test": "test_path"}
        files = {
            "train": train_path,
            **{name: _paths(data, key)[0] for name, key in others.items() if getattr(data, key)},
        }
        splits = {
            "train": train,
            **{name: _read_file(data, path, label_names(train)) for name, path in files.items() if name != "train"},
        }
        return DatasetDict(splits), {"splits": {name: {"file": str(path)} for name, path in files.items()}}
    fractions = {name: fraction for name, fraction in zip(SPLIT_NAMES, data.split) if fraction > 0}
    if "validation" not in fractions:
        raise ValueError(f"data.split: the validation fraction must be > 0, got {list(data.split)!r}")
    cut = _cut_record(str(train_path), fractions, data.seed)
    splits = _cut(data, train, fractions, repr(data.path))
    return splits, {"splits": {name: {"file": str(train_path), "cut": cut} for name in splits}}


def _root_splits(data: DataConfig) -> tuple[DatasetDict, dict[str, Any]]:
    """The data set ``data.source`` from the data root: each split from its release file; a split whose file is
    absent (or that the release lacks, as TNEWS's labelled test) is cut from a present file (train's, else
    validation's, else test's) by ``data.split`` and ``data.seed``, with a warning (once per process) and the cut in the
    provenance."""
    item = release(data.source)
    root = data_root()
    wanted = [name for name, fraction in zip(SPLIT_NAMES, data.split) if fraction > 0]
    if "validation" not in wanted:
        raise ValueError(f"data.split: the validation fraction must be > 0, got {list(data.split)!r}")
    present = present_files(data.source, tuple(item.splits.values()), root)  # MissingDataError when none is there
    files = {name: present[item.splits[name]] for name in SPLIT_NAMES if item.splits.get(name) in present}
    labels = data.labels_path
    used = [item.file(path.name) for path in files.values()]  # the release's files this section reads
    if item.labels_file is not None and labels is None and item.file(item.labels_file).location(root).is_file():
        labels = str(item.file(item.labels_file).location(root))
        used.append(item.file(item.labels_file))
    read = {name: _read_file(data, path, labels_path=labels) for name, path in files.items() if name in wanted}
    absent = [name for name in wanted if name not in files]
    record: dict[str, Any] = {
        "data_root": str(root),
        "missing": [file.path for file in item.files if file.name in item.splits.values() and file.name not in present],
        "checksums": checked_statuses(item, used, root),
        "splits": {name: {"file": str(files[name].relative_to(root))} for name in read},
    }
    donor = next(name for name in SPLIT_NAMES if name in files)  # the file the training split is read or cut from
    donor_data = read[donor] if donor in read else _read_file(data, files[donor], labels_path=labels)
    check_training_file(donor_data, "data.source", files[donor])
    if not absent:
        _check_every_class(read["train"], str(files["train"]), labels)
        return DatasetDict(read), record
    donor_file = str(files[donor].relative_to(root))
    parts = {
        name: fraction
        for name, fraction in zip(SPLIT_NAMES, data.split)
        if (name == donor and fraction > 0) or name in absent
    }
    cut = _cut(data, donor_data, parts, donor_file)
    read.update(cut)
    for name in cut:
        record["splits"][name] = {"file": donor_file, "cut": _cut_record(donor_file, parts, data.seed)}
    lacking = [name for name in absent if name not in item.splits]
    unfetched = [str(item.file(item.splits[name]).location(root)) for name in absent if name in item.splits]
    reasons = ([f"{', '.join(unfetched)} not in the data root"] if unfetched else []) + (
        [f"the release has no labelled {' or '.join(lacking)} split"] if lacking else []
    )
    fetch = f"; `{item.fetch_command}` adds the release's files" if unfetched else ""
    warn_once(
        f"data.source {data.source!r}: {' and '.join(reasons)}, so {donor_file} is cut into {', '.join(parts)} "
        f"(stratified by label, seed {data.seed}, in the shares of data.split {list(data.split)!r}){fetch}"
    )
    _check_every_class(read["train"], str(files.get("train", files[donor])), labels)
    return DatasetDict({name: read[name] for name in SPLIT_NAMES if name in read}), record


def _without_duplicates(splits: DatasetDict) -> tuple[DatasetDict, dict[str, Any]]:
    """``splits`` by :func:`deduplicate_splits` (every split, in :data:`PRIORITY` order) and the provenance's
    ``duplicates`` record; ValueError naming the split that nothing is left of."""
    priority = [name for name in PRIORITY if name in splits]
    cleaned, removed = deduplicate_splits(splits, priority=priority)
    for name in priority:
        if len(cleaned[name]) == 0:
            holders = " or ".join(priority[: priority.index(name)])
            raise ValueError(
                f"data: every example of the {name} split ({len(splits[name])}) is also in the {holders} split, "
                "which keeps it; give splits that share fewer texts"
            )
    compared = [key for key in ("text", "text_pair") if all(key in split.column_names for split in splits.values())]
    return cleaned, {
        "compared": compared,
        "normalisation": NORMALISATION,
        "priority": priority,
        "once_in": [name for name in ONCE_IN if name in splits],
        "removed": removed,
    }


def _check_every_class(train: Dataset, train_file: str, labels_file: str | Path | None) -> None:
    """Every class a labels file names needs an example in the training split: else ValueError naming the classes, the
    labels file and the training file (a class without an example cannot be learnt, and scores 0 in macro-F1)."""
    if labels_file is None:
        return
    present = set(train["label"])
    empty = [name for k, name in enumerate(label_names(train)) if k not in present]
    if empty:
        raise ValueError(
            f"labels_path: {str(labels_file)!r} names {empty}, which no example of the training split "
            f"({train_file}) has; a class without a training example cannot be learnt: remove it from the labels "
            "file, or check that both files are the release's"
        )


def load_splits(data: DataConfig | Mapping[str, Any]) -> Splits:
    """Splits ``train``, ``validation`` (and ``test``) of a labelled source, with their ``provenance``
    (:class:`Splits`).

    Sample sources come split. A file source reads ``data.path`` and ``validation_path`` / ``test_path`` with the
    training file's classes, or cuts ``path`` by ``stratified_split`` (``data.split``, ``data.seed``; a 0 test
    fraction: no test). A named data set without a path (``{source: qbqtc}``) reads its release files from the data
    root; a split whose file is absent is cut from the present ones (a warning says which); no file present is a
    :class:`~workbench.data.root_files.MissingDataError` naming the files, the root and the fetch command.
    Then, for every source, no text is in two splits: :func:`deduplicate_splits` removes from each split what a split
    before it in test, validation, train holds (``text`` and ``text_pair``, by :func:`text_key`) and the repeats within
    validation and test; the provenance's ``duplicates`` counts them. After it, ``max_train_samples`` /
    ``max_eval_samples`` keep a seeded stratified sample of N examples of each split
    (:func:`stratified_sample`, ``data.seed``): the first N rows of a file sorted by label would lose classes."""
    data = DataConfig.from_mapping(data)
    if data.source in ("sample_relevance", "sample_sentences"):
        generate = sample_relevance_splits if data.source == "sample_relevance" else sample_sentence_splits
        splits = generate(seed=data.seed)
        record = {"generated": {"seed": data.seed}, "splits": {}}
    elif (
        data.source in RELEASES
        and RELEASES[data.source].labelled
        and data.path is None
        and data.validation_path is None
    ):
        splits, record = _root_splits(data)
    elif data.source in LABELLED_SOURCES:
        splits, record = _file_splits(data)
    else:
        raise ValueError(f"data.source: {data.source!r} has no labels; use one of {', '.join(LABELLED_SOURCES)}")
    splits, duplicates = _without_duplicates(splits)
    limits = {name: data.max_train_samples if name == "train" else data.max_eval_samples for name in splits}
    result = Splits(
        {
            name: split if limits[name] is None else stratified_sample(split, limits[name], data.seed)
            for name, split in splits.items()
        }
    )
    warn_one_class_splits(result)
    entries = record.pop("splits")
    result.provenance = {
        "source": data.source,
        **record,
        "duplicates": duplicates,
        "splits": {
            name: {
                **entries.get(name, {}),
                "examples": len(split),
                **({"stratified_sample": {"max": limits[name], "seed": data.seed}} if limits[name] else {}),
            }
            for name, split in result.items()
        },
    }
    return result


class Texts(tuple):
    """``(texts, pairs)`` of :func:`load_texts` (it unpacks as a pair) with ``provenance``: a JSON-ready record,
    ``source``, ``duplicates`` (the repeats removed: ``removed.texts`` with ``repeated`` and ``of``, as in
    :class:`Splits`), ``texts`` (how many are given) and, for a labelled source, ``splits`` (its ``load_splits``
    provenance)."""

    provenance: dict[str, Any]

    def __new__(cls, texts: list[str], pairs: list[str] | None, provenance: dict[str, Any]) -> Texts:
        loaded = super().__new__(cls, (texts, pairs))
        loaded.provenance = provenance
        return loaded


def load_texts(data: DataConfig | Mapping[str, Any]) -> Texts:
    """Texts (and second segments, or None) for MLM pre-training, each text (pair) once: ``sample_corpus``'s
    ``n_sentences``; ``corpus``: the non-blank lines of ``data.path`` (a file or a list, ``.gz`` allowed), without a
    path the ``corpus`` data set's files present in the data root (a warning names the absent ones); a labelled
    source: its training split (which shares no text with its validation and test splits, :func:`load_splits`) in a
    seeded random order (``data.seed``; a file sorted by label gives texts of every class). A text repeating an
    earlier one (by :func:`text_key`) is removed before ``max_train_samples`` keeps the first N texts of that order, so
    the texts after them are unseen (notebook 03 holds them out). A :class:`Texts` with its provenance."""
    data = DataConfig.from_mapping(data)
    pairs = None
    record: dict[str, Any] = {"source": data.source}
    if data.source == "sample_corpus":
        texts = sample_corpus(n_sentences=data.n_sentences, seed=data.seed)
    elif data.source == "corpus":
        paths = _paths(data) if data.path is not None else _root_corpus()
        texts = [line.strip() for path in paths for _, line in read_lines(path) if line.strip()]
        if not texts:
            raise ValueError(
                f"data.path: must hold at least one non-blank line, got none in {', '.join(map(str, paths))}"
            )
    else:  # every training text, shuffled: the first N and those after them come from every class
        splits = load_splits(data.replace(max_train_samples=None))
        train = splits["train"].select(np.random.default_rng(data.seed).permutation(len(splits["train"])))
        texts = list(train["text"])
        pairs = list(train["text_pair"]) if "text_pair" in train.column_names else None
        record["splits"] = splits.provenance
    unique, unique_pairs, repeated = unique_texts(texts, pairs)
    kept = unique[: data.max_train_samples]
    record["duplicates"] = {
        "normalisation": NORMALISATION,
        "removed": {"texts": {"shared": 0, "repeated": repeated, "of": len(texts)}},
    }
    record["texts"] = len(kept)
    return Texts(kept, None if unique_pairs is None else unique_pairs[: data.max_train_samples], record)


def _root_corpus() -> list[Path]:
    """The ``corpus`` data set's files present in the data root, in the release's order; a warning names absent ones."""
    present = present_files("corpus")  # MissingDataError when none is there
    item = release("corpus")
    checked_statuses(item, [item.file(name) for name in present], data_root())
    absent = [file.path for file in item.files if file.name not in present]
    if absent:
        warn_once(
            f"data.source 'corpus': {', '.join(absent)} not in the data root {data_root()}; reading "
            f"{', '.join(str(path) for path in present.values())} only"
        )
    return list(present.values())
