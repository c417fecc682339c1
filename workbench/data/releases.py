"""The real data sets the workbench knows by name, in their public releases' layout under the data root.

:data:`RELEASES` maps a name (``qbqtc``, ``tnews``, ``chnsenticorp``, ``lcqmc``, ``corpus``, ``cilin``, ``vocab``,
``wordnet``) to its :class:`Release`, the one entry that says everything the workbench knows of a data set: its files
(a path under the root, where it comes from, its pinned sha256 where a copy was at hand to pin, its size), the
licence as the release states it, and for a labelled set which file holds which split, the reader of its files and
whether its labels are ordinal. The config's list of sources, the loaders' labelled sources and their dispatch all
derive from it (docs/architecture.md, "How to add a data set").

A file comes one of three ways: downloaded from a URL (``url``; with ``member``: taken from the zip archive at that
URL), built from public sources by a recipe of :mod:`workbench.data.builds` (``build``), or placed by hand
(``manual``: a release behind a form). Every URL points at a commit or a tag, never at a moving branch, so a pinned
file does not change under its checksum (:func:`url_pin` says which). ``python -m workbench data list`` shows them;
``data fetch`` downloads and builds them (:mod:`workbench.data.fetch`).

This module imports nothing heavy (no ``datasets``), so that the config reads the names of the sources from it; a
release's reader is the name of a function of :mod:`workbench.data.loaders`, imported when a file is read. What lies
in the data root (which files are present, whether each is the release's) is :mod:`workbench.data.root_files`'.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.data_root import data_root

BOUND_FACTOR = 4
"""A download may be at most this many times the size its entry records (``size``): a mirror announcing or sending
more is stopped, so a wrong or hostile server cannot fill the disk."""


@dataclass(frozen=True)
class Download:
    """A file a build downloads: its ``url`` (at a commit or a tag), its ``size`` in bytes (what the source is known or
    expected to hold; the download stops at :data:`BOUND_FACTOR` times it) and its pinned ``sha256`` (None where no
    copy was at hand to pin)."""

    url: str
    size: int
    sha256: str | None = None

    @property
    def max_bytes(self) -> int:
        """The most bytes the download may bring: :data:`BOUND_FACTOR` x ``size``."""
        return BOUND_FACTOR * self.size


@dataclass(frozen=True)
class Build:
    """How a file is built from public sources: the ``sources`` downloaded, the ``recipe`` (a function of
    :mod:`workbench.data.builds` called with the downloaded files and the output) and ``steps``, what it does in a
    sentence (``data list`` shows it)."""

    sources: tuple[Download, ...]
    recipe: str
    steps: str


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release: ``path`` under the data root (``qbqtc/dev.json``) and one way to get it: ``url`` where
    it is downloaded (with ``member``: the file of that name inside the zip archive at ``url``), ``build`` (built from
    public sources) or ``manual`` (the step that places it by hand). ``sha256`` is the pinned checksum (None where no
    copy was at hand to pin: the first fetch's is recorded); ``size`` its size in bytes (the pinned copy's, else what
    the release leads one to expect), ``archive_size`` that of the archive at ``url`` for a member: the download and
    the member's extraction stop at :data:`BOUND_FACTOR` times them."""

    path: str
    url: str | None = None
    sha256: str | None = None
    member: str | None = None
    manual: str | None = None
    size: int | None = None
    archive_size: int | None = None
    build: Build | None = None

    def __post_init__(self) -> None:
        ways = {"url": self.url, "build": self.build, "manual": self.manual}
        given = [way for way, value in ways.items() if value is not None]
        if len(given) != 1:
            raise ValueError(f"{self.path}: give one of url, build or manual, got {given or 'none'}")
        if self.url is not None and self.size is None:
            raise ValueError(f"{self.path}: size: a downloaded file needs the size it is expected to have, in bytes")
        if self.member is not None and self.archive_size is None:
            raise ValueError(f"{self.path}: archive_size: a member needs the size of the archive at {self.url}")

    @property
    def name(self) -> str:
        """The file's name (``dev.json``)."""
        return Path(self.path).name

    @property
    def max_bytes(self) -> int | None:
        """The most bytes the file's download (or its extraction from the archive) may bring: :data:`BOUND_FACTOR` x
        ``size``; None for a file without a download."""
        return None if self.size is None else BOUND_FACTOR * self.size

    @property
    def archive_max_bytes(self) -> int | None:
        """The most bytes the archive holding ``member`` may bring: :data:`BOUND_FACTOR` x ``archive_size``."""
        return None if self.archive_size is None else BOUND_FACTOR * self.archive_size

    def location(self, root: Path | None = None) -> Path:
        """The file's path under ``root`` (default :func:`data_root`)."""
        return (data_root() if root is None else root) / self.path

    def origin(self) -> str:
        """Where the file comes from, for ``data list``: its URL and pin, its build, or its manual step."""
        if self.build is not None:
            sources = ", ".join(f"{source.url} ({url_pin(source.url)})" for source in self.build.sources)
            return f"built: {self.build.steps}, from {sources}"
        if self.url is not None:
            return f"{self.url} ({url_pin(self.url)})" + (f", member {self.member}" if self.member else "")
        return f"manual: {self.manual}"

    def manual_step(self, root: Path | None = None, url: str | None = None) -> str:
        """How to place the file by hand: download ``url`` (default: the release's; unzip ``member`` from the release's
        archive) to the file's path, build it, or the ``manual`` text of a file placed by hand."""
        target = self.location(root)
        if url is not None and url != self.url:  # a mirror's copy: the file itself
            return f"download {url} and place it at {target}"
        if self.build is not None:
            sources = " and ".join(source.url for source in self.build.sources)
            return f"download {sources}, {self.build.steps}, and place the result at {target}"
        if self.url is None:
            return f"{self.manual}; place it at {target}"
        if self.member is not None:
            return f"download {self.url}, unzip {self.member} from it and place it at {target}"
        return f"download {self.url} and place it at {target}"


