"""``python -m workbench data list`` and ``data fetch NAME ...``: the named data sets in the data root (docs/data.md).

:func:`fetch` downloads each file of a release from its canonical public URL (``$WORKBENCH_DATA_MIRROR``, when set,
replaces it: ``<mirror>/<path under the root>``) into a temporary file in the target's folder, checks its sha256
against the pinned one (a file without a pin: against the hash its first fetch recorded in ``<root>/fetched.json``,
or records it) and renames it into place. Offline, an HTTP error, a transfer cut short, a timeout or a checksum
mismatch is a :class:`FetchError` naming the URL and the manual step, and leaves no partial file behind.
:func:`list_releases` tells, for every file, whether it is present and whether its checksum holds.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
import zipfile
from collections.abc import Iterable
from contextlib import suppress
from pathlib import Path
from typing import IO, Any

from tqdm.auto import tqdm

from workbench.data.releases import RELEASES, ReleaseFile, release
from workbench.data_root import DATA_ROOT_ENV, data_root

MIRROR_ENV = "WORKBENCH_DATA_MIRROR"
"""The environment variable whose URL replaces the releases' own: a file is fetched from ``<mirror>/<path>``."""
FETCH_RECORD = "fetched.json"
"""The data root's record of fetched files: ``{path: {url, sha256, size, fetched}}``."""
TIMEOUT_S = 60
"""Seconds a connection may wait for the server (to connect, or for the next bytes) before the fetch fails."""
CHUNK_BYTES = 1 << 16


class FetchError(ValueError):
    """A download that did not give the release's file; the message names the URL and the manual step."""


def sha256_of(path: Path) -> str:
    """The hex sha256 of the file at ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def mirror_url(file: ReleaseFile) -> str | None:
    """The URL ``file`` is fetched from: ``<$WORKBENCH_DATA_MIRROR>/<path>`` when the mirror is set, else its own."""
    mirror = os.environ.get(MIRROR_ENV)
    return f"{mirror.rstrip('/')}/{file.path}" if mirror else file.url


def read_record(root: Path) -> dict[str, dict[str, Any]]:
    """``<root>/fetched.json`` (empty when absent); ValueError naming it when it is not a JSON mapping."""
    path = root / FETCH_RECORD
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: not JSON ({error}); remove it (it only records fetched files' checksums)") from None
    if not isinstance(record, dict):
        raise ValueError(f"{path}: must be a JSON mapping of path -> record; remove it")
    return record


def _write_record(root: Path, record: dict[str, dict[str, Any]]) -> None:
    """``record`` into ``<root>/fetched.json`` through a temporary file and a rename."""
    handle, name = tempfile.mkstemp(prefix=f".{FETCH_RECORD}.", suffix=".part", dir=root)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(record, out, indent=1, sort_keys=True)
            out.write("\n")
        os.replace(name, root / FETCH_RECORD)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(name)


def file_status(file: ReleaseFile, root: Path, record: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{path, present, size, sha256, status}`` of ``file`` under ``root``; ``status``: ``missing``, ``verified``
    (the pinned sha256), ``DIFFERS from the pinned sha256``, ``as first fetched`` (no pin; the recorded hash),
    ``CHANGED since it was fetched`` or ``unverified: no pinned sha256`` (and not fetched)."""
    target = file.location(root)
    if not target.is_file():
        return {"path": file.path, "present": False, "size": None, "sha256": None, "status": "missing"}
    digest = sha256_of(target)
    recorded = record.get(file.path, {}).get("sha256")
    if file.sha256 is not None:
        status = "verified" if digest == file.sha256 else "DIFFERS from the pinned sha256"
    elif recorded is not None:
        status = "as first fetched" if digest == recorded else "CHANGED since it was fetched"
    else:
        status = "unverified: no pinned sha256"
    return {"path": file.path, "present": True, "size": target.stat().st_size, "sha256": digest, "status": status}


