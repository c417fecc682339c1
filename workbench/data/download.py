"""Where ``data fetch`` (:mod:`workbench.data.fetch`) downloads a file from, and one download: a URL copied into an
open file, its sha256 computed on the way, bounded and watched.

:func:`mirror_url` is a file's URL: its release's, or ``<$WORKBENCH_DATA_MIRROR>/<path>`` (:func:`mirror`). Every
message about a URL shows it by :func:`workbench.redaction.shown_url` (:func:`without_secrets` for a text that urllib
or a recipe wrote).

:func:`stream` opens the URL (:func:`request`: a mirror's user information sent as HTTP basic authentication, to its
host alone), reads what the server announces (:func:`announced_length`: an HTML page, a length beyond the file's bound,
or no way to tell a whole transfer from one cut short is refused before a byte is kept) and copies the body
(:func:`copy_body`: stopped past the bound, when the first block is an HTML page, or when a window of
:data:`RATE_WINDOW_S` seconds brings less than :data:`MIN_RATE_BYTES_S` a second). Every failure is one
:class:`FetchError` saying what happened; the caller names the URL and the manual step.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import unquote, urlsplit

from tqdm.auto import tqdm

from workbench.data.releases import ReleaseFile
from workbench.redaction import scrub, shown_url, url_secrets

MIRROR_ENV = "WORKBENCH_DATA_MIRROR"
"""The environment variable whose URL replaces the releases' own: a file is fetched from ``<mirror>/<path>``."""
MIRROR_SCHEMES = ("http://", "https://", "file://")
TIMEOUT_S = 60
"""Seconds a connection may wait for the server (to connect, or for the next bytes) before the fetch fails."""
MIN_RATE_BYTES_S = 1_000
"""The slowest a download may go, in bytes a second, measured over each :data:`RATE_WINDOW_S` seconds."""
RATE_WINDOW_S = 60
CHUNK_BYTES = 1 << 16
USER_AGENT = "workbench-data-fetch"
_HTML_STARTS = (b"<!doctype html", b"<html")


class FetchError(ValueError):
    """A download that did not give the release's file; the message names the URL and the manual step."""


def mirror() -> str | None:
    """``$WORKBENCH_DATA_MIRROR`` when set; FetchError naming it when it is not a URL (http, https or file)."""
    value = os.environ.get(MIRROR_ENV)
    if value and not value.startswith(MIRROR_SCHEMES):
        raise FetchError(
            f"${MIRROR_ENV}: must be a URL beginning with {', '.join(MIRROR_SCHEMES)} (a local copy: "
            f"file:///path/to/mirror), got {shown_url(value)!r}"
        )
    return value or None


def mirror_url(file: ReleaseFile) -> str | None:
    """The URL ``file`` is fetched from: ``<$WORKBENCH_DATA_MIRROR>/<path>`` when the mirror is set (a built file too:
    the mirror holds the result), else its own URL (None for a file built or placed by hand)."""
    base = mirror()
    if base and (file.url is not None or file.build is not None):
        return f"{base.rstrip('/')}/{file.path}"
    return file.url


def url_name(url: str) -> str:
    """The file name a URL's path ends in (no query, no user information): a download's label and ``.part`` name."""
    return Path(urlsplit(url).path).name


def without_secrets(message: str, urls: Iterable[str]) -> str:
    """``message`` with every secret of ``urls`` (:func:`workbench.redaction.url_secrets`) scrubbed out, the URLs
    themselves shown by :func:`workbench.redaction.shown_url`: a text that urllib or a recipe wrote may quote them."""
    for url in urls:
        message = scrub(message.replace(url, shown_url(url)), url_secrets(url))
    return message


@dataclass
class Transfer:
    """What a download has brought so far: the sha256 of its bytes, how many, and the length the server announced."""

    digest: Any = field(default_factory=hashlib.sha256)
    received: int = 0
    expected: int | None = None


