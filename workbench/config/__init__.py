"""The one configuration system: frozen sections whose fields carry their help and check (a ``ValueError`` naming
the key), ``key.path=value`` overrides, and ``training`` as ``transformers.TrainingArguments`` by its own names.
No torch here.

Its modules, by concern: ``sections`` (the section machinery: fields, checks, mappings), ``data``, ``model``,
``objectives`` (loss, masking, objective, electra, aux), ``settings`` (a notebook's ``extra_settings``), ``training``
and ``load`` (the whole :class:`Config` and
:func:`load_config`). Every public name is importable from ``workbench.config``.
"""

from workbench.config.data import BLOCK_BOUNDARIES, DATA_SOURCES, LABELLED_SOURCES, ORDINAL_SOURCES, DataConfig
from workbench.config.load import TASKS, Config, check_loss_fits_labels, load_config
from workbench.config.model import MODEL_KINDS, ModelConfig, ProbeConfig, TinyConfig, check_checkpoint
from workbench.config.objectives import (
    MASKING_STRATEGIES,
    OBJECTIVES,
    AuxConfig,
    ElectraSpec,
    LossSpec,
    MaskingSpec,
    ObjectiveConfig,
)
from workbench.config.sections import INT_MAX, Bounds, Section, check_field, option
from workbench.config.settings import extra_claims, extra_specs
from workbench.config.training import (
    NOT_HONOURED,
    PRECISIONS,
    SET_BY_THE_WORKBENCH,
    TRAINING_BOUNDS,
    TRAINING_DEFAULTS,
    TrainingConfig,
    check_honoured,
    check_optimizer,
    check_training_arguments,
    resolve_precision,
)
from workbench.losses.choices import HC_LEVELS, KL_DIRECTIONS, SR_LEVELS, SR_PREDICTIONS  # the objectives' options
from workbench.yaml_files import parse_override, read_yaml, read_yaml_file

__all__ = [
    "BLOCK_BOUNDARIES",
    "DATA_SOURCES",
    "LABELLED_SOURCES",
    "HC_LEVELS",
    "INT_MAX",
    "KL_DIRECTIONS",
    "MASKING_STRATEGIES",
    "MODEL_KINDS",
    "NOT_HONOURED",
    "OBJECTIVES",
    "ORDINAL_SOURCES",
    "PRECISIONS",
    "SET_BY_THE_WORKBENCH",
    "SR_LEVELS",
    "SR_PREDICTIONS",
    "TASKS",
    "TRAINING_BOUNDS",
    "TRAINING_DEFAULTS",
    "AuxConfig",
    "Bounds",
    "Config",
    "DataConfig",
    "ElectraSpec",
    "LossSpec",
    "MaskingSpec",
    "ModelConfig",
    "ObjectiveConfig",
    "ProbeConfig",
    "Section",
    "TinyConfig",
    "TrainingConfig",
    "check_checkpoint",
    "check_field",
    "check_honoured",
    "check_loss_fits_labels",
    "check_optimizer",
    "check_training_arguments",
    "extra_claims",
    "extra_specs",
    "load_config",
    "option",
    "parse_override",
    "read_yaml",
    "read_yaml_file",
    "resolve_precision",
]
