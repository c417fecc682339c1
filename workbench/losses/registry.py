"""Name -> loss class registry and the single public constructor ``build_loss``: the workbench's own losses
(:data:`LOSSES`) and yours (:func:`register_loss`, :func:`import_loss_modules`; docs/your_own_loss.md)."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from torch import nn

from workbench.data_root import expand_data_root
from workbench.losses._base import ImbalanceLoss
from workbench.losses.classification import (
    ClassBalancedLoss,
    CrossEntropyLoss,
    FocalLoss,
    LabelSmoothingLoss,
    LogitAdjustedLoss,
    WeightedCrossEntropyLoss,
)
from workbench.losses.dice import DiceLoss, SelfAdjustingDiceLoss, TverskyLoss
from workbench.losses.mlm import HardCorrectionLoss, MaskedLMLoss, SoftRegularizationLoss
from workbench.losses.ordinal import CornLoss
from workbench.losses.own import OwnLoss, check_loss_class, check_name, class_parameters
from workbench.losses.pcl import PropensityCorrectedLoss

LOSSES: dict[str, type[nn.Module]] = {
    "ce": CrossEntropyLoss,
    "wce": WeightedCrossEntropyLoss,
    "ls": LabelSmoothingLoss,
    "focal": FocalLoss,
    "dice": DiceLoss,
    "tversky": TverskyLoss,
    "dsc": SelfAdjustingDiceLoss,
    "pcl": PropensityCorrectedLoss,
    "class_balanced": ClassBalancedLoss,
    "logit_adjusted": LogitAdjustedLoss,
    "corn": CornLoss,
    "mlm": MaskedLMLoss,
    "mlm_hc": HardCorrectionLoss,
    "mlm_sr": SoftRegularizationLoss,
}


OWN_LOSSES: dict[str, type[nn.Module]] = {}
"""The losses registered by :func:`register_loss` (yours), beside the workbench's own :data:`LOSSES`."""
MODULE_PREFIX = "workbench_loss_module_"
"""The start of the module name a file of ``loss_modules`` is imported under (a flat name: its classes pickle)."""
COUNTS_PARAMETER = "label_counts"
"""A parameter a loss of yours may require: ``workbench.train.loss_from_spec`` gives it the training split's counts."""


def register_loss(name: str, loss_class: type[nn.Module], replace: bool = False) -> type[nn.Module]:
    """Register ``loss_class`` under ``name``: :func:`build_loss` builds it (checking its parameters against the
    class's signature), :func:`available_losses` lists it, the configs, notebooks and curves take the name.

    Args:
        name: a letter, then letters, digits, ``_``, ``.`` or ``-``; not a name of the workbench's own losses.
        loss_class: an ``nn.Module`` class whose keyword arguments are its parameters and whose
            ``forward(logits, target)`` takes (N, C) logits and (N,) class ids and returns the mean
            (``workbench.losses.own``: how the trainers are served).
        replace: allow a name already registered by another class of yours. The same class registered again (its
            module re-imported, a notebook cell run again) replaces the earlier one without it.

    Returns:
        ``loss_class``. TypeError naming the class for a class that is not an ``nn.Module``, parameters that are not
        named keyword arguments, or a ``forward`` that cannot take (logits, target); ValueError naming the name for
        a bad name or a name taken.
    """
    check_name(name)
    check_loss_class(loss_class)
    if name in LOSSES:
        raise ValueError(
            f"name: {name!r} is one of the workbench's own losses ({LOSSES[name].__name__}), which the notebooks "
            f"compare against; register yours under another name, got {name!r} for {loss_class.__qualname__}"
        )
    earlier = OWN_LOSSES.get(name)
    again = earlier is not None and (earlier.__module__, earlier.__qualname__) == (
        loss_class.__module__,
        loss_class.__qualname__,
    )
    if earlier is not None and not again and not replace:
        raise ValueError(
            f"name: {name!r} is already registered for {earlier.__module__}.{earlier.__qualname__}; pass "
            f"replace=True to register {loss_class.__module__}.{loss_class.__qualname__} in its place, or choose "
            "another name"
        )
    OWN_LOSSES[name] = loss_class
    return loss_class


@contextlib.contextmanager
def registry_restored() -> Iterator[None]:
    """Inside, register and import as usual; after, the registrations and loss modules of the block are gone (the
    runner checks each notebook's ``loss_modules`` as that notebook's own kernel will see them)."""
    registered = dict(OWN_LOSSES)
    modules = set(sys.modules)
    try:
        yield
    finally:
        OWN_LOSSES.clear()
        OWN_LOSSES.update(registered)
        for name in set(sys.modules) - modules:
            if name.startswith(MODULE_PREFIX):
                del sys.modules[name]


def own_losses() -> list[str]:
    """Sorted names registered by :func:`register_loss` (yours)."""
    return sorted(OWN_LOSSES)


def available_losses() -> list[str]:
    """Sorted names accepted by ``build_loss``: the workbench's own and those registered by :func:`register_loss`."""
    return sorted({*LOSSES, *OWN_LOSSES})


