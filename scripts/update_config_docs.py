"""Regenerate the key table of docs/training.md from the config dataclasses' help text.

    python scripts/update_config_docs.py

tests/test_docs.py fails while the table in the docs differs from :func:`markdown_table`.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from workbench.config import TRAINING_DEFAULTS, Config, ProbeConfig, Section, TinyConfig, TrainingConfig

DOCS = Path(__file__).resolve().parents[1] / "docs" / "training.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def _text(value: Any) -> str:
    if isinstance(value, Section):
        return "`{" + ", ".join(f"{key}: {_text(item).strip('`')}" for key, item in value.to_dict().items()) + "}`"
    value = list(value) if isinstance(value, tuple) else value
    return "null" if value is None else f"`{str(value).lower() if isinstance(value, bool) else value}`"


def markdown_table() -> str:
    """Every config key: key, default, meaning (the fields' help); TrainingArguments' fields summed up."""
    rows = ["| key | default | meaning |", "|---|---|---|"]

    def walk(section: Section) -> None:
        for item in dataclasses.fields(section):
            key, value = section.key(item.name), getattr(section, item.name)
            if isinstance(value, Section) and not isinstance(value, (TinyConfig, ProbeConfig)):
                rows.append(f"| **{key}** | | {item.metadata['help']} |")
                walk(value)
            elif item.name != "arguments" or not isinstance(section, TrainingConfig):
                rows.append(f"| `{key}` | {_text(value)} | {item.metadata['help']} |")
        if isinstance(section, TrainingConfig):
            for name, value in TRAINING_DEFAULTS.items():
                rows.append(
                    f"| `training.{name}` | {_text(value)} | a TrainingArguments field (the workbench's default) |"
                )
            rows.append(
                "| `training.<field>` | TrainingArguments' | any other `transformers.TrainingArguments` field |"
            )

    walk(Config())
    return "\n".join(rows)


def updated(text: str) -> str:
    """``text`` with the block between the markers replaced by the current table."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    if not rest:
        raise ValueError(f"{DOCS}: must hold the markers {START} and {END}")
    return f"{head}{START}\n{markdown_table()}\n{END}{tail}"


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    DOCS.write_text(updated(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"updated {DOCS}")
