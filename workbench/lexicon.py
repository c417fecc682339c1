"""Synonym tables for the true-negative MLM objectives (hard correction, soft regularization).

A :class:`SynonymTable` is a set of synonym groups; two different words are
synonyms when some group holds both. Three sources:

- HIT Tongyici Cilin (extended), ``from_cilin``: ``Aa01A01= w1 w2 ...``; only
  ``=`` lines are synonym groups (``#`` lines are related words, ``@`` lines a
  single word).
- WordNet synsets as TSV, ``from_wordnet_tsv``: ``synset_id<TAB>pos<TAB>member...``;
  underscores in multiword members become spaces.
- Word embeddings, ``from_embeddings``: each word's top-k cosine neighbours
  above a threshold (the paper's Word2Vec-style variant), made symmetric.

``SynonymTable.default()`` loads a tiny Cilin-format lexicon shipped with the
package (``resources/lexicon_tiny.txt``, about 100 common groups) for tests and
the default run; pass real lexicons by path.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import torch

_CILIN_LINE = re.compile(r"^(?P<code>\S+?)(?P<flag>[=#@])\s*(?P<members>.*)$")


def _read_lines(path: str | Path) -> list[str]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"path: no such lexicon file {str(path)!r}")
    return path.read_text(encoding="utf-8").splitlines()


class SynonymTable:
    """Synonym groups with symmetric look-up; a word is never its own synonym."""

    def __init__(self, groups: Iterable[Iterable[str]]):
        self._groups: list[frozenset[str]] = []
        self._groups_of: dict[str, list[int]] = {}
        for group in groups:
            members = frozenset(word for word in group if word)
            if len(members) < 2:
                continue
            index = len(self._groups)
            self._groups.append(members)
            for word in members:
                self._groups_of.setdefault(word, []).append(index)

    def __len__(self) -> int:
        """Number of synonym groups."""
        return len(self._groups)

    def __contains__(self, word: str) -> bool:
        return word in self._groups_of

    def synonyms(self, word: str) -> set[str]:
        """Every word sharing a group with ``word``, without ``word`` itself."""
        found: set[str] = set()
        for index in self._groups_of.get(word, ()):
            found |= self._groups[index]
        found.discard(word)
        return found

    def are_synonyms(self, a: str, b: str) -> bool:
        """True when ``a != b`` and some group holds both (symmetric)."""
        if a == b:
            return False
        groups_a = self._groups_of.get(a)
        groups_b = self._groups_of.get(b)
        return bool(groups_a and groups_b and not set(groups_a).isdisjoint(groups_b))

    @classmethod
    def from_cilin(cls, path: str | Path) -> SynonymTable:
        """Load the ``=`` groups of a HIT Cilin (extended) file; ``#`` and ``@`` lines are skipped."""
        groups = []
        for number, line in enumerate(_read_lines(path), start=1):
            line = line.strip().lstrip("\ufeff")
            if not line:
                continue
            match = _CILIN_LINE.match(line)
            if match is None:
                raise ValueError(f"path: line {number} of {str(path)!r} is not Cilin format 'Aa01A01= w1 w2 ...'")
            if match["flag"] == "=":
                groups.append(match["members"].split())
        return cls(groups)

    @classmethod
    def from_wordnet_tsv(cls, path: str | Path) -> SynonymTable:
        """Load synsets from ``synset_id<TAB>pos<TAB>member<TAB>...`` lines (``#`` lines are comments)."""
        groups = []
        for number, line in enumerate(_read_lines(path), start=1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) < 3:
                raise ValueError(f"path: line {number} of {str(path)!r} needs synset_id, pos and members")
            groups.append(" ".join(member.replace("_", " ").split()) for member in fields[2:])
        return cls(groups)

    @classmethod
    def from_embeddings(
        cls, matrix: np.ndarray | torch.Tensor, vocab: Sequence[str], k: int = 10, threshold: float = 0.5,
        chunk_size: int = 4096,
    ) -> SynonymTable:
        """Synonyms from word vectors: ``b`` is a synonym of ``a`` when ``b`` is among the ``k``
        nearest neighbours of ``a`` by cosine similarity cos(a, b) = a.b / (|a| |b|) and
        cos(a, b) >= ``threshold``; the relation is made symmetric (a ~ b if either lists the other).
        Computed in row chunks of ``chunk_size`` with one matrix product each.
        """
        vectors = torch.as_tensor(np.asarray(matrix), dtype=torch.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(vocab):
            raise ValueError(f"matrix must have shape (len(vocab), dim) = ({len(vocab)}, dim), got {tuple(vectors.shape)}")
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        if not -1.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a cosine in [-1, 1], got {threshold}")
        unit = torch.nn.functional.normalize(vectors, dim=1)
        n_neighbours = min(k, len(vocab) - 1)
        pairs = []
        for start in range(0, len(vocab), chunk_size):
            similarity = unit[start : start + chunk_size] @ unit.T
            rows = torch.arange(similarity.shape[0])
            similarity[rows, rows + start] = -float("inf")
            values, neighbours = similarity.topk(n_neighbours, dim=1)
            keep = values >= threshold
            for row, neighbour in zip((rows[:, None] + start).expand_as(neighbours)[keep].tolist(),
                                      neighbours[keep].tolist()):
                pairs.append((vocab[row], vocab[neighbour]))
        return cls(pairs)

    @classmethod
    def from_path(cls, path: str | Path | None) -> SynonymTable:
        """A lexicon file: WordNet TSV for a ``.tsv`` suffix, Cilin otherwise; None: :meth:`default`."""
        if path is None:
            return cls.default()
        return cls.from_wordnet_tsv(path) if Path(path).suffix == ".tsv" else cls.from_cilin(path)

    @classmethod
    def default(cls) -> SynonymTable:
        """The tiny Cilin-format lexicon shipped with the package (``resources/lexicon_tiny.txt``)."""
        return cls.from_cilin(Path(str(resources.files("workbench") / "resources" / "lexicon_tiny.txt")))
