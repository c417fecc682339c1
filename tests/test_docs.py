"""The docs stay true: the config key table is generated from the dataclasses."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

from test_public_api import _resolves

ROOT = Path(__file__).resolve().parents[1]


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_training_docs_key_table_is_current():
    docs = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
    assert _script("update_config_docs").updated(docs) == docs, "run: python scripts/update_config_docs.py"


COMMAND_STARTS = ("python", "make", "papermill", ".venv/bin/", "torchrun", "accelerate", "conda", "bash", "jupyter")
PATH_SUFFIXES = (".yaml", ".yml", ".ipynb", ".py", ".md", ".json", ".txt", ".gz", ".tsv", ".toml")


def _commands() -> list[tuple[str, str]]:
    """(file, command line) for every command in a code block of README.md, params/README.md and docs/*.md."""
    found = []
    for path in [ROOT / "README.md", ROOT / "params" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        fenced = False
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip().startswith("```"):
                fenced = not fenced
                continue
            if not (fenced or line.startswith("    ")):
                continue
            command = line.strip()
            if command.startswith(COMMAND_STARTS):
                found.append((path.name, command.split("#")[0].strip()))
    return found


def _named_paths(command: str) -> list[str]:
    paths = []
    tokens = command.replace("=", " ").replace('"', " ").split()
    for before, token in zip(["", *tokens], tokens):
        token = token.rstrip(",;)")
        if before == "--encoder":  # a hub name (hfl/chinese-roberta-wwm-ext) or a checkpoint folder of the user's
            continue
        if "<" in token or "*" in token or token.startswith(("-", "$", "http")) or token.split(".")[0].isupper():
            continue
        if token.startswith(("outputs/", "out/", "/tmp", ".venv/")) or token in (
            "out.ipynb",
        ):  # made by the run / make
            continue
        if "/" in token or token.endswith(PATH_SUFFIXES):
            if token.endswith(PATH_SUFFIXES) or (ROOT / token).suffix == "" and "/" in token:
                paths.append(token)
    return paths


# commands whose last argument is a folder they create
CREATES_LAST_ARGUMENT = (
    "python scripts/publish_encoder.py",
    ".venv/bin/python scripts/publish_encoder.py",
    "python scripts/gpu_window.py unpack",
)


def test_every_path_a_documented_command_names_exists():
    commands = [
        (source, command.rsplit(" ", 1)[0] if command.startswith(CREATES_LAST_ARGUMENT) else command)
        for source, command in _commands()
    ]
    assert len(commands) >= 10, "the README and docs show the commands a user runs"
    missing = []
    for source, command in commands:
        for token in _named_paths(command):  # $WORKBENCH_DATA/... (the data root) is skipped with every $ token
            if not (ROOT / token).exists() and not (ROOT / "notebooks" / token).exists():
                missing.append(f"{source}: {token} in `{command}`")
    assert not missing, "\n".join(missing)


_IMPORT = re.compile(r"from (workbench[\w.]*) import ([\w, ]+)")
_DOTTED = re.compile(r"(?<![\w/.])workbench(?:\.\w+)+")


def test_the_library_table_names_a_function_for_every_paper():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| paper | equation or algorithm | function |") : readme.index("| module | concern |")]
    assert all(paper in table for paper in ("arXiv:1911.02855", "arXiv:2208.02959", "arXiv:2212.00460", "COLING 2022"))
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    functions = [re.findall(r"`(workbench[\w.]+)`", line.rstrip(" |").rsplit("|", 1)[1]) for line in rows]
    assert all(functions), "every row names the function"
    assert [name for names in functions for name in names if not _resolves(name)] == []


def test_every_module_and_name_the_docs_import_exists():
    # docs/runner.md showed `from workbench.results import write_metrics` and `workbench.runner`, neither exists
    missing = []
    for path in [ROOT / "README.md", ROOT / "params" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        for module, names in _IMPORT.findall(text):
            missing += [
                f"{path.name}: from {module} import {name}"
                for name in (n.strip() for n in names.split(","))
                if name and not _resolves(f"{module}.{name}")
            ]
        missing += [f"{path.name}: {dotted}" for dotted in sorted(set(_DOTTED.findall(text))) if not _resolves(dotted)]
    assert not missing, "\n".join(missing)


_TEST = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def test_every_test_the_docs_name_exists():
    # docs/reliability.md's "handled" and round-2 rows name the test that covers each
    named = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        named += [(path.name, *found) for found in _TEST.findall(path.read_text(encoding="utf-8"))]
    assert len(named) >= 5
    missing = [
        f"{source}: {test_file}::{name}"
        for source, test_file, name in named
        if not (ROOT / test_file).is_file()
        or not re.search(rf"^(async )?def {name}\(", (ROOT / test_file).read_text(encoding="utf-8"), re.MULTILINE)
    ]
    assert not missing, "\n".join(missing)


def test_gitignore_ignores_no_committed_file():
    import subprocess

    ignored = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    if ignored.returncode != 0:
        import pytest

        pytest.skip("not a git checkout")
    assert ignored.stdout.split() == [], "committed files that .gitignore lists (e.g. params/README.md)"
