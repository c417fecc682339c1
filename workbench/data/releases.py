"""The real data sets the workbench knows by name, in their public releases' layout under the data root.

:data:`RELEASES` maps a name (``qbqtc``, ``tnews``, ``lcqmc``, ``chnsenticorp``, ``corpus``, ``cilin``, ``vocab``,
``wordnet``) to its :class:`Release`: the files (a path under the root, the canonical URL, the pinned sha256 where a
copy was at hand to pin), the licence as the release states it, and for a labelled set which file holds which split.
A file without a URL is placed by hand (its ``manual`` step says how): a release behind a form, or a file the
workbench builds from a public source. ``python -m workbench data list`` shows them; ``data fetch`` downloads them
(:mod:`workbench.data.fetch`). :func:`present_files` and :class:`MissingDataError` serve ``load_splits`` /
``load_texts`` for a data section without a path (docs/data.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from workbench.data_root import DATA_ROOT_ENV, data_root

_QBQTC = "https://raw.githubusercontent.com/CLUEbenchmark/QBQTC/HEAD/dataset/"
_TNEWS_ZIP = "https://storage.googleapis.com/cluebenchmark/tasks/tnews_public.zip"
_CHNSENTICORP = "https://raw.githubusercontent.com/jsksxs360/How-to-use-Transformers/HEAD/data/ChnSentiCorp/"
_LCQMC_FORM = "http://icrc.hitsz.edu.cn/Article/show/171.html"


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release: ``path`` under the data root (``qbqtc/dev.json``); ``url`` where it is downloaded (with
    ``member``: the file of that name inside the zip archive at ``url``), or None and ``manual`` the step that places
    it; ``sha256`` the pinned checksum, None where no copy was at hand to pin (the first fetch's is recorded)."""

    path: str
    url: str | None = None
    sha256: str | None = None
    member: str | None = None
    manual: str | None = None

    @property
    def name(self) -> str:
        """The file's name (``dev.json``)."""
        return Path(self.path).name

    def location(self, root: Path | None = None) -> Path:
        """The file's path under ``root`` (default :func:`data_root`)."""
        return (data_root() if root is None else root) / self.path

    def manual_step(self, root: Path | None = None, url: str | None = None) -> str:
        """How to place the file by hand: download ``url`` (default: the release's; unzip ``member`` from the release's
        archive) to the file's path, or the ``manual`` text of a file without a download."""
        target = self.location(root)
        if url is not None and url != self.url:  # a mirror's copy: the file itself
            return f"download {url} and place it at {target}"
        if self.url is None:
            return f"{self.manual}; place it at {target}"
        if self.member is not None:
            return f"download {self.url}, unzip {self.member} from it and place it at {target}"
        return f"download {self.url} and place it at {target}"


@dataclass(frozen=True)
class Release:
    """A data set as its public release lays it out: ``files``, the ``licence`` as the release states it, its
    ``homepage``, and for a labelled set ``splits`` (split -> file name in the data set's folder)."""

    name: str
    description: str
    homepage: str
    licence: str
    files: tuple[ReleaseFile, ...]
    splits: Mapping[str, str] = field(default_factory=dict)

    def file(self, name: str) -> ReleaseFile:
        """The file called ``name`` (``dev.json``)."""
        return next(item for item in self.files if item.name == name)

    @property
    def fetch_command(self) -> str:
        """The command that downloads the release's files."""
        return f"python -m workbench data fetch {self.name}"


