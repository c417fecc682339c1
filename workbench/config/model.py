"""The ``model`` section: a transformer (a tiny BERT, or a checkpoint) or the character probe, with their sizes."""

from __future__ import annotations

import os
from dataclasses import dataclass

from workbench.config.sections import Section, option

MODEL_KINDS = ("transformer", "probe")


@dataclass(frozen=True)
class TinyConfig(Section, prefix="model.tiny"):
    """A randomly initialised tiny BERT, sized for a CPU."""

    num_layers: int = option(2, "transformer layers", ge=1)
    hidden_size: int = option(64, "hidden size (a multiple of num_heads)", ge=1)
    num_heads: int = option(2, "attention heads", ge=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.hidden_size % self.num_heads:
            raise ValueError(
                f"model.tiny.hidden_size: must be a multiple of num_heads={self.num_heads}, got {self.hidden_size}"
            )


@dataclass(frozen=True)
class ProbeConfig(Section, prefix="model.probe"):
    """The bag-of-characters probe (``model.kind: probe``): fast enough for many seeds on a CPU."""

    embedding_size: int = option(32, "character embedding size", ge=1)
    hidden_size: int | None = option(64, "hidden layer of the head; null: a linear head (fastText)", ge=1)


@dataclass(frozen=True)
class ModelConfig(Section, prefix="model"):
    """Which model is trained: a transformer (tiny, or a checkpoint) or the character probe."""

    kind: str = option(
        "transformer", "transformer (tiny or a checkpoint) or probe (bag of characters)", choices=MODEL_KINDS
    )
    model_name_or_path: str | None = option(
        None, "a checkpoint folder (a pretrain_* output_dir) or hub name, with its tokenizer"
    )
    vocab_file: str | None = option(None, "WordPiece vocab without a checkpoint (null: the shipped 4,500-token vocab)")
    tiny: TinyConfig = option(help="the tiny BERT built without a checkpoint (pretrain_electra: D)", factory=TinyConfig)
    probe: ProbeConfig = option(help="the probe's sizes (kind: probe)", factory=ProbeConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model_name_or_path is not None and (self.kind == "probe" or self.vocab_file is not None):
            other = "kind" if self.kind == "probe" else "vocab_file"
            raise ValueError(
                f"{self.key('model_name_or_path')}: must be null when model.{other} is {getattr(self, other)!r}, "
                f"got {self.model_name_or_path!r}"
            )
        check_checkpoint(self.key("model_name_or_path"), self.model_name_or_path)


def check_checkpoint(name: str, path: str | None) -> None:
    """A local ``path`` must be a checkpoint folder (with config.json), not a file such as a pickle; a path that does
    not exist is a hub name."""
    if path is not None and os.path.exists(path) and not os.path.isfile(os.path.join(path, "config.json")):
        raise ValueError(f"{name}: must be a checkpoint folder (holding config.json) or a hub name, got {path!r}")
