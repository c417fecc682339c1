"""The docs stay true: the config key table is generated from the dataclasses."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_docs_key_table_is_current():
    docs = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    assert _script("update_config_docs").updated(docs) == docs, "run: python scripts/update_config_docs.py"
