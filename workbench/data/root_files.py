"""The data root's files: which files of a release are present, whether each is the release's, and the warning when
a file read is not.

A file's status (:func:`file_status`) compares its sha256 with the pinned one of its entry
(:class:`~workbench.data.releases.ReleaseFile`), or, for a file without a pin, with the hash its first fetch recorded
in ``<root>/fetched.json`` (:data:`FETCH_RECORD`, written by :mod:`workbench.data.fetch`). Whatever reads a release's
file from the root goes through :func:`checked_statuses`: ``load_splits`` and ``load_texts`` for a data section
without a path, and :meth:`workbench.synonyms.SynonymTable.from_path` for a lexicon of the root
(:func:`check_root_file`); a file that is not the release's gets a warning naming it and its status, once per process.
:func:`present_files` and :class:`MissingDataError` tell which files a data section finds. Imports nothing heavy (no
``datasets``): the lexicons read it.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.data.releases import RELEASES, Release, ReleaseFile, release
from workbench.data_root import DATA_ROOT_ENV, check_data_root, data_root, where_root_is_set

FETCH_RECORD = "fetched.json"
"""The data root's record of fetched files: ``{path: {url or sources, sha256, size, fetched}}``."""
CHUNK_BYTES = 1 << 16
SUSPECT_STATUSES = ("DIFFERS", "CHANGED", "unreadable")
"""The beginnings of a status that says a present file is not the release's (or cannot be read)."""
_WARNED: set[str] = set()  # the data root's warnings, each once per process however many fits read the section


class MissingDataError(ValueError):
    """A data set's files are not under the data root; the message names them, the root and the fetch command."""


def warn_once(message: str) -> None:
    """``message`` as a UserWarning, once per process (however many fits read the same section)."""
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, stacklevel=4)


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def read_record(root: Path) -> dict[str, dict[str, Any]]:
    """``<root>/fetched.json`` (empty when absent); ValueError naming it when it cannot be read or is not a JSON
    mapping."""
    path = root / FETCH_RECORD
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not JSON ({error}); remove it (it only records fetched files' checksums)") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: must be a JSON mapping of path -> record; remove it")
    return record


def file_status(file: ReleaseFile, root: Path, record: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``{path, present, size, sha256, status}`` of ``file`` under ``root``; ``status``: ``missing``, ``verified``
    (the pinned sha256), ``DIFFERS from the pinned sha256``, ``as first fetched`` (no pin; the recorded hash),
    ``CHANGED since it was fetched``, ``unverified: no pinned sha256`` (and not fetched), ``unreadable (<why>)`` or
    ``a folder, not a file``."""
    target = file.location(root)
    absent = {"path": file.path, "present": False, "size": None, "sha256": None}
    if target.is_dir():
        return {**absent, "status": "a folder, not a file"}
    if not target.is_file():
        return {**absent, "status": "missing"}
    try:
        digest = sha256_of(target)
    except OSError as error:
        return {**absent, "present": True, "status": f"unreadable ({error.strerror or error})"}
    recorded = record.get(file.path, {}).get("sha256")
    if file.sha256 is not None:
        status = "verified" if digest == file.sha256 else "DIFFERS from the pinned sha256"
    elif recorded is not None:
        status = "as first fetched" if digest == recorded else "CHANGED since it was fetched"
    else:
        status = "unverified: no pinned sha256"
    return {"path": file.path, "present": True, "size": target.stat().st_size, "sha256": digest, "status": status}


def present_files(name: str, wanted: tuple[str, ...] | None = None, root: Path | None = None) -> dict[str, Path]:
    """``{file name: path}`` of the release's files (or of ``wanted``) present under the root. None present:
    :class:`MissingDataError` naming the missing files, the data root and the command that fetches them (or the manual
    step of a file that cannot be fetched); a root that is a file or a link loop: ValueError naming it."""
    item = release(name)
    root = data_root() if root is None else root
    check_data_root(root)
    files = [item.file(wanted_name) for wanted_name in (wanted or [file.name for file in item.files])]
    present = {file.name: file.location(root) for file in files if file.location(root).is_file()}
    if not present:
        manual = next((file.manual for file in files if file.manual is not None), None)
        how = f"run `{item.fetch_command}`" + (f" (it says how to place them: {manual})" if manual else "")
        raise MissingDataError(
            f"{name}: none of {', '.join(str(file.location(root)) for file in files)} is in the data root {root} "
            f"({where_root_is_set()}, else <user cache>/workbench/data); {how}, or set {DATA_ROOT_ENV} to the folder "
            "that holds them"
        )
    return present


def checked_statuses(
    item: Release, files: Sequence[ReleaseFile], root: Path, instead: str = "name your own file in data.path"
) -> dict[str, str]:
    """``{path: status}`` of the files of ``item`` that a reader reads from ``root`` (``verified``, ``as first
    fetched``, ``DIFFERS from the pinned sha256``, ...: :func:`file_status`); a file that is not the release's gets a
    warning (once per process) naming it, its status, the fetch that puts the release's back and ``instead``, what else
    the reader may do."""
    try:
        record = read_record(root)
    except ValueError as error:  # the record's own problem is data list's to tell; the pinned files are still checked
        warn_once(f"{error}; the files without a pinned sha256 are read unverified")
        record = {}
    statuses = {}
    for file in files:
        statuses[file.path] = file_status(file, root, record)["status"]
        if statuses[file.path].startswith(SUSPECT_STATUSES):
            warn_once(
                f"{file.location(root)}: {statuses[file.path]}, so what this run reads is not the release's file "
                f"(`python -m workbench data list` shows it); move it away and run `{item.fetch_command}`, or "
                f"{instead}"
            )
    return statuses


def check_root_file(path: str | Path, instead: str) -> str | None:
    """The status of the file at ``path`` (:func:`checked_statuses`: a warning when it is not the release's) when it is
    a release's file in the data root, however the path is written (``$WORKBENCH_DATA/...`` expanded, a link, a
    relative path); None for any other file."""
    root = data_root()
    try:
        target = Path(path).resolve()
        for item in RELEASES.values():
            for file in item.files:
                if file.location(root).resolve() == target:
                    return checked_statuses(item, [file], root, instead)[file.path]
    except (OSError, RuntimeError):  # a path that cannot be resolved is the reader's to name
        return None
    return None