class RateWindow:
    """The bytes a download brought in the current window of :data:`RATE_WINDOW_S` seconds, and when it began."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.bytes = 0

    def add(self, count: int, received: int) -> None:
        """Count ``count`` more bytes (``received`` in all); at the end of a window, FetchError when it brought less
        than :data:`MIN_RATE_BYTES_S` a second, else a new window begins."""
        self.bytes += count
        elapsed = time.monotonic() - self.start
        if elapsed < RATE_WINDOW_S:
            return
        if self.bytes < MIN_RATE_BYTES_S * elapsed:
            raise FetchError(
                f"the server sent {self.bytes} bytes in {elapsed:.0f} s, slower than "
                f"{MIN_RATE_BYTES_S} bytes a second; stopped after {received} bytes"
            )
        self.start, self.bytes = time.monotonic(), 0


def _looks_like_html(first: bytes) -> bool:
    return first.lstrip(b"\xef\xbb\xbf \t\r\n").lower().startswith(_HTML_STARTS)


def _is_html_file(label: str) -> bool:
    """Whether the file downloaded is itself a web page (an HTML answer is then no captive portal)."""
    return label.endswith((".html", ".htm"))


def request(url: str) -> urllib.request.Request:
    """The request for ``url``: its user information (``user:password@``), if any, taken out of the URL and sent as
    HTTP basic authentication, a header that urllib does not pass on to a host the server redirects to."""
    parts = urlsplit(url)
    user_info, at, host = parts.netloc.rpartition("@")
    made = urllib.request.Request(parts._replace(netloc=host).geturl(), headers={"User-Agent": USER_AGENT})
    if at:
        user, _, password = user_info.partition(":")
        pair = f"{unquote(user)}:{unquote(password)}".encode()
        made.add_unredirected_header("Authorization", f"Basic {base64.b64encode(pair).decode('ascii')}")
    return made


def announced_length(response: Any, label: str, max_bytes: int, pinned: bool) -> int | None:
    """The length the server announces for the file ``label`` (None: it announces none). FetchError when it answers
    with an HTML page (Content-Type text/html), announces more than ``max_bytes``, or (for a file whose sha256 is not
    ``pinned``) neither announces a length nor sends chunks, so that a transfer cut short would pass."""
    kind = response.headers.get("Content-Type", "")
    if kind.split(";")[0].strip().lower() == "text/html" and not _is_html_file(label):
        raise FetchError(
            "the server answered with an HTML page (Content-Type text/html), not the file: a captive portal "
            "or a login page? Open any web page in a browser first"
        )
    length = response.headers.get("Content-Length")
    expected = int(length) if length and length.isdigit() else None
    if expected is not None and expected > max_bytes:
        raise FetchError(
            f"the server announces {expected} bytes, more than this file's bound of {max_bytes} (the release "
            "is far smaller): a wrong file or a wrong mirror; nothing was downloaded"
        )
    if expected is None and not getattr(response, "chunked", False) and not pinned:
        raise FetchError(
            "the server does not say how long the file is (no Content-Length, no chunked encoding), so a "
            "transfer cut short could not be told from a whole one, and no sha256 is pinned to check it"
        )
    return expected


def copy_body(response: Any, out: IO[bytes], label: str, max_bytes: int, transfer: Transfer) -> None:
    """The body of ``response`` written to ``out`` with a progress bar, counted and hashed in ``transfer``.
    FetchError when its first block is an HTML page, it passes ``max_bytes``, or it goes slower than
    :data:`MIN_RATE_BYTES_S` (:class:`RateWindow`)."""
    unit = {"unit": "B", "unit_scale": True, "unit_divisor": 1024}
    rate = RateWindow()
    with tqdm(total=transfer.expected, desc=label, file=sys.stderr, leave=False, disable=None, **unit) as bar:
        while block := response.read1(CHUNK_BYTES):
            if transfer.received == 0 and _looks_like_html(block) and not _is_html_file(label):
                raise FetchError("the server answered with an HTML page, not the file: a captive portal?")
            transfer.received += len(block)
            if transfer.received > max_bytes:
                raise FetchError(f"the transfer passed this file's bound of {max_bytes} bytes; stopped")
            out.write(block)
            transfer.digest.update(block)
            bar.update(len(block))
            rate.add(len(block), transfer.received)


def stream(url: str, out: IO[bytes], label: str, max_bytes: int, pinned: bool) -> tuple[str, int]:
    """Copy ``url`` into ``out`` with a progress bar: (sha256, bytes). FetchError (without the manual step) when the
    server cannot be reached or answers with an error or an HTML page, announces or sends more than ``max_bytes``,
    stops answering for TIMEOUT_S, goes slower than MIN_RATE_BYTES_S, sends less than it announced, or (for a file
    whose sha256 is not ``pinned``) does not say how long the file is, so that a transfer cut short would pass."""
    transfer = Transfer()
    try:
        with urllib.request.urlopen(request(url), timeout=TIMEOUT_S) as response:
            transfer.expected = announced_length(response, label, max_bytes, pinned)
            copy_body(response, out, label, max_bytes, transfer)
    except urllib.error.HTTPError as error:
        raise FetchError(f"HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:  # offline, no such host, refused
        raise FetchError(f"cannot reach it ({error.reason})") from None
    except TimeoutError:
        raise FetchError(f"no answer within {TIMEOUT_S} s after {transfer.received} bytes") from None
    except (http.client.HTTPException, OSError) as error:  # a chunked transfer cut short, a reset, a full disk
        broke = f"{type(error).__name__}: {error}"
        raise FetchError(f"the transfer broke after {transfer.received} bytes ({broke})") from None
    if transfer.expected is not None and transfer.received != transfer.expected:
        raise FetchError(f"the transfer stopped after {transfer.received} of {transfer.expected} bytes")
    return transfer.digest.hexdigest(), transfer.received
