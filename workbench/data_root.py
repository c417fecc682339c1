"""The data root: the one folder that holds the real data sets in their public releases' layout (docs/data.md).

``$WORKBENCH_DATA`` when set, else ``<user cache>/workbench/data`` (platformdirs' user cache folder when platformdirs
is installed, else ``$XDG_CACHE_HOME`` or ``~/.cache``), always as an absolute path: a relative ``$WORKBENCH_DATA`` is
read from the working directory of the command that reads it, and :func:`settle_data_root` writes it back absolute
once, so that the kernels a runner starts in another folder see the same root. A path written
``$WORKBENCH_DATA/qbqtc/dev.json`` (or ``${WORKBENCH_DATA}/...``) in a config or a parameter set names a file under
the root, whether the variable is set or not: :func:`expand_data_root` turns it into the file's path where the value
enters (config fields, lexicon paths). Imports nothing of the workbench, so the configuration and the lexicons can use
it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

DATA_ROOT_ENV = "WORKBENCH_DATA"
"""The environment variable that names the data root."""
ROOT_PREFIXES = (f"${DATA_ROOT_ENV}/", f"${{{DATA_ROOT_ENV}}}/")
"""How a path under the data root is written in a config: ``$WORKBENCH_DATA/cilin/cilin_ex.txt``."""


def user_cache_dir() -> Path:
    """The user's cache folder: platformdirs' when installed, else ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    try:
        from platformdirs import user_cache_path
    except ModuleNotFoundError:
        return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return user_cache_path()


def data_root() -> Path:
    """``$WORKBENCH_DATA`` (``~`` expanded, made absolute) when set and not empty, else
    ``<user cache>/workbench/data``."""
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV]).expanduser().absolute()
    return (user_cache_dir() / "workbench" / "data").absolute()


def settle_data_root() -> None:
    """Write a relative ``$WORKBENCH_DATA`` back as the absolute path it names from here (the command's working
    directory), so that processes started in another folder (a runner's kernels run in ``notebooks/``) read the same
    root. Called once, where a command starts."""
    value = os.environ.get(DATA_ROOT_ENV)
    if value and not Path(value).expanduser().is_absolute():
        os.environ[DATA_ROOT_ENV] = str(data_root())


def where_root_is_set() -> str:
    """How the data root was chosen, for messages: ``$WORKBENCH_DATA`` or the default."""
    return f"${DATA_ROOT_ENV}" if os.environ.get(DATA_ROOT_ENV) else f"${DATA_ROOT_ENV} unset: the default"


def check_data_root(root: Path) -> None:
    """ValueError naming ``root`` and how the root was chosen when it cannot be a folder: a file, a symbolic link
    loop, a symbolic link to nothing. A root that does not exist yet passes (``data fetch`` creates it)."""
    problem = None
    try:
        os.stat(root)
    except OSError as error:
        if error.errno == errno.ELOOP:
            problem = "is a symbolic link loop (a link that leads back to itself)"
        elif os.path.islink(root):
            problem = f"is a symbolic link to {os.readlink(root)!r}, which does not exist"
    else:
        if not root.is_dir():
            problem = "is a file, not a folder"
    if problem is not None:
        raise ValueError(
            f"data root: {root} ({where_root_is_set()}) {problem}; set {DATA_ROOT_ENV} to a folder for the data sets"
        )


def expand_data_root(value: str) -> str:
    """``value`` with a leading ``$WORKBENCH_DATA/`` or ``${WORKBENCH_DATA}/`` replaced by :func:`data_root`;
    any other string unchanged."""
    for prefix in ROOT_PREFIXES:
        if value.startswith(prefix):
            return str(data_root() / value[len(prefix) :])
    return value
