"""Model inputs for the classification trainers: the splits of a config, tokenized."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from typing import Any

from datasets import Dataset, DatasetDict

from workbench.config import Config
from workbench.data import label_names, load_splits, shared_with_train
from workbench.vocab import load_tokenizer

UNREADABLE_SHARE = 0.1  # a split with more than this share of unreadable samples gets a warning


def unreadable_share(encoded: Dataset, tokenizer: Any) -> float:
    """Share of samples whose tokens (special tokens aside) are mostly ``[UNK]`` or single Latin letters
    (e.g. English split into letters by a Chinese character vocabulary)."""
    letter = re.compile(r"(##)?[A-Za-z]")
    unreadable = {i for token, i in tokenizer.get_vocab().items() if token == tokenizer.unk_token or letter.fullmatch(token)}
    special = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}
    tokens = ([i for i in ids if i not in special] for ids in encoded["input_ids"])
    return sum(bool(row) and sum(i in unreadable for i in row) > len(row) / 2 for row in tokens) / max(len(encoded), 1)


def tokenize_splits(splits: DatasetDict, tokenizer: Any, max_length: int) -> DatasetDict:
    """Tokenize ``text`` (and ``text_pair``) to at most ``max_length`` tokens, unpadded, ``label`` -> ``labels``;
    one warning names the splits the vocabulary cannot read (:func:`unreadable_share` > ``UNREADABLE_SHARE``)."""

    def encode(batch: dict[str, list]) -> dict[str, list]:
        encoded = tokenizer(batch["text"], batch.get("text_pair"), truncation=True, max_length=max_length)
        return {**encoded, "labels": batch["label"]}

    encoded = DatasetDict(
        {
            name: split.map(encode, batched=True, remove_columns=split.column_names, desc=f"tokenize {name}")
            for name, split in splits.items()
        }
    )
    shares = {name: unreadable_share(split, tokenizer) for name, split in encoded.items()}
    unreadable = ", ".join(f"{share:.0%} of {name}" for name, share in shares.items() if share > UNREADABLE_SHARE)
    if unreadable:
        warnings.warn(
            f"text the vocabulary cannot read: {unreadable} samples are mostly [UNK] or single Latin letters; use a vocabulary "
            "that fits the language (model.vocab_file) or a model.model_name_or_path whose tokenizer does",
            stacklevel=2,
        )
    return encoded


@dataclass
class ClassificationData:
    """A config's splits, label names, tokenizer, tokenized splits, ``data.is_ordinal``, rows shared with train."""

    splits: DatasetDict
    names: list[str]
    tokenizer: Any
    encoded: DatasetDict
    ordinal: bool = False
    shared_with_train: dict[str, int] = field(default_factory=dict)


def classification_data(config: Config, splits: DatasetDict | None = None) -> ClassificationData:
    """Load ``config.data``'s splits (or take ``splits``) and tokenize them with ``config.model``'s tokenizer;
    a split sharing rows with train gets a warning with the count."""
    splits = load_splits(config.data) if splits is None else splits
    shared = shared_with_train(splits)
    if any(shared.values()):
        counts = ", ".join(f"{name} {count} of {len(splits[name])}" for name, count in shared.items() if count)
        warnings.warn(
            f"rows shared with train (text, text_pair): {counts}; workbench.data.deduplicate_splits removes them", stacklevel=2
        )
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    encoded = tokenize_splits(splits, tokenizer, config.data.max_length)
    return ClassificationData(splits, label_names(splits["train"]), tokenizer, encoded, config.data.is_ordinal, shared)
