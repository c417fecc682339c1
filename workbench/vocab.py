"""The one tokenizer entry point: :func:`load_tokenizer`.

The package ships a small Chinese character vocabulary (``resources/vocab.txt``,
4,500 tokens: the most frequent characters of a Chinese news corpus, ASCII and
punctuation; rebuilt by ``scripts/build_vocab.py``) so that the default run and
the tests need no download. Point ``vocab_file`` at the standard 21,128-token
Chinese BERT vocabulary, or ``model_name_or_path`` at a checkpoint (its own
tokenizer, e.g. ``models/workbench-zh-mini``), for real experiments.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

from transformers import AutoTokenizer, BertTokenizerFast, PreTrainedTokenizerBase

from workbench.hub import check_hub_model
from workbench.text_files import read_lines

CHARS_PER_TOKEN = 100  # a WordPiece token covers at most 100 characters of a word (a longer word is one [UNK])


def clip_texts(texts: list[str | None], max_length: int) -> list[str | None]:
    """Each text cut to ``max_length`` x :data:`CHARS_PER_TOKEN` characters before tokenizing: the first ``max_length``
    tokens come from within them (but for runs of whitespace that long), and a 20M-character text no longer takes
    13.5 GB to tokenize only to be truncated."""
    bound = max_length * CHARS_PER_TOKEN
    return [text[:bound] if isinstance(text, str) else text for text in texts]


def default_vocab_file() -> Path:
    """Path of the small Chinese vocabulary shipped with the package."""
    return Path(str(resources.files("workbench") / "resources" / "vocab.txt"))


@lru_cache(maxsize=8)
def _cached_tokenizer(vocab_file: str, do_lower_case: bool) -> BertTokenizerFast:
    tokens = [line.rstrip("\r\n") for _, line in read_lines(vocab_file, "vocab_file")]  # UTF-8, else file:line
    vocab = {token: index for index, token in enumerate(tokens)}
    if len(vocab) < len(tokens) or not vocab.keys() >= {
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    }:  # ids without gaps
        raise ValueError(
            f"vocab_file: {vocab_file!r} must hold distinct tokens, one a line, [PAD] [UNK] [CLS] [SEP] [MASK] too"
        )
    return BertTokenizerFast(vocab=vocab, do_lower_case=do_lower_case, tokenize_chinese_chars=True)


def load_tokenizer(
    model_name_or_path: str | Path | None = None,
    vocab_file: str | Path | None = None,
    do_lower_case: bool = True,
    key: str = "model.model_name_or_path",
) -> PreTrainedTokenizerBase:
    """The tokenizer of a checkpoint or of a WordPiece vocabulary.

    Args:
        model_name_or_path: a checkpoint folder or hub name: its own tokenizer (``AutoTokenizer``).
        vocab_file: without a checkpoint, a WordPiece vocabulary (one token a line); None: the
            shipped vocabulary. Chinese characters are split one per token.
        do_lower_case: lower-case the text first (vocabulary tokenizers only).
        key: the config key ``model_name_or_path`` came from, which errors name.

    Returns:
        The tokenizer (vocabulary tokenizers are cached per file). Raises ValueError when both are given,
        naming the vocabulary file (missing, not UTF-8, no special tokens) or ``key`` for an unreadable checkpoint or a
        hub name the hub does not answer for in bounded time (:func:`workbench.hub.check_hub_model`).
    """
    if model_name_or_path is not None:
        if vocab_file is not None:
            raise ValueError(f"vocab_file: must be None when model_name_or_path is given, got {str(vocab_file)!r}")
        check_hub_model(str(model_name_or_path), key)
        try:
            return AutoTokenizer.from_pretrained(str(model_name_or_path))
        except Exception as error:  # a broken tokenizer.json (JSON, tokenizers' own errors), no such model
            raise ValueError(f"{key}: {str(model_name_or_path)!r}: no readable tokenizer ({error})") from None
    path = Path(vocab_file) if vocab_file is not None else default_vocab_file()
    return _cached_tokenizer(str(path.resolve()), do_lower_case)
