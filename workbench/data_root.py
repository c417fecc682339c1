"""The data root: the one folder that holds the real data sets in their public releases' layout (docs/data.md).

``$WORKBENCH_DATA`` when set, else ``<user cache>/workbench/data`` (platformdirs' user cache folder when platformdirs
is installed, else ``$XDG_CACHE_HOME`` or ``~/.cache``). A path written ``$WORKBENCH_DATA/qbqtc/dev.json`` (or
``${WORKBENCH_DATA}/...``) in a config or a parameter set names a file under the root, whether the variable is set or
not: :func:`expand_data_root` turns it into the file's path where the value enters (config fields, lexicon paths).
Imports nothing of the workbench, so the configuration and the lexicons can use it.
"""

from __future__ import annotations

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
    """``$WORKBENCH_DATA`` (``~`` expanded) when set and not empty, else ``<user cache>/workbench/data``."""
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV]).expanduser()
    return user_cache_dir() / "workbench" / "data"


def expand_data_root(value: str) -> str:
    """``value`` with a leading ``$WORKBENCH_DATA/`` or ``${WORKBENCH_DATA}/`` replaced by :func:`data_root`;
    any other string unchanged."""
    for prefix in ROOT_PREFIXES:
        if value.startswith(prefix):
            return str(data_root() / value[len(prefix) :])
    return value
