"""The data root (issue 32): named releases, ``data: {source: NAME}`` without a path, ``python -m workbench data
list / fetch`` against a local HTTP server on 127.0.0.1 (never the internet) behind ``$WORKBENCH_DATA_MIRROR``."""

from __future__ import annotations

import hashlib
import io
import json
import re
import threading
import warnings
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from workbench.__main__ import main
from workbench.config import DataConfig, load_config
from workbench.data import RELEASES, MissingDataError, Release, ReleaseFile, label_names, load_splits, load_texts
from workbench.data.fetch import FETCH_RECORD, LOCK_FILE, MIRROR_ENV, FetchError, fetch, file_status, read_record
from workbench.data_root import DATA_ROOT_ENV, data_root, expand_data_root
from workbench.synonyms import SynonymTable


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Server:
    """Files by URL path; ``/cut/...`` announces the whole length and closes after half of it; others 404."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                server.requests.append(self.path)
                body = server.files.get(self.path.removeprefix("/cut"))
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if self.path.startswith("/cut/") else body)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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


TRAIN = b'{"id": 0, "query": "q", "title": "t", "label": "1"}\n' * 40
DEV = b'{"id": 1, "query": "q2", "title": "t2", "label": "0"}\n' * 40


@pytest.fixture
def toy(monkeypatch, server):
    """A release ``toy`` whose train.json is pinned and dev.json is not, served by ``server`` behind the mirror."""
    release = Release(
        "toy",
        "a toy release",
        "https://example.org/toy",
        "CC0",
        (
            ReleaseFile("toy/train.json", "https://example.org/toy/train.json", _sha(TRAIN), size=len(TRAIN)),
            ReleaseFile("toy/dev.json", "https://example.org/toy/dev.json", size=len(DEV)),
        ),
    )
    monkeypatch.setitem(RELEASES, "toy", release)
    monkeypatch.setenv(MIRROR_ENV, server.url)
    server.files.update({"/toy/train.json": TRAIN, "/toy/dev.json": DEV})
    return release


def _leftovers(root: Path) -> list[str]:
    """Every file under the root but the (empty) lock file two fetches take turns on."""
    files = (path for path in root.rglob("*") if path.is_file() and path.name != LOCK_FILE)
    return sorted(str(path.relative_to(root)) for path in files)


def _fetch_error(capsys, *names: str) -> str:
    assert main(["data", "fetch", *names]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


# ----------------------------------------------------------------------------- the root and the registry


def test_the_root_is_the_variable_else_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "mine"))
    assert data_root() == tmp_path / "mine"
    monkeypatch.delenv(DATA_ROOT_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert data_root() == tmp_path / "cache" / "workbench" / "data"  # platformdirs on Linux follows XDG too


def test_a_path_written_under_the_root_enters_as_the_root_s_file(root, tmp_path):
    assert expand_data_root("$WORKBENCH_DATA/cilin/cilin_ex.txt") == str(root / "cilin" / "cilin_ex.txt")
    assert expand_data_root("${WORKBENCH_DATA}/a.txt") == str(root / "a.txt")
    assert expand_data_root("notes/$WORKBENCH_DATA/a.txt") == "notes/$WORKBENCH_DATA/a.txt"
    data = DataConfig.from_mapping({"source": "corpus", "path": ["$WORKBENCH_DATA/corpus/a.txt.gz", "b.txt"]})
    assert data.path == [str(root / "corpus" / "a.txt.gz"), "b.txt"]
    lexicon = root / "cilin" / "cilin_ex.txt"
    lexicon.parent.mkdir(parents=True)
    lexicon.write_text("Aa01A01= 美丽 漂亮\n", encoding="utf-8")
    assert SynonymTable.from_path("$WORKBENCH_DATA/cilin/cilin_ex.txt").are_synonyms("美丽", "漂亮")


def test_every_release_file_has_a_download_or_a_manual_step_and_every_split_a_file():
    for name, item in RELEASES.items():
        assert item.name == name and item.licence and item.homepage.startswith("http")
        for file in item.files:
            assert file.path.startswith(f"{name}/")
            assert [file.url, file.build, file.manual].count(None) == 2, file.path  # one way to get it
            assert file.sha256 is None or re.fullmatch("[0-9a-f]{64}", file.sha256), file.path
            assert file.url is None or file.size > 0, file.path  # its download's bound
        assert set(item.splits.values()) <= {file.name for file in item.files}
    assert set(RELEASES) >= {"qbqtc", "tnews", "lcqmc", "chnsenticorp", "corpus", "cilin", "vocab", "wordnet"}
    assert RELEASES["qbqtc"].splits == {"train": "train.json", "validation": "dev.json", "test": "test_public.json"}


# ----------------------------------------------------------------------------- data list / data fetch


def test_a_good_fetch_writes_each_file_checked_and_records_the_unpinned_hash(root, toy, capsys):
    assert main(["data", "fetch", "toy"]) == 0
    assert (root / "toy" / "train.json").read_bytes() == TRAIN
    assert (root / "toy" / "dev.json").read_bytes() == DEV
    assert _leftovers(root) == [FETCH_RECORD, "toy/dev.json", "toy/train.json"]  # no temporary file
    record = read_record(root)
    assert record["toy/dev.json"]["sha256"] == _sha(DEV) and record["toy/dev.json"]["url"].endswith("/toy/dev.json")
    statuses = {file.path: file_status(file, root, record)["status"] for file in toy.files}
    assert statuses == {"toy/train.json": "verified", "toy/dev.json": "as first fetched"}
    out = capsys.readouterr().out
    assert str(root / FETCH_RECORD) in out  # it says the unpinned hash was recorded, and where


def test_a_present_file_is_not_downloaded_again(root, toy, server):
    fetch(["toy"], stream=io.StringIO())
    before = len(server.requests)
    lines = fetch(["toy"], stream=io.StringIO())
    assert len(server.requests) == before and all("present" in line for line in lines)


def test_a_checksum_mismatch_leaves_no_file_and_names_the_url_and_the_manual_step(root, toy, server, capsys):
    server.files["/toy/train.json"] = TRAIN.replace(b'"1"', b'"2"')
    line = _fetch_error(capsys, "toy")
    assert f"{server.url}/toy/train.json" in line and str(root / "toy" / "train.json") in line
    assert _sha(TRAIN) in line  # the pinned sha256
    assert _leftovers(root) == []


def test_a_404_leaves_no_file(root, toy, server, capsys):
    del server.files["/toy/train.json"]
    line = _fetch_error(capsys, "toy")
    assert "404" in line and f"{server.url}/toy/train.json" in line and "place it at" in line
    assert _leftovers(root) == []


def test_a_transfer_cut_halfway_leaves_no_file(root, toy, server, monkeypatch, capsys):
    monkeypatch.setenv(MIRROR_ENV, f"{server.url}/cut")
    line = _fetch_error(capsys, "toy")
    assert f"{server.url}/cut/toy/train.json" in line and f"of {len(TRAIN)} bytes" in line
    assert _leftovers(root) == []


def test_offline_names_the_url_and_leaves_no_file(root, toy, server, monkeypatch, capsys):
    url = server.url
    server.close()  # nothing listens on the port any more
    monkeypatch.setenv(MIRROR_ENV, url)
    line = _fetch_error(capsys, "toy")
    assert f"{url}/toy/train.json" in line and "cannot reach it" in line
    assert _leftovers(root) == []
    server.close = lambda: None


def test_a_later_fetch_of_an_unpinned_file_is_checked_against_the_first(root, toy, server):
    fetch(["toy"], stream=io.StringIO())
    (root / "toy" / "dev.json").unlink()
    server.files["/toy/dev.json"] = DEV + b'{"id": 2, "query": "q", "title": "t", "label": "2"}\n'
    with pytest.raises(FetchError, match=_sha(DEV)) as caught:
        fetch(["toy"], stream=io.StringIO())
    assert FETCH_RECORD in str(caught.value)
    assert not (root / "toy" / "dev.json").exists()


def test_a_present_file_that_differs_from_its_pin_is_not_overwritten(root, toy, capsys):
    (root / "toy").mkdir(parents=True)
    (root / "toy" / "train.json").write_bytes(b"mine\n")
    line = _fetch_error(capsys, "toy")
    assert str(root / "toy" / "train.json") in line
    assert (root / "toy" / "train.json").read_bytes() == b"mine\n"


def test_a_release_behind_a_form_says_how_to_place_it(root, capsys):
    line = _fetch_error(capsys, "lcqmc")
    assert "http://icrc.hitsz.edu.cn" in line and str(root / "lcqmc" / "train.txt") in line


def test_an_unknown_name_is_refused_naming_the_known_ones(root, capsys):
    line = _fetch_error(capsys, "qbqtcc")
    assert "'qbqtcc'" in line and "qbqtc" in line and not root.exists()


def test_an_archive_member_is_fetched_from_the_release_s_zip(root, server, monkeypatch):
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.writestr("toy_public/train.json", TRAIN)
        archive.writestr("toy_public/labels.json", DEV)
    server.files["/toy_public.zip"] = bundle.getvalue()
    url = f"{server.url}/toy_public.zip"
    sizes = {"archive_size": len(bundle.getvalue())}
    files = (
        ReleaseFile("toyzip/train.json", url, _sha(TRAIN), member="train.json", size=len(TRAIN), **sizes),
        ReleaseFile("toyzip/labels.json", url, member="labels.json", size=len(DEV), **sizes),
    )
    monkeypatch.setitem(RELEASES, "toyzip", Release("toyzip", "zipped", "https://example.org", "CC0", files))
    fetch(["toyzip"], stream=io.StringIO())
    assert (root / "toyzip" / "train.json").read_bytes() == TRAIN
    assert (root / "toyzip" / "labels.json").read_bytes() == DEV
    assert server.requests.count("/toy_public.zip") == 1  # one download for both members
    assert _leftovers(root) == [FETCH_RECORD, "toyzip/labels.json", "toyzip/train.json"]


def test_data_list_names_every_file_and_its_status(root, toy, capsys):
    fetch(["toy"], stream=io.StringIO())
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for item in RELEASES.values():
        assert all(file.path in out for file in item.files)
    assert str(root) in out


# ----------------------------------------------------------------------------- a data section without a path


def _qbqtc_lines(count: int, start: int = 0) -> str:
    labels = ["0", "1", "1", "2"]
    return "".join(
        json.dumps({"id": i, "query": f"查询{i}", "title": f"标题{i}", "label": labels[i % 4]}, ensure_ascii=False)
        + "\n"
        for i in range(start, start + count)
    )


def _place(root: Path, relative: str, text: str) -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_a_section_without_a_path_reads_the_release_files_of_the_root(root):
    _place(root, "qbqtc/train.json", _qbqtc_lines(40))
    _place(root, "qbqtc/dev.json", _qbqtc_lines(12, 100))
    _place(root, "qbqtc/test_public.json", _qbqtc_lines(8, 200))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        splits = load_splits({"source": "qbqtc"})
    assert not [warning for warning in caught if "cut" in str(warning.message)]  # every split has its file: no cut
    assert {name: len(split) for name, split in splits.items()} == {"train": 40, "validation": 12, "test": 8}
    assert label_names(splits["train"]) == ["irrelevant", "related", "highly_relevant"]
    assert splits.provenance["splits"]["validation"] == {"file": "qbqtc/dev.json", "examples": 12}
    assert splits.provenance["data_root"] == str(root) and splits.provenance["missing"] == []


def test_an_explicit_path_wins_over_the_root(root, tmp_path):
    _place(root, "qbqtc/dev.json", _qbqtc_lines(40))
    own = _place(tmp_path, "own.json", _qbqtc_lines(20, 500))
    splits = load_splits({"source": "qbqtc", "path": str(own)})
    assert sum(len(split) for split in splits.values()) == 20
    assert splits.provenance["splits"]["train"]["file"] == str(own)


def test_a_missing_split_is_cut_from_the_present_file_with_a_warning_and_a_record(root):
    _place(root, "qbqtc/dev.json", _qbqtc_lines(200))
    with pytest.warns(UserWarning, match="qbqtc/train.json") as caught:
        splits = load_splits({"source": "qbqtc", "seed": 3})
    assert "python -m workbench data fetch qbqtc" in str(caught[0].message)
    assert {name: len(split) for name, split in splits.items()} == {"train": 160, "validation": 20, "test": 20}
    cut = {
        "from": "qbqtc/dev.json",
        "method": "stratified_split",
        "shares": {"train": 0.8, "validation": 0.1, "test": 0.1},
    }
    for name in ("train", "validation", "test"):
        assert splits.provenance["splits"][name]["cut"] == {**cut, "seed": 3}
    assert splits.provenance["missing"] == ["qbqtc/train.json", "qbqtc/test_public.json"]
    texts = [set(split["text"]) for split in splits.values()]
    assert not (texts[0] & texts[1] or texts[0] & texts[2] or texts[1] & texts[2])  # disjoint parts of dev.json


def test_a_split_the_release_lacks_is_cut_from_train_never_from_the_validation_file(root):
    _place(root, "qbqtc/train.json", _qbqtc_lines(90))
    _place(root, "qbqtc/dev.json", _qbqtc_lines(12, 100))
    with pytest.warns(UserWarning, match="test_public.json"):
        splits = load_splits({"source": "qbqtc"})
    assert len(splits["validation"]) == 12 and len(splits["train"]) + len(splits["test"]) == 90
    assert splits.provenance["splits"]["test"]["cut"]["shares"] == {"train": 0.888889, "test": 0.111111}


def test_no_file_of_the_data_set_is_one_error_naming_the_files_the_root_and_the_command(root):
    with pytest.raises(MissingDataError) as caught:
        load_splits({"source": "qbqtc"})
    message = str(caught.value)
    assert isinstance(caught.value, ValueError)  # the command lines' exit 2
    for name in ("train.json", "dev.json", "test_public.json"):
        assert str(root / "qbqtc" / name) in message
    assert str(root) in message and "python -m workbench data fetch qbqtc" in message


@pytest.mark.slow  # imports the trainers
def test_the_trainer_command_exits_2_on_a_data_set_the_root_lacks(root, tmp_path, capsys):
    from workbench.train.__main__ import main as train_main

    config = tmp_path / "c.yaml"
    config.write_text("task: finetune\ndata: {source: chnsenticorp}\n", encoding="utf-8")
    assert train_main([str(config), f"output_dir={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err
    assert "python -m workbench data fetch chnsenticorp" in err and str(root) in err
    assert load_config(str(config)).data.path is None


def test_a_corpus_section_without_a_path_reads_the_root_s_corpus_files(root):
    import gzip

    path = root / "corpus" / "wiki_web_sample.txt.gz"
    path.parent.mkdir(parents=True)
    path.write_bytes(gzip.compress("第一句。\n\n第二句。\n".encode()))
    with pytest.warns(UserWarning, match="xwlb_news.txt.gz"):
        texts, pairs = load_texts({"source": "corpus"})
    assert texts == ["第一句。", "第二句。"] and pairs is None


def test_a_root_that_cannot_be_written_is_one_error_naming_it(tmp_path, monkeypatch, toy, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n", encoding="utf-8")
    monkeypatch.setenv(DATA_ROOT_ENV, str(blocker))
    line = _fetch_error(capsys, "toy")
    assert str(blocker) in line and DATA_ROOT_ENV in line
