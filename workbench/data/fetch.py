"""``python -m workbench data list`` and ``data fetch NAME ...``: the named data sets in the data root (docs/data.md).

:func:`fetch` gets each missing file of a release: downloaded from its public URL (``$WORKBENCH_DATA_MIRROR``, when
set, replaces it: ``<mirror>/<path under the root>``), taken from the release's zip archive, or built from public
sources (:mod:`workbench.data.builds`). Each download (:mod:`workbench.data.download`) is bounded
(:data:`~workbench.data.releases.BOUND_FACTOR` times the size its entry records: a longer announced length is refused
at once, a longer transfer stopped), must keep a minimum rate, and is refused when the server answers with an HTML page
(a captive portal) or gives no way to tell a whole transfer from one cut short. A file's sha256 is checked against the
pinned one (a file without a pin: against the hash its first fetch recorded in ``<root>/fetched.json``, or recorded
there).

A data set is placed whole or not at all: its files are written to temporary ``.part`` files beside their places and
renamed into place, and recorded, only when every one of them succeeded; a failed fetch leaves nothing, and a later
one downloads every file again. ``data fetch a b c`` goes on after a data set that fails and names every file that
could not be fetched in one :class:`FetchError`. Two fetches into one root take turns (a lock file,
``<root>/.fetch.lock``) and each merges its entries into the record as it is on disk. A ``.part`` file left by a
fetch that was killed is removed by the next fetch and listed by ``data list``. Files are written with the mode the
umask gives (a root shared by a class stays readable).

:func:`list_releases` tells, for every file, whether it is present and whether its checksum holds, and where it
comes from (the commit or tag of its URL).

Every URL a message, a line or ``fetched.json`` names is shown by :func:`workbench.redaction.shown_url`: a mirror's
user information (``https://user:token@mirror/``) as ``<CREDENTIALS>``, a secret query parameter (``?token=``) as its
mark; the host and the file stay named. A mirror's user information is sent as HTTP basic authentication, to the
mirror's host alone (not to a host it redirects to).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Iterable
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import filelock

from workbench.data.builds import RECIPES, ArchiveError, find_member, member_blocks, open_zip
from workbench.data.download import MIRROR_ENV, FetchError, mirror, mirror_url, stream, url_name, without_secrets
from workbench.data.releases import RELEASES, Release, ReleaseFile, release
from workbench.data.root_files import FETCH_RECORD, SUSPECT_STATUSES, file_status, read_record, sha256_of
from workbench.data_root import DATA_ROOT_ENV, check_data_root, data_root, where_root_is_set
from workbench.redaction import shown_url

__all__ = ["FETCH_RECORD", "FetchError", "fetch", "file_status", "list_releases", "read_record", "sha256_of"]

LOCK_FILE = ".fetch.lock"
"""The lock two fetches into one root take turns on (an empty file in the root)."""
PART_SUFFIX = ".part"
"""The suffix of a file being written (``.<name>.<random>.part``); one left behind is a killed fetch's."""


def stale_parts(root: Path) -> list[Path]:
    """The ``.part`` files in the root and in its data sets' folders: left by a fetch that was killed (a running
    fetch holds the lock while it has them)."""
    found = []
    for folder in [root, *(root / name for name in RELEASES)]:
        with suppress(OSError):  # a folder that cannot be read holds none we could remove
            found += folder.glob(f".*{PART_SUFFIX}") if folder.is_dir() else []
    return sorted(found)


def _urls(file: ReleaseFile) -> list[str]:
    """Every URL of ``file``'s entry: its own, or its build's sources."""
    return [file.url] if file.url is not None else [source.url for source in file.build.sources] if file.build else []


def _size(size: int | None) -> str:
    if size is None:
        return "-"
    return f"{size / 1e6:.1f} MB" if size >= 100_000 else f"{size / 1e3:.1f} kB"


