"""Reading text files line by line: the one reader of the workbench's UTF-8 text files (vocabularies, lexicons,
word lists, data files), ``.gz`` through gzip, errors naming ``file:line``."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path


def read_lines(path: str | Path, name: str = "path") -> Iterator[tuple[int, str]]:
    """(1-based line number, line) of a UTF-8 text file, ``.gz`` through gzip, a byte-order mark
    dropped. ValueError naming ``name`` if the file is missing, ``file:line`` for bytes that are not UTF-8 (GBK, an
    encoded lone surrogate: with the ``iconv`` command that fixes it), a carriage return inside a line (line ends that
    are CR only: the whole file reads as one line) or a broken or truncated gzip stream."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{name}: no such file {str(path)!r}")
    line_no = 0
    try:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as handle:
            for line_no, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8")
                except UnicodeDecodeError as error:
                    source = "<its encoding>" if "\ufffd" in raw.decode("gbk", "replace") else "GBK"
                    where = f"{path}:{line_no}: not UTF-8 text ({error.reason} at byte {error.start} of the line)"
                    raise ValueError(f"{where}; convert it with iconv -f {source} -t UTF-8") from None
                if "\r" in line.rstrip("\r\n"):
                    raise ValueError(
                        f"{path}:{line_no}: holds a carriage return (CR) inside the line: its line ends are CR only "
                        f"(classic Mac OS) or mixed; convert them: tr '\\r' '\\n' < {path.name} > converted"
                    )
                yield line_no, line
    except (OSError, EOFError, zlib.error) as error:  # gzip.BadGzipFile is an OSError; a truncated .gz ends in EOFError
        raise ValueError(f"{path}:{line_no + 1}: not a readable file ({error or type(error).__name__})") from None
