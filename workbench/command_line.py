"""What the command lines (``python -m workbench``, ``python -m workbench.train``) print for bad input: one line."""

from __future__ import annotations

import sys

PIP_NAMES = {"yaml": "pyyaml", "sklearn": "scikit-learn", "mathjax": "django-static-mathjax"}
"""The pip package of an import name, where the two differ."""


def error_message(error: Exception) -> str:
    """A CLI's one error line, ``error: <message>``. A missing package's line names its pip install; a missing
    module of the workbench itself is re-raised."""
    if not isinstance(error, ModuleNotFoundError):
        return f"error: {error}"
    if not error.name or error.name.startswith("workbench"):
        raise error
    package = PIP_NAMES.get(error.name.split(".")[0], error.name.split(".")[0])
    return f"error: package {package} is missing: install it with `{sys.executable} -m pip install {package}`"
