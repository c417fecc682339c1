"""The whole config (:class:`Config`: the task, its run folder and every section) and :func:`load_config`: YAML, a
mapping or a Config, ``key.path=value`` overrides, the task check."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.checks import check_choice
from workbench.config.data import DataConfig
from workbench.config.model import ModelConfig
from workbench.config.objectives import AuxConfig, ElectraSpec, LossSpec, MaskingSpec, ObjectiveConfig
from workbench.config.sections import Section, _nested, _plain, _section_fields, _unknown, check_field, option
from workbench.config.training import TrainingConfig
from workbench.yaml_files import parse_override, read_yaml_file

TASKS = ("finetune", "pretrain_mlm", "two_stage", "pretrain_electra")


@dataclass(frozen=True)
class Config(Section):
    """A whole trainer config: the task, its run folder and every section."""

    task: str = option(
        "finetune", "finetune, pretrain_mlm, two_stage or pretrain_electra (the CLI runs this one)", choices=TASKS
    )
    output_dir: str = option("outputs/train", "run folder: new, empty or this run's own (training.resume continues it)")
    loss_modules: list[str] = option(
        help="your own losses: .py files that call workbench.losses.register_loss, imported before anything is built "
        "(relative to the working directory; docs/your_own_loss.md)",
        factory=list,
    )
    data: DataConfig = option(help="", factory=DataConfig)
    model: ModelConfig = option(help="", factory=ModelConfig)
    loss: LossSpec = option(help="finetune; two_stage's stage 2", factory=LossSpec)
    masking: MaskingSpec = option(help="pretrain_mlm, pretrain_electra", factory=MaskingSpec)
    objective: ObjectiveConfig = option(
        help="pretrain_* (pretrain_electra: its generator's MLM)", factory=ObjectiveConfig
    )
    electra: ElectraSpec = option(help="pretrain_electra", factory=ElectraSpec)
    aux: AuxConfig = option(help="two_stage", factory=AuxConfig)
    training: TrainingConfig = option(help="", factory=TrainingConfig)

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.loss_modules, str | bytes) or not isinstance(self.loss_modules, list | tuple):
            raise ValueError(f"loss_modules: must be a list of .py files, got {self.loss_modules!r}")
        modules = [check_field(f"loss_modules[{index}]", path, str) for index, path in enumerate(self.loss_modules)]
        object.__setattr__(self, "loss_modules", modules)
        if self.loss.params.get("reduction", "mean") != "mean":  # a trainer averages the loss of a batch
            raise ValueError(
                f"loss.params.reduction: must be 'mean' in a trainer, got {self.loss.params['reduction']!r}"
            )
        if self.task in ("finetune", "two_stage"):
            check_loss_fits_labels(self.data, self.loss)
        if self.task == "pretrain_electra" and self.objective.sop:
            raise ValueError(
                "objective.sop: must be false for pretrain_electra (ELECTRA has no sentence-order head), got True"
            )


def check_loss_fits_labels(data: DataConfig, loss: LossSpec) -> None:
    """Losses that read the classes' order need ordered labels: pcl on nominal labels (``data.is_ordinal`` false)
    without ``loss.params.cost_matrix`` raises ValueError naming both keys; corn (an ordinal model, its K - 1 outputs
    rank the classes) on nominal labels raises ValueError naming ``loss.name`` and ``data.ordinal``."""
    if loss.name == "pcl" and not data.is_ordinal and loss.params.get("cost_matrix") is None:
        raise ValueError(
            "loss.params.cost_matrix: pcl's near and far cases need ordinal labels; give a cost matrix or set "
            f"data.ordinal: true if the classes are ordered, got nominal labels "
            f"(source {data.source}, data.ordinal: false)"
        )
    if loss.name == "corn" and not data.is_ordinal:
        raise ValueError(
            "loss.name: corn ranks ordered classes (K - 1 outputs, P(y > k)); set data.ordinal: true if the classes "
            f"are ordered, else take a nominal loss, got nominal labels (source {data.source}, data.ordinal: false)"
        )


def _set_path(tree: dict[str, Any], cls: type[Section], path: list[str], value: Any) -> None:
    """Set ``tree[path] = value`` (the override replaces the node it names), refusing unknown keys; below a
    free mapping (``loss.params``) or in ``training`` any key is set and checked when the section is built."""
    for depth, key in enumerate(path):
        if cls is TrainingConfig or key in cls.free_mappings:
            for part in path[depth:-1]:
                tree[part] = dict(tree[part]) if isinstance(tree.get(part), Mapping) else {}
                tree = tree[part]
            tree[path[-1]] = value
            return
        if key not in _section_fields(cls) or depth < len(path) - 1 and not _nested(cls, key):
            raise _unknown(cls, ".".join(path if key in _section_fields(cls) else path[: depth + 1]))
        if depth == len(path) - 1:
            tree[key] = value
            return
        tree = tree.setdefault(key, {})
        cls = _nested(cls, key)


def load_config(
    config: str | Path | Mapping[str, Any] | Config | None = None,
    overrides: Iterable[str] = (),
    task: str | None = None,
) -> Config:
    """Read a config, fill defaults, apply overrides, validate.

    Args:
        config: a YAML file, a mapping of sections, a :class:`Config`, or None (all defaults).
        overrides: ``"section.key=value"`` strings, values parsed as YAML; each replaces the node it names
            (``loss.params={}`` clears the loss parameters, ``loss.params.gamma=2`` sets one).
        task: a trainer's own task: a config without one gets it, one with another task is refused.

    Returns:
        The validated :class:`Config` (a :class:`Config` without overrides is returned as it is: it was validated when
        it was built); ValueError naming the key (or the file and line) for bad input.
    """
    overrides = list(overrides)
    if isinstance(config, Config) and not overrides:
        if task is not None and config.task != check_choice("task", task, TASKS):
            raise ValueError(f"task: {task}() cannot run a config whose task is {config.task!r}")
        return config
    if isinstance(config, str | Path):
        tree = read_yaml_file(config, "config")
    else:
        tree = _plain(config.to_dict() if isinstance(config, Config) else dict(config or {}))
    earlier: list[list[str]] = []
    for path, value in map(parse_override, overrides):
        # given twice, or after one of its own keys: one of them would be lost
        if any(key[: len(path)] == path for key in earlier):
            raise ValueError(f"overrides: {'.'.join(path)}= replaces an earlier override (of it or a key below it)")
        earlier.append(path)
        _set_path(tree, Config, path, value)
    if task is not None:
        given = tree.setdefault("task", check_choice("task", task, TASKS))
        if given != task:
            raise ValueError(f"task: {task}() cannot run a config whose task is {given!r}")
    return Config.from_mapping(tree)
