"""Recipes that build a data set's file from its public sources (``data fetch corpus``, ``data fetch wordnet``), and
the bounded reading of zip members that they and :mod:`workbench.data.fetch` share.

A recipe is called with the downloaded sources (their checksums already checked where pinned) and the binary file it
writes; bad input is a ValueError naming the source and what is wrong. The output is the same bytes for the same
sources (gzip without a timestamp), so the sha256 recorded at a first build checks every later one.
"""

from __future__ import annotations

import gzip
import json
import re
import xml.etree.ElementTree as ElementTree
import zipfile
from collections.abc import Iterator, Sequence
from html import unescape
from pathlib import Path
from typing import IO

CHUNK_BYTES = 1 << 16
DAY_MAX_BYTES = 4_000_000
"""The most bytes one day's JSON of the news archive may hold (a day is about 30 kB)."""
MIN_DOCUMENT_CHARS = 20
"""A line of the wiki and CLUECorpusSmall samples shorter than this is a title alone, not a document."""


class ArchiveError(ValueError):
    """An archive that cannot give a member: absent, given twice, larger than its bound, or not a readable zip."""


def find_member(bundle: zipfile.ZipFile, member: str) -> zipfile.ZipInfo:
    """The entry of ``bundle`` called ``member`` (at any depth: ``tnews_public/train.json``); ArchiveError when there
    is none, or more than one (which one would be the release's file?)."""
    found = [info for info in bundle.infolist() if info.filename == member or info.filename.endswith(f"/{member}")]
    if not found:
        raise ArchiveError(f"the archive holds no {member}")
    if len(found) > 1:
        names = ", ".join(info.filename for info in found)
        raise ArchiveError(f"the archive holds {len(found)} entries named {member} ({names}); which is the release's?")
    return found[0]


def member_blocks(bundle: zipfile.ZipFile, info: zipfile.ZipInfo, max_bytes: int) -> Iterator[bytes]:
    """The bytes of the entry ``info``, block by block, read no further than ``max_bytes``: an entry that says it is
    larger, or expands beyond it, is an ArchiveError (a small member that unpacks to gigabytes fills no disk)."""
    if info.file_size > max_bytes:
        raise ArchiveError(f"{info.filename}: says it holds {info.file_size} bytes, more than its bound {max_bytes}")
    read = 0
    try:
        with bundle.open(info) as source:
            while block := source.read(min(CHUNK_BYTES, max_bytes + 1 - read)):
                read += len(block)
                if read > max_bytes:
                    raise ArchiveError(f"{info.filename}: expands beyond its bound of {max_bytes} bytes")
                yield block
    except (zipfile.BadZipFile, EOFError, OSError) as error:  # a bad CRC, a truncated member
        raise ArchiveError(f"{info.filename}: not readable from the archive ({error})") from None


def open_zip(path: Path, url: str) -> zipfile.ZipFile:
    """The zip archive at ``path`` (downloaded from ``url``); ArchiveError naming the URL when it is not one."""
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as error:
        raise ArchiveError(f"{url}: not a readable zip archive ({error})") from None


def _gzip_writer(out: IO[bytes]) -> gzip.GzipFile:
    return gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0)  # no timestamp: the same bytes every build


# ----------------------------------------------------------------------------- the news corpus

_DAY = re.compile(r"(?:^|/)assets/\d{4}/\d{8}\.json$")
_BREAK = re.compile(r"</p\s*>|<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]*>")
_OPENING = re.compile(r"^(?:中国网络电视台消息|央视网消息)\s*[（(]新闻联播[）)]\s*[：:]\s*")
_CREDITS = re.compile(r"^[（(][^（()）]*编辑\s*[：:]")


def news_story(content: str) -> str:
    """One story of the news archive as one line: its HTML paragraphs (``<p>``, ``<br>``) as text joined by a space,
    without the channel's opening words (``央视网消息（新闻联播）：``) and the editors' credits
    (``（视频编辑：...）``)."""
    paragraphs: list[str] = []
    for part in _BREAK.split(content):
        text = " ".join(unescape(_TAG.sub("", part)).split())
        if not paragraphs:
            text = _OPENING.sub("", text)
        if text and not _CREDITS.match(text):
            paragraphs.append(text)
    return " ".join(paragraphs)


