"""Regenerate the key table of docs/training.md from the config dataclasses' help text.

    python scripts/update_config_docs.py

tests/test_docs.py fails while the table in the docs differs from ``workbench.config.markdown_table()``.
"""

from __future__ import annotations

from pathlib import Path

from workbench.config import markdown_table

DOCS = Path(__file__).resolve().parents[1] / "docs" / "training.md"
START, END = "<!-- config-table:start -->", "<!-- config-table:end -->"


def updated(text: str) -> str:
    """``text`` with the block between the markers replaced by the current table."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    if not rest:
        raise ValueError(f"{DOCS}: must hold the markers {START} and {END}")
    return f"{head}{START}\n{markdown_table()}\n{END}{tail}"


if __name__ == "__main__":
    DOCS.write_text(updated(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"updated {DOCS}")
