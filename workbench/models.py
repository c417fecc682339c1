"""Model constructors: every builder makes a tiny randomly initialised BERT (``tiny_bert_config(**tiny)``, sized for
CPU) or loads ``model_name_or_path`` with float32 weights (mixed precision is the trainer's); ELECTRA's pair
(:func:`build_electra`), a masked LM's head at the labelled positions only (:func:`labelled_logits`), the heads of
two-stage training with auxiliary labels and MRE-BERT's fusion of two encoders (:class:`FusionClassifier`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForPreTraining,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForMaskedLM,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    ElectraConfig,
    ElectraForMaskedLM,
    ElectraForPreTraining,
    PreTrainedModel,
)
from transformers.modeling_outputs import SequenceClassifierOutput

from workbench.checks import check_choice, check_int, check_number
from workbench.config import ElectraSpec, ModelConfig
from workbench.vocab import load_tokenizer

GENERATOR_DIR = "generator"  # pretrain_electra's generator: <output_dir>/generator; the discriminator is <output_dir>


def tiny_bert_config(
    vocab_size: int | None = None,
    num_layers: int = 2,
    hidden_size: int = 64,
    num_heads: int = 2,
    intermediate_size: int | None = None,
    max_position: int = 128,
    **kw: Any,
) -> BertConfig:
    """A small BertConfig for CPU experiments: ``vocab_size`` defaults to the shipped tokenizer's size,
    ``intermediate_size`` to 4 x ``hidden_size`` (BERT's ratio); ``kw`` go to BertConfig. ValueError naming the
    parameter for non-positive sizes or ``hidden_size % num_heads != 0``."""
    vocab_size = len(load_tokenizer()) if vocab_size is None else vocab_size
    intermediate_size = 4 * hidden_size if intermediate_size is None else intermediate_size
    sizes = dict(vocab_size=vocab_size, num_layers=num_layers, hidden_size=hidden_size, num_heads=num_heads)
    for name, value in {**sizes, "intermediate_size": intermediate_size, "max_position": max_position}.items():
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
    """:func:`tiny_bert_config`'s sizes and checks as an ElectraConfig (``pretrain_electra``'s discriminator), embedding
    size = hidden size (ELECTRA-Base's choice); ``kw`` go to ElectraConfig."""
    bert = tiny_bert_config(vocab_size, num_layers, hidden_size, num_heads, intermediate_size, max_position)
    sizes = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    shared = {key: getattr(bert, key) for key in (*sizes, "max_position_embeddings")}
    return ElectraConfig(embedding_size=bert.hidden_size, **shared, **kw)


def electra_generator_config(discriminator: ElectraConfig, generator_size: float) -> ElectraConfig:
    """The generator's config, as ELECTRA's ``get_generator_config`` (Clark et al. 2020, Sec. 3.2, App. A): hidden size
    h = round(``generator_size`` x H), intermediate size 4h, max(1, h // 64) attention heads (lowered until it divides
    h: the workbench's rule for tiny sizes), the discriminator's layers, embedding size and everything else.
    ``generator_size`` is the validated ``electra.generator_size`` (in (0, 1], checked by the config's
    :class:`~workbench.config.ElectraSpec`); h must come out >= 1."""
    hidden = round(discriminator.hidden_size * generator_size)
    if hidden < 1:
        raise ValueError(
            f"electra.generator_size: x {discriminator.hidden_size} gives 0 hidden units, got {generator_size!r}"
        )
    heads = max(1, hidden // 64)
    while hidden % heads:
        heads -= 1
    values = {
        **discriminator.to_dict(),
        "hidden_size": hidden,
        "intermediate_size": 4 * hidden,
        "num_attention_heads": heads,
    }
    return ElectraConfig.from_dict(values)


def build_electra(
    electra: ElectraSpec, model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> tuple[ElectraForMaskedLM, ElectraForPreTraining]:
    """ELECTRA's ``(generator, discriminator)``: D a tiny ELECTRA (``tiny``) or the checkpoint
    ``model_name_or_path``; G ``<model_name_or_path>/generator`` when it exists, else a new one of
    ``electra.generator_size`` (``electra``: a config's validated ``electra`` section).
    Clark et al. 2020, Sec. 3.2, "we only share the embeddings (both the token and positional embeddings)": G's
    ``electra.embeddings`` *is* D's."""
    if not isinstance(electra, ElectraSpec):
        raise ValueError(f"electra: must be a validated ElectraSpec (a config's electra section), got {electra!r}")
    if model_name_or_path is None:
        discriminator = ElectraForPreTraining(tiny_electra_config(**dict(tiny or {})))
        generator = ElectraForMaskedLM(electra_generator_config(discriminator.config, electra.generator_size))
    else:
        if tiny is not None:
            raise ValueError(
                f"tiny: must be None with model_name_or_path={str(model_name_or_path)!r} (a checkpoint has its own "
                f"sizes), got {tiny!r}"
            )
        model_type = AutoConfig.from_pretrained(str(model_name_or_path)).model_type
        if model_type != "electra":
            raise ValueError(
                f"model.model_name_or_path: {str(model_name_or_path)!r} is a {model_type!r} checkpoint, not ELECTRA"
            )
        discriminator = load_pretrained(ElectraForPreTraining, model_name_or_path)
        saved_generator = Path(model_name_or_path) / GENERATOR_DIR
        if saved_generator.is_dir():
            generator = load_pretrained(ElectraForMaskedLM, saved_generator)
        else:
            generator = ElectraForMaskedLM(electra_generator_config(discriminator.config, electra.generator_size))
    if generator.config.embedding_size != discriminator.config.embedding_size:
        sizes = (generator.config.embedding_size, discriminator.config.embedding_size)
        raise ValueError(
            f"model.model_name_or_path: the generator's embedding size must equal the discriminator's, got {sizes}"
        )
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.tie_weights()
    return generator, discriminator


def model_source(model: ModelConfig, vocab_size: int, max_length: int) -> dict[str, Any]:
    """The builders' keyword arguments from a ``model`` section: the checkpoint, or the tiny config for
    ``vocab_size``."""
    if model.kind != "transformer":
        raise ValueError(f"model.kind: must be 'transformer' to build a transformer, got {model.kind!r}")
    if model.model_name_or_path is not None:
        return {"model_name_or_path": model.model_name_or_path}
    return {"tiny": {**model.tiny.to_dict(), "vocab_size": vocab_size, "max_position": max(128, max_length)}}


def load_pretrained(model_class: type, path: str | Path, **kwargs: Any) -> PreTrainedModel:
    """``from_pretrained`` in float32 (precision is the trainer's); unreadable files: a ValueError naming ``path``."""
    try:
        return model_class.from_pretrained(str(path), dtype=torch.float32, **kwargs)
    except (OSError, ValueError, RuntimeError, SafetensorError) as error:
        raise ValueError(f"model_name_or_path: {str(path)!r}: cannot load it ({str(error).splitlines()[0]})") from None


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
            raise ValueError(
                f"tiny: must be None with model_name_or_path={str(model_name_or_path)!r} (a checkpoint has its own "
                f"sizes), got {tiny!r}"
            )
        return load_pretrained(auto_class, model_name_or_path, **head_kw)
    config = tiny_bert_config(**dict(tiny or {}))
    for key, value in head_kw.items():
        setattr(config, key, value)
    return bert_class(config)


def build_sequence_classifier(
    num_labels: int, model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> PreTrainedModel:
    """A BertForSequenceClassification with ``num_labels`` outputs, or the checkpoint's own classifier class (a
    pretrain_electra output_dir gives an ElectraForSequenceClassification, with a new head)."""
    check_int("num_labels", num_labels, 1)
    return _build(
        AutoModelForSequenceClassification,
        BertForSequenceClassification,
        model_name_or_path,
        tiny,
        num_labels=num_labels,
    )


def build_masked_lm(
    model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None, sentence_order: bool = False
) -> PreTrainedModel:
    """A BertForMaskedLM; with ``sentence_order`` a BertForPreTraining, whose ``seq_relationship`` head on the pooled
    [CLS] predicts the sentence order."""
    if sentence_order:
        return _build(AutoModelForPreTraining, BertForPreTraining, model_name_or_path, tiny)
    return _build(AutoModelForMaskedLM, BertForMaskedLM, model_name_or_path, tiny)


def mlm_head(model: nn.Module) -> nn.Module | None:
    """A masked LM's vocabulary head, hidden states (..., hidden) -> logits (..., vocab): BERT's ``cls.predictions``,
    ELECTRA's ``generator_predictions`` + ``generator_lm_head``, RoBERTa's ``lm_head``; None for other models (and for
    a DDP / DataParallel wrapper, whose gradient sync needs its own forward)."""
    if hasattr(model, "cls"):
        return model.cls.predictions
    if hasattr(model, "generator_predictions"):
        return nn.Sequential(model.generator_predictions, model.get_output_embeddings())
    return getattr(model, "lm_head", None)


def labelled_logits(model: nn.Module, labels: torch.Tensor, **inputs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(logits, sop_logits)``: ``model(**inputs).logits[labels != -100]`` (M, vocab) with the vocabulary head
    (:func:`mlm_head`) on the M labelled hidden states only (as Megatron's BERT; a model without a known head runs
    whole), and a BertForPreTraining's sentence-order logits (batch, 2) (None for other models)."""
    labelled = labels != -100
    head = mlm_head(model)
    if head is None:
        output = model(**inputs)
        logits = output["logits"] if "logits" in output else output["prediction_logits"]
        return logits[labelled], output.get("seq_relationship_logits")
    encoded = model.base_model(**inputs)
    sop_head = getattr(getattr(model, "cls", None), "seq_relationship", None)  # BertForPreTraining's
    return head(encoded.last_hidden_state[labelled]), None if sop_head is None else sop_head(encoded.pooler_output)


def build_encoder(
    model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> PreTrainedModel:
    """A bare encoder (BertModel with pooler, or ``AutoModel.from_pretrained``), e.g. for FusionClassifier."""
    return _build(AutoModel, BertModel, model_name_or_path, tiny)


def build_aux_label_classifier(
    num_labels: int, num_aux: int, model_name_or_path: str | Path | None = None, tiny: Mapping[str, Any] | None = None
) -> PreTrainedModel:
    """Stage 1 of auxiliary-label training: a sequence classifier with K + n outputs, ``0..K-1`` the task labels
    (``num_labels`` = K), ``K..K+n-1`` the ``num_aux`` = n auxiliary labels that never occur; K and n are recorded on
    the config as ``num_task_labels`` and ``num_aux_labels``."""
    check_int("num_labels", num_labels, 1)
    check_int("num_aux", num_aux, 1)
    model = build_sequence_classifier(num_labels + num_aux, model_name_or_path, tiny)
    model.config.num_task_labels = num_labels
    model.config.num_aux_labels = num_aux
    return model


def replace_head(model: PreTrainedModel, num_labels: int, seed: int | None = None) -> PreTrainedModel:
    """Stage 2 of auxiliary-label training, in place: a fresh ``num_labels``-way linear head, weights ~ N(0,
    initializer_range) drawn with ``seed`` (the global RNG when None), zero bias (BERT's); ``num_aux_labels`` = 0."""
    check_int("num_labels", num_labels, 1)
    old_head = getattr(model, "classifier", None)
    if not isinstance(old_head, nn.Linear):
        raise ValueError(
            f"model: expected a classifier head nn.Linear at model.classifier, got {type(old_head).__name__}"
        )
    generator = torch.Generator().manual_seed(seed) if seed is not None else None
    head = nn.Linear(old_head.in_features, num_labels)
    with torch.no_grad():
        head.weight.normal_(0.0, model.config.initializer_range, generator=generator)
        head.bias.zero_()
    model.classifier = head.to(device=old_head.weight.device, dtype=old_head.weight.dtype)
    model.num_labels = model.config.num_labels = model.config.num_task_labels = num_labels
    model.config.num_aux_labels = 0
    return model


def freeze_encoder(model: PreTrainedModel) -> PreTrainedModel:
    """``requires_grad=False`` on every parameter of the encoder (``model.base_model``); the head stays trainable."""
    encoder = model.base_model
    if encoder is model:
        raise ValueError("model: has no separate encoder (model.base_model is the model itself)")
    for parameter in encoder.parameters():
        parameter.requires_grad_(False)
    return model


class FusionClassifier(nn.Module):
    """MRE-BERT fusion of two encoders: ``logits = W [h_a ; h_b] + b`` (the paper says MRE-BERT "fuses the textual
    representations"; concatenation under one linear head is the workbench's reading).

    ``h_a``, ``h_b``: each encoder's [CLS] vector (``representation="cls"``) or pooled output (``"pooled"``), through
    dropout. Both encoders read the same ``input_ids``. With ``labels`` the output's ``loss`` is the mean cross-entropy.
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
        self.num_labels = check_int("num_labels", num_labels, 1)
        self.representation = check_choice("representation", representation, self.REPRESENTATIONS)
        self.dropout = nn.Dropout(check_number("dropout", dropout, 0.0, 1.0, high_inclusive=False))
        self.encoder_a = encoder_a
        self.encoder_b = encoder_b
        self.classifier = nn.Linear(encoder_a.config.hidden_size + encoder_b.config.hidden_size, num_labels)

    def _represent(self, encoder: PreTrainedModel, **inputs: torch.Tensor | None) -> torch.Tensor:
        output = encoder(**inputs)
        if self.representation == "cls":
            return output.last_hidden_state[:, 0]
        if getattr(output, "pooler_output", None) is None:
            raise ValueError(
                "representation: 'pooled' needs encoders with a pooler (e.g. BertModel with add_pooling_layer=True)"
            )
        return output.pooler_output

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> SequenceClassifierOutput:
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
        fused = torch.cat(
            [self._represent(self.encoder_a, **inputs), self._represent(self.encoder_b, **inputs)], dim=-1
        )
        logits = self.classifier(self.dropout(fused))
        loss = None if labels is None else nn.functional.cross_entropy(logits, labels)
        return SequenceClassifierOutput(loss=loss, logits=logits)
