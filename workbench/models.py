"""Model constructors: tiny BERT configs, checkpoints, classification heads.

Every constructor builds either a tiny randomly initialised BERT (from
``tiny_bert_config(**tiny)``, the default; sized for CPU) or loads a checkpoint
through the ``transformers`` Auto classes when ``model_name_or_path`` is given,
always with float32 weights (mixed precision is the trainer's business).
Classifiers' ``forward`` returns an output with ``.logits``; the workbench
trainers compute the loss themselves with the workbench losses.

ELECTRA (Clark et al., ICLR 2020) pre-training gets its pair from :func:`build_electra`: a
small ``ElectraForMaskedLM`` generator and an ``ElectraForPreTraining`` discriminator sharing
their embeddings (:func:`tiny_electra_config`, :func:`electra_generator_config`).

The auxiliary-label helpers implement the two-stage recipe: stage 1 trains the
encoder with a head of K+n outputs (n auxiliary labels that never occur,
``build_aux_label_classifier``); stage 2 freezes the encoder (``freeze_encoder``)
and fits a fresh K-way head (``replace_head``). ``FusionClassifier`` is the
MRE-BERT fusion: two encoders' [CLS] (or pooled) vectors concatenated and fed
to one linear head.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertForTokenClassification,
    BertModel,
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    PreTrainedModel,
)
from transformers.modeling_outputs import SequenceClassifierOutput

from workbench.checks import check_int, check_number
from workbench.config import ModelConfig
from workbench.vocab import load_tokenizer

__all__ = [
    "FusionClassifier",
    "GENERATOR_DIR",
    "build_aux_label_classifier",
    "build_electra",
    "build_encoder",
    "build_masked_lm",
    "build_sequence_classifier",
    "build_token_classifier",
    "freeze_encoder",
    "replace_head",
    "electra_generator_config",
    "tiny_bert_config",
    "tiny_electra_config",
    "model_source",
]

GENERATOR_DIR = "generator"
"""Where a pretrain_electra run keeps its generator: ``<output_dir>/generator`` (the discriminator is
``<output_dir>`` itself, so ``finetune`` loads it as ``model.model_name_or_path``)."""


def tiny_bert_config(
    vocab_size: int | None = None,
    num_layers: int = 2,
    hidden_size: int = 64,
    num_heads: int = 2,
    intermediate_size: int | None = None,
    max_position: int = 128,
    **kw: Any,
) -> BertConfig:
    """A small BertConfig for CPU experiments.

    ``vocab_size`` defaults to the shipped tokenizer's size, ``intermediate_size``
    to ``4 * hidden_size`` (BERT's ratio). Extra keyword arguments go to
    BertConfig (e.g. ``hidden_dropout_prob``). Raises ValueError naming the
    parameter for non-positive sizes or ``hidden_size % num_heads != 0``.
    """
    vocab_size = len(load_tokenizer()) if vocab_size is None else vocab_size
    intermediate_size = 4 * hidden_size if intermediate_size is None else intermediate_size
    for name, value in (
        ("vocab_size", vocab_size),
        ("num_layers", num_layers),
        ("hidden_size", hidden_size),
        ("num_heads", num_heads),
        ("intermediate_size", intermediate_size),
        ("max_position", max_position),
    ):
        check_int(name, value, 1)
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size: must be divisible by num_heads={num_heads}, got {hidden_size}")
    return BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        intermediate_size=intermediate_size,
        max_position_embeddings=max_position,
        **kw,
    )


def tiny_electra_config(
    vocab_size: int | None = None,
    num_layers: int = 2,
    hidden_size: int = 64,
    num_heads: int = 2,
    intermediate_size: int | None = None,
    max_position: int = 128,
    **kw: Any,
) -> ElectraConfig:
    """A small ElectraConfig for CPU experiments (the discriminator of ``pretrain_electra``), sized and
    checked as :func:`tiny_bert_config`; its embedding size equals the hidden size (ELECTRA-Base's
    choice; ELECTRA-Small uses 128 for a hidden size of 256). Extra keyword arguments go to ElectraConfig."""
    bert = tiny_bert_config(vocab_size, num_layers, hidden_size, num_heads, intermediate_size, max_position)
    return ElectraConfig(
        vocab_size=bert.vocab_size,
        embedding_size=bert.hidden_size,
        hidden_size=bert.hidden_size,
        num_hidden_layers=bert.num_hidden_layers,
        num_attention_heads=bert.num_attention_heads,
        intermediate_size=bert.intermediate_size,
        max_position_embeddings=bert.max_position_embeddings,
        **kw,
    )


def electra_generator_config(discriminator: ElectraConfig, generator_size: float) -> ElectraConfig:
    """The generator's config for ``discriminator``, as ELECTRA's ``get_generator_config``
    (google-research/electra, ``configure_pretraining.py`` / ``run_pretraining.py``; Clark et al. 2020,
    Sec. 3.2 and App. A): hidden size h = round(``generator_size`` x H), intermediate size 4h,
    max(1, h // 64) attention heads, the discriminator's layers, embedding size and everything else.

    When h is not a multiple of that head count (tiny sizes; ELECTRA's are multiples of 64) the
    count is lowered to the largest one that divides h (the workbench's rule). Raises ValueError
    (``electra.generator_size: ...``) when h would be 0.
    """
    check_number("electra.generator_size", generator_size, 0, 1, low_inclusive=False)
    hidden = round(discriminator.hidden_size * generator_size)
    if hidden < 1:
        raise ValueError(
            f"electra.generator_size: must give a generator hidden size >= 1 (round(size x "
            f"{discriminator.hidden_size})), got {generator_size!r}"
        )
    heads = max(1, hidden // 64)
    while hidden % heads:
        heads -= 1
    values = {**discriminator.to_dict(), "hidden_size": hidden, "intermediate_size": 4 * hidden, "num_attention_heads": heads}
    return ElectraConfig.from_dict(values)


def build_electra(
    generator_size: float, model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> tuple[ElectraForMaskedLM, ElectraForPreTraining]:
    """ELECTRA's ``(generator, discriminator)`` with shared embeddings, float32 weights.

    The discriminator is a tiny ELECTRA (:func:`tiny_electra_config` from ``tiny``) or the checkpoint
    ``model_name_or_path`` (an ELECTRA one: a pretrain_electra output_dir or a hub
    ``*-discriminator``; ValueError otherwise). The generator is ``<model_name_or_path>/generator``
    when that folder exists (:data:`GENERATOR_DIR`, a pretrain_electra output_dir), else a new one
    from :func:`electra_generator_config` (``generator_size`` sizes new generators only).

    Sharing (Clark et al. 2020, Sec. 3.2: "we only share the embeddings (both the token and
    positional embeddings)"; the official code reuses the whole ``electra/embeddings`` variable
    scope): the generator's ``electra.embeddings`` module *is* the discriminator's (word, position
    and token-type embeddings and their LayerNorm), and the generator's output layer stays tied to
    the shared word embeddings (``tie_weights``), as BERT's and ELECTRA's MLM heads are. The
    generator's ``embeddings_project`` (embedding size -> its hidden size) and everything above it
    are its own. transformers has no ELECTRA pre-training model; assigning the module is how
    PyTorch re-implementations share them.
    """
    if model_name_or_path is None:
        discriminator = ElectraForPreTraining(tiny_electra_config(**dict(tiny or {})))
        generator = ElectraForMaskedLM(electra_generator_config(discriminator.config, generator_size))
    else:
        if tiny is not None:
            raise ValueError("tiny: give either model_name_or_path or tiny config kwargs, not both")
        model_type = AutoConfig.from_pretrained(str(model_name_or_path)).model_type
        if model_type != "electra":
            raise ValueError(
                f"model.model_name_or_path: must be an ELECTRA checkpoint (model_type electra) for "
                f"pretrain_electra, got model_type {model_type!r} in {str(model_name_or_path)!r}"
            )
        discriminator = ElectraForPreTraining.from_pretrained(str(model_name_or_path), dtype=torch.float32)
        saved_generator = Path(model_name_or_path) / GENERATOR_DIR
        if saved_generator.is_dir():
            generator = ElectraForMaskedLM.from_pretrained(str(saved_generator), dtype=torch.float32)
        else:
            generator = ElectraForMaskedLM(electra_generator_config(discriminator.config, generator_size))
    if generator.config.embedding_size != discriminator.config.embedding_size:
        raise ValueError(
            f"model.model_name_or_path: the generator's embedding size {generator.config.embedding_size} "
            f"must equal the discriminator's {discriminator.config.embedding_size} to share embeddings"
        )
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.tie_weights()
    return generator, discriminator


def model_source(model: ModelConfig, vocab_size: int, max_length: int) -> dict[str, Any]:
    """Keyword arguments for the builders below from a config's ``model`` section: the checkpoint,
    or the tiny config sized to the tokenizer (``vocab_size``) and to ``max_length`` positions."""
    if model.kind != "transformer":
        raise ValueError(f"model.kind: must be 'transformer' to build a transformer, got {model.kind!r}")
    if model.model_name_or_path is not None:
        return {"model_name_or_path": model.model_name_or_path}
    return {"tiny": {**model.tiny.to_dict(), "vocab_size": vocab_size, "max_position": max(128, max_length)}}


def _build(
    auto_class: type,
    bert_class: type,
    model_name_or_path: str | Path | None,
    tiny: Mapping[str, Any] | None,
    **head_kw: Any,
) -> PreTrainedModel:
    """Load ``model_name_or_path`` with ``auto_class`` or build ``bert_class`` from a tiny config."""
    if model_name_or_path is not None:
        if tiny is not None:
            raise ValueError("tiny: give either model_name_or_path or tiny config kwargs, not both")
        # float32 master weights whatever the checkpoint's dtype (a bf16 checkpoint such as
        # models/workbench-zh-mini is upcast): training precision comes from training.precision.
        return auto_class.from_pretrained(str(model_name_or_path), dtype=torch.float32, **head_kw)
    config = tiny_bert_config(**dict(tiny or {}))
    for key, value in head_kw.items():
        setattr(config, key, value)
    return bert_class(config)


def build_sequence_classifier(
    num_labels: int, model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> PreTrainedModel:
    """A BertForSequenceClassification with ``num_labels`` outputs (tiny), or the checkpoint's own
    classifier through ``AutoModelForSequenceClassification`` (a pretrain_electra output_dir gives an
    ElectraForSequenceClassification on its discriminator, with a new head).

    Sentence pairs need nothing special: the tokenizer builds ``[CLS] S1 [SEP] S2 [SEP]``
    with ``token_type_ids``.
    """
    check_int("num_labels", num_labels, 1)
    return _build(
        AutoModelForSequenceClassification,
        BertForSequenceClassification,
        model_name_or_path,
        tiny,
        num_labels=num_labels,
    )


def build_token_classifier(
    num_labels: int, model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> PreTrainedModel:
    """A BertForTokenClassification with ``num_labels`` outputs per token."""
    check_int("num_labels", num_labels, 1)
    return _build(
        AutoModelForTokenClassification,
        BertForTokenClassification,
        model_name_or_path,
        tiny,
        num_labels=num_labels,
    )


def build_masked_lm(
    model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None, sentence_order: bool = False
) -> PreTrainedModel:
    """A BertForMaskedLM (tiny, or from a checkpoint); with ``sentence_order`` a BertForPreTraining,
    whose two-way ``seq_relationship`` head on the pooled [CLS] serves sentence-order prediction
    (its logits are ``prediction_logits`` and ``seq_relationship_logits``)."""
    if sentence_order:
        return _build(AutoModelForPreTraining, BertForPreTraining, model_name_or_path, tiny)
    return _build(AutoModelForMaskedLM, BertForMaskedLM, model_name_or_path, tiny)


def build_encoder(model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None) -> PreTrainedModel:
    """A bare encoder (BertModel with pooler, or ``AutoModel.from_pretrained``), e.g. for FusionClassifier."""
    return _build(AutoModel, BertModel, model_name_or_path, tiny)


def build_aux_label_classifier(
    num_labels: int,
    num_aux: int,
    model_name_or_path: str | Path | None = None,
    tiny: Mapping[str, Any] | None = None,
) -> PreTrainedModel:
    """Stage 1 of auxiliary-label training: a sequence classifier with K + n outputs.

    Outputs ``0..K-1`` are the task labels (``num_labels`` = K), ``K..K+n-1`` the
    ``num_aux`` = n auxiliary labels that never occur as gold labels. K and n are
    recorded on the config as ``num_task_labels`` and ``num_aux_labels`` (saved
    with ``save_pretrained``).
    """
    check_int("num_labels", num_labels, 1)
    check_int("num_aux", num_aux, 1)
    model = build_sequence_classifier(num_labels + num_aux, model_name_or_path, tiny)
    model.config.num_task_labels = num_labels
    model.config.num_aux_labels = num_aux
    return model


def replace_head(model: PreTrainedModel, num_labels: int, seed: int | None = None) -> PreTrainedModel:
    """Stage 2 of auxiliary-label training: a fresh ``num_labels``-way linear head on the same encoder.

    The new ``model.classifier`` has weights ~ N(0, config.initializer_range) and
    zero bias (BERT's initialisation), drawn from a generator seeded with
    ``seed`` (the global torch RNG when None). Modifies ``model`` in place and
    returns it; ``config.num_aux_labels`` becomes 0.
    """
    check_int("num_labels", num_labels, 1)
    old_head = getattr(model, "classifier", None)
    if not isinstance(old_head, nn.Linear):
        raise ValueError(f"model: expected a classifier head nn.Linear at model.classifier, got {type(old_head).__name__}")
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    head = nn.Linear(old_head.in_features, num_labels)
    with torch.no_grad():
        head.weight.normal_(0.0, model.config.initializer_range, generator=generator)
        head.bias.zero_()
    model.classifier = head.to(device=old_head.weight.device, dtype=old_head.weight.dtype)
    model.num_labels = num_labels
    model.config.num_labels = num_labels
    model.config.num_task_labels = num_labels
    model.config.num_aux_labels = 0
    return model


def freeze_encoder(model: PreTrainedModel) -> PreTrainedModel:
    """Set ``requires_grad=False`` on every parameter of the encoder (``model.base_model``:
    embeddings, layers, pooler); the head stays trainable. Returns ``model``."""
    encoder = model.base_model
    if encoder is model:
        raise ValueError("model: has no separate encoder (model.base_model is the model itself)")
    for parameter in encoder.parameters():
        parameter.requires_grad_(False)
    return model


class FusionClassifier(nn.Module):
    """MRE-BERT fusion of two encoders: ``logits = W [h_a ; h_b] + b``.

    The auxiliary-label paper says only that MRE-BERT "fuses the textual representations" of two
    pre-trained models (M-BERT "unites" them); concatenating the two vectors under one linear
    head is the workbench's reading.

    ``h_a``, ``h_b`` are each encoder's [CLS] vector (``representation="cls"``:
    ``last_hidden_state[:, 0]``) or pooled output (``representation="pooled"``),
    concatenated and passed through dropout and one linear layer. Both encoders
    read the same ``input_ids`` (they must share the tokenizer). ``forward``
    returns a SequenceClassifierOutput; with ``labels`` its ``loss`` is the mean
    cross-entropy (as in the Hugging Face classifiers).
    """

    REPRESENTATIONS = ("cls", "pooled")

    def __init__(
        self,
        encoder_a: PreTrainedModel,
        encoder_b: PreTrainedModel,
        num_labels: int,
        representation: str = "cls",
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        check_int("num_labels", num_labels, 1)
        if representation not in self.REPRESENTATIONS:
            raise ValueError(f"representation: must be one of {self.REPRESENTATIONS}, got {representation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout: must be in [0, 1), got {dropout!r}")
        self.encoder_a = encoder_a
        self.encoder_b = encoder_b
        self.num_labels = num_labels
        self.representation = representation
        self.dropout = nn.Dropout(dropout)
        width = encoder_a.config.hidden_size + encoder_b.config.hidden_size
        self.classifier = nn.Linear(width, num_labels)

    def _represent(self, encoder: PreTrainedModel, **inputs: torch.Tensor | None) -> torch.Tensor:
        output = encoder(**inputs)
        if self.representation == "cls":
            return output.last_hidden_state[:, 0]
        if getattr(output, "pooler_output", None) is None:
            raise ValueError("representation: 'pooled' needs encoders with a pooler (e.g. BertModel with add_pooling_layer=True)")
        return output.pooler_output

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> SequenceClassifierOutput:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        fused = torch.cat([self._represent(self.encoder_a, **inputs), self._represent(self.encoder_b, **inputs)], dim=-1)
        logits = self.classifier(self.dropout(fused))
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)