def list_releases(root: Path | None = None) -> str:
    """Every known data set: its licence and source, and per file its presence, size, checksum status and origin
    (URL and the commit or tag it points at, its build, or the manual step). ValueError naming the root when it is a
    file or a link loop."""
    root = data_root() if root is None else root
    check_data_root(root)
    lines = [f"data root: {root} ({where_root_is_set()})"]
    try:
        record = read_record(root) if root.is_dir() else {}
    except ValueError as error:
        record = {}
        lines.append(f"record: {error}")
    if os.environ.get(MIRROR_ENV):
        shown = shown_url(os.environ[MIRROR_ENV])
        lines.append(f"mirror: {shown} (${MIRROR_ENV}: each file is fetched from <mirror>/<path>)")
    for item in RELEASES.values():
        lines += ["", f"{item.name}: {item.description}", f"  licence: {item.licence}", f"  source: {item.homepage}"]
        for file in item.files:
            status = file_status(file, root, record)
            origin = (
                f"{shown_url(mirror_url(file))} (mirror)" if os.environ.get(MIRROR_ENV) and mirror_url(file) else None
            )
            own = without_secrets(file.origin(), _urls(file))
            lines.append(f"  {file.path:<36} {_size(status['size']):>9}  {status['status']:<34} {origin or own}")
        lines.append(f"  fetch: {item.fetch_command}")
    stale = stale_parts(root)
    if stale:
        lines += ["", f"partial files left by an interrupted fetch (the next data fetch removes them): {len(stale)}"]
        lines += [f"  {path}" for path in stale]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- a temporary file


def _temporary(folder: Path, name: str) -> tuple[IO[bytes], Path]:
    """A new file ``.<name>.<random>.part`` in ``folder``, created with the mode the umask gives (as ``open`` does)."""
    while True:
        path = folder / f".{name}.{secrets.token_hex(6)}{PART_SUFFIX}"
        try:
            handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        return os.fdopen(handle, "wb"), path


# ----------------------------------------------------------------------------- one data set, whole or not at all


@dataclass
class _Staged:
    """A file downloaded (or built) into ``partial``, waiting to be renamed to ``target``; its record entry."""

    file: ReleaseFile
    partial: Path
    target: Path
    entry: dict[str, Any]
    checked: str | None  # "sha256 verified", "sha256 as at its first fetch", or None: recorded now