@dataclass(frozen=True)
class Release:
    """A data set as its public release lays it out: ``files``, the ``licence`` as the release states it, its
    ``homepage``; for a labelled set ``splits`` (split -> file name in the data set's folder), ``reader`` (the name of
    the function of :mod:`workbench.data.loaders` that reads one of its files, or the function itself), ``ordinal``
    (its labels are ordered: far errors, PCL) and ``labels_file`` (a file of the release naming the classes, given to
    the reader as ``labels_path``); ``texts`` for a corpus of raw text (a source of ``load_texts``)."""

    name: str
    description: str
    homepage: str
    licence: str
    files: tuple[ReleaseFile, ...]
    splits: Mapping[str, str] = field(default_factory=dict)
    reader: str | Callable[..., Any] | None = None
    ordinal: bool = False
    labels_file: str | None = None
    texts: bool = False

    def file(self, name: str) -> ReleaseFile:
        """The file called ``name`` (``dev.json``)."""
        return next(item for item in self.files if item.name == name)

    @property
    def labelled(self) -> bool:
        """Whether the data set has labelled splits (a reader)."""
        return self.reader is not None

    @property
    def fetch_command(self) -> str:
        """The command that downloads (or builds) the release's files."""
        return f"python -m workbench data fetch {self.name}"

    def read(self, path: str | Path, labels_path: str | Path | None = None) -> Any:
        """One labelled file of the release as a ``datasets.Dataset``, read by ``reader`` (with ``labels_path`` for a
        release with a ``labels_file``)."""
        if self.reader is None:
            raise ValueError(f"data.source: {self.name!r} has no labels; it is a corpus of raw text")
        reader = self.reader
        if isinstance(reader, str):
            reader = getattr(importlib.import_module("workbench.data.loaders"), reader)
        return reader(path, labels_path=labels_path) if self.labels_file is not None else reader(path)


def _raw(repo: str, commit: str, path: str) -> str:
    """The URL of ``path`` of the GitHub repository ``repo`` at ``commit``."""
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


# Each URL at the commit (or tag) of the copy the workbench's maintainers had at hand; docs/data.md says how one is
# chosen and how to move a pin.
_QBQTC = "22f0f672e6418f7bf3f0f91f0a25df4867db4bc8"  # the commit whose dataset/dev.json is the pinned one
_CHNSENTICORP = "885a519175fdf92758155d0f9ce550135793faff"
_CILIN = "0e56a2d331f6a9832a4ceb1b6f9135a9a0155273"
_BERT_CHINESE = "c30a6ed22ab4564dc1e3b2ecbf6e766b0611a33f"  # a revision of google-bert/bert-base-chinese
_XWLB = "0db698b29f1b4cf8b3809ba88c50238ab3cfcdff"  # stories up to 2026-10-01 (the repository grows every day)
_WORDNET = "2025-edition"  # a release tag of globalwordnet/english-wordnet
_TNEWS_ZIP = "https://storage.googleapis.com/cluebenchmark/tasks/tnews_public.zip"  # a fixed object, no versions
_TNEWS_ZIP_SIZE = 6_000_000  # train, dev, test and labels of TNEWS, zipped
_LCQMC_FORM = "http://icrc.hitsz.edu.cn/Article/show/171.html"


