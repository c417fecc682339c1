"""Chinese word segmentation with jieba: the dictionaries load once per process, each segmenter caches per text."""

from __future__ import annotations

import logging
from functools import cache, lru_cache
from pathlib import Path

import jieba

from workbench.checks import check_int
from workbench.text_files import read_lines

jieba.setLogLevel(logging.WARNING)

DEFAULT_CACHE_SIZE = 200_000


@cache
def _jieba_tokenizers(user_dict: str | None):
    """The jieba tokenizer and POS tokenizer of one user dictionary (None: jieba's default ones), loaded once."""
    import jieba.posseg  # about a second: on first use only

    tokenizer = jieba.dt if user_dict is None else jieba.Tokenizer()
    tokenizer.initialize()
    if user_dict is not None:
        tokenizer.load_userdict(user_dict)
    return tokenizer, jieba.posseg.dt if user_dict is None else jieba.posseg.POSTokenizer(tokenizer)


class JiebaSegmenter:
    """Segments Chinese text into jieba words with part-of-speech tags.

    Args:
        user_dict: a jieba user dictionary (UTF-8, ``word [freq] [tag]`` a line), or None.
        pos: False: words from the faster ``jieba.cut``, tag "".
        cache_size: distinct texts whose segmentation is kept (LRU).
    """

    def __init__(self, user_dict: str | Path | None = None, pos: bool = True, cache_size: int = DEFAULT_CACHE_SIZE):
        if user_dict is not None:
            list(read_lines(user_dict, "user_dict"))  # a ValueError unless the file exists and is UTF-8 text
        self.user_dict = None if user_dict is None else str(Path(user_dict).resolve())
        self.pos = pos
        self.cache_size = check_int("cache_size", cache_size, 1)
        self._segment_cached = lru_cache(maxsize=cache_size)(self._segment_uncached)

    def __reduce__(self):
        """Pickled by its settings (for datasets' processes), with an empty cache."""
        return JiebaSegmenter, (self.user_dict, self.pos, self.cache_size)

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
