"""What a task optimises: the ``loss`` (finetune), ``masking``, ``objective`` and ``electra`` (pre-training) and
``aux`` (two-stage training) sections."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from workbench.config.model import check_checkpoint
from workbench.config.sections import Section, option
from workbench.losses.choices import (  # the objectives' options, beside the losses that take them
    HC_LEVELS,
    KL_DIRECTIONS,
    SR_LEVELS,
    SR_PREDICTIONS,
    SR_WEIGHT,
)

MASKING_STRATEGIES = ("random", "wwm", "kdm")
OBJECTIVES = ("plain", "hc", "sr")


@dataclass(frozen=True)
class LossSpec(Section, prefix="loss", free_mappings=("params",)):
    """A ``workbench.losses.build_loss`` name and its parameters (``resolve`` adds the training split's counts)."""

    name: str = option(
        "ce", "any build_loss name: ce, wce, ls, focal, dice, tversky, dsc, pcl, ...; or yours (loss_modules)"
    )
    params: dict[str, Any] = option(
        help="its keyword arguments (an override loss.params={...} replaces them all)", factory=dict
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.params, Mapping | None):
            raise ValueError(f"{self.key('params')}: must be a mapping of parameters, got {self.params!r}")
        object.__setattr__(self, "params", dict(self.params or {}))


@dataclass(frozen=True)
class MaskingSpec(Section, prefix="masking"):
    """How MLM pre-training chooses the tokens to predict (``workbench.masking.build_collator``)."""

    strategy: str = option(
        "wwm", "random (tokens), wwm (jieba words), kdm (entities, events first)", choices=MASKING_STRATEGIES
    )
    mlm_probability: float = option(0.15, "share of tokens masked", gt=0, lt=1)
    max_ngram: int = option(1, "WWM spans of up to this many words (>1: the ALBERT/MacBERT n-gram option)", ge=1)


@dataclass(frozen=True)
class ObjectiveConfig(Section, prefix="objective"):
    """The MLM objective: plain, hard correction (HC) or soft regularization (SR)."""

    name: str = option("plain", "plain MLM, hc (hard correction) or sr (soft regularization)", choices=OBJECTIVES)
    weight: float = option(1.0, "SR weight (loss = MLM CE + weight x SR)", bounds=SR_WEIGHT)
    level: str = option(
        "token", "SR: token (1 - cos of embeddings, eq. 3) or sentence (KL of hidden states)", choices=SR_LEVELS
    )
    prediction: str = option(
        "argmax", "SR's predicted embedding: argmax (the paper's) or expected", choices=SR_PREDICTIONS
    )
    kl_direction: str = option(
        "filled||original", "sentence SR: KL(filled || original) (the paper) or reverse", choices=KL_DIRECTIONS
    )
    hc_level: str = option(
        "token", "HC: token (the paper, footnote 5) or word (the workbench's extension)", choices=HC_LEVELS
    )
    lexicon: str | None = option(
        None, "HC synonym lexicon: a Cilin file or a WordNet .tsv; null: the shipped tiny lexicon"
    )
    sop: bool = option(False, "add sentence-order prediction: each block's halves swapped with p = 0.5 (ALBERT)")


@dataclass(frozen=True)
class ElectraSpec(Section, prefix="electra"):
    """ELECTRA (Clark et al., ICLR 2020): L = L_MLM(generator) + discriminator_weight x L_disc."""

    generator_size: float = option(
        0.25, "generator hidden size as a share of the discriminator's (same layers)", gt=0, le=1
    )
    discriminator_weight: float = option(
        50.0, "lambda of the discriminator's replaced-token loss (ELECTRA: 50)", gt=0, le=1e12
    )


@dataclass(frozen=True)
class AuxConfig(Section, prefix="aux"):
    """Two-stage training with auxiliary labels."""

    num_aux: int = option(2, "n auxiliary labels of the stage-1 head (K + n outputs)", ge=0)
    stage2_epochs: float | None = option(None, "stage 2's epochs (null: training.num_train_epochs)", gt=0, le=1e6)
    stage2_lr: float | None = option(None, "stage 2's learning rate (null: training.learning_rate)", gt=0)
    fgm_epsilon: float = option(0.0, "FGM adversarial training in stage 1 when > 0 (the F variant)", ge=0, le=1e12)
    fusion: bool = option(False, "a two-encoder FusionClassifier (MRE) instead of one encoder")
    fusion_model: str | None = option(
        None, "the fusion's second encoder (null: another tiny BERT / the same checkpoint)"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_checkpoint(self.key("fusion_model"), self.fusion_model)