RELEASES: dict[str, Release] = {
    release.name: release
    for release in (
        Release(
            "qbqtc",
            "CLUE QBQTC query-title relevance, labels 0 / 1 / 2",
            "https://github.com/CLUEbenchmark/QBQTC",
            "no licence file in the source repository (CLUEbenchmark/QBQTC); cite QBQTC and CLUE",
            (
                # 180,000 records at dev.json's 143 bytes each
                ReleaseFile(
                    "qbqtc/train.json", _raw("CLUEbenchmark/QBQTC", _QBQTC, "dataset/train.json"), size=26_000_000
                ),
                ReleaseFile(
                    "qbqtc/dev.json",
                    _raw("CLUEbenchmark/QBQTC", _QBQTC, "dataset/dev.json"),
                    "8f1bbc0d0aa1cefd9cfd5424d8e3060af81d8adfa15d2b0c6931417831f4e51b",
                    size=2_861_827,
                ),
                ReleaseFile(
                    "qbqtc/test_public.json",
                    _raw("CLUEbenchmark/QBQTC", _QBQTC, "dataset/test_public.json"),
                    size=720_000,
                ),
            ),
            {"train": "train.json", "validation": "dev.json", "test": "test_public.json"},
            reader="load_qbqtc",
            ordinal=True,
        ),
        Release(
            "tnews",
            "CLUE TNEWS news-title classification, 15 classes (the public test split has no labels)",
            "https://github.com/CLUEbenchmark/CLUE",
            "no licence file in the source repository (CLUEbenchmark/CLUE); cite CLUE",
            (
                ReleaseFile(
                    "tnews/train.json",
                    _TNEWS_ZIP,
                    "e2c6c008569d23b50778a45abe4c2d9cef140177982203ed7dbad9ddcd748b25",
                    member="train.json",
                    size=9_704_779,
                    archive_size=_TNEWS_ZIP_SIZE,
                ),
                ReleaseFile(
                    "tnews/dev.json", _TNEWS_ZIP, member="dev.json", size=1_820_000, archive_size=_TNEWS_ZIP_SIZE
                ),
                ReleaseFile(
                    "tnews/labels.json", _TNEWS_ZIP, member="labels.json", size=1_000, archive_size=_TNEWS_ZIP_SIZE
                ),
            ),
            {"train": "train.json", "validation": "dev.json"},
            reader="load_tnews",
            labels_file="labels.json",
        ),
        Release(
            "chnsenticorp",
            "ChnSentiCorp hotel / product review sentiment, 0 negative / 1 positive",
            "https://github.com/jsksxs360/How-to-use-Transformers",
            "via Baidu LUGE: non-commercial research and teaching only",
            (
                ReleaseFile(
                    "chnsenticorp/train.txt",
                    _raw("jsksxs360/How-to-use-Transformers", _CHNSENTICORP, "data/ChnSentiCorp/train.txt"),
                    "8366e1c561bba37707bdd3575b5da853abb472ff92e812ed3b2c755351811f62",
                    size=3_019_961,
                ),
                ReleaseFile(
                    "chnsenticorp/dev.txt",
                    _raw("jsksxs360/How-to-use-Transformers", _CHNSENTICORP, "data/ChnSentiCorp/dev.txt"),
                    "4ebb5d4fc9d9b23665331cccd3b121174ce42ccfd6d0b163f3830bda53ce65f8",
                    size=374_217,
                ),
                ReleaseFile(
                    "chnsenticorp/test.txt",
                    _raw("jsksxs360/How-to-use-Transformers", _CHNSENTICORP, "data/ChnSentiCorp/test.txt"),
                    size=375_000,
                ),
            ),
            {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"},
            reader="load_chnsenticorp",
        ),
        Release(
            "lcqmc",
            "LCQMC question-pair matching, 1 same intent / 0 not",
            _LCQMC_FORM,
            "released by HIT Shenzhen on application (a form), for research; "
            "no licence file in the source repositories",
            tuple(
                ReleaseFile(
                    f"lcqmc/{name}",
                    sha256=sha256,
                    manual=f"LCQMC is released on application: apply at {_LCQMC_FORM}, take {name} from the release",
                )
                for name, sha256 in (
                    ("train.txt", None),
                    ("dev.txt", "d3cd41ed89b8f6196a76ebff2aa03d5ecf42edcd12942aa865d34f7e570af7c2"),
                    ("test.txt", None),
                )
            ),
            {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"},
            reader="load_lcqmc",
        ),
        Release(
            "corpus",
            "raw Chinese text for MLM pre-training: CCTV evening-news stories; a Wikipedia and CLUECorpusSmall sample",
            "https://github.com/china-data/xwlb",
            "the news: CCTV's copyright, offered for study use only; the wiki sample: Wikipedia CC BY-SA",
            (
                ReleaseFile(
                    "corpus/xwlb_news.txt.gz",
                    build=Build(
                        (Download(f"https://github.com/china-data/xwlb/archive/{_XWLB}.zip", 60_000_000),),
                        "news_stories",
                        "one story a line from each day's assets/YYYY/YYYYMMDD.json (HTML, the channel's opening "
                        "words and the editors' credits removed), gzip UTF-8",
                    ),
                ),
                ReleaseFile(
                    "corpus/wiki_web_sample.txt.gz",
                    build=Build(
                        tuple(
                            Download(_raw("Tencent/TencentPretrain", commit, f"corpora/{name}"), size)
                            for commit, name, size in (
                                ("66d32cf50303d13b14f82aa76b79b52ca03efedd", "zhwiki_sampled.txt", 2_400_000),
                                ("efd0758fd3dc9de19f08fcef9a20f5aceacad25f", "CLUECorpusSmall_sampled.txt", 2_200_000),
                            )
                        ),
                        "documents",
                        "one document a line, those of 20 characters or more (titles alone dropped), gzip UTF-8",
                    ),
                ),
            ),
            texts=True,
        ),
        Release(
            "cilin",
            "HIT Tongyici Cilin (extended), Chinese synonym lexicon",
            "https://github.com/bububa/cilin",
            "no licence file in the source repository (bububa/cilin); HIT-SCIR's lexicon, for research",
            (
                ReleaseFile(
                    "cilin/cilin_ex.txt",
                    _raw("bububa/cilin", _CILIN, "cilin.txt"),
                    "f5cfdff9eb98d4184039d88d71b3e53ba7c9bf9324197dc51c94f2670ae70408",
                    size=892_600,
                ),
            ),
        ),
        Release(
            "vocab",
            "the Chinese BERT WordPiece vocabulary (21,128 tokens)",
            "https://huggingface.co/google-bert/bert-base-chinese",
            "Apache 2.0 (google-bert/bert-base-chinese)",
            (
                ReleaseFile(
                    "vocab/bert-base-chinese-vocab.txt",
                    f"https://huggingface.co/google-bert/bert-base-chinese/resolve/{_BERT_CHINESE}/vocab.txt",
                    size=109_540,
                ),
            ),
        ),
        Release(
            "wordnet",
            "Open English WordNet synsets with two or more members, as TSV",
            "https://github.com/globalwordnet/english-wordnet",
            "CC BY 4.0 (Open English WordNet; see wordnet/LICENSE.md)",
            (
                ReleaseFile(
                    "wordnet/synsets.tsv",
                    build=Build(
                        (
                            Download(
                                "https://github.com/globalwordnet/english-wordnet/releases/download/"
                                f"{_WORDNET}/english-wordnet-2025.xml.gz",
                                15_000_000,
                                "9ca6d1dcb75f822fdd66617f7d9da48142ace38dd544d6ad5e2feca1674ad3fe",
                            ),
                        ),
                        "wordnet_synsets",
                        "one synset with two or more members a line (synset_id TAB pos TAB member TAB member ...) "
                        "from the release's WN-LMF XML",
                    ),
                ),
                ReleaseFile(
                    "wordnet/LICENSE.md",
                    _raw("globalwordnet/english-wordnet", _WORDNET, "LICENSE.md"),
                    size=21_000,
                ),
            ),
        ),
    )
}
"""Every data set the workbench knows, by name: the one entry each (docs/architecture.md, "How to add a data set")."""


def releases_where(flag: str) -> tuple[str, ...]:
    """The names of the releases whose ``flag`` (``labelled``, ``texts``, ``ordinal``) holds, in the order of
    :data:`RELEASES`: the config's sources derive from them."""
    return tuple(name for name, item in RELEASES.items() if getattr(item, flag))


def release(name: str) -> Release:
    """The :class:`Release` called ``name``; ValueError naming the known ones."""
    if name not in RELEASES:
        raise ValueError(f"data set: must be one of {', '.join(RELEASES)}, got {name!r}")
    return RELEASES[name]


def url_pin(url: str) -> str:
    """Which version of its source ``url`` names: ``commit <hash>``, ``tag <name>`` or ``revision <hash>``; a URL on
    a branch names none (``moving: branch <name>``), an object store's URL a fixed object."""
    commit = re.search(r"/([0-9a-f]{40})(?:/|\.zip$)", url)
    if commit:
        return f"{'revision' if 'huggingface.co' in url else 'commit'} {commit.group(1)[:12]}"
    tag = re.search(r"/releases/download/([^/]+)/", url) or re.search(
        r"raw\.githubusercontent\.com/[^/]+/[^/]+/([^/]+)/", url
    )
    if tag and tag.group(1) not in ("HEAD", "main", "master"):
        return f"tag {tag.group(1)}"
    branch = re.search(r"/(HEAD|main|master)/", url)
    if branch:
        return f"moving: branch {branch.group(1)}"
    return "a fixed object: no versions, its sha256 says which copy"
