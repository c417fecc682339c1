"""What is a secret, and what the workbench shows in its place: one rule for every file it writes (params.yaml, the
executed notebook and its pages, index.html, summary.csv, metrics.json, run.json, run_config.yaml, results.md) and
every message it prints.

**The rule** (:func:`is_secret`) reads a key as words: camelCase, dashes, dots and spaces split it, case is ignored
(``hubToken``, ``HFToken``, ``hub-token``, ``X-API-Key`` -> ``hub token``, ``hf token``, ``hub token``,
``x api key``). A key names a secret when

* one of its words is a credential word (:data:`CREDENTIAL_WORDS`: ``password``, ``passphrase``, ``pwd``, ``secret``,
  ``credentials``, ``authorization``, ``auth``, ``bearer``, ``apikey``, ...), or
* its last word is a credential noun (:data:`CREDENTIAL_NOUNS`: ``token(s)``, ``key(s)``, ``pat``, ``signature(s)``,
  ``sig``; a token glued to its qualifier too, ``hftoken``), unless the word before it says the noun is a text's
  token or a data key (:data:`NOT_CREDENTIAL_QUALIFIERS`: ``pad_token``, ``max_tokens``, ``num_tokens``,
  ``text_key``, ...); alone, the singular is a secret (``token``, transformers' rule) and the plural is not
  (``tokens``: a text's, ``keys``: a mapping's).

So ``hub_token``, ``access_tokens``, ``api-key``, ``x-api-key``, ``private_key``, ``openai_key``, ``github_pat``,
``db_password`` are secrets; ``tokenizer``, ``max_tokens``, ``num_tokens``, ``pad_token``, ``key_column``,
``hub_model_id`` are not. An unknown qualifier counts as a secret: a name is hidden in doubt, never shown in doubt.

**What is shown** (:func:`redact`): the whole value under a secret key, whatever its type (a string, a list, a
mapping, a number), becomes its mark ``<HUB_TOKEN>`` (the key in capitals, as ``TrainingArguments.to_dict`` writes
it); a value that holds nothing (None, an empty string or collection, a bool) or is its mark already stays, and so
does a number under a ``token`` name (a token is a text: ``has_token: 1.0`` is a measure; a number under
``password`` or ``api_key`` is hidden). A message
shows a value given under a key through :func:`shown`.

**A URL** is shown by :func:`shown_url`: its user information (``https://user:token@mirror/...``) becomes
``<CREDENTIALS>`` and the value of each query parameter under a secret key (``?token=...``, ``&api_key=...``: the rule
above) its mark; the scheme, host, path and the other parameters stay, so the message still names the server and the
file. :func:`url_secrets` gives those texts for :func:`scrub`, for a message someone else wrote about the URL.
Imports nothing of the workbench.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote_plus, urlsplit

CREDENTIAL_WORDS = frozenset(
    {
        "password",
        "passwords",
        "passwd",
        "passphrase",
        "passcode",
        "pwd",
        "secret",
        "secrets",
        "credential",
        "credentials",
        "creds",
        "authorization",
        "auth",
        "bearer",
        "apikey",
        "apikeys",
        "privatekey",
        "accesskey",
        "secretkey",
    }
)
"""Words that make a key a secret wherever they stand in it."""
CREDENTIAL_NOUNS = frozenset({"token", "tokens", "key", "keys", "pat", "signature", "signatures", "sig"})
"""Words that make a key a secret as its last word (``hub_token``, ``api_key``, ``github_pat``, a signed URL's
``X-Amz-Signature`` and ``sig``)."""
NOT_CREDENTIAL_QUALIFIERS = frozenset(
    {
        # a tokenizer's special tokens and its vocabulary
        *("pad", "unk", "cls", "sep", "mask", "bos", "eos", "special", "added", "sub", "vocabulary", "vocab"),
        # counts and measures of tokens
        *("max", "min", "num", "n", "count", "total", "mean", "rate", "masked", "input", "output", "prompt"),
        *("completion", "span", "align", "word", "char", "level"),
        # a column, field or lookup key of data
        *("text", "label", "sort", "primary", "foreign", "sweep", "column", "group", "metric", "cache", "dict"),
        *("encoder", "decoder", "index", "lookup", "hash", "row", "field", "item", "join"),
    }
)
"""Words before ``token`` / ``key`` that make it a text's token or a data key, not a credential."""
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_GLUED = re.compile(r"^(.+?)(tokens?)$")


def key_words(key: Any) -> list[str]:
    """``key`` as lower-case words: camelCase, dashes, dots, underscores and spaces split it (``X-API-Key`` ->
    ``["x", "api", "key"]``, ``HFToken`` -> ``["hf", "token"]``)."""
    return [word.lower() for word in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub("_", str(key))) if word]


def _secret_noun(key: Any) -> str | None:
    """The word that makes ``key`` a secret: its credential word, or its last word, a credential noun (the module
    docstring's rule); None when ``key`` names no secret."""
    words = key_words(key)
    credential = next((word for word in words if word in CREDENTIAL_WORDS), None)
    if credential or not words:
        return credential
    *before, last = words
    glued = _GLUED.match(last) if last not in CREDENTIAL_NOUNS else None
    if glued:  # hftoken, hubtoken, authtoken: the noun glued to its qualifier
        before, last = [*before, glued.group(1)], glued.group(2)
    if last not in CREDENTIAL_NOUNS:
        return None
    if not before:  # token, key, pat: a secret; tokens, keys alone: a text's tokens, a mapping's keys
        return None if last.endswith("s") else last
    return None if before[-1] in NOT_CREDENTIAL_QUALIFIERS else last


