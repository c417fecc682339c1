"""Synonym tables for the true-negative MLM objectives (hard correction, soft regularization).

A :class:`SynonymTable` is a set of synonym groups; two different words are synonyms when some group holds both.
Sources: HIT Tongyici Cilin (extended) ``=`` groups, WordNet synsets as TSV, each word's top-k cosine neighbours
in word vectors, and a tiny Cilin-format lexicon shipped for tests and the default run (``default``).
Hard correction compares token ids on the device through :class:`SynonymIdIndex` (``table.id_index``). Tables
and indexes grow linearly with the lexicon (its (word, group) memberships), whatever the size of a group.
"""

from __future__ import annotations

import re
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from workbench.checks import check_int, check_number
from workbench.data.root_files import check_root_file
from workbench.data_root import expand_data_root
from workbench.text_files import read_lines

_CILIN_LINE = re.compile(r"^(?P<code>\S+?)(?P<flag>[=#@])\s*(?P<members>.*)$")


class SynonymTable:
    """Synonym groups with symmetric look-up; a word is never its own synonym."""

    def __init__(self, groups: Iterable[Iterable[str]]):
        self._groups: list[frozenset[str]] = []
        self._groups_of: dict[str, list[int]] = {}
        for group in groups:
            members = frozenset(word for word in group if word)
            if len(members) < 2:
                continue
            for word in members:
                self._groups_of.setdefault(word, []).append(len(self._groups))
            self._groups.append(members)
        self._id_indexes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __getstate__(self) -> dict:
        """Pickled without the id indexes (weak references to tokenizers); they are rebuilt on use."""
        return {key: value for key, value in self.__dict__.items() if key != "_id_indexes"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._id_indexes = weakref.WeakKeyDictionary()

    def __len__(self) -> int:
        """Number of synonym groups."""
        return len(self._groups)

    def __contains__(self, word: str) -> bool:
        return word in self._groups_of

    @property
    def groups(self) -> list[frozenset[str]]:
        """The synonym groups (each with at least two words)."""
        return list(self._groups)

    def synonyms(self, word: str) -> set[str]:
        """Every word sharing a group with ``word``, without ``word`` itself."""
        found = set().union(*(self._groups[index] for index in self._groups_of.get(word, ())))
        found.discard(word)
        return found

    def are_synonyms(self, a: str, b: str) -> bool:
        """True when ``a != b`` and some group holds both (symmetric)."""
        return a != b and not set(self._groups_of.get(a, ())).isdisjoint(self._groups_of.get(b, ()))

    @classmethod
    def from_cilin(cls, path: str | Path) -> SynonymTable:
        """The ``=`` groups of a HIT Cilin (extended) file (``Aa01A01= w1 w2 ...``); ``#`` and ``@`` lines are
        skipped."""
        groups = []
        for number, line in read_lines(path):
            if not line.strip():
                continue
            match = _CILIN_LINE.match(line.strip())
            if match is None:
                raise ValueError(f"{path}:{number}: not Cilin format 'Aa01A01= w1 w2 ...'")
            if match["flag"] == "=":
                groups.append(match["members"].split())
        return cls(groups)

    @classmethod
    def from_wordnet_tsv(cls, path: str | Path) -> SynonymTable:
        """Synsets from ``synset_id<TAB>pos<TAB>member<TAB>...`` lines (``#`` starts a comment; ``_`` in a member
        is a space)."""
        groups = []
        for number, line in read_lines(path):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split("\t")
            if len(fields) < 3:
                raise ValueError(f"{path}:{number}: needs synset_id, pos and members separated by tabs")
            groups.append(" ".join(member.replace("_", " ").split()) for member in fields[2:])
        return cls(groups)

    @classmethod
    def from_embeddings(
        cls,
        matrix: np.ndarray | torch.Tensor,
        vocab: Sequence[str],
        k: int = 10,
        threshold: float | None = None,
        chunk_size: int = 4096,
    ) -> SynonymTable:
        """``b`` is a synonym of ``a`` when among the ``k`` nearest neighbours of ``a`` by cosine a.b / (|a| |b|)
        (and at least ``threshold``), made symmetric: the threshold and the symmetry are the workbench's adaptations;
        k = 10 is the true-negatives paper's (footnote 11: "the top 10 most similar words for each retrieval").
        ``chunk_size`` rows per matrix product."""
        vectors = torch.as_tensor(np.asarray(matrix), dtype=torch.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(vocab):
            raise ValueError(
                f"matrix: must have shape (len(vocab), dim) = ({len(vocab)}, dim), got {tuple(vectors.shape)}"
            )
        check_int("k", k, 1)
        check_number("threshold", threshold, -1.0, 1.0, allow_none=True)
        unit = torch.nn.functional.normalize(vectors, dim=1)
        pairs = []
        for start in range(0, len(vocab), chunk_size):
            similarity = unit[start : start + chunk_size] @ unit.T
            rows = torch.arange(similarity.shape[0])
            similarity[rows, rows + start] = -float("inf")
            values, neighbours = similarity.topk(min(k, len(vocab) - 1), dim=1)
            keep = torch.isfinite(values) if threshold is None else values >= threshold
            for row, neighbour in zip(
                (rows[:, None] + start).expand_as(neighbours)[keep].tolist(), neighbours[keep].tolist()
            ):
                pairs.append((vocab[row], vocab[neighbour]))
        return cls(pairs)

    @classmethod
    def from_path(cls, path: str | Path | None) -> SynonymTable:
        """The lexicon at ``path``.

        Args:
            path: a WordNet-style TSV (``.tsv``, ``.tsv.gz``), a Cilin file (anything else), or None; a path under the
                data root may be written ``$WORKBENCH_DATA/cilin/cilin_ex.txt``.

        Returns:
            The :class:`SynonymTable`; None gives the shipped tiny table (:meth:`default`). A file of no group of
            two or more words (HC would be plain MLM) is a ValueError naming it. A lexicon of the data root
            (``cilin/cilin_ex.txt``, ``wordnet/synsets.tsv``) is checked as a data set's file is: one that differs
            from its pinned sha256 (or changed since its fetch) gets a warning naming it
            (``workbench.data.root_files.check_root_file``).
        """
        if path is None:
            return cls.default()
        path = expand_data_root(str(path))
        check_root_file(path, instead="name a lexicon file of your own")
        table = cls.from_wordnet_tsv(path) if str(path).removesuffix(".gz").endswith(".tsv") else cls.from_cilin(path)
        if not table.groups:
            raise ValueError(f"lexicon: {str(path)!r} holds no synonym group of two or more words")
        return table

    @classmethod
    def default(cls) -> SynonymTable:
        """The tiny Cilin-format lexicon shipped with the package (``resources/lexicon_tiny.txt``)."""
        return cls.from_cilin(Path(str(resources.files("workbench") / "resources" / "lexicon_tiny.txt")))

    def id_index(self, tokenizer: Any) -> SynonymIdIndex:
        """The :class:`SynonymIdIndex` of this table for ``tokenizer``, built on first use and kept per tokenizer."""
        index = self._id_indexes.get(tokenizer)
        if index is None:
            index = self._id_indexes[tokenizer] = SynonymIdIndex(self, tokenizer)
        return index


# Two polynomial string hashes mod primes below 2**31, combined into one 62-bit key: a product
# of a hash and a power stays below 2**62, so int64 tensor arithmetic never overflows.
HASH_MODULI = (2_147_483_647, 2_147_483_629)
HASH_BASES = (911_382_323, 972_663_749)
_KEY_SHIFT = 31


def text_hashes(text: str) -> tuple[int, int]:
    """``(h_0, h_1)``: ``h_m = sum_i (ord(c_i) + 1) * B_m**(n - 1 - i) mod P_m`` over the ``n``
    characters ``c_i`` of ``text`` (``HASH_BASES``, ``HASH_MODULI``)."""
    first = 0
    second = 0
    for code in map(ord, text):
        first = (first * HASH_BASES[0] + code + 1) % HASH_MODULI[0]
        second = (second * HASH_BASES[1] + code + 1) % HASH_MODULI[1]
    return first, second


def text_key(text: str) -> int:
    """The 62-bit key ``h_0 * 2**31 + h_1`` of ``text`` (:func:`text_hashes`)."""
    first, second = text_hashes(text)
    return (first << _KEY_SHIFT) | second


def token_text(tokens: Sequence[str]) -> str:
    """Join WordPiece tokens into the text they spell (``##`` continuation marks removed)."""
    return "".join(token.removeprefix("##") for token in tokens)


class SynonymIdIndex:
    """A :class:`SynonymTable` as tensors over a tokenizer's ids, for look-ups on the device.

    Built once (the paper's "lookup table built offline ... from the model vocabulary"): per vocabulary
    id the text it spells (:func:`token_text`), its length and hashes ``h_m`` (ids at or beyond the
    vocabulary spell no word); the table's words numbered by the rank of their :func:`text_key`; the
    sorted membership codes ``word * G + group`` (G groups), linear in the lexicon. A span's hash is
    ``h_m(span) = sum_j h_m(v_j) * B_m**(chars after v_j) mod P_m``; two different texts share a key
    with probability about ``2**-62``, equal texts always do (a prediction spelling the gold text is
    never a synonym).
    """

    def __init__(self, table: SynonymTable, tokenizer: Any):
        self.table = table
        self.vocab_size = len(tokenizer)
        texts = [token_text([token]) for token in tokenizer.convert_ids_to_tokens(list(range(self.vocab_size)))]
        keyed = sorted((text_key(word), word) for word in table._groups_of)
        if len({key for key, _ in keyed}) != len(keyed):
            raise RuntimeError("two lexicon words share a 62-bit text key; change HASH_BASES")
        groups_of = [table._groups_of[word] for _, word in keyed]
        self.num_words = len(keyed)
        self.num_groups = max(len(table), 1)
        self.max_chars = max((len(word) for _, word in keyed), default=0)
        self.max_groups = max(map(len, groups_of), default=0)  # the most groups a word is in: a query's cost
        self.num_pairs = sum(len(group) * (len(group) - 1) for group in table._groups)  # ordered pairs, per group
        self._cpu = {
            "token_hash": torch.tensor(
                [text_hashes(text) for text in texts] + [(0, 0)], dtype=torch.int64
            ).T.contiguous(),
            "token_chars": torch.tensor([len(text) for text in texts] + [self.max_chars + 1], dtype=torch.int64),
            "powers": torch.tensor(
                [
                    [pow(base, e, modulus) for e in range(self.max_chars + 1)]
                    for base, modulus in zip(HASH_BASES, HASH_MODULI)
                ],
                dtype=torch.int64,
            ),
            "word_keys": torch.tensor([key for key, _ in keyed], dtype=torch.int64),
            "member_codes": torch.tensor(
                sorted(word * self.num_groups + group for word, groups in enumerate(groups_of) for group in groups),
                dtype=torch.int64,
            ),
        }
        self.num_memberships = len(self._cpu["member_codes"])  # the size of the index
        self._on_device: dict[torch.device, dict[str, torch.Tensor]] = {torch.device("cpu"): self._cpu}

    def __repr__(self) -> str:
        return f"SynonymIdIndex(words={self.num_words}, pairs={self.num_pairs})"

    def _tensors(self, device: torch.device) -> dict[str, torch.Tensor]:
        if device not in self._on_device:
            self._on_device[device] = {name: tensor.to(device) for name, tensor in self._cpu.items()}
        return self._on_device[device]

    def span_words(self, token_ids: torch.Tensor, spans: torch.Tensor, num_spans: int) -> torch.Tensor:
        """The table word (its number, or -1) each span spells: position n of ``token_ids`` (N,) is in span ``spans[n]``
        (contiguous runs numbered 0, 1, ... in order). (``num_spans``,) int64 on the device, no host synchronisation."""
        tensors = self._tensors(token_ids.device)
        if self.num_words == 0:
            return torch.full((num_spans,), -1, dtype=torch.int64, device=token_ids.device)
        ids = token_ids.clamp(0, self.vocab_size)  # ids >= vocab_size -> the "too long" marker row
        chars = tensors["token_chars"][ids]
        span_chars = torch.zeros(num_spans, dtype=torch.int64, device=ids.device).scatter_add_(0, spans, chars)
        through = chars.cumsum(0)  # characters up to and including each token, over all spans
        span_start = span_chars.cumsum(0) - span_chars  # characters before each span
        after = (span_chars[spans] - (through - span_start[spans])).clamp(0, self.max_chars)
        key = torch.zeros(num_spans, dtype=torch.int64, device=ids.device)
        for m, modulus in enumerate(HASH_MODULI):
            terms = tensors["token_hash"][m][ids] * tensors["powers"][m][after] % modulus
            hashed = (
                torch.zeros(num_spans, dtype=torch.int64, device=ids.device).scatter_add_(0, spans, terms) % modulus
            )
            key = (key << _KEY_SHIFT) | hashed
        word_keys = tensors["word_keys"]
        position = torch.searchsorted(word_keys, key).clamp(max=self.num_words - 1)
        found = (word_keys[position] == key) & (span_chars <= self.max_chars)
        return torch.where(found, position, -1)

    def are_synonyms(self, first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
        """Elementwise: word numbers ``first`` and ``second`` (:meth:`span_words`) are different words
        and some group of ``first`` holds ``second``; False where either is -1."""
        codes = self._tensors(first.device)["member_codes"]
        groups = self.num_groups
        if self.num_words == 0:
            return torch.zeros_like(first, dtype=torch.bool)
        a = first.clamp(min=0)
        b = second.clamp(min=0)
        start = torch.searchsorted(codes, a * groups)
        stop = torch.searchsorted(codes, (a + 1) * groups)
        member = start[..., None] + torch.arange(self.max_groups, device=first.device)  # the memberships of a
        query = b[..., None] * groups + codes[member.clamp(max=codes.numel() - 1)] % groups  # (b, each group of a)
        found = codes[torch.searchsorted(codes, query).clamp(max=codes.numel() - 1)] == query
        return (first >= 0) & (second >= 0) & (first != second) & (found & (member < stop[..., None])).any(-1)


def synonym_matcher(tokenizer: Any, lexicon: SynonymTable | str | Path | None = None) -> SynonymIdIndex:
    """Hard correction's synonym matcher (``workbench.losses.HardCorrectionLoss(matcher, level)``): ``lexicon`` over
    ``tokenizer``'s ids, built once per table and tokenizer (:meth:`SynonymTable.id_index`).

    Args:
        tokenizer: the model's tokenizer (ids -> text).
        lexicon: a :class:`SynonymTable`, a lexicon file (:meth:`SynonymTable.from_path`: Cilin or WordNet TSV; the
            config's ``objective.lexicon``) or None (the shipped tiny table).

    Returns:
        The :class:`SynonymIdIndex`; ValueError naming ``tokenizer`` (not a tokenizer) or the lexicon file.
    """
    if tokenizer is None or not hasattr(tokenizer, "convert_ids_to_tokens"):
        raise ValueError(f"tokenizer: must be the model's tokenizer (with convert_ids_to_tokens), got {tokenizer!r}")
    table = lexicon if isinstance(lexicon, SynonymTable) else SynonymTable.from_path(lexicon)
    return table.id_index(tokenizer)


# --------------------------------------------------------------------------
# Lexicon files and coverage for notebook 03 (Table 6, second block)
# --------------------------------------------------------------------------

_NOT_IN_A_LEXICON_FILE = re.compile(r"[\s_]")


def write_lexicon_tsv(table: SynonymTable, path: str | Path, prefix: str = "emb") -> Path:
    """Write ``table`` as WordNet-style TSV (``<prefix>NNNNNN<TAB>x<TAB>member...``), which ``objective.lexicon``
    reads for a ``.tsv`` path; groups sorted, a group listed twice written once. Words must hold no white space or
    underscore (WordNet's multi-word separator)."""
    path = Path(path)
    if path.suffix != ".tsv":
        raise ValueError(f"path: must end in .tsv (the suffix from_path reads as WordNet TSV), got {str(path)!r}")
    groups = sorted({tuple(sorted(group)) for group in table.groups})
    bad = sorted({word for group in groups for word in group if _NOT_IN_A_LEXICON_FILE.search(word)})
    if bad:
        raise ValueError(
            f"table: words with white space or underscores cannot be written to a lexicon file, got {bad[:5]}"
        )
    lines = [
        "# synset_id\tpos\tmembers (tab separated): synonym groups written by workbench.synonyms.write_lexicon_tsv"
    ]
    lines += [f"{prefix}{number:06d}\tx\t" + "\t".join(group) for number, group in enumerate(groups)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def lexicon_coverage(
    tables: Mapping[str, SynonymTable],
    documents: Sequence[Sequence[str]],
    vocabulary: Sequence[str] = (),
    reference: str | None = None,
) -> pd.DataFrame:
    """How much of a corpus each synonym source can correct, one row per ``name -> table``: words (with a synonym),
    pairs, corpus_word_types / corpus_word_tokens (share of the distinct / running words of ``documents`` with a
    synonym), corpus_pairs (both words in the corpus), vocabulary_tokens (share of ``vocabulary``, a model's token
    texts, with a synonym: the measure of the true-negatives paper's footnote 5, without its stopword removal) and,
    with ``reference``, in_reference (share of the corpus pairs the reference also lists)."""
    if not tables:
        raise ValueError("tables: must name at least one synonym table, got none")
    if reference is not None and reference not in tables:
        raise ValueError(f"reference: must be one of {list(tables)}, got {reference!r}")
    occurrences = Counter(word for document in documents for word in document)
    rows = []
    for name, table in tables.items():
        pairs = {(a, b) for group in table.groups for a in group for b in group if a < b}
        corpus_pairs = [(a, b) for a, b in pairs if a in occurrences and b in occurrences]
        covered = [word for word in occurrences if word in table]
        row = {
            "source": name,
            "words": len(set().union(*table.groups)),
            "pairs": len(pairs),
            "corpus_word_types": len(covered) / max(len(occurrences), 1),
            "corpus_word_tokens": sum(occurrences[word] for word in covered) / max(sum(occurrences.values()), 1),
            "corpus_pairs": len(corpus_pairs),
            "vocabulary_tokens": sum(token in table for token in vocabulary) / max(len(vocabulary), 1),
        }
        if reference is not None:
            row["in_reference"] = (
                np.mean([tables[reference].are_synonyms(a, b) for a, b in corpus_pairs]) if corpus_pairs else np.nan
            )
        rows.append(row)
    return pd.DataFrame(rows)


def neighbours(tables: Mapping[str, SynonymTable], words: Sequence[str]) -> pd.DataFrame:
    """The synonyms each source lists for each of ``words`` (sorted, space-separated): one row per word, one
    column per source."""
    return pd.DataFrame(
        [{"word": word, **{name: " ".join(sorted(t.synonyms(word))) for name, t in tables.items()}} for word in words]
    )
