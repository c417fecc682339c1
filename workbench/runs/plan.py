"""Planning a run: which notebooks, with which parameters, in which folders; all checked before anything runs.

Parameters, later ones winning: ``<params-dir>/<set>/<stem>.yaml`` (a missing file: the notebook's
defaults), one ``--sweep`` grid point, ``--seeds``, then ``output_dir`` and ``interactive = False``
(set by the runner). Every name is checked against the notebook's ``parameters`` cell
(:mod:`workbench.runs.notebook_cells`), every value by the notebook's own rules (its ``checks`` cells), every path it
names before any kernel starts. The options' values are read in :mod:`workbench.runs.options`, the params sets in
:mod:`workbench.runs.params_sets`.
"""

from __future__ import annotations

import itertools
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.checks import check_seeds
from workbench.redaction import secret_items
from workbench.runs.notebook_cells import (
    OUTPUT_DIR_PARAMETER,
    notebook_defaults,
    notebook_parameters,
    notebook_rules,
    run_parameters_cell,
)
from workbench.runs.options import cell_slug
from workbench.runs.params_sets import load_params

INTERACTIVE_PARAMETER = "interactive"
SEEDS_PARAMETER = "seeds"
# Keys of a parameter (at any depth of its mappings) whose text names a file or folder the notebook reads: "file" (a
# data file, vocabulary or lexicon; a list or a name -> file mapping of them too) or "checkpoint" (a folder, or a hub
# name). The runner checks them all before any kernel starts (check_paths).
PATH_KEYS = {
    "path": "file",
    "validation_path": "file",
    "test_path": "file",
    "labels_path": "file",
    "vocab_file": "file",
    "lexicon": "file",
    "table8_lexicon": "file",
    "extra_lexicons": "file",
    "loss_modules": "file",
    "model_name_or_path": "checkpoint",
    "fusion_model": "checkpoint",
}


@dataclass(frozen=True)
class Execution:
    """One notebook run: its parameters (without ``output_dir``: what papermill injects), its sweep point and folder
    name, and the defaults of its parameters cell (:func:`~workbench.runs.notebook_cells.notebook_defaults`)."""

    notebook: Path
    parameters: dict[str, Any]
    point: dict[str, Any]
    slug: str
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.notebook.stem

    @property
    def recorded_parameters(self) -> dict[str, Any]:
        """Every parameter the notebook runs with, as the runner records it in its metrics.json: the parameters
        cell's defaults, then the injected values (``output_dir`` aside: the folder the record is in)."""
        return {**self.defaults, **self.parameters}


def secret_environment(parameters: Mapping[str, Any], source: str = "parameters") -> dict[str, str]:
    """The kernel environment that carries the secrets of ``parameters`` (``workbench.redaction.secret_items``: any
    secret-looking key, any type), which params.yaml, the executed notebook and its pages show redacted
    (``<HUB_TOKEN>``): a ``hub_token`` text (at any depth) as ``HF_TOKEN``, which huggingface_hub reads (the trainers
    take the mark for "the environment's token"). Any other secret (a password, an API key, a token under another
    name, a hub token that is no text) is a ValueError naming ``source`` and the parameter: the runner cannot hand it
    to the notebook unwritten."""
    tokens = {}
    for key, value in secret_items(parameters):
        if key.rsplit(".", 1)[-1] != "hub_token" or not isinstance(value, str):
            raise ValueError(
                f"{source}: parameter {key!r} holds a secret, which the executed notebook, its params.yaml and pages "
                "would show; give it to the notebook through an environment variable instead"
                + ("" if isinstance(value, str) else " (a hub_token is one text)")
            )
        tokens[key] = value
    if len(set(tokens.values())) > 1:
        raise ValueError(
            f"{source}: parameters {sorted(tokens)} hold different hub tokens; a notebook gets one HF_TOKEN"
        )
    return {"HF_TOKEN": next(iter(tokens.values()))} if tokens else {}


def _check_parameters(notebook: Path, allowed: list[str], parameters: Mapping[str, Any], source: str) -> None:
    swept = [key for key, _ in secret_items(parameters)] if source == "--sweep" else []
    if swept:
        raise ValueError(f"--sweep: a secret ({swept[0]}) is not swept; give it in the params file")
    secret_environment(parameters, source)
    for name, value in parameters.items():
        if name == OUTPUT_DIR_PARAMETER:
            raise ValueError(f"{source}: parameter {name!r} is set by the runner, not by the user")
        if name not in allowed:
            raise ValueError(
                f"{source}: unknown parameter {name!r} for notebook {notebook.name}; allowed: {', '.join(allowed)}"
            )
        if name == INTERACTIVE_PARAMETER and value is not False:
            raise ValueError(
                f"{source}: {name}={value!r}: a headless run has no widget (figures go missing); allowed: false"
            )
        if name == SEEDS_PARAMETER:  # a notebook would refuse them only once it runs
            check_seeds(f"{source}: {name}", value)


