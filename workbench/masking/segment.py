"""Chinese word segmentation with jieba, loaded once per process and cached per text.

jieba's dictionary takes about a second to load, so the jieba tokenizers live at
module level (one per user dictionary, built lazily on first use) and are shared
by every :class:`JiebaSegmenter`. Each segmenter also keeps an LRU cache keyed by
the text, so a corpus is segmented once rather than once per epoch.
"""

from __future__ import annotations

import logging
from functools import cache, lru_cache
from pathlib import Path

import jieba

from workbench.checks import check_int

jieba.setLogLevel(logging.WARNING)

DEFAULT_CACHE_SIZE = 200_000


@cache
def _jieba_tokenizers(user_dict: str | None):
    """The (jieba.Tokenizer, jieba.posseg.POSTokenizer) pair for one user dictionary, built once."""
    import jieba.posseg

    if user_dict is None:
        tokenizer, pos_tokenizer = jieba.dt, jieba.posseg.dt
    else:
        tokenizer = jieba.Tokenizer()
        pos_tokenizer = jieba.posseg.POSTokenizer(tokenizer)
    tokenizer.initialize()
    if user_dict is not None:
        tokenizer.load_userdict(user_dict)
    return tokenizer, pos_tokenizer


class JiebaSegmenter:
    """Segments Chinese text into jieba words with part-of-speech tags.

    ``user_dict``: optional jieba user dictionary (``word [freq] [tag]`` per line).
    ``pos``: when False, words come from the faster ``jieba.cut`` and their tag is "".
    ``cache_size``: how many distinct texts keep their segmentation (LRU).
    """

    def __init__(self, user_dict: str | Path | None = None, pos: bool = True, cache_size: int = DEFAULT_CACHE_SIZE):
        if user_dict is not None and not Path(user_dict).is_file():
            raise ValueError(f"user_dict: no such file {str(user_dict)!r}")
        check_int("cache_size", cache_size, 1)
        self.user_dict = None if user_dict is None else str(Path(user_dict).resolve())
        self.pos = pos
        self._segment_cached = lru_cache(maxsize=cache_size)(self._segment_uncached)

    def _segment_uncached(self, text: str) -> tuple[tuple[str, str], ...]:
        tokenizer, pos_tokenizer = _jieba_tokenizers(self.user_dict)
        if self.pos:
            return tuple((pair.word, pair.flag) for pair in pos_tokenizer.cut(text))
        return tuple((word, "") for word in tokenizer.cut(text))

    def segment(self, text: str) -> list[tuple[str, str]]:
        """``[(word, pos_tag), ...]`` covering ``text`` exactly (the words join back to it)."""
        return list(self._segment_cached(text))

    def words(self, text: str) -> list[str]:
        """The jieba words of ``text``."""
        return [word for word, _ in self._segment_cached(text)]

    def cache_info(self):
        """Hits and misses of the per-text cache (``functools.lru_cache`` statistics)."""
        return self._segment_cached.cache_info()