@dataclass
class _Fetcher:
    """One ``fetch`` call into ``root``: archives downloaded once and removed at the end, every temporary file removed
    whatever happens."""

    root: Path
    temporaries: list[Path] = field(default_factory=list)
    archives: dict[str, Path] = field(default_factory=dict)
    broken_archives: dict[str, FetchError] = field(default_factory=dict)  # one failed download fails every member

    def close(self) -> None:
        """Remove every temporary file this fetch made (the ones renamed into place are gone already)."""
        for path in self.temporaries:
            with suppress(FileNotFoundError):
                path.unlink()
        self.temporaries.clear()

    def _new_part(self, folder: Path, name: str) -> tuple[IO[bytes], Path]:
        try:
            out, path = _temporary(folder, name)
        except OSError as error:
            raise FetchError(
                f"{folder}: cannot write there ({error.strerror or error}); set {DATA_ROOT_ENV} to a writable folder"
            ) from None
        self.temporaries.append(path)
        return out, path

    def _download(self, url: str, folder: Path, label: str, max_bytes: int, pinned: bool) -> tuple[Path, str, int]:
        out, path = self._new_part(folder, Path(label).name)
        with out:
            digest, size = stream(url, out, label, max_bytes, pinned)
        return path, digest, size

    def _archive(self, file: ReleaseFile, folder: Path) -> Path:
        if file.url in self.broken_archives:
            raise self.broken_archives[file.url]
        if file.url not in self.archives:
            try:
                path = self._download(file.url, folder, url_name(file.url), file.archive_max_bytes, False)[0]
            except FetchError as error:
                self.broken_archives[file.url] = error
                raise
            self.archives[file.url] = path
        return self.archives[file.url]

    def _member(self, file: ReleaseFile, folder: Path) -> tuple[Path, str, int]:
        archive = self._archive(file, folder)
        out, path = self._new_part(folder, file.name)
        digest = hashlib.sha256()
        size = 0
        with out, open_zip(archive, file.url) as bundle:
            for block in member_blocks(bundle, find_member(bundle, file.member), file.max_bytes):
                out.write(block)
                digest.update(block)
                size += len(block)
        return path, digest.hexdigest(), size

    def _build(self, file: ReleaseFile, folder: Path) -> tuple[Path, str, int]:
        sources = []
        for source in file.build.sources:
            name = url_name(source.url)
            path, digest, _ = self._download(source.url, folder, name, source.max_bytes, source.sha256 is not None)
            if source.sha256 is not None and digest != source.sha256:
                raise FetchError(f"{shown_url(source.url)}: sha256 {digest} differs from the pinned {source.sha256}")
            sources.append(path)
        out, path = self._new_part(folder, file.name)
        with out:
            RECIPES[file.build.recipe](sources, [source.url for source in file.build.sources], out)
        for source_path in sources:
            source_path.unlink()
        return path, sha256_of(path), path.stat().st_size

    def stage(self, file: ReleaseFile, record: dict[str, dict[str, Any]]) -> _Staged:
        """``file`` downloaded (or built) into a ``.part`` beside its place and its sha256 checked; FetchError naming
        the URL and the manual step when that fails (its temporary files removed)."""
        target = file.location(self.root)
        url = mirror_url(file)
        try:
            if url != file.url or file.member is None and file.build is None:  # the file itself: a mirror's, or own
                partial, digest, size = self._download(url, target.parent, file.path, file.max_bytes, bool(file.sha256))
            elif file.member is not None:
                partial, digest, size = self._member(file, target.parent)
            else:
                partial, digest, size = self._build(file, target.parent)
            expected, origin = self._expected(file, record)
            if expected is not None and digest != expected:
                raise FetchError(f"sha256 {digest} differs from {origin} {expected}")
        except (FetchError, ArchiveError, ValueError) as error:
            urls = [url] if url is not None else [source.url for source in file.build.sources]
            where = ", ".join(shown_url(item) for item in urls)
            message = f"{where}: {error}. By hand: {file.manual_step(self.root, url)}"
            raise FetchError(without_secrets(message, urls)) from None
        checked = "sha256 verified" if file.sha256 else "sha256 as at its first fetch" if expected else None
        if url is None:  # built here
            entry = {"sources": [shown_url(source.url) for source in file.build.sources]}
        else:
            entry = {"url": shown_url(url)}
        return _Staged(file, partial, target, {**entry, "sha256": digest, "size": size}, checked)

    @staticmethod
    def _expected(file: ReleaseFile, record: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
        if file.sha256 is not None:
            return file.sha256, "the pinned"
        recorded = record.get(file.path, {})
        return recorded.get("sha256"), f"the first fetch's ({recorded.get('fetched', '?')}, {FETCH_RECORD})"

    def fetch_release(self, item: Release) -> tuple[list[str], list[str]]:
        """The release's missing files, all placed and recorded or none: (lines for the files present or placed,
        failures naming each file that could not be fetched)."""
        record = read_record(self.root)
        lines, problems, wanted = [], [], []
        for file in item.files:  # first what needs no download: present files, folders in the way, manual steps
            target = file.location(self.root)
            status = file_status(file, self.root, record)["status"]
            if status == "a folder, not a file":
                problems.append(f"{target}: is a folder, not a file; move it away (nothing was downloaded)")
            elif status.startswith(SUSPECT_STATUSES):
                problems.append(
                    f"{target}: present, but its sha256 {status.lower()}; move it away and fetch again "
                    "(nothing was overwritten)"
                )
            elif status != "missing":
                lines.append(f"{file.path}: present, {status}")
            elif mirror_url(file) is None and file.build is None:
                problems.append(f"{file.path}: has no download: {file.manual_step(self.root)}")
            else:
                wanted.append(file)
        if problems or not wanted:
            return lines, problems
        folders = {file.location(self.root).parent for file in wanted}
        created = [folder for folder in folders if not folder.is_dir()]
        staged = []
        try:
            for folder in created:
                folder.mkdir(parents=True, exist_ok=True)
            for file in wanted:
                try:
                    staged.append(self.stage(file, record))
                except FetchError as error:
                    problems.append(str(error))
            if problems:
                return lines, problems
            return lines + self._place(staged), []
        except OSError as error:
            raise FetchError(
                f"{self.root}: cannot write there ({error.strerror or error}); set {DATA_ROOT_ENV} to a writable folder"
            ) from None
        finally:
            self.close()  # the data set's .part files, its archives
            self.archives.clear()
            self.broken_archives.clear()
            for folder in created:  # a data set's folder made for this fetch and left empty: removed
                with suppress(OSError):
                    folder.rmdir()

    def _place(self, staged: list[_Staged]) -> list[str]:
        """Rename every staged file into place and record it; a failure of either takes the placed files back."""
        placed: list[Path] = []
        try:
            for part in staged:
                os.replace(part.partial, part.target)
                placed.append(part.target)
            fetched = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            _merge_record(self.root, {part.file.path: {**part.entry, "fetched": fetched} for part in staged})
        except (OSError, ValueError) as error:
            for path in placed:
                with suppress(OSError):
                    path.unlink()
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            raise FetchError(
                f"{self.root}: cannot place the files or record them in {FETCH_RECORD} ({reason}); nothing was placed"
            ) from None
        return [self._line(part) for part in staged]

    def _line(self, part: _Staged) -> str:
        if "url" in part.entry:
            head = f"{part.file.path}: fetched from {part.entry['url']}"
        else:
            head = f"{part.file.path}: built from {' and '.join(part.entry['sources'])}"
        if part.checked is not None:
            return f"{head}, {part.checked}"
        return (
            f"{head}; no sha256 is pinned for it, so its sha256 {part.entry['sha256']} is recorded in "
            f"{self.root / FETCH_RECORD} and later fetches are checked against it"
        )


def _merge_record(root: Path, entries: dict[str, dict[str, Any]]) -> None:
    """``entries`` merged into ``<root>/fetched.json`` as it is on disk now (another fetch may have added its own),
    written through a temporary file and a rename; OSError when it cannot be written."""
    record = {**read_record(root), **entries}
    out, path = _temporary(root, FETCH_RECORD)
    try:
        with out:
            out.write((json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8"))
        os.replace(path, root / FETCH_RECORD)
    finally:
        with suppress(FileNotFoundError):
            path.unlink()


@contextmanager
def _turn(root: Path, stream: IO[str], made_root: bool):
    """This fetch's turn in ``root``: the lock ``<root>/.fetch.lock``, waited for (saying so) while another fetch
    holds it. A root this fetch ``made_root`` and left with nothing but the lock is removed (a failed first fetch
    leaves no folder)."""
    lock = filelock.FileLock(root / LOCK_FILE)
    try:
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            print(f"waiting for another fetch into {root} to finish ({root / LOCK_FILE})", file=stream, flush=True)
            lock.acquire()
    except OSError as error:
        raise FetchError(
            f"{root}: cannot write there ({error.strerror or error}); set {DATA_ROOT_ENV} to a writable folder"
        ) from None
    try:
        yield
    finally:
        lock.release()
        if made_root and [path.name for path in root.iterdir()] == [LOCK_FILE]:
            with suppress(OSError):
                (root / LOCK_FILE).unlink()
                root.rmdir()


def _needs_download(item: Release, root: Path) -> bool:
    return any(not file.location(root).exists() and (mirror_url(file) or file.build) for file in item.files)


def fetch(names: Iterable[str], root: Path | None = None, stream: IO[str] | None = None) -> list[str]:
    """Get every file of the data sets ``names`` that the root lacks (docs/data.md), each data set whole or not at
    all; one line per file, printed to ``stream`` (default stdout) as its data set is placed. ValueError for an
    unknown name or a bad mirror; :class:`FetchError` (a ValueError) naming every file that could not be fetched (its
    URL and the manual step), after the other data sets were fetched."""
    names = list(dict.fromkeys(names))
    if not names:
        raise ValueError(f"data fetch: name one or more data sets, of {', '.join(RELEASES)}")
    items = [release(name) for name in names]
    mirror()
    root = data_root() if root is None else root
    check_data_root(root)
    stream = sys.stdout if stream is None else stream
    fetcher = _Fetcher(root)
    lines, failures, failed = [], [], []
    try:
        if not any(_needs_download(item, root) for item in items):  # nothing to write: no lock (a read-only root)
            for item in items:
                done, problems = fetcher.fetch_release(item)
                _report(done, stream, lines)
                failures += problems
                failed += [item.name] if problems else []
            return _finish(lines, failures, failed)
        made_root = not root.exists()
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise FetchError(
                f"{root}: cannot create the data root ({error.strerror or error}); set {DATA_ROOT_ENV}"
            ) from None
        with _turn(root, stream, made_root):
            stale = stale_parts(root)
            for path in stale:
                path.unlink()
            if stale:
                _report([f"removed {len(stale)} partial files left by an interrupted fetch"], stream, lines)
            for item in items:
                done, problems = fetcher.fetch_release(item)
                _report(done, stream, lines)
                failures += problems
                failed += [item.name] if problems else []
    finally:
        fetcher.close()
    return _finish(lines, failures, failed)


def _report(done: list[str], stream: IO[str], lines: list[str]) -> None:
    for line in done:
        lines.append(line)
        print(line, file=stream, flush=True)


def _finish(lines: list[str], failures: list[str], failed: list[str]) -> list[str]:
    if not failures:
        return lines
    nothing = f"nothing of {', '.join(failed)} was placed"
    if len(failures) == 1:
        raise FetchError(f"{failures[0]}; {nothing}")
    listed = " ".join(f"({number}) {failure}" for number, failure in enumerate(failures, start=1))
    raise FetchError(f"{len(failures)} files could not be fetched, so {nothing}: {listed}")