def _named_paths(name: str, value: Any, kind: str | None = None) -> Iterable[tuple[str, str, str]]:
    """(dotted parameter name, kind, path) for every text under a PATH_KEYS key in ``value``, a parameter's value."""
    if kind is not None and isinstance(value, str):
        yield name, kind, value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _named_paths(f"{name}.{key}", item, kind or PATH_KEYS.get(key))
    elif kind is not None and isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _named_paths(f"{name}[{index}]", item, kind)


def _is_hub_name(text: str) -> bool:
    """Whether ``text`` reads as a hub repository id (``org/name``), which transformers looks up when no folder has
    that name; ``../models/x`` or ``/abs/x`` cannot be one."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(text)
    except HFValidationError:
        return False
    return True


def _data_sections(parameter: str, value: Any) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(name, section) of the config data sections in a parameter: ``data`` or ``*_data`` (``finetune_data``)."""
    if (parameter == "data" or parameter.endswith("_data")) and isinstance(value, Mapping):
        yield parameter, value


def _check_data_root(name: str, section: Mapping[str, Any]) -> None:
    """A data section naming a data set of the data root without a file (``{source: qbqtc}``) needs one of the
    release's files there (``workbench.data.root_files.present_files``, as ``load_splits`` / ``load_texts`` read them);
    MissingDataError otherwise, naming the files, the root and the fetch command."""
    from workbench.data.releases import RELEASES
    from workbench.data.root_files import present_files
    from workbench.data_root import data_root

    source = section.get("source")
    if source not in RELEASES or section.get("path") is not None or section.get("validation_path") is not None:
        return
    splits = tuple(RELEASES[source].splits.values()) or None
    try:
        present_files(source, splits, data_root())  # absolute: `python -m workbench` settles a relative one
    except ValueError as error:
        raise type(error)(f"{name}.source: {error}") from None


def check_paths(executions: Sequence[Execution], params_set: str) -> None:
    """Every file and folder the executions' parameters name (:data:`PATH_KEYS`, at any depth; ``$WORKBENCH_DATA/...``
    expanded) and the data root's files a data section reads (``{source: qbqtc}`` without a path), before any kernel
    starts: a relative path is read from the notebook's folder, its working directory. A missing one (a checkpoint:
    no such folder and no hub name) is a ValueError naming where it was given, the parameter and the path.
    """
    from workbench.data_root import expand_data_root

    for execution in executions:
        folder = execution.notebook.parent
        for parameter, value in execution.parameters.items():
            given = "--sweep" if parameter in execution.point else f"params file {params_set}/{execution.name}.yaml"
            for name, kind, text in _named_paths(parameter, value, PATH_KEYS.get(parameter)):
                path = folder / Path(expand_data_root(text)).expanduser()
                if path.exists() if kind == "file" else path.is_dir() or _is_hub_name(text):
                    continue
                where = "" if path.is_absolute() and text == str(path) else f" ({path}, from {folder}/, where it runs)"
                what = "file or folder" if kind == "file" else "checkpoint folder (nor a hub name)"
                hint = (
                    "; --encoder NAME_OR_FOLDER names another (docs/gpu.md)"
                    if name.endswith("model_name_or_path")
                    else ""
                )
                raise ValueError(f"{given}: {name}: no such {what}: {text!r}{where}{hint}")
            for name, section in _data_sections(parameter, value):
                try:
                    _check_data_root(name, section)
                except ValueError as error:
                    raise type(error)(f"{given}: {error}") from None


def _from_folder(value: Any, folder: Path, kind: str | None = None) -> Any:
    """``value`` with each relative path under a :data:`PATH_KEYS` key (at any depth) read from ``folder``, the
    notebook's, where its kernel runs; for checks made in this process, whose working directory is another. A file's
    path becomes absolute whether or not it exists (a check that names a missing one names where it was looked for);
    a checkpoint's only when it exists (else it may be a hub name)."""
    from workbench.data_root import expand_data_root

    if kind is not None and isinstance(value, str):
        path = Path(expand_data_root(value)).expanduser()
        if path.is_absolute() or not (kind == "file" or (folder / path).exists()):
            return value
        return os.path.normpath((folder / path).absolute())
    if isinstance(value, Mapping):
        return {key: _from_folder(item, folder, kind or PATH_KEYS.get(key)) for key, item in value.items()}
    if kind is not None and isinstance(value, list | tuple):
        return [_from_folder(item, folder, kind) for item in value]
    return value


