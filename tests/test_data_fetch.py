"""Round 4 of the hostile sweep on data fetching and the data root (issue 37 items 2, 4-7, 15-17; issue 41 items 5, 9;
docs/reliability.md "Round 4: data fetching"): bounded downloads, a data set placed whole or not at all, fetches that
take turns, files that are not the release's named at load time, archives, builds from public sources. Every
download goes to a local HTTP server on 127.0.0.1, never the internet."""

from __future__ import annotations

import base64
import dataclasses
import gzip
import hashlib
import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import warnings
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import filelock
import pytest

from workbench.__main__ import main
from workbench.config import DATA_SOURCES, ORDINAL_SOURCES
from workbench.data import RELEASES, Download, Release, ReleaseFile, load_splits, load_table, load_texts
from workbench.data import download as downloading
from workbench.data import fetch as fetching
from workbench.data.fetch import FETCH_RECORD, LOCK_FILE, MIRROR_ENV, FetchError, fetch, list_releases, read_record
from workbench.data.releases import BOUND_FACTOR, releases_where, url_pin
from workbench.data_root import DATA_ROOT_ENV, data_root, settle_data_root
from workbench.synonyms import SynonymTable
from workbench.text_files import read_lines

ROOT = Path(__file__).resolve().parents[1]
TRAIN = b'{"id": 0, "query": "q", "title": "t", "label": "1"}\n' * 40
DEV = b'{"id": 1, "query": "q2", "title": "t2", "label": "0"}\n' * 40


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Server:
    """Files by URL path, served whole with a Content-Length; a first path segment changes how:
    ``/huge/`` announces 10**15 bytes, ``/nolength/`` sends no length and closes after the body, ``/half/`` the same
    after half of it, ``/endless/`` no length and bytes without end, ``/chunked/`` chunked encoding, ``/chunkcut/``
    chunked and cut in the middle, ``/portal/`` a captive portal's HTML page (Content-Type text/html), ``/sniff/`` the
    same page as application/octet-stream, ``/trickle/`` one byte every 50 ms, ``/redirect/`` a 302 to the same path
    at ``redirect_to``. ``on_get`` runs before each answer."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        self.authorizations: list[str | None] = []  # each request's Authorization header
        self.redirect_to = ""  # where /redirect/<path> sends a client: <redirect_to>/<path>
        self.on_get = None
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.requests.append(self.path)
                server.authorizations.append(self.headers.get("Authorization"))
                if server.on_get is not None:
                    server.on_get(self.path)
                mode, _, rest = self.path.lstrip("/").partition("/")
                if mode == "redirect":  # to the same path on another server
                    self.send_response(302)
                    self.send_header("Location", f"{server.redirect_to}/{rest}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                modes = ("huge", "nolength", "half", "endless", "chunked", "chunkcut", "portal", "sniff", "trickle")
                path = f"/{rest}" if mode in modes else self.path
                body = server.files.get(path)
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                if mode in ("portal", "sniff"):
                    body = b"<!DOCTYPE html><html><body>Please log in to the hotel Wi-Fi</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if mode == "portal" else "application/octet-stream")
                self.send_header("Connection", "close")
                if mode == "huge":
                    self.send_header("Content-Length", str(10**15))
                elif mode in ("chunked", "chunkcut"):
                    self.send_header("Transfer-Encoding", "chunked")
                elif mode not in ("nolength", "half", "endless"):
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self._body(mode, body)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: as it should
                    pass
                self.close_connection = True

            def _body(self, mode: str, body: bytes) -> None:
                if mode == "huge":
                    self.wfile.write(body)
                elif mode == "half":
                    self.wfile.write(body[: len(body) // 2])
                elif mode == "endless":
                    for _ in range(10_000):
                        self.wfile.write(b"x" * 65536)
                elif mode in ("chunked", "chunkcut"):
                    part = body if mode == "chunked" else body[: len(body) // 2]
                    self.wfile.write(f"{len(body):x}\r\n".encode() + part)
                    if mode == "chunked":
                        self.wfile.write(b"\r\n0\r\n\r\n")
                elif mode == "trickle":
                    for byte in body[:40]:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(0.05)
                else:
                    self.wfile.write(body)
                self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    running = _Server()
    yield running
    running.close()


@pytest.fixture
def root(tmp_path, monkeypatch):
    folder = tmp_path / "data-root"
    monkeypatch.setenv(DATA_ROOT_ENV, str(folder))
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    return folder


def _toy(monkeypatch, server, prefix: str = "", name: str = "toy") -> Release:
    """A release ``name`` whose train.json is pinned and dev.json is not, served by ``server`` at ``prefix``."""
    base = f"{server.url}{prefix}/{name}"
    files = (
        ReleaseFile(f"{name}/train.json", f"{base}/train.json", _sha(TRAIN), size=len(TRAIN)),
        ReleaseFile(f"{name}/dev.json", f"{base}/dev.json", size=len(DEV)),
    )
    item = Release(name, "a toy release", "https://example.org/toy", "CC0", files)
    monkeypatch.setitem(RELEASES, name, item)
    server.files.update({f"/{name}/train.json": TRAIN, f"/{name}/dev.json": DEV})
    return item


@pytest.fixture
def toy(monkeypatch, server):
    return _toy(monkeypatch, server)


def _files(root: Path) -> list[str]:
    """Every file under the root but the (empty) lock file two fetches take turns on; .part files included."""
    if not root.exists():
        return []
    files = (path for path in root.rglob("*") if path.is_file() and path.name != LOCK_FILE)
    return sorted(str(path.relative_to(root)) for path in files)


def _fetch_error(capsys, *names: str) -> str:
    assert main(["data", "fetch", *names]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def _zip(members: dict[str, bytes]) -> bytes:
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return bundle.getvalue()


# ----------------------------------------------------------------------------- item 2: downloads bounded


def test_an_announced_length_beyond_the_bound_is_refused_before_any_byte_is_kept(root, server, monkeypatch, capsys):
    _toy(monkeypatch, server, "/huge")
    line = _fetch_error(capsys, "toy")
    assert f"{server.url}/huge/toy/train.json" in line and "announces 1000000000000000 bytes" in line
    assert str(BOUND_FACTOR * len(TRAIN)) in line  # the bound it was held to
    assert _files(root) == []  # no file, no .part, no record


def test_a_transfer_passing_its_bound_is_stopped_and_leaves_nothing(root, server, monkeypatch, capsys):
    _toy(monkeypatch, server, "/endless")  # a pinned file, no length announced: bytes without end
    line = _fetch_error(capsys, "toy")
    assert f"{server.url}/endless/toy/train.json" in line and f"bound of {BOUND_FACTOR * len(TRAIN)} bytes" in line
    assert _files(root) == []


def test_an_archive_member_is_read_no_further_than_its_bound(root, server, monkeypatch, capsys):
    bomb = b"\0" * 2_000_000  # deflates to about 2 kB
    server.files["/bundle.zip"] = archive = _zip({"pack/train.json": bomb, "pack/labels.json": DEV})
    url = f"{server.url}/bundle.zip"
    sizes = {"archive_size": len(archive)}
    files = (
        ReleaseFile("zipped/train.json", url, member="train.json", size=1000, **sizes),
        ReleaseFile("zipped/labels.json", url, member="labels.json", size=len(DEV), **sizes),
    )
    monkeypatch.setitem(RELEASES, "zipped", Release("zipped", "zipped", "https://example.org", "CC0", files))
    line = _fetch_error(capsys, "zipped")
    assert "pack/train.json" in line and "2000000 bytes" in line and str(BOUND_FACTOR * 1000) in line
    assert _files(root) == []  # the archive, the member's .part and labels.json: all gone
    assert server.requests.count("/bundle.zip") == 1


def test_an_archive_larger_than_its_bound_is_refused(root, server, monkeypatch, capsys):
    server.files["/bundle.zip"] = _zip({"train.json": os.urandom(50_000)})
    file = ReleaseFile(
        "zipped/train.json", f"{server.url}/bundle.zip", member="train.json", size=60_000, archive_size=1000
    )
    monkeypatch.setitem(RELEASES, "zipped", Release("zipped", "zipped", "https://example.org", "CC0", (file,)))
    line = _fetch_error(capsys, "zipped")
    assert "bundle.zip" in line and str(BOUND_FACTOR * 1000) in line
    assert _files(root) == []


def test_every_download_of_the_releases_has_a_bound():
    for item in RELEASES.values():
        for file in item.files:
            if file.url is not None:
                assert file.max_bytes == BOUND_FACTOR * file.size > 0, file.path
            if file.member is not None:
                assert file.archive_max_bytes > 0, file.path
            for source in file.build.sources if file.build else ():
                assert source.max_bytes == BOUND_FACTOR * source.size > 0, source.url
    with pytest.raises(ValueError, match="x/y.json: size"):
        ReleaseFile("x/y.json", "https://example.org/y.json")
    with pytest.raises(ValueError, match="x/y.json: archive_size"):
        ReleaseFile("x/y.json", "https://example.org/y.zip", member="y.json", size=10)


# ----------------------------------------------------------------------------- item 4: a failed fetch plants nothing


def test_a_transfer_cut_short_without_a_length_is_not_kept_and_a_retry_gets_the_whole_file(
    root, server, monkeypatch, capsys
):
    _toy(monkeypatch, server, "/half")  # dev.json is not pinned: only the length could have told
    line = _fetch_error(capsys, "toy")
    assert f"{server.url}/half/toy/dev.json" in line and "no Content-Length" in line
    assert _files(root) == []  # train.json (whole, pinned) is not placed without dev.json either
    _toy(monkeypatch, server)
    assert main(["data", "fetch", "toy"]) == 0
    assert (root / "toy" / "dev.json").read_bytes() == DEV
    assert read_record(root)["toy/dev.json"]["sha256"] == _sha(DEV)  # the whole file's hash, not the half's


@pytest.mark.parametrize("mode", ["chunkcut", "half"])
def test_a_pinned_file_cut_short_is_not_kept(root, server, monkeypatch, mode):
    item = _toy(monkeypatch, server, f"/{mode}")
    monkeypatch.setitem(RELEASES, "toy", dataclasses.replace(item, files=item.files[:1]))  # train.json, pinned
    with pytest.raises(FetchError, match=re.escape(f"{server.url}/{mode}/toy/train.json")):
        fetch(["toy"], stream=io.StringIO())
    assert _files(root) == []


def test_a_chunked_transfer_is_measured_and_kept(root, server, monkeypatch):
    _toy(monkeypatch, server, "/chunked")
    fetch(["toy"], stream=io.StringIO())
    assert (root / "toy" / "dev.json").read_bytes() == DEV and (root / "toy" / "train.json").read_bytes() == TRAIN


@pytest.mark.parametrize("mode", ["portal", "sniff"])
def test_a_captive_portal_s_page_is_not_kept(root, server, monkeypatch, capsys, mode):
    _toy(monkeypatch, server, f"/{mode}")
    line = _fetch_error(capsys, "toy")
    assert "HTML page" in line and f"{server.url}/{mode}/toy/train.json" in line
    assert _files(root) == []


def test_one_failed_file_places_none_of_its_data_set_and_a_retry_downloads_every_file_again(root, server, toy, capsys):
    del server.files["/toy/dev.json"]
    line = _fetch_error(capsys, "toy")
    assert "404" in line and "toy/dev.json" in line and "nothing of toy was placed" in line
    assert not root.exists()  # the root this first fetch made: gone, its lock file too
    server.files["/toy/dev.json"] = DEV
    assert main(["data", "fetch", "toy"]) == 0
    assert server.requests.count("/toy/train.json") == 2  # downloaded again: the first copy was never kept
    assert _files(root) == [FETCH_RECORD, "toy/dev.json", "toy/train.json"]


def test_stale_part_files_are_listed_then_removed_by_the_next_fetch(root, toy, capsys):
    stale = root / "toy" / ".train.json.0123456789ab.part"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(TRAIN[:10])
    assert main(["data", "list"]) == 0
    listed = capsys.readouterr().out
    assert "interrupted fetch" in listed and str(stale) in listed
    assert main(["data", "fetch", "toy"]) == 0
    assert "removed 1 partial files" in capsys.readouterr().out
    assert not stale.exists() and _files(root) == [FETCH_RECORD, "toy/dev.json", "toy/train.json"]


# ----------------------------------------------------------------------------- item 5: two fetches at once


def test_a_fetch_merges_its_entries_into_the_record_another_fetch_wrote_meanwhile(root, server, toy):
    other = {"other/file.txt": {"url": "https://example.org/f", "sha256": "0" * 64, "size": 1, "fetched": "x"}}

    def another_fetch_finishes(path: str) -> None:  # while this fetch downloads, another one records its file
        if path == "/toy/dev.json":
            (root / FETCH_RECORD).write_text(json.dumps(other), encoding="utf-8")

    server.on_get = another_fetch_finishes
    fetch(["toy"], stream=io.StringIO())
    record = read_record(root)
    assert set(record) == {"other/file.txt", "toy/train.json", "toy/dev.json"}  # neither lost


def test_a_second_fetch_waits_its_turn_and_says_so(root, toy):
    root.mkdir(parents=True)
    held = filelock.FileLock(root / LOCK_FILE)
    held.acquire()
    said = io.StringIO()
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(fetch(["toy"], stream=said)), daemon=True)
    worker.start()
    for _ in range(400):  # until it says it waits (at most 20 s)
        if "waiting for another fetch" in said.getvalue():
            break
        time.sleep(0.05)
    assert "waiting for another fetch" in said.getvalue() and str(root / LOCK_FILE) in said.getvalue()
    assert not (root / "toy").exists()  # nothing written while the other one holds the root
    held.release()
    worker.join(timeout=30)
    assert outcome and (root / "toy" / "train.json").read_bytes() == TRAIN


# ----------------------------------------------------------------------------- item 6: a file that is not the release's


def _qbqtc_lines(count: int, start: int = 0) -> str:
    labels = ["0", "1", "1", "2"]
    rows = [
        {"id": i, "query": f"查询{i}", "title": f"标题{i}", "label": labels[i % 4]} for i in range(start, start + count)
    ]
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _place(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_file_that_differs_from_its_pin_is_named_at_load_time_and_in_the_provenance(root, monkeypatch):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    dev = _place(root, "qbqtc/dev.json", _qbqtc_lines(200))  # not the release's dev.json
    with pytest.warns(UserWarning, match=re.escape(f"{dev}: DIFFERS from the pinned sha256")) as caught:
        splits = load_splits({"source": "qbqtc"})
    assert any("data fetch qbqtc" in str(warning.message) for warning in caught)
    assert splits.provenance["checksums"] == {"qbqtc/dev.json": "DIFFERS from the pinned sha256"}


def test_an_unpinned_file_changed_since_its_fetch_is_named_at_load_time(root, monkeypatch):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    _place(root, "qbqtc/dev.json", _qbqtc_lines(200))
    train = _place(root, "qbqtc/train.json", _qbqtc_lines(80, 300))
    record = {"qbqtc/train.json": {"url": "u", "sha256": "0" * 64, "size": 1, "fetched": "2026-01-01T00:00:00Z"}}
    (root / FETCH_RECORD).write_text(json.dumps(record), encoding="utf-8")
    with pytest.warns(UserWarning, match=re.escape(f"{train}: CHANGED since it was fetched")):
        splits = load_splits({"source": "qbqtc"})
    assert splits.provenance["checksums"]["qbqtc/train.json"] == "CHANGED since it was fetched"


def test_a_corpus_file_that_is_not_the_release_s_is_named_too(root, monkeypatch):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    news = root / "corpus" / "xwlb_news.txt.gz"
    news.parent.mkdir(parents=True)
    news.write_bytes(gzip.compress("第一句。\n".encode()))
    (root / FETCH_RECORD).write_text(
        json.dumps({"corpus/xwlb_news.txt.gz": {"sha256": "0" * 64, "size": 1, "fetched": "x"}}), encoding="utf-8"
    )
    with pytest.warns(UserWarning, match=re.escape(f"{news}: CHANGED since it was fetched")):
        load_texts({"source": "corpus"})


CILIN_LINES = "Aa01A01= 美丽 漂亮 好看\nAa01A02= 高兴 开心\n"


def test_a_lexicon_of_the_root_that_differs_from_its_pin_is_named_as_a_data_set_s_file_is(root, monkeypatch):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    cilin = _place(root, "cilin/cilin_ex.txt", CILIN_LINES)  # not the release's cilin_ex.txt
    with pytest.warns(UserWarning, match=re.escape(f"{cilin}: DIFFERS from the pinned sha256")) as caught:
        table = SynonymTable.from_path("$WORKBENCH_DATA/cilin/cilin_ex.txt")
    assert table.are_synonyms("美丽", "漂亮")  # read all the same, as a data set's file is
    assert any("data fetch cilin" in str(warning.message) for warning in caught)
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    with pytest.warns(UserWarning, match=re.escape(f"{cilin}: DIFFERS")):
        SynonymTable.from_path(str(cilin))  # the same file by its own path


def test_a_lexicon_that_is_the_release_s_or_not_in_the_root_reads_without_a_warning(root, monkeypatch, tmp_path):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    cilin = _place(root, "cilin/cilin_ex.txt", CILIN_LINES)
    pinned = dataclasses.replace(RELEASES["cilin"].files[0], sha256=_sha(cilin.read_bytes()))
    monkeypatch.setitem(RELEASES, "cilin", dataclasses.replace(RELEASES["cilin"], files=(pinned,)))
    own = _place(tmp_path / "mine", "cilin_ex.txt", CILIN_LINES + "Ba01A01= 汽车 轿车\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(SynonymTable.from_path("$WORKBENCH_DATA/cilin/cilin_ex.txt")) == 2
        assert len(SynonymTable.from_path(own)) == 3


def test_an_unpinned_lexicon_changed_since_its_fetch_is_named(root, monkeypatch):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    synsets = _place(root, "wordnet/synsets.tsv", "oewn-1-n\tn\tcar\tauto\n")
    record = {"wordnet/synsets.tsv": {"sources": ["u"], "sha256": "0" * 64, "size": 1, "fetched": "x"}}
    (root / FETCH_RECORD).write_text(json.dumps(record), encoding="utf-8")
    with pytest.warns(UserWarning, match=re.escape(f"{synsets}: CHANGED since it was fetched")):
        assert SynonymTable.from_path("$WORKBENCH_DATA/wordnet/synsets.tsv").are_synonyms("car", "auto")


@pytest.mark.parametrize("train_present", [True, False], ids=["its training file", "the file train is cut from"])
def test_a_named_data_set_of_one_class_is_refused_as_a_table_of_one_class_is(root, monkeypatch, train_present):
    # one rule for both paths (split_files.check_training_file): a data set of the root was read with a warning only
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    one_class = "".join(f"good {i}\t1\n" for i in range(40))
    source = _place(root, "chnsenticorp/train.txt" if train_present else "chnsenticorp/dev.txt", one_class)
    if train_present:
        _place(root, "chnsenticorp/dev.txt", "bad\t0\nfine\t1\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the files differ from their pins: warned, and not what this test asks
        with pytest.raises(ValueError, match=rf"^data\.source: '{source}' holds one class, 'positive', on every line"):
            load_splits({"source": "chnsenticorp", "split": [0.8, 0.2, 0]})
    table = _place(root.parent, "own/train.tsv", "text\tlabel\n" + one_class)
    with pytest.raises(ValueError, match=rf"^data\.path: '{table}' holds one class, '1', on every line"):
        load_splits({"source": "table", "path": str(table), "text": "text", "label": "label"})


# ----------------------------------------------------------------------------- item 7: archives and TNEWS labels


def test_two_archive_entries_matching_a_member_are_refused_naming_both(root, server, monkeypatch, capsys):
    server.files["/bundle.zip"] = archive = _zip({"a/train.json": TRAIN, "b/train.json": DEV})
    file = ReleaseFile(
        "zipped/train.json", f"{server.url}/bundle.zip", member="train.json", size=len(TRAIN), archive_size=len(archive)
    )
    monkeypatch.setitem(RELEASES, "zipped", Release("zipped", "zipped", "https://example.org", "CC0", (file,)))
    line = _fetch_error(capsys, "zipped")
    assert "a/train.json" in line and "b/train.json" in line and "2 entries" in line
    assert _files(root) == []


def _tnews(root: Path, labels: list[dict], train: list[dict]) -> None:
    _place(root, "tnews/labels.json", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in labels))
    _place(root, "tnews/train.json", "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in train))


TNEWS_TRAIN = [
    {"label": label, "label_desc": desc, "sentence": f"句子{i}{label}", "keywords": ""}
    for i in range(10)
    for label, desc in (("100", "news_story"), ("101", "news_culture"))
]


def test_tnews_descriptions_swapped_in_labels_json_are_refused_naming_file_and_line(root):
    _tnews(
        root,
        [{"label": "100", "label_desc": "news_culture"}, {"label": "101", "label_desc": "news_story"}],
        TNEWS_TRAIN,
    )
    with pytest.raises(ValueError, match=re.escape(f"{root / 'tnews' / 'train.json'}:1:")) as caught:
        load_splits({"source": "tnews"})
    assert "'news_story'" in str(caught.value) and "'news_culture'" in str(caught.value)
    assert str(root / "tnews" / "labels.json") in str(caught.value)


def test_a_class_of_labels_json_without_a_training_example_is_refused(root):
    labels = [{"label": "100", "label_desc": "news_story"}, {"label": "101", "label_desc": "news_culture"}]
    _tnews(root, [*labels, {"label": "105", "label_desc": "news_extra"}], TNEWS_TRAIN)
    with pytest.raises(ValueError, match="labels_path") as caught:
        load_splits({"source": "tnews"})
    assert "news_extra" in str(caught.value) and str(root / "tnews" / "labels.json") in str(caught.value)
    assert "news_story" not in str(caught.value).split("names")[1].split("which")[0]  # only the empty class


def test_tnews_labels_that_agree_with_the_data_load(root, monkeypatch):
    monkeypatch.setattr("workbench.data.root_files._WARNED", set())
    _tnews(
        root,
        [{"label": "100", "label_desc": "news_story"}, {"label": "101", "label_desc": "news_culture"}],
        TNEWS_TRAIN,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cut of train into splits, the pins
        splits = load_splits({"source": "tnews"})
    assert splits["train"].features["label"].names == ["news_story", "news_culture"]
    assert set(splits.provenance["checksums"]) == {"tnews/train.json", "tnews/labels.json"}


# ----------------------------------------------------------------------------- item 15: unclear failures


def test_a_trickling_server_is_stopped_by_the_minimum_rate(root, server, monkeypatch, capsys):
    monkeypatch.setattr(downloading, "RATE_WINDOW_S", 0.4)  # 1,000 bytes a second over 0.4 s; the server sends 20
    _toy(monkeypatch, server, "/trickle")
    line = _fetch_error(capsys, "toy")
    assert "slower than 1000 bytes a second" in line and f"{server.url}/trickle/toy/train.json" in line
    assert _files(root) == []


def test_a_record_that_cannot_be_written_is_one_line_and_takes_the_placed_files_back(root, toy, monkeypatch, capsys):
    temporary = fetching._temporary

    def full_disk(folder: Path, name: str):
        if name == FETCH_RECORD:
            raise OSError(28, "No space left on device")
        return temporary(folder, name)

    monkeypatch.setattr(fetching, "_temporary", full_disk)
    line = _fetch_error(capsys, "toy")
    assert FETCH_RECORD in line and "No space left on device" in line and str(root) in line
    assert _files(root) == []


def test_a_root_that_cannot_be_written_into_is_one_line(root, toy, monkeypatch, capsys):
    def read_only(folder: Path, name: str):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(fetching, "_temporary", read_only)
    line = _fetch_error(capsys, "toy")
    assert "Permission denied" in line and DATA_ROOT_ENV in line
    assert _files(root) == []


def test_a_folder_where_a_file_goes_is_refused_before_downloading(root, server, toy, capsys):
    (root / "toy" / "dev.json").mkdir(parents=True)
    line = _fetch_error(capsys, "toy")
    assert f"{root / 'toy' / 'dev.json'}: is a folder" in line
    assert server.requests == [] and not (root / "toy" / "train.json").exists()


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_fetched_files_get_the_mode_the_umask_gives(root, toy, umask):
    previous = os.umask(umask)
    try:
        fetch(["toy"], stream=io.StringIO())
    finally:
        os.umask(previous)
    for name in ("toy/train.json", "toy/dev.json", FETCH_RECORD):
        assert (root / name).stat().st_mode & 0o777 == 0o666 & ~umask, name


def test_data_list_says_unreadable_instead_of_a_traceback(root, toy, monkeypatch, capsys):
    fetch(["toy"], stream=io.StringIO())

    def unreadable(path: Path) -> str:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("workbench.data.root_files.sha256_of", unreadable)
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"toy/train.json .*unreadable \(Permission denied\)", out)


@pytest.mark.parametrize("value", ["127.0.0.1:8000", "mirror.example.org/data", "ftp://mirror.example.org"])
def test_a_mirror_without_a_scheme_is_named_in_its_error(root, toy, monkeypatch, capsys, value):
    monkeypatch.setenv(MIRROR_ENV, value)
    line = _fetch_error(capsys, "toy")
    assert MIRROR_ENV in line and repr(value) in line and "http://" in line
    assert _files(root) == []


def test_a_local_folder_serves_as_a_mirror(root, toy, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    _place(mirror, "toy/train.json", TRAIN.decode())
    _place(mirror, "toy/dev.json", DEV.decode())
    monkeypatch.setenv(MIRROR_ENV, mirror.as_uri())
    fetch(["toy"], stream=io.StringIO())
    assert (root / "toy" / "train.json").read_bytes() == TRAIN


# ----------------------------------------------------------------------------- a mirror's credentials

SECRET = "s3cr3t-T0KEN"


def _refused_port() -> int:
    """A port of 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_mirror_s_credentials_are_sent_to_it_and_written_nowhere(root, toy, server, monkeypatch, capsys):
    host = server.url.removeprefix("http://")
    monkeypatch.setenv(MIRROR_ENV, f"http://reader:{SECRET}@{host}")
    lines = fetch(["toy"], stream=io.StringIO())
    assert (root / "toy" / "train.json").read_bytes() == TRAIN
    expected = "Basic " + base64.b64encode(f"reader:{SECRET}".encode()).decode()
    assert server.authorizations == [expected, expected]  # HTTP basic authentication, to the mirror
    record = (root / FETCH_RECORD).read_text(encoding="utf-8")
    assert main(["data", "list"]) == 0
    listed = capsys.readouterr().out
    for text in (*lines, record, listed):
        assert SECRET not in text and "reader" not in text
    assert f"http://<CREDENTIALS>@{host}/toy/train.json" in " ".join(lines)
    assert read_record(root)["toy/dev.json"]["url"] == f"http://<CREDENTIALS>@{host}/toy/dev.json"
    assert f"mirror: http://<CREDENTIALS>@{host}" in listed


