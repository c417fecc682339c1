"""Loaders for the real datasets (a user points them at downloaded files).

Each loader returns a ``datasets.Dataset`` with ``text`` (and ``text_pair``)
strings and an integer ``label`` whose ClassLabel feature holds the class names.
A missing file, a missing column, a malformed line or an unknown label value
raises ValueError naming the file and the 1-based line number; so does a line
that is not UTF-8 (e.g. a GBK download: the message gives the iconv command
that converts it). A file without any record raises ``<path>: no records``.
A UTF-8 byte-order mark before the first line is dropped (``utf-8-sig``), so
a header after it is recognised. CSV/TSV fields may be as long as the file:
the csv module's field-size limit is raised to the file size while it is read.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from datasets import Dataset

from workbench.data.features import RELEVANCE_LABEL_NAMES, build_dataset

Record = tuple[int, dict[str, str]]
"""(1-based line number, field -> raw value)."""

FORMATS = ("csv", "tsv", "jsonl")
_SUFFIX_FORMATS = {".csv": "csv", ".tsv": "tsv", ".txt": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}

TNEWS_LABELS: tuple[tuple[str, str], ...] = (
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
"""CLUE TNEWS label ids and descriptions (the content of its labels.json; 105 and 111 unused)."""


def _existing_file(path: str | Path, parameter: str = "path") -> Path:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{parameter}: no such file {str(path)!r}")
    return path


_CSV_FIELD_LIMIT_CAP = 2**31 - 1  # csv.field_size_limit takes a C long (32-bit on Windows)


def _undecodable_lines(path: Path) -> Iterator[tuple[int, bytes, UnicodeDecodeError]]:
    """(1-based line number, raw bytes, error) of every line of ``path`` that is not UTF-8."""
    with path.open("rb") as handle:
        for line_no, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
            except UnicodeDecodeError as error:
                yield line_no, raw, error


def _not_utf8(path: Path) -> ValueError:
    """The error for a file that is not UTF-8, naming its first undecodable line and the iconv
    command that converts it (GBK when that line decodes as GBK)."""
    line_no, raw, error = next(_undecodable_lines(path))
    try:
        raw.decode("gbk")
        source = "GBK"
    except UnicodeDecodeError:
        source = "<its encoding>"
    return ValueError(
        f"{path}:{line_no}: not UTF-8 text ({error.reason} at byte {error.start} of the line); "
        f"convert it with iconv -f {source} -t UTF-8"
    )


def _text_lines(path: Path, newline: str | None) -> Iterator[str]:
    """The lines of ``path`` read as UTF-8 (``open(newline=newline)``); a byte-order mark
    before the first line is dropped. A file that is not UTF-8 raises ValueError naming
    path:line of its first undecodable line."""
    try:
        with path.open(encoding="utf-8-sig", newline=newline) as handle:
            yield from handle
    except UnicodeDecodeError:
        raise _not_utf8(path) from None


def _jsonl_records(path: Path) -> Iterator[Record]:
    for line_no, line in enumerate(_text_lines(path, None), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{line_no}: not a JSON object ({error.msg})") from None
        if not isinstance(record, dict):
            raise ValueError(f"{path}:{line_no}: not a JSON object")
        yield line_no, {key: "" if value is None else str(value) for key, value in record.items()}


def _delimited_records(path: Path, delimiter: str, fieldnames: Sequence[str] | None) -> Iterator[Record]:
    """Rows of a CSV/TSV file. With ``fieldnames`` None the first line is the header.

    With ``fieldnames`` given (a headerless format), a first line that contains
    the word ``label`` as a field is taken as a header: its ``label`` column is
    the label and the remaining columns, in order, fill the other fieldnames.
    """
    quoting = csv.QUOTE_MINIMAL if delimiter == "," else csv.QUOTE_NONE
    previous_limit = csv.field_size_limit()
    csv.field_size_limit(max(previous_limit, min(path.stat().st_size + 1, _CSV_FIELD_LIMIT_CAP)))
    try:
        reader = csv.reader(_text_lines(path, ""), delimiter=delimiter, quoting=quoting)
        columns = list(fieldnames) if fieldnames is not None else None
        for row in _csv_rows(reader, path):
            line_no = reader.line_num
            if not any(field.strip() for field in row):
                continue
            if columns is None:
                columns = [field.strip() for field in row]
                continue
            if line_no == 1 and fieldnames is not None and "label" in (field.strip().lower() for field in row):
                columns = _columns_from_header(row, fieldnames)
                continue
            if len(row) != len(columns):
                raise ValueError(f"{path}:{line_no}: expected {len(columns)} fields {columns}, got {len(row)}")
            yield line_no, dict(zip(columns, row))
    finally:
        csv.field_size_limit(previous_limit)


def _csv_rows(reader, path: Path) -> Iterator[list[str]]:
    """The rows of a csv reader; a csv.Error becomes a ValueError naming path:line."""
    try:
        yield from reader
    except csv.Error as error:
        raise ValueError(f"{path}:{reader.line_num}: {error}") from None


def _columns_from_header(header: Sequence[str], fieldnames: Sequence[str]) -> list[str]:
    names = [field.strip().lower() for field in header]
    others = [name for name in fieldnames if name != "label"]
    if len(names) != len(fieldnames):
        raise ValueError(f"header: expected {len(fieldnames)} columns, got {header}")
    iterator = iter(others)
    return ["label" if name == "label" else next(iterator) for name in names]


def _records(path: Path, format: str, fieldnames: Sequence[str] | None = None) -> Iterator[Record]:
    if format == "jsonl":
        return _jsonl_records(path)
    return _delimited_records(path, "," if format == "csv" else "\t", fieldnames)


def _build(
    records: Iterator[Record],
    path: Path,
    text: str,
    text_pair: str | None,
    label: str,
    label_index: Mapping[str, int],
    names: Sequence[str],
) -> Dataset:
    """Dataset from raw records: ``text``/``text_pair`` columns copied, ``label`` mapped by ``label_index``."""
    columns: dict[str, list] = {"text": [], "label": []}
    if text_pair is not None:
        columns["text_pair"] = []
    wanted = [text, label] + ([text_pair] if text_pair is not None else [])
    for line_no, record in records:
        for source in wanted:
            if source not in record:
                raise ValueError(f"{path}:{line_no}: missing column {source!r} (has {sorted(record)})")
        raw_label = record[label].strip()
        if raw_label not in label_index:
            raise ValueError(f"{path}:{line_no}: unknown label value {raw_label!r}; allowed {sorted(label_index)}")
        columns["text"].append(record[text])
        if text_pair is not None:
            columns["text_pair"].append(record[text_pair])
        columns["label"].append(label_index[raw_label])
    if not columns["label"]:
        raise ValueError(f"{path}: no records")
    return build_dataset(columns, names)


def _index_labels(values: Sequence[str]) -> dict[str, int]:
    return {value: index for index, value in enumerate(values)}


def load_qbqtc(path: str | Path) -> Dataset:
    """CLUE QBQTC JSON lines (id, query, title, label "0"/"1"/"2"): text=query, text_pair=title."""
    path = _existing_file(path)
    return _build(_jsonl_records(path), path, "query", "title", "label", _index_labels(["0", "1", "2"]), RELEVANCE_LABEL_NAMES)


def _tnews_label_table(labels_path: str | Path | None) -> tuple[tuple[str, str], ...]:
    if labels_path is None:
        return TNEWS_LABELS
    path = _existing_file(labels_path, "labels_path")
    table = []
    for line_no, record in _jsonl_records(path):
        if "label" not in record or "label_desc" not in record:
            raise ValueError(f"{path}:{line_no}: missing column 'label' or 'label_desc'")
        table.append((record["label"], record["label_desc"]))
    if not table:
        raise ValueError(f"{path}: no records")
    return tuple(sorted(table, key=lambda pair: int(pair[0]) if pair[0].isdigit() else pair[0]))


def load_tnews(path: str | Path, labels_path: str | Path | None = None) -> Dataset:
    """CLUE TNEWS JSON lines (label, label_desc, sentence, keywords): text=sentence.

    Label ids (e.g. "100".."116") map to contiguous indices in the order of the
    ids listed in ``labels_path`` (CLUE's labels.json; default: the built-in
    ``TNEWS_LABELS``, 15 classes); the class names are the label_desc values.
    """
    path = _existing_file(path)
    table = _tnews_label_table(labels_path)
    return _build(
        _jsonl_records(path),
        path,
        "sentence",
        None,
        "label",
        _index_labels([label_id for label_id, _ in table]),
        [desc for _, desc in table],
    )


def load_chnsenticorp(path: str | Path) -> Dataset:
    """ChnSentiCorp: ``text TAB label`` lines (0 negative, 1 positive); an optional header
    line naming a ``label`` column (e.g. ``label TAB text_a``) sets the column order."""
    path = _existing_file(path)
    return _build(
        _delimited_records(path, "\t", ("text", "label")),
        path,
        "text",
        None,
        "label",
        _index_labels(["0", "1"]),
        ("negative", "positive"),
    )


def load_lcqmc(path: str | Path) -> Dataset:
    """LCQMC: ``s1 TAB s2 TAB label`` lines (1 same intent, 0 not); optional header with ``label``."""
    path = _existing_file(path)
    return _build(
        _delimited_records(path, "\t", ("text", "text_pair", "label")),
        path,
        "text",
        "text_pair",
        "label",
        _index_labels(["0", "1"]),
        ("different", "same"),
    )


def _infer_label_index(values: Sequence[str]) -> tuple[dict[str, int], list[str]]:
    """Distinct label values sorted (numerically when all are integers) as the class names."""
    distinct = sorted(set(values), key=lambda v: (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v))
    return _index_labels(distinct), distinct


def load_table(
    path: str | Path,
    text: str = "text",
    text_pair: str | None = None,
    label: str = "label",
    label_names: Sequence[str] | None = None,
    format: str | None = None,
) -> Dataset:
    """A CSV/TSV (with a header line) or JSON-lines file with a column mapping.

    ``text``/``text_pair``/``label`` name the source columns. ``format`` is one
    of ``FORMATS``, inferred from the suffix when None (.csv, .tsv/.txt,
    .jsonl/.json). With ``label_names`` a label value may be a class name or its
    integer index; without, the distinct values (sorted, numerically when all
    are integers) become the classes.
    """
    path = _existing_file(path)
    if format is None:
        format = _SUFFIX_FORMATS.get(path.suffix.lower())
        if format is None:
            raise ValueError(f"format: cannot infer from suffix {path.suffix!r}; pass one of {FORMATS}")
    if format not in FORMATS:
        raise ValueError(f"format: must be one of {FORMATS}, got {format!r}")
    if label_names is not None:
        names = list(label_names)
        if not names or len(set(names)) != len(names):
            raise ValueError(f"label_names: must be distinct and non-empty, got {names}")
        label_index = {**_index_labels([str(k) for k in range(len(names))]), **_index_labels(names)}
    else:
        values = [record.get(label, "").strip() for _, record in _records(path, format)]
        if not values:
            raise ValueError(f"{path}: no records")
        label_index, names = _infer_label_index(values)
    return _build(_records(path, format), path, text, text_pair, label, label_index, names)