def check_notebook_rules(notebook: Path, rules: tuple[str, str] | None, parameters: Mapping[str, Any]) -> None:
    """Run ``notebook``'s checks cells (:func:`~workbench.runs.notebook_cells.notebook_rules`) in this process on its
    parameters cell's defaults and ``parameters``, as its kernel would run them after papermill's injected cell: every
    value is checked by the rule the notebook itself uses (its library calls), before any kernel starts. A value a rule
    refuses (ValueError, TypeError) is a ValueError naming the notebook and what the rule says (the parameter and what
    is allowed).

    The one pre-kernel check of a notebook's parameters, ``loss_modules`` and ``extra_settings`` among them: a checks
    cell that imports loss modules of yours (``workbench.losses.import_loss_modules``) runs under
    ``workbench.losses.registry_restored``, so each notebook's modules are checked alone, as its own kernel will
    import them, and this process's registry is left as it was."""
    if rules is None:
        return
    from workbench.losses import registry_restored

    defaults, checks = rules
    namespace = run_parameters_cell(notebook, defaults)  # the notebook's own defaults
    namespace.update(parameters)
    for name, value in list(namespace.items()):
        if not name.startswith("__"):  # the parameters, not the builtins exec added
            namespace[name] = _from_folder(value, notebook.parent, PATH_KEYS.get(name))
    namespace[OUTPUT_DIR_PARAMETER] = None  # the checks write nothing
    try:
        with registry_restored():  # the loss modules it imports are its own, as in its kernel; gone from this process
            exec(compile(checks, f"{notebook.name}: checks", "exec"), namespace)
    except (ValueError, TypeError) as error:
        raise ValueError(f"notebook {notebook.name}: {error}") from None


def resolve_encoder(text: str) -> str:
    """``--encoder``'s checkpoint: an existing folder, as an absolute path (a kernel runs in its notebook's folder),
    which must hold a checkpoint (``workbench.config.check_checkpoint``), or a hub repository id (``org/name``), which
    transformers downloads into its cache on first use. ValueError naming ``--encoder`` otherwise."""
    from workbench.config import check_checkpoint

    path = Path(text).expanduser()
    if path.is_dir():
        check_checkpoint("--encoder", str(path.resolve()))
        return str(path.resolve())
    if not text or not _is_hub_name(text):
        raise ValueError(
            f"--encoder {text!r}: no such checkpoint folder ({path.absolute()}), nor a hub name (org/name, e.g. "
            "hfl/chinese-roberta-wwm-ext)"
        )
    return text


def with_encoder(value: Any, encoder: str) -> tuple[Any, int]:
    """``value`` (a parameter) with every ``model_name_or_path`` at any depth set to ``encoder``, and how many were."""
    if isinstance(value, Mapping):
        replaced = {key: with_encoder(item, encoder) for key, item in value.items()}
        count = sum(found for _, found in replaced.values())
        if "model_name_or_path" in value:
            return {**{key: item for key, (item, _) in replaced.items()}, "model_name_or_path": encoder}, count + 1
        return {key: item for key, (item, _) in replaced.items()}, count
    if isinstance(value, list | tuple):
        replaced = [with_encoder(item, encoder) for item in value]
        return [item for item, _ in replaced], sum(found for _, found in replaced)
    return value, 0


