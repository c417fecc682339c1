"""Test-wide settings: encoded corpora are cached in a temporary folder, never in the user's cache."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def corpus_cache_in_a_temporary_folder(tmp_path_factory):
    previous = os.environ.get("WORKBENCH_CACHE")
    os.environ["WORKBENCH_CACHE"] = str(tmp_path_factory.mktemp("workbench_cache"))
    yield
    if previous is None:
        os.environ.pop("WORKBENCH_CACHE", None)
    else:
        os.environ["WORKBENCH_CACHE"] = previous