def test_a_mirror_s_credentials_are_not_passed_to_a_host_it_redirects_to(root, toy, server, monkeypatch):
    other = _Server()
    try:
        other.files.update(server.files)
        server.redirect_to = other.url
        monkeypatch.setenv(MIRROR_ENV, f"http://reader:{SECRET}@{server.url.removeprefix('http://')}/redirect")
        fetch(["toy"], stream=io.StringIO())
        assert (root / "toy" / "train.json").read_bytes() == TRAIN
        assert all(value is not None for value in server.authorizations) and len(server.authorizations) == 2
        assert other.authorizations == [None, None]  # the redirected requests carry no credentials
    finally:
        other.close()


@pytest.mark.parametrize("where", ["missing", "refused", "query"])
def test_a_failed_download_names_the_host_and_the_file_but_no_secret(root, server, monkeypatch, capsys, where):
    port = _refused_port() if where == "refused" else server.url.rsplit(":", 1)[1]
    if where == "query":  # a release's own URL with a token in its query string, answered 404
        file = ReleaseFile("toy/train.json", f"{server.url}/toy/train.json?token={SECRET}&x=1", size=10)
        monkeypatch.setitem(RELEASES, "toy", Release("toy", "a toy", "https://example.org", "CC0", (file,)))
    else:  # a mirror with a user and a password: the file is not on it, or nothing listens on its port
        _toy(monkeypatch, server, name="toy")
        server.files.clear()
        monkeypatch.setenv(MIRROR_ENV, f"http://reader:{SECRET}@127.0.0.1:{port}/")
    line = _fetch_error(capsys, "toy")
    assert SECRET not in line and "reader" not in line
    assert f"127.0.0.1:{port}/toy/train.json" in line
    assert ("?token=<TOKEN>&x=1" if where == "query" else f"http://<CREDENTIALS>@127.0.0.1:{port}/") in line
    assert ("Connection refused" if where == "refused" else "HTTP 404") in line
    assert _files(root) == []
    assert main(["data", "list"]) == 0
    listed = capsys.readouterr().out
    assert SECRET not in listed and f"127.0.0.1:{port}/toy/train.json" in listed