def _day_stories(day: object, name: str) -> Iterator[str]:
    videos = day.get("videoList") if isinstance(day, dict) else None
    if not isinstance(videos, list):
        raise ValueError(f"{name}: has no videoList (a list of the day's stories)")
    for video in videos:
        detail = video.get("video_detail") if isinstance(video, dict) else None
        content = detail.get("content") if isinstance(detail, dict) else None
        story = news_story(content) if isinstance(content, str) else ""
        if story:
            yield story


def news_stories(sources: Sequence[Path], urls: Sequence[str], out: IO[bytes]) -> None:
    """``corpus/xwlb_news.txt.gz``: every story of the archive of china-data/xwlb, one a line (:func:`news_story`),
    day by day (``assets/YYYY/YYYYMMDD.json`` in date order), gzip UTF-8. ValueError naming the archive's URL when it
    holds no day, or the day whose JSON is malformed."""
    with open_zip(sources[0], urls[0]) as bundle, _gzip_writer(out) as text:
        days = sorted(
            (info for info in bundle.infolist() if _DAY.search(info.filename)), key=lambda info: info.filename
        )
        if not days:
            raise ValueError(f"{urls[0]}: holds no assets/YYYY/YYYYMMDD.json")
        for info in days:
            raw = b"".join(member_blocks(bundle, info, DAY_MAX_BYTES))
            try:
                day = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as error:
                raise ValueError(f"{urls[0]}: {info.filename}: not JSON ({error})") from None
            for story in _day_stories(day, f"{urls[0]}: {info.filename}"):
                text.write(f"{story}\n".encode())


# ----------------------------------------------------------------------------- the wiki and web sample


def documents(sources: Sequence[Path], urls: Sequence[str], out: IO[bytes]) -> None:
    """``corpus/wiki_web_sample.txt.gz``: the lines of each source (one document a line), in order, stripped, those of
    :data:`MIN_DOCUMENT_CHARS` characters or more, gzip UTF-8. ValueError naming the source's URL and line when it is
    not UTF-8, or when no document is left."""
    written = 0
    with _gzip_writer(out) as text:
        for path, url in zip(sources, urls):
            with open(path, "rb") as handle:
                for line_no, raw in enumerate(handle, start=1):
                    try:
                        line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8").strip()
                    except UnicodeDecodeError as error:
                        raise ValueError(f"{url}:{line_no}: not UTF-8 text ({error.reason})") from None
                    if len(line) >= MIN_DOCUMENT_CHARS:
                        text.write(f"{line}\n".encode())
                        written += 1
    if not written:
        raise ValueError(f"{', '.join(urls)}: no line of {MIN_DOCUMENT_CHARS} characters or more")


# ----------------------------------------------------------------------------- WordNet


def wordnet_synsets(sources: Sequence[Path], urls: Sequence[str], out: IO[bytes]) -> None:
    """``wordnet/synsets.tsv``: from the WN-LMF XML (gzip) of an Open English WordNet release, every synset with two
    or more members, one a line: its id without the ``oewn-`` prefix, its part of speech, its members' written forms
    (TAB separated), after a header line. ValueError naming the URL when the XML is malformed or holds no synset."""
    lemmas: dict[str, str] = {}
    rows = 0
    out.write(b"# synset_id\tpos\tmembers (tab separated); Open English WordNet, synsets with >=2 members\n")
    try:
        with gzip.open(sources[0], "rb") as xml:
            for _, element in ElementTree.iterparse(xml, events=("end",)):
                if element.tag == "LexicalEntry":
                    lemma = element.find("Lemma")
                    if lemma is not None and element.get("id"):
                        lemmas[element.get("id", "")] = lemma.get("writtenForm", "")
                    element.clear()
                elif element.tag == "Synset":
                    members = [lemmas.get(entry, "") for entry in element.get("members", "").split()]
                    members = [member for member in members if member]
                    if len(members) >= 2:
                        synset = element.get("id", "").removeprefix("oewn-")
                        out.write("\t".join([synset, element.get("partOfSpeech", ""), *members]).encode() + b"\n")
                        rows += 1
                    element.clear()
    except (ElementTree.ParseError, OSError, EOFError) as error:
        raise ValueError(f"{urls[0]}: not a gzipped WN-LMF XML file ({error})") from None
    if not rows:
        raise ValueError(f"{urls[0]}: holds no synset with two or more members")


RECIPES = {"news_stories": news_stories, "documents": documents, "wordnet_synsets": wordnet_synsets}
"""The recipes by the name a :class:`~workbench.data.releases.Build` gives."""
