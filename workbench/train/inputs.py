"""Model inputs for the classification trainers: the splits of a config, tokenized."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from datasets import DatasetDict

from workbench.config import Config
from workbench.data import label_names, load_splits
from workbench.vocab import load_tokenizer


def tokenize_splits(splits: DatasetDict, tokenizer: Any, max_length: int) -> DatasetDict:
    """Tokenize ``text`` (and ``text_pair``) truncated to ``max_length``; ``label`` becomes ``labels``.

    Only model inputs and ``labels`` remain; padding happens per batch in the collator.
    """

    def encode(batch: dict[str, list]) -> dict[str, list]:
        pairs = batch.get("text_pair")
        encoded = tokenizer(batch["text"], pairs, truncation=True, max_length=max_length)
        encoded["labels"] = batch["label"]
        return dict(encoded)

    return DatasetDict(
        {
            name: split.map(encode, batched=True, remove_columns=split.column_names, desc=f"tokenize {name}")
            for name, split in splits.items()
        }
    )


@dataclass
class ClassificationData:
    """A config's labelled splits, their label names, the model's tokenizer and the tokenized splits."""

    splits: DatasetDict
    names: list[str]
    tokenizer: Any
    encoded: DatasetDict


def classification_data(config: Config, splits: DatasetDict | None = None) -> ClassificationData:
    """Load ``config.data``'s splits (or take ``splits``) and tokenize them with ``config.model``'s tokenizer."""
    splits = load_splits(config.data) if splits is None else splits
    tokenizer = load_tokenizer(config.model.model_name_or_path, config.model.vocab_file)
    encoded = tokenize_splits(splits, tokenizer, config.data.max_length)
    return ClassificationData(splits, label_names(splits["train"]), tokenizer, encoded)