def registered_class(name: str, key: str = "name") -> type[nn.Module]:
    """The class registered as ``name``; ValueError naming ``key`` and the available names otherwise."""
    found = LOSSES.get(name) if isinstance(name, str) else None
    found = found or (OWN_LOSSES.get(name) if isinstance(name, str) else None)
    if found is None:
        raise ValueError(
            f"{key}: must be one of {available_losses()} (a loss of yours: workbench.losses.register_loss in a "
            f"module named by loss_modules), got {name!r}"
        )
    return found


def loss_parameters(name: str) -> dict[str, bool]:
    """The parameters of the loss registered as ``name``, each mapped to whether it is required (has no default)."""
    return class_parameters(registered_class(name))


def check_loss_parameters(
    name: str,
    params: Mapping[str, Any],
    name_key: str = "name",
    params_key: str | None = None,
    counts_supplied: bool = False,
) -> None:
    """ValueError unless ``name`` is registered and ``params`` holds only parameters its class takes and every one it
    requires (``label_counts`` counts as given when ``counts_supplied``: the training split's, added later). The
    messages name ``name_key`` / ``params_key`` (a config's ``loss.name``, a notebook's ``extra_settings['x']``),
    the loss and its parameters. The values are the class's to check, when it is built."""
    parameters = class_parameters(registered_class(name, name_key))
    where = f"{params_key}: " if params_key else ""
    unknown = sorted(set(params) - set(parameters))
    if unknown:
        raise ValueError(f"{where}parameters of {name!r}: must be among {list(parameters)}, got {unknown}")
    given = set(params) | ({COUNTS_PARAMETER} if counts_supplied else set())
    missing = [parameter for parameter, required in parameters.items() if required and parameter not in given]
    if missing:
        raise ValueError(
            f"{where}parameters of {name!r}: must give {missing} (no default; its parameters: {list(parameters)}), "
            f"got {sorted(params)}"
        )


def build_loss(name: str, **params: object) -> nn.Module:
    """Build the loss registered as ``name`` with keyword ``params``.

    Args:
        name: one of :func:`available_losses`: the workbench's own (ce, wce, ls, focal, dice, tversky, dsc, pcl,
            class_balanced, logit_adjusted, corn, mlm, mlm_hc, mlm_sr) or one registered by :func:`register_loss`.
        **params: the loss class's keyword arguments (docs/losses.md).

    Returns:
        The ``nn.Module`` (a loss of yours inside an :class:`~workbench.losses.own.OwnLoss`, unless its class is an
        ``ImbalanceLoss``). Raises ValueError for an unknown name (listing the available ones), for a parameter the
        loss does not take or a required one not given (listing the ones it takes), and for out-of-range or
        non-finite values ("param: must ..., got ...").
    """
    check_loss_parameters(name, params)
    built = registered_class(name)(**params)
    if name in LOSSES or isinstance(built, ImbalanceLoss):
        return built
    return OwnLoss(name, built)


def import_loss_modules(paths: Sequence[str | Path], folder: str | Path | None = None) -> dict[str, list[str]]:
    """Import each ``.py`` file of ``paths`` (relative ones from ``folder``, default the working directory;
    ``$WORKBENCH_DATA/...`` expanded), so that the losses it registers can be built; a file imported before and
    unchanged since is not run again, an edited one is. Returns each file's path -> the names its classes are
    registered under. ValueError, one line, naming the parameter ``loss_modules`` and the file: not a list of paths,
    no such file, not a ``.py`` file, or its import failed (the file and line, the error)."""
    if isinstance(paths, str | bytes | Path) or not isinstance(paths, Sequence):
        raise ValueError(f"loss_modules: must be a list of .py files, got {paths!r}")
    registered = {}
    for index, text in enumerate(paths):
        if not isinstance(text, str | Path) or not str(text):
            raise ValueError(f"loss_modules[{index}]: must be the path of a .py file, got {text!r}")
        path = Path(expand_data_root(str(text))).expanduser()
        path = (Path(folder or Path.cwd()) / path).resolve()
        if path.suffix != ".py":
            raise ValueError(f"loss_modules[{index}]: must be a .py file, got {str(text)!r}")
        if not path.is_file():
            raise ValueError(f"loss_modules[{index}]: no such file: {str(text)!r} ({path})")
        module = _import_file(path)
        registered[str(path)] = [name for name, cls in OWN_LOSSES.items() if cls.__module__ == module]
    return registered


def _import_file(path: Path) -> str:
    """Run the file at ``path`` as a module (unless it ran before with the same text); its module name."""
    text = path.read_bytes()
    digest = hashlib.sha1(str(path).encode("utf-8", "backslashreplace")).hexdigest()[:10]
    name = f"{MODULE_PREFIX}{re.sub(r'[^0-9A-Za-z_]', '_', path.stem)}_{digest}"
    earlier = sys.modules.get(name)
    if earlier is not None and getattr(earlier, "__source_sha1__", None) == hashlib.sha1(text).hexdigest():
        return name
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    module.__source_sha1__ = hashlib.sha1(text).hexdigest()
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        sys.modules.pop(name, None)
        line = error.lineno if isinstance(error, SyntaxError) else None
        frames = [frame for frame in traceback.extract_tb(error.__traceback__) if Path(frame.filename) == path]
        line = frames[-1].lineno if frames else line
        raise ValueError(
            f"loss_modules: {path}{f':{line}' if line else ''}: importing it failed: {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''}"
        ) from error
    return name