def is_secret(key: Any) -> bool:
    """Whether ``key`` names a secret (the module docstring's rule)."""
    return _secret_noun(key) is not None


def secret_mark(key: Any) -> str:
    """What a written file shows for the secret under ``key``: ``<HUB_TOKEN>``, as TrainingArguments.to_dict writes."""
    return f"<{str(key).upper()}>"


def holds_secret(key: Any, value: Any) -> bool:
    """Whether ``value`` under the secret ``key`` holds something to hide: not None, an empty string or collection, a
    bool or the key's mark, nor a number under a ``token`` name (``has_token: 1.0``: a token is a text, a number there
    is a count or a rate of a text's tokens)."""
    if value is None or isinstance(value, bool) or value == secret_mark(key):
        return False
    if isinstance(value, numbers.Real) and _secret_noun(key) in ("token", "tokens"):
        return False
    return not (isinstance(value, (str, bytes, Mapping, list, tuple, set)) and len(value) == 0)


def redact(value: Any) -> Any:
    """``value`` (mappings and lists at any depth) with the whole value under each key :func:`is_secret` names, of
    any type, replaced by its :func:`secret_mark`; everything else as it was."""
    if isinstance(value, Mapping):
        return {
            key: secret_mark(key) if is_secret(key) and holds_secret(key, item) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return type(value)(redact(item) for item in value)
    return value


def last_key(name: str) -> str:
    """The last key of a dotted name or an override (``training.hub_token`` -> ``hub_token``, ``x[0]`` -> ``x``)."""
    return re.sub(r"(\[\d+\])+$", "", str(name).rsplit(".", 1)[-1]).lstrip("-")


def shown(name: str, value: Any) -> Any:
    """What a message shows of ``value`` given as ``name`` (a key or a dotted name such as ``training.hub_token``):
    its mark when the name's last key is a secret, else :func:`redact`-ed."""
    key = last_key(name)
    return secret_mark(key) if is_secret(key) and holds_secret(key, value) else redact(value)


def secret_items(value: Any, path: tuple[str, ...] = ()) -> Iterable[tuple[str, Any]]:
    """(dotted key, value) of every secret in ``value`` (a value :func:`holds_secret` under a key :func:`is_secret`
    names), at any depth of its mappings and lists."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if is_secret(key) and holds_secret(key, item):
                yield ".".join((*path, str(key))), item
            else:
                yield from secret_items(item, (*path, str(key)))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from secret_items(item, (*path, str(index)))


def secret_texts(value: Any) -> list[str]:
    """Every text (a string, or a number written out) inside the secrets of ``value``, longest first: what
    :func:`scrub` removes from a message that may quote them."""
    texts: set[str] = set()

    def leaves(item: Any) -> None:
        if isinstance(item, Mapping):
            for inner in item.values():
                leaves(inner)
        elif isinstance(item, (list, tuple, set)):
            for inner in item:
                leaves(inner)
        elif item is not None and not isinstance(item, bool) and str(item):
            texts.add(str(item))

    for _, secret in secret_items(value):
        leaves(secret)
    return sorted(texts, key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` (:func:`secret_texts`) replaced by ``<SECRET>``: for a message written by
    code that did not know it quoted one (an exception from a library or a notebook's kernel)."""
    for secret in secrets:
        text = text.replace(secret, "<SECRET>")
    return text


USER_INFO_MARK = "<CREDENTIALS>"
"""What a URL shows in place of its user information (``user:password@``, ``token@``)."""


def _user_info(url: str) -> str | None:
    """The user information of ``url`` (``user:password`` of ``https://user:password@host/``), None when it has
    none."""
    netloc = urlsplit(url).netloc if "://" in url else ""
    user_info, at, _ = netloc.rpartition("@")
    return user_info if at else None


def _query_parameters(url: str) -> list[tuple[str, str]]:
    """``(key, value)`` of each parameter of the query of ``url`` as written (``&`` or ``;`` between them)."""
    query = urlsplit(url).query
    pairs = (part.partition("=") for part in re.split(r"[&;]", query) if part)
    return [(key, value) for key, _, value in pairs]


def shown_url(url: str) -> str:
    """``url`` as a message or a written record shows it: its user information as :data:`USER_INFO_MARK`, the value
    of each query parameter under a secret key (:func:`is_secret` of the key) as the key's mark
    (``?token=<TOKEN>``); everything else as written. A text that is no URL comes back as it is."""
    url = str(url)
    user_info = _user_info(url)
    if user_info is not None:
        scheme, _, rest = url.partition("://")
        url = f"{scheme}://{USER_INFO_MARK}@{rest.removeprefix(user_info + '@')}"
    base, question, query_and_fragment = url.partition("?")
    if not question:
        return url
    query, hash_mark, fragment = query_and_fragment.partition("#")
    parts = []
    for part in re.split(r"([&;])", query):
        key, equals, value = part.partition("=")
        secret = equals and value and is_secret(unquote_plus(key))
        parts.append(f"{key}={secret_mark(unquote_plus(key))}" if secret else part)
    return f"{base}?{''.join(parts)}{hash_mark}{fragment}"


def url_secrets(url: str) -> list[str]:
    """The secret texts of ``url``, longest first, as written and percent-decoded: its user information, its password
    (or the user alone, a token, when no password follows it) and each value of a query parameter under a secret key;
    for :func:`scrub`."""
    texts: set[str] = set()
    user_info = _user_info(str(url))
    if user_info:
        user, colon, password = user_info.partition(":")
        texts |= {user_info, password} if colon else {user_info}
    texts |= {value for key, value in _query_parameters(str(url)) if value and is_secret(unquote_plus(key))}
    texts |= {unquote_plus(text) for text in texts}
    return sorted((text for text in texts if text), key=len, reverse=True)