def _size(size: int | None) -> str:
    if size is None:
        return "-"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def list_releases(root: Path | None = None) -> str:
    """Every known data set: its licence and source, and per file its presence, size, checksum status and URL (or
    the manual step of a file without a download)."""
    root = data_root() if root is None else root
    record = read_record(root) if root.is_dir() else {}
    where = f"${DATA_ROOT_ENV}" if os.environ.get(DATA_ROOT_ENV) else f"${DATA_ROOT_ENV} unset: the default"
    lines = [f"data root: {root} ({where})"]
    if os.environ.get(MIRROR_ENV):
        lines.append(f"mirror: {os.environ[MIRROR_ENV]} (${MIRROR_ENV}: each file is fetched from <mirror>/<path>)")
    for item in RELEASES.values():
        lines += ["", f"{item.name}: {item.description}", f"  licence: {item.licence}", f"  source: {item.homepage}"]
        for file in item.files:
            status = file_status(file, root, record)
            origin = mirror_url(file) or f"manual: {file.manual}"
            lines.append(f"  {file.path:<36} {_size(status['size']):>9}  {status['status']:<34} {origin}")
        lines.append(f"  fetch: {item.fetch_command}")
    return "\n".join(lines)


def _stream(url: str, out: IO[bytes], label: str) -> tuple[str, int]:
    """Copy ``url`` into ``out`` with a progress bar: (sha256, bytes). FetchError (without the manual step) when the
    server cannot be reached or answers with an error, stops answering for TIMEOUT_S, or sends less than it
    announced."""
    digest = hashlib.sha256()
    received = 0
    expected = None
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "workbench-data-fetch"})
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            length = response.headers.get("Content-Length")
            expected = int(length) if length and length.isdigit() else None
            unit = {"unit": "B", "unit_scale": True, "unit_divisor": 1024}
            with tqdm(total=expected, desc=label, file=sys.stderr, leave=False, disable=None, **unit) as bar:
                for block in iter(lambda: response.read(CHUNK_BYTES), b""):
                    out.write(block)
                    digest.update(block)
                    received += len(block)
                    bar.update(len(block))
    except urllib.error.HTTPError as error:
        raise FetchError(f"HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:  # offline, no such host, refused
        raise FetchError(f"cannot reach it ({error.reason})") from None
    except TimeoutError:
        raise FetchError(f"no answer within {TIMEOUT_S} s after {received} bytes") from None
    except http.client.IncompleteRead as error:
        raise FetchError(f"the transfer stopped after {received + len(error.partial)} of {expected} bytes") from None
    except (http.client.HTTPException, OSError) as error:  # a reset connection, a full disk
        raise FetchError(f"the transfer broke after {received} bytes ({type(error).__name__}: {error})") from None
    if expected is not None and received != expected:
        raise FetchError(f"the transfer stopped after {received} of {expected} bytes")
    return digest.hexdigest(), received


def _temporary(folder: Path, name: str) -> tuple[IO[bytes], Path]:
    handle, path = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
    return os.fdopen(handle, "wb"), Path(path)


class _Fetcher:
    """One ``fetch`` call: archives downloaded once and removed at the end, the record written after each file."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.record = read_record(root) if root.is_dir() else {}
        self.archives: dict[str, Path] = {}

    def close(self) -> None:
        for path in self.archives.values():
            with suppress(FileNotFoundError):
                path.unlink()

    def _archive(self, url: str, folder: Path) -> Path:
        if url not in self.archives:
            out, path = _temporary(folder, Path(url).name)
            self.archives[url] = path
            with out:
                _stream(url, out, Path(url).name)
        return self.archives[url]

    def _member(self, archive: Path, member: str, out: IO[bytes]) -> tuple[str, int]:
        try:
            with zipfile.ZipFile(archive) as bundle:
                names = [name for name in bundle.namelist() if name == member or name.endswith(f"/{member}")]
                if not names:
                    raise FetchError(f"the archive holds no {member}")
                digest = hashlib.sha256()
                size = 0
                with bundle.open(names[0]) as source:
                    for block in iter(lambda: source.read(CHUNK_BYTES), b""):
                        out.write(block)
                        digest.update(block)
                        size += len(block)
        except zipfile.BadZipFile as error:
            raise FetchError(f"not a readable zip archive ({error})") from None
        return digest.hexdigest(), size

    def fetch_file(self, file: ReleaseFile) -> str:
        """Download ``file`` unless it is there; the line that says what happened. FetchError naming the URL and the
        manual step when the download fails or its checksum does not hold (no file left behind)."""
        target = file.location(self.root)
        if target.is_file():
            status = file_status(file, self.root, self.record)["status"]
            if status.startswith(("DIFFERS", "CHANGED")):
                raise FetchError(
                    f"{target}: present, but its sha256 {status.lower()}; move it away and fetch again "
                    f"(nothing was overwritten)"
                )
            return f"{file.path}: present, {status}"
        url = mirror_url(file)
        if url is None:
            raise FetchError(f"{file.path}: has no download: {file.manual_step(self.root)}")
        created = not target.parent.is_dir()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            out, partial = _temporary(target.parent, file.name)
        except OSError as error:
            raise FetchError(
                f"{target.parent}: cannot write there ({error.strerror or error}); set {DATA_ROOT_ENV} to a writable "
                "folder"
            ) from None
        try:
            try:
                with out:
                    if file.member is not None and url == file.url:
                        digest, size = self._member(self._archive(url, target.parent), file.member, out)
                    else:
                        digest, size = _stream(url, out, file.path)
                expected, origin = self._expected(file)
                if expected is not None and digest != expected:
                    raise FetchError(f"sha256 {digest} differs from {origin} {expected}")
            except FetchError as error:
                manual = file.manual_step(self.root, url)
                if created and not self.archives:  # the data set's folder, made for this file: left as it was
                    with suppress(OSError):
                        partial.unlink()
                        target.parent.rmdir()
                raise FetchError(f"{url}: {error}; no file was written. By hand: {manual}") from None
            os.replace(partial, target)
        finally:
            with suppress(FileNotFoundError):
                partial.unlink()
        fetched = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.record[file.path] = {"url": url, "sha256": digest, "size": size, "fetched": fetched}
        _write_record(self.root, self.record)
        if file.sha256 is not None:
            return f"{file.path}: fetched from {url}, sha256 verified"
        if expected is not None:
            return f"{file.path}: fetched from {url}, sha256 as at its first fetch"
        return (
            f"{file.path}: fetched from {url}; no sha256 is pinned for it, so its sha256 {digest} is recorded in "
            f"{self.root / FETCH_RECORD} and later fetches are checked against it"
        )

    def _expected(self, file: ReleaseFile) -> tuple[str | None, str]:
        if file.sha256 is not None:
            return file.sha256, "the pinned"
        recorded = self.record.get(file.path, {})
        return recorded.get("sha256"), f"the first fetch's ({recorded.get('fetched', '?')}, {FETCH_RECORD})"


def fetch(names: Iterable[str], root: Path | None = None, stream: IO[str] | None = None) -> list[str]:
    """Download every file of the data sets ``names`` that the root lacks (docs/data.md); one line per file, printed
    to ``stream`` (default stdout) as it is done. ValueError for an unknown name; :class:`FetchError` (a ValueError)
    for the first file that cannot be fetched, naming its URL and the manual step."""
    names = list(names)
    if not names:
        raise ValueError(f"data fetch: name one or more data sets, of {', '.join(RELEASES)}")
    items = [release(name) for name in names]
    root = data_root() if root is None else root
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise FetchError(
            f"{root}: cannot create the data root ({error.strerror or error}); set {DATA_ROOT_ENV}"
        ) from None
    stream = sys.stdout if stream is None else stream
    fetcher = _Fetcher(root)
    lines = []
    try:
        for item in items:
            for file in item.files:
                lines.append(fetcher.fetch_file(file))
                print(lines[-1], file=stream, flush=True)
    finally:
        fetcher.close()
    return lines