RELEASES: dict[str, Release] = {
    release.name: release
    for release in (
        Release(
            "qbqtc",
            "CLUE QBQTC query-title relevance, labels 0 / 1 / 2",
            "https://github.com/CLUEbenchmark/QBQTC",
            "no licence file in the source repository (CLUEbenchmark/QBQTC); cite QBQTC and CLUE",
            (
                ReleaseFile("qbqtc/train.json", _QBQTC + "train.json"),
                ReleaseFile(
                    "qbqtc/dev.json",
                    _QBQTC + "dev.json",
                    "8f1bbc0d0aa1cefd9cfd5424d8e3060af81d8adfa15d2b0c6931417831f4e51b",
                ),
                ReleaseFile("qbqtc/test_public.json", _QBQTC + "test_public.json"),
            ),
            {"train": "train.json", "validation": "dev.json", "test": "test_public.json"},
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
                ),
                ReleaseFile("tnews/dev.json", _TNEWS_ZIP, member="dev.json"),
                ReleaseFile("tnews/labels.json", _TNEWS_ZIP, member="labels.json"),
            ),
            {"train": "train.json", "validation": "dev.json"},
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
        ),
        Release(
            "chnsenticorp",
            "ChnSentiCorp hotel / product review sentiment, 0 negative / 1 positive",
            "https://github.com/jsksxs360/How-to-use-Transformers",
            "via Baidu LUGE: non-commercial research and teaching only",
            (
                ReleaseFile(
                    "chnsenticorp/train.txt",
                    _CHNSENTICORP + "train.txt",
                    "8366e1c561bba37707bdd3575b5da853abb472ff92e812ed3b2c755351811f62",
                ),
                ReleaseFile(
                    "chnsenticorp/dev.txt",
                    _CHNSENTICORP + "dev.txt",
                    "4ebb5d4fc9d9b23665331cccd3b121174ce42ccfd6d0b163f3830bda53ce65f8",
                ),
                ReleaseFile("chnsenticorp/test.txt", _CHNSENTICORP + "test.txt"),
            ),
            {"train": "train.txt", "validation": "dev.txt", "test": "test.txt"},
        ),
        Release(
            "corpus",
            "raw Chinese text for MLM pre-training: CCTV evening-news stories; a Wikipedia and CLUECorpusSmall sample",
            "https://github.com/china-data/xwlb",
            "the news: CCTV's copyright, offered for study use only; the wiki sample: Wikipedia CC BY-SA",
            (
                ReleaseFile(
                    "corpus/xwlb_news.txt.gz",
                    manual="built from https://github.com/china-data/xwlb (one story a line, HTML and boilerplate "
                    "removed, gzip UTF-8); no fetch: any corpus of your own serves through data.path",
                ),
                ReleaseFile(
                    "corpus/wiki_web_sample.txt.gz",
                    manual="built from the samples in https://github.com/Tencent/TencentPretrain/tree/main/corpora "
                    "(one document a line, gzip UTF-8); no fetch: any corpus of your own serves through data.path",
                ),
            ),
        ),
        Release(
            "cilin",
            "HIT Tongyici Cilin (extended), Chinese synonym lexicon",
            "https://github.com/bububa/cilin",
            "no licence file in the source repository (bububa/cilin); HIT-SCIR's lexicon, for research",
            (
                ReleaseFile(
                    "cilin/cilin_ex.txt",
                    "https://raw.githubusercontent.com/bububa/cilin/HEAD/cilin.txt",
                    "f5cfdff9eb98d4184039d88d71b3e53ba7c9bf9324197dc51c94f2670ae70408",
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
                    "https://huggingface.co/google-bert/bert-base-chinese/resolve/main/vocab.txt",
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
                    manual="converted from an Open English WordNet release "
                    "(https://github.com/globalwordnet/english-wordnet/releases): one synset with two or more members "
                    "a line, synset_id TAB pos TAB member TAB member ...",
                ),
                ReleaseFile(
                    "wordnet/LICENSE.md",
                    manual="the licence file of the same release (https://github.com/globalwordnet/english-wordnet)",
                ),
            ),
        ),
    )
}
"""Every data set the workbench knows, by name."""


class MissingDataError(ValueError):
    """A data set's files are not under the data root; the message names them, the root and the fetch command."""


def release(name: str) -> Release:
    """The :class:`Release` called ``name``; ValueError naming the known ones."""
    if name not in RELEASES:
        raise ValueError(f"data set: must be one of {', '.join(RELEASES)}, got {name!r}")
    return RELEASES[name]


def present_files(name: str, wanted: tuple[str, ...] | None = None, root: Path | None = None) -> dict[str, Path]:
    """``{file name: path}`` of the release's files (or of ``wanted``) present under the root. None present:
    :class:`MissingDataError` naming the missing files, the data root and the command that fetches them (or the manual
    step of a file that cannot be fetched)."""
    item = release(name)
    root = data_root() if root is None else root
    files = [item.file(wanted_name) for wanted_name in (wanted or [file.name for file in item.files])]
    present = {file.name: file.location(root) for file in files if file.location(root).is_file()}
    if not present:
        manual = next((file.manual for file in files if file.manual is not None), None)
        how = f"run `{item.fetch_command}`" + (f" (it says how to place them: {manual})" if manual else "")
        raise MissingDataError(
            f"{name}: none of {', '.join(str(file.location(root)) for file in files)} is in the data root {root} "
            f"(${DATA_ROOT_ENV}, else <user cache>/workbench/data); {how}, or set {DATA_ROOT_ENV} to the folder that "
            "holds them"
        )
    return present