def test_a_mirror_that_is_no_url_is_named_without_its_secret(root, toy, monkeypatch, capsys):
    monkeypatch.setenv(MIRROR_ENV, f"ftp://reader:{SECRET}@mirror.example.org/data")
    line = _fetch_error(capsys, "toy")
    assert MIRROR_ENV in line and "ftp://<CREDENTIALS>@mirror.example.org/data" in line and SECRET not in line


# ----------------------------------------------------------------------------- item 16: the data root


def test_a_relative_root_is_made_absolute_once_for_the_command_and_its_kernels(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(DATA_ROOT_ENV, "rel/data")
    assert data_root() == tmp_path / "rel" / "data"  # absolute wherever it is asked from here
    settle_data_root()
    assert os.environ[DATA_ROOT_ENV] == str(tmp_path / "rel" / "data")  # what a kernel started elsewhere inherits
    monkeypatch.chdir(ROOT)
    assert data_root() == tmp_path / "rel" / "data"


def test_the_command_line_settles_a_relative_root(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(DATA_ROOT_ENV, "rel")
    assert main(["data", "list"]) == 0
    assert (
        os.environ[DATA_ROOT_ENV] == str(tmp_path / "rel")
        and f"data root: {tmp_path / 'rel'}" in capsys.readouterr().out
    )


def test_a_runner_check_reads_a_relative_root_from_where_the_command_started(tmp_path, monkeypatch):
    from workbench.runs.plan import _check_data_root

    _place(tmp_path / "rel", "qbqtc/dev.json", _qbqtc_lines(4))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(DATA_ROOT_ENV, "rel")
    settle_data_root()
    monkeypatch.chdir(tmp_path / "rel" / "qbqtc")  # a kernel's folder: the root is still found
    _check_data_root("data", {"source": "qbqtc"})


@pytest.mark.parametrize("kind", ["file", "loop", "dangling"])
def test_a_root_that_cannot_be_a_folder_is_called_what_it_is(tmp_path, monkeypatch, capsys, kind):
    bad = tmp_path / "root"
    if kind == "file":
        bad.write_text("x", encoding="utf-8")
    elif kind == "loop":
        os.symlink(bad, bad)
    else:
        os.symlink(tmp_path / "nowhere", bad)
    monkeypatch.setenv(DATA_ROOT_ENV, str(bad))
    said = {"file": "is a file, not a folder", "loop": "symbolic link loop", "dangling": "which does not exist"}[kind]
    for command in ("list", "fetch"):
        assert main(["data", command, *(["qbqtc"] if command == "fetch" else [])]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0] and str(bad) in err[0] and DATA_ROOT_ENV in err[0], err
    with pytest.raises(ValueError, match=re.escape(said)):
        load_splits({"source": "qbqtc"})


# ----------------------------------------------------------------------------- item 17: line ends


@pytest.mark.parametrize(
    "name, data",
    [
        ("dev.json", b'{"text": "a", "label": "x"}\r{"text": "b", "label": "y"}\r'),
        ("dev.csv", b"text,label\ra,x\rb,y\r"),
        ("dev.tsv", b"text\tlabel\ra\tx\rb\ty\r"),
    ],
)
def test_cr_only_line_ends_are_named(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ValueError, match=re.escape(f"{path}:1:") + ".*CR only"):
        load_table(path)


def test_cr_only_line_ends_of_any_text_file_are_named_and_crlf_still_reads(tmp_path):
    lexicon = tmp_path / "cilin.txt"
    lexicon.write_bytes("Aa01A01= 美丽 漂亮\rAa01A02= 开心 高兴\r".encode())
    with pytest.raises(ValueError, match=re.escape(f"{lexicon}:1:") + ".*CR only"):
        list(read_lines(lexicon))
    lexicon.write_bytes("Aa01A01= 美丽 漂亮\r\nAa01A02= 开心 高兴\r\n".encode())
    assert len(list(read_lines(lexicon))) == 2


# ----------------------------------------------------------------------------- issue 41 item 5: every missing file


def test_several_data_sets_go_on_after_a_failure_and_every_missing_file_is_named(root, server, monkeypatch, capsys):
    _toy(monkeypatch, server, name="good")
    _toy(monkeypatch, server, name="bad")
    del server.files["/bad/train.json"], server.files["/bad/dev.json"]
    assert main(["data", "fetch", "bad", "good", "lcqmc"]) == 2
    out, err = capsys.readouterr()
    assert "good/train.json: fetched from" in out  # the data set after the failed one was fetched
    for missing in ("bad/train.json", "bad/dev.json", "lcqmc/train.txt", "lcqmc/dev.txt", "lcqmc/test.txt"):
        assert missing in err, missing
    assert len(err.strip().splitlines()) == 1 and "nothing of bad, lcqmc was placed" in err
    assert _files(root) == [FETCH_RECORD, "good/dev.json", "good/train.json"]


# ----------------------------------------------------------------------------- issue 41 item 5: builds


def _day(stories: list[str]) -> bytes:
    videos = [{"num": k, "video_detail": {"content": content}} for k, content in enumerate(stories)]
    return json.dumps({"total": len(videos), "videoList": videos}, ensure_ascii=False).encode()


NEWS_DAYS = {
    "xwlb-abc/assets/2012/20120702.json": _day(
        [
            "<p>    中国网络电视台消息(新闻联播)：单行本已出版。</P>\r\n<p>    (视频编辑：张 文字编辑：温)</P>",
            "<p>  中国网络电视台消息(新闻联播)：保障房建设加速。</P>\r\n<p>  在房展会上。<BR> <BR>  一张菜单。</P>",
        ]
    ),
    "xwlb-abc/assets/2026/20261001.json": _day(
        [
            "<p>央视网消息（新闻联播）：</p><p>亚运会&nbsp;中国队领跑</p><p>金牌榜“第一”。</p>",
            "<p>央视网消息（新闻联播）：</p>",
        ]
    ),
    "xwlb-abc/README.md": b"# xwlb\n",
}
NEWS_LINES = [
    "单行本已出版。",
    "保障房建设加速。 在房展会上。 一张菜单。",
    "亚运会 中国队领跑 金牌榜“第一”。",
]


def _with_sources(monkeypatch, name: str, path: str, sources: tuple[Download, ...]) -> None:
    """The release ``name`` with the build of ``path`` reading ``sources`` (the local server) instead of the real
    URLs; its recipe and everything else as the workbench ships it."""
    item = RELEASES[name]
    files = tuple(
        dataclasses.replace(file, build=dataclasses.replace(file.build, sources=sources)) if file.path == path else file
        for file in item.files
    )
    monkeypatch.setitem(RELEASES, name, dataclasses.replace(item, files=files))


def test_the_news_corpus_is_built_from_its_public_archive(root, server, monkeypatch):
    server.files["/xwlb.zip"] = archive = _zip(NEWS_DAYS)
    _with_sources(monkeypatch, "corpus", "corpus/xwlb_news.txt.gz", (Download(f"{server.url}/xwlb.zip", len(archive)),))
    server.files["/corpora/zhwiki.txt"] = "标题\n" + "维基百科的一篇文章，足够长，二十个字以上了。\n"
    server.files["/corpora/zhwiki.txt"] = server.files["/corpora/zhwiki.txt"].encode()
    server.files["/corpora/clue.txt"] = "短评\n这是一条很长的评论，说明这家酒店的服务非常好。\n".encode()
    sources = tuple(Download(f"{server.url}/corpora/{name}", 1000) for name in ("zhwiki.txt", "clue.txt"))
    _with_sources(monkeypatch, "corpus", "corpus/wiki_web_sample.txt.gz", sources)
    lines = fetch(["corpus"], stream=io.StringIO())
    news = gzip.decompress((root / "corpus" / "xwlb_news.txt.gz").read_bytes()).decode().splitlines()
    assert news == NEWS_LINES
    wiki = gzip.decompress((root / "corpus" / "wiki_web_sample.txt.gz").read_bytes()).decode().splitlines()
    assert wiki == ["维基百科的一篇文章，足够长，二十个字以上了。", "这是一条很长的评论，说明这家酒店的服务非常好。"]
    assert any("built from" in line and "xwlb.zip" in line for line in lines)
    assert read_record(root)["corpus/xwlb_news.txt.gz"]["sources"] == [f"{server.url}/xwlb.zip"]
    assert load_texts({"source": "corpus"})[0] == news + wiki
    first = (root / "corpus" / "xwlb_news.txt.gz").read_bytes()
    (root / "corpus" / "xwlb_news.txt.gz").unlink()
    again = fetch(["corpus"], stream=io.StringIO())  # built again: the same bytes, checked against the first build
    assert any(line.startswith("corpus/xwlb_news.txt.gz: built") and "as at its first fetch" in line for line in again)
    assert (root / "corpus" / "xwlb_news.txt.gz").read_bytes() == first


WORDNET_XML = b"""<?xml version="1.0" encoding="UTF-8"?>
<LexicalResource xmlns:dc="https://globalwordnet.github.io/schemas/dc/">
  <Lexicon id="oewn" label="Open English WordNet" language="en" email="x" license="CC BY 4.0" version="2025">
    <LexicalEntry id="oewn-rain-v"><Lemma writtenForm="rain" partOfSpeech="v"/>
      <Sense id="s1" synset="oewn-02762516-v"/></LexicalEntry>
    <LexicalEntry id="oewn-rain_down-v"><Lemma writtenForm="rain down" partOfSpeech="v"/></LexicalEntry>
    <LexicalEntry id="oewn-spat-v"><Lemma writtenForm="spat" partOfSpeech="v"/></LexicalEntry>
    <Synset id="oewn-02762516-v" members="oewn-rain-v oewn-rain_down-v" partOfSpeech="v">
      <Definition>x</Definition></Synset>
    <Synset id="oewn-02763140-v" members="oewn-spat-v" partOfSpeech="v"/>
  </Lexicon>
</LexicalResource>
"""


def test_wordnet_is_built_from_its_release_and_a_source_that_differs_from_its_pin_is_refused(root, server, monkeypatch):
    server.files["/wn.xml.gz"] = packed = gzip.compress(WORDNET_XML)
    _with_sources(
        monkeypatch, "wordnet", "wordnet/synsets.tsv", (Download(f"{server.url}/wn.xml.gz", 1000, _sha(packed)),)
    )
    licence = RELEASES["wordnet"].file("LICENSE.md")
    server.files["/LICENSE.md"] = b"CC BY 4.0\n"
    files = tuple(
        dataclasses.replace(file, url=f"{server.url}/LICENSE.md") if file is licence else file
        for file in RELEASES["wordnet"].files
    )
    monkeypatch.setitem(RELEASES, "wordnet", dataclasses.replace(RELEASES["wordnet"], files=files))
    fetch(["wordnet"], stream=io.StringIO())
    rows = (root / "wordnet" / "synsets.tsv").read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("# synset_id") and rows[1:] == ["02762516-v\tv\train\train down"]
    (root / "wordnet" / "synsets.tsv").unlink()
    (root / "wordnet" / "LICENSE.md").unlink()
    server.files["/wn.xml.gz"] = gzip.compress(WORDNET_XML.replace(b"rain down", b"pour"))
    with pytest.raises(FetchError, match=re.escape(_sha(packed))):
        fetch(["wordnet"], stream=io.StringIO())
    assert not (root / "wordnet" / "synsets.tsv").exists() and not (root / "wordnet" / "LICENSE.md").exists()


def test_a_build_source_passing_its_bound_is_stopped(root, server, monkeypatch, capsys):
    server.files["/xwlb.zip"] = _zip(NEWS_DAYS)
    _with_sources(monkeypatch, "corpus", "corpus/xwlb_news.txt.gz", (Download(f"{server.url}/xwlb.zip", 10),))
    line = _fetch_error(capsys, "corpus")
    assert f"{server.url}/xwlb.zip" in line and "bound" in line
    assert not (root / "corpus").exists()


# ----------------------------------------------------------------------------- issue 41 item 9: pinned URLs


def test_every_url_points_at_a_commit_or_a_tag_and_data_list_says_which(root, capsys):
    urls = [file.url for item in RELEASES.values() for file in item.files if file.url]
    urls += [
        source.url for item in RELEASES.values() for file in item.files if file.build for source in file.build.sources
    ]
    for url in urls:
        assert not url_pin(url).startswith("moving"), url
        assert "/HEAD/" not in url and "/main/" not in url and "/master/" not in url, url
    assert url_pin("https://raw.githubusercontent.com/o/r/HEAD/f.json") == "moving: branch HEAD"
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "(commit 22f0f672e641)" in out and "(tag 2025-edition)" in out and "(revision c30a6ed22ab4)" in out


# ----------------------------------------------------------------------------- issue 38 item 4: one entry per data set


def test_the_sources_of_the_config_and_the_loaders_derive_from_the_releases():
    from workbench.data import loading

    labelled, corpora = releases_where("labelled"), releases_where("texts")
    assert labelled == ("qbqtc", "tnews", "chnsenticorp", "lcqmc") and corpora == ("corpus",)
    assert set(labelled) <= set(DATA_SOURCES) and set(corpora) <= set(DATA_SOURCES)
    assert set(labelled) <= set(loading.LABELLED_SOURCES) and not set(corpora) & set(loading.LABELLED_SOURCES)
    assert {name for name in ORDINAL_SOURCES if name in RELEASES} == {n for n, item in RELEASES.items() if item.ordinal}
    assert not {"cilin", "vocab", "wordnet"} & set(DATA_SOURCES)  # lexicons and vocabularies are no data sources


def test_a_new_data_set_is_one_entry_and_its_reader(tmp_path):
    """A release added to RELEASES (before the config is imported) is a source of a data section, read by its reader,
    with no other edit."""
    root = tmp_path / "root"
    _place(root, "toyset/train.tsv", "".join(f"文本{i}\t{'ab'[i % 2]}\n" for i in range(20)))
    script = """
import json
from workbench.data import releases
from workbench.data.releases import Release, ReleaseFile

def read_toy(path):
    from workbench.data.features import build_dataset
    rows = [line.rstrip("\\n").split("\\t") for line in open(path, encoding="utf-8")]
    return build_dataset({"text": [r[0] for r in rows], "label": [0 if r[1] == "a" else 1 for r in rows]}, ["a", "b"])

files = (ReleaseFile("toyset/train.tsv", manual="by hand"),)
releases.RELEASES["toyset"] = Release("toyset", "toy", "https://example.org", "CC0", files, {"train": "train.tsv"},
                                      reader=read_toy, ordinal=True)
from workbench.config import DataConfig
from workbench.data import load_splits
import warnings
warnings.simplefilter("ignore")
splits = load_splits({"source": "toyset"})
print(json.dumps({"sizes": {k: len(v) for k, v in splits.items()}, "ordinal": DataConfig(source="toyset").is_ordinal}))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT), DATA_ROOT_ENV: str(root)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert sum(result["sizes"].values()) == 20 and result["ordinal"] is True


def test_data_list_lists_every_release_file_with_its_origin(root, capsys):
    text = list_releases(root)
    for item in RELEASES.values():
        for file in item.files:
            assert file.path in text
    assert "built: one story a line" in text and "manual: LCQMC is released on application" in text