def _training_sections(parameter: str, value: Any) -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(name, section) of the config training sections in a parameter: ``training`` or ``*_training``."""
    if (parameter == "training" or parameter.endswith("_training")) and isinstance(value, Mapping):
        yield parameter, value


def check_devices(executions: Sequence[Execution], params_set: str) -> None:
    """Every training section's ``precision`` against this machine (``workbench.config.resolve_precision``, the
    trainers' rule): bf16 or fp16 without a CUDA device is a ValueError naming where it was given, before any kernel
    starts. For kernels that run here (the threads executor); a Slurm job runs elsewhere."""
    from workbench.config import resolve_precision

    for execution in executions:
        for parameter, value in execution.parameters.items():
            for name, section in _training_sections(parameter, value):
                try:
                    resolve_precision(section.get("precision", "auto"))
                except ValueError as error:
                    given = (
                        "--sweep" if parameter in execution.point else f"params file {params_set}/{execution.name}.yaml"
                    )
                    raise ValueError(f"{given}: {name}.{str(error).removeprefix('training.')}") from None


def plan_executions(
    notebooks: Sequence[Path],
    params_dir: str | Path,
    params_set: str,
    sweep: dict[str, list[Any]] | None = None,
    seeds: Sequence[int] | None = None,
    encoder: str | None = None,
) -> list[Execution]:
    """Every execution of the run, validated: a bad name or value raises ValueError before anything runs; each value
    is checked by the notebook's own rules (its cells tagged ``checks``, :func:`check_notebook_rules`).

    Args:
        notebooks, params_dir, params_set: the notebooks; ``<params_dir>/<params_set>/<stem>.yaml`` their parameters.
        sweep: parameter -> values (:func:`~workbench.runs.options.parse_sweep`); one execution per point of their
            product.
        seeds: each notebook's ``seeds`` list parameter; refused together with a ``seeds`` sweep.
        encoder: a checkpoint folder or hub name (:func:`resolve_encoder`) that replaces every ``model_name_or_path``
            of every notebook's parameters; a notebook whose parameters name none is refused.

    Returns:
        One :class:`Execution` per notebook and sweep point (params file, sweep point, seeds, ``interactive = False``),
        each in its own folder (names that differ only in case get a hash: macOS and Windows would merge them).
    """
    sweep = sweep or {}
    encoder = resolve_encoder(encoder) if encoder is not None else None
    fixed = {SEEDS_PARAMETER: list(seeds)} if seeds else {}
    if fixed and SEEDS_PARAMETER in sweep:
        raise ValueError(f"--seeds: give seeds either with --seeds or with --sweep {SEEDS_PARAMETER}=..., not both")
    points = [dict(zip(sweep, values)) for values in itertools.product(*sweep.values())]
    folded = Counter(cell_slug(point).casefold() for point in points)
    slugs = [cell_slug(point, hashed=folded[cell_slug(point).casefold()] > 1) for point in points]
    executions = []
    for notebook in notebooks:
        allowed = notebook_parameters(notebook)
        if OUTPUT_DIR_PARAMETER not in allowed:
            raise ValueError(
                f"notebook {notebook.name}: no 'output_dir' parameter (add `output_dir = None` to its parameters)"
            )
        base = load_params(params_dir, params_set, notebook.stem, notebook.parent)
        _check_parameters(notebook, allowed, base, f"params file {params_set}/{notebook.stem}.yaml")
        _check_parameters(notebook, allowed, fixed, "--seeds")
        headless = {INTERACTIVE_PARAMETER: False} if INTERACTIVE_PARAMETER in allowed else {}
        rules = notebook_rules(notebook)
        defaults = notebook_defaults(notebook, allowed)
        for point, slug in zip(points, slugs):
            _check_parameters(notebook, allowed, point, "--sweep")
            parameters = {**base, **point, **fixed, **headless}
            if encoder is not None:
                parameters = _encoder_parameters(notebook, parameters, encoder, params_set)
            try:
                check_notebook_rules(notebook, rules, parameters)
            except ValueError as error:
                given = f"params file {params_set}/{notebook.stem}.yaml"
                if point and _passes(notebook, rules, {**base, **fixed, **headless}, encoder, params_set):
                    given = "--sweep " + " ".join(f"{key}={_as_typed(value)}" for key, value in point.items())
                raise ValueError(f"{given}: {error}") from None
            executions.append(Execution(notebook, parameters, point, slug, defaults))
    return executions


def _encoder_parameters(notebook: Path, parameters: dict[str, Any], encoder: str, params_set: str) -> dict[str, Any]:
    """``parameters`` with ``encoder`` in every ``model_name_or_path``; ValueError when they name none."""
    replaced = {name: with_encoder(value, encoder) for name, value in parameters.items()}
    if not any(count for _, count in replaced.values()):
        raise ValueError(
            f"--encoder: the parameters of notebook {notebook.name} (set {params_set}) name no model_name_or_path to "
            "replace; --encoder sets the checkpoint of a set whose models are checkpoints (the gpu set)"
        )
    return {name: value for name, (value, _) in replaced.items()}


def _as_typed(value: Any) -> str:
    """A sweep value as one would type it (``[CE, NOPE]``, not ``['CE', 'NOPE']``)."""
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, allow_unicode=True).removesuffix("\n...\n").strip()


def _passes(notebook: Path, rules: Any, parameters: dict[str, Any], encoder: str | None, params_set: str) -> bool:
    """Whether ``parameters`` (a point's, less the sweep's values) pass the notebook's rules: the sweep is to blame."""
    if encoder is not None:
        parameters = _encoder_parameters(notebook, parameters, encoder, params_set)
    try:
        check_notebook_rules(notebook, rules, parameters)
    except ValueError:
        return False
    return True
