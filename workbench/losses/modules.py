"""Files of your own losses: :func:`import_loss_modules` runs the ``.py`` files a config's or a notebook's
``loss_modules`` names, whose ``register_loss`` calls add their losses to the registry (docs/your_own_loss.md).

The one module of the losses that reads more of the workbench than ``workbench.checks``: ``workbench.data_root``, which
imports nothing of the workbench, expands a path written ``$WORKBENCH_DATA/...`` as for every other file a
parameter names. It builds no loss.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from workbench.data_root import expand_data_root
from workbench.losses.registry import MODULE_PREFIX, OWN_LOSSES


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
            where = "" if str(text) == str(path) else f" ({path})"  # where a relative one was looked for
            raise ValueError(f"loss_modules[{index}]: no such file: {str(text)!r}{where}")
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
