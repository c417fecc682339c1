"""Planning a run: which notebooks, with which parameters, in which folders; all checked before anything runs.

Parameters, later ones winning: ``<params-dir>/<set>/<stem>.yaml`` (a missing file: the notebook's
defaults), one ``--sweep`` grid point, ``--seeds``, then ``output_dir`` and ``interactive = False``
(set by the runner). Every name is checked against the notebook's ``parameters`` cell.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.checks import MAX_SEED, check_seeds
from workbench.config import read_yaml, read_yaml_file
from workbench.metrics_file import to_jsonable
from workbench.redaction import is_secret, secret_items

PARAMETERS_TAG = "parameters"
CHECKS_TAG = "checks"  # a notebook's cells that check its parameters; the runner runs them before any kernel starts
INJECTED_PARAMETERS_TAG = "injected-parameters"
OUTPUT_DIR_PARAMETER = "output_dir"
INTERACTIVE_PARAMETER = "interactive"
SEEDS_PARAMETER = "seeds"
PARAMS_SETS = ("default", "smoke", "gpu", "results")  # sets with a file per notebook; any folder of --params-dir too
SET_PURPOSES = {  # what the sets the project ships are for (python -m workbench run --help lists every set present)
    "default": "CPU, minutes: make run",
    "smoke": "seconds: the tests'",
    "gpu": "real data and an encoder, bf16",
    "results": "each paper's claim on real data at CPU scale, 5 seeds: results.md",
    "own": "your own_data.csv",
    "class": "notebook 05 for a class, under a minute: --only 05",
    "own_loss": "your own loss (Poly-1) beside notebook 05's, with evidence: --only 05",
}
MAX_SLUG = 96  # characters of a sweep point's folder name before its hash (file systems allow 255 bytes)
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
_SLUG_UNSAFE = re.compile(r"[^A-Za-z0-9._=+,-]")


@dataclass(frozen=True)
class Execution:
    """One notebook run: its parameters (without ``output_dir``: what papermill injects), its sweep point and folder
    name, and the defaults of its parameters cell (:func:`notebook_defaults`)."""

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


def parse_sweep(specs: Iterable[str]) -> dict[str, list[Any]]:
    """``["epsilon=0.1,0.2", "table8_losses=[CE,DSC],[FL]"]`` ->
    ``{"epsilon": [0.1, 0.2], "table8_losses": [["CE", "DSC"], ["FL"]]}``: the values read as one YAML flow list. Empty
    values, control characters and values equal after parsing (``0.1`` and ``0.10``) are refused."""
    sweep: dict[str, list[Any]] = {}
    for spec in specs:
        key, _, values = (part.strip() for part in spec.partition("="))
        if not key or not values:
            raise ValueError(f"--sweep {spec!r}: expected key=v1,v2,... with at least one value")
        if key in sweep:
            raise ValueError(f"--sweep: parameter {key!r} given twice; list all its values in one key=v1,v2")
        if is_secret(key):  # before its values are read: no message may quote them
            raise ValueError(f"--sweep: a secret ({key}) is not swept; give it in the params file")
        if not spec.isprintable() or values.endswith(","):  # a control character, a byte the terminal could not decode
            raise ValueError(f"--sweep {key}: values must be printable and not empty, got {values!r}")
        parsed = read_yaml(f"[{values}]", f"--sweep {key}")
        for a, b in itertools.combinations(parsed, 2):
            # equal after parsing: 0.1 and 0.10, NaN twice; but 1 and true are different values
            if (a == b and isinstance(a, bool) == isinstance(b, bool)) or repr(a) == repr(b):
                raise ValueError(f"--sweep {key}: the value {a!r} is given twice (equal after parsing)")
        sweep[key] = parsed
    return sweep


def parse_seeds(text: str) -> list[int]:
    """``"1,2,3"`` -> ``[1, 2, 3]``: distinct integers from 0 to ``workbench.checks.MAX_SEED`` (numpy's range)."""
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ValueError(f"--seeds {text!r}: expected comma-separated integers, e.g. 1,2,3") from None
    if any(not 0 <= seed <= MAX_SEED for seed in seeds):
        raise ValueError(f"--seeds {text!r}: seeds must be integers from 0 to {MAX_SEED}")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds {text!r}: each seed may appear once")
    return seeds


def parse_assignments(specs: Iterable[str], option: str) -> dict[str, Any]:
    """``["timeout_min=60", "slurm_partition=gpu"]`` -> ``{"timeout_min": 60, "slurm_partition": "gpu"}``, the
    values read as YAML."""
    assignments: dict[str, Any] = {}
    for spec in specs:
        key, sep, value = (part.strip() for part in spec.partition("="))
        if not sep or not key or key in assignments:
            raise ValueError(f"{option} {spec!r}: expected key=value, each key once")
        assignments[key] = read_yaml(value, f"{option} {key}")
    return assignments


def _reads_back(value: Any) -> bool:
    """True when the text of ``value`` reads back as a ``--sweep`` value as that same value and type
    (the string ``'0.1'`` writes as ``0.1``, a float; ``1,b=2`` as two values)."""
    try:
        again = read_yaml(f"[{value}]", "a folder name")
    except ValueError:
        return False
    return again == [value] and type(again[0]) is type(value)


def cell_slug(point: dict[str, Any], hashed: bool = False) -> str:
    """Folder name of a sweep point, ``epsilon=0.1,gamma=2`` (empty for no sweep), never shared by two points:
    unsafe characters become ``_``, and when that changed the text, the text is over ``MAX_SLUG`` (it is cut),
    a value does not read back (:func:`_reads_back`) or ``hashed`` is set, a hash of the typed point is appended."""
    text = ",".join(f"{key}={value}" for key, value in point.items())
    safe = _SLUG_UNSAFE.sub("_", text)
    if hashed or safe != text or len(safe) > MAX_SLUG or not all(_reads_back(value) for value in point.values()):
        safe = safe[:MAX_SLUG] + "-" + hashlib.sha1(repr(point).encode("utf-8", "backslashreplace")).hexdigest()[:8]
    return safe


def select_notebooks(notebooks_dir: str | Path, only: Sequence[str] | None = None) -> list[Path]:
    """All ``*.ipynb`` in ``notebooks_dir`` sorted, or those whose stem equals or starts with an ``only`` entry."""
    notebooks = sorted(Path(notebooks_dir).glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"--notebooks-dir {str(notebooks_dir)!r}: holds no *.ipynb notebooks")
    if not only:
        return notebooks
    selected = []
    for wanted in only:
        stem = wanted.strip().removesuffix(".ipynb")
        matches = [nb for nb in notebooks if stem and (nb.stem == stem or nb.stem.startswith(stem))]
        if not matches:
            raise ValueError(
                f"--only {wanted!r}: matches no notebook; available: {', '.join(nb.stem for nb in notebooks)}"
            )
        selected.extend(nb for nb in matches if nb not in selected)
    return sorted(selected)


def runnable_sets(params_dir: str | Path, notebooks_dir: str | Path) -> list[str]:
    """The sets a run takes: the folders of ``params_dir`` whose every ``*.yaml`` names a notebook of
    ``notebooks_dir`` (an empty folder too: every notebook on its defaults), not the trainer configs of ``examples/``
    or ``pretrain/``, which a run refuses."""
    stems = {notebook.stem for notebook in Path(notebooks_dir).glob("*.ipynb")}
    folders = sorted(path for path in Path(params_dir).glob("*") if path.is_dir() and not path.name.startswith("."))
    return [folder.name for folder in folders if {file.stem for file in folder.glob("*.yaml")} <= stems]


def params_folder(params_dir: str | Path, params_set: str, notebooks_dir: str | Path | None = None) -> Path:
    """``<params_dir>/<params_set>``: any folder there is a set; a missing one is an error naming it and the sets a
    run takes (:func:`runnable_sets` of ``notebooks_dir``; without it, every folder)."""
    if not Path(params_dir).is_dir():
        raise ValueError(f"--params-dir {str(params_dir)!r}: no such folder")
    folder = Path(params_dir) / params_set
    if not params_set or Path(params_set).name != params_set or params_set == ".." or not folder.is_dir():
        if notebooks_dir is None:
            available = sorted(path.name for path in Path(params_dir).iterdir() if path.is_dir())
        else:
            available = runnable_sets(params_dir, notebooks_dir)
        raise ValueError(
            f"--params-set {params_set!r}: no folder {folder}; available: {', '.join(available) or '(none)'}"
        )
    return folder


def describe_sets(params_dir: str | Path, notebooks_dir: str | Path) -> str:
    """The sets in ``params_dir`` a run takes (:func:`runnable_sets`), each with its purpose where the project says it
    (``default (CPU, minutes: make run), ..., results``); the shipped sets alone when the folders are not there."""
    names = runnable_sets(params_dir, notebooks_dir) if Path(params_dir).is_dir() else []
    return ", ".join(
        f"{name} ({SET_PURPOSES[name]})" if name in SET_PURPOSES else name for name in names or SET_PURPOSES
    )


def load_params(
    params_dir: str | Path, params_set: str, notebook_stem: str, notebooks_dir: str | Path | None = None
) -> dict[str, Any]:
    """``<params_dir>/<set>/<stem>.yaml`` as a dict; a missing file means the notebook's defaults (``{}``)."""
    path = params_folder(params_dir, params_set, notebooks_dir) / f"{notebook_stem}.yaml"
    return read_yaml_file(path, "params file") if path.is_file() else {}


def read_notebook(notebook: Path, what: str = "NOTEBOOK") -> Any:
    """The notebook at ``notebook`` (nbformat 4, checked against nbformat's schema); ValueError naming ``what`` and the
    path when it is missing or not a notebook (not JSON, not UTF-8, a cell or output outside the schema)."""
    import nbformat

    if not notebook.is_file():
        raise ValueError(f"{what} {notebook}: no such file")
    try:
        invalid: dict[str, Exception] = {}  # read only warns of a cell or output outside nbformat's schema
        with warnings.catch_warnings():  # nbformat's warnings on the file's form: the error below says what is wrong
            warnings.simplefilter("ignore")
            read = nbformat.read(notebook, as_version=4, capture_validation_error=invalid)
        if invalid:
            raise invalid["ValidationError"]
        return read
    except (ValueError, TypeError, AttributeError, nbformat.ValidationError) as error:  # not JSON, UTF-8, a notebook
        reason = str(getattr(error, "message", None) or error).splitlines()[0][:200] or type(error).__name__
        path = getattr(error, "absolute_path", ())  # where in the notebook the schema fails: cells[0].source
        where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
        reason = f"{where.lstrip('.')}: {reason}" if where else reason
        raise ValueError(f"{what} {notebook}: not a Jupyter notebook ({reason})") from None


def notebook_parameters(notebook: str | Path) -> list[str]:
    """Names defined in the notebook's ``parameters`` cell (papermill.inspect_notebook), once
    :func:`read_notebook` has read it."""
    import papermill

    read_notebook(Path(notebook), "notebook")
    try:
        return list(papermill.inspect_notebook(str(notebook)))
    except ValueError as exc:  # e.g. no kernelspec in the notebook metadata
        raise ValueError(f"notebook {Path(notebook).name}: {exc}") from exc


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


def notebook_rules(notebook: Path) -> tuple[str, str] | None:
    """The source of ``notebook``'s parameters cell and of its cells tagged :data:`CHECKS_TAG` (the calls that check
    each parameter against its rule in the library), or None when it has no such cell."""
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    checks = [cell.source for cell in cells if cell.cell_type == "code" and CHECKS_TAG in cell.metadata.get("tags", [])]
    return (parameters_cell(notebook), "\n\n".join(checks)) if checks else None


def parameters_cell(notebook: Path) -> str:
    """The source of ``notebook``'s cell tagged :data:`PARAMETERS_TAG`."""
    import nbformat

    cells = nbformat.read(notebook, as_version=4).cells
    return "\n".join(cell.source for cell in cells if PARAMETERS_TAG in cell.metadata.get("tags", []))


def run_parameters_cell(notebook: Path, source: str) -> dict[str, Any]:
    """What ``source``, the notebook's parameters cell, defines when it runs in this process, as it runs first in the
    notebook's kernel: the notebook's defaults (and what the cell imports). A cell that fails is a ValueError naming
    the notebook: its kernel would stop there too."""
    namespace: dict[str, Any] = {}
    try:
        exec(compile(source, f"{notebook.name}: parameters", "exec"), namespace)
    except Exception as error:  # a syntax error, a name the cell does not define: any error of the notebook's code
        raise ValueError(
            f"notebook {notebook.name}: its parameters cell fails ({type(error).__name__}: {error})"
        ) from None
    return namespace


def notebook_defaults(notebook: Path, names: Sequence[str]) -> dict[str, Any]:
    """The defaults of the parameters ``names`` (``output_dir`` aside), as the notebook's parameters cell gives them
    (:func:`run_parameters_cell`): what the runner records beside the injected values. A value JSON cannot hold is
    recorded as its ``repr``."""
    namespace = run_parameters_cell(notebook, parameters_cell(notebook))
    defaults = {}
    for name in names:
        if name == OUTPUT_DIR_PARAMETER or name not in namespace:
            continue
        try:
            defaults[name] = to_jsonable(namespace[name])
        except ValueError:
            defaults[name] = repr(namespace[name])
    return defaults


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
    """Run ``notebook``'s checks cells (:func:`notebook_rules`) in this process on its parameters cell's defaults and
    ``parameters``, as its kernel would run them after papermill's injected cell: every value is checked by the rule
    the notebook itself uses (its library calls), before any kernel starts. A value a rule refuses (ValueError,
    TypeError) is a ValueError naming the notebook and what the rule says (the parameter and what is allowed).

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
    is checked by the notebook's own rules (its cells tagged :data:`CHECKS_TAG`, :func:`check_notebook_rules`).

    Args:
        notebooks, params_dir, params_set: the notebooks; ``<params_dir>/<params_set>/<stem>.yaml`` their parameters.
        sweep: parameter -> values (:func:`parse_sweep`); one execution per point of their product.
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
