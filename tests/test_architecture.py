"""The import rules of docs/architecture.md: dependencies flow one way, studies stand alone.

Every ``import workbench.X`` / ``from workbench.X import ...`` in the package (module level or
inside a function) is read with ``ast`` and checked against the layer map below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "workbench"

FOUNDATION = {
    "checks",
    "command_line",
    "config",
    "stats",
    "threads",
    "vocab",
    "metrics",
    "label_entropy",
    "synonyms",
    "text_files",
    "word_vectors",
    "metrics_file",
    "decisions",
    "evidence",
    "yaml_files",
    "data_root",
    "hub",
}
ALLOWED: dict[str, set[str]] = {
    "checks": set(),
    "command_line": set(),
    "stats": {"checks", "metrics"},  # the paired bootstrap resamples metrics.confusion_scores
    "threads": set(),
    "config": {"checks", "yaml_files", "losses", "data_root", "metrics_file", "data"},  # losses.choices (torch-free);
    # $WORKBENCH_DATA/ paths; metrics_file.redact: a shown config hides its secrets; data.releases: the named data sets
    "data_root": set(),
    "metrics_file": set(),
    "yaml_files": set(),
    "text_files": set(),
    "hub": set(),
    "vocab": {"text_files", "hub"},  # text_files.read_lines: the one reader of text files; hub: a name looked up
    "metrics": {"checks"},
    "decisions": {"checks", "metrics"},
    "evidence": {"checks", "metrics", "stats"},
    "label_entropy": {"checks"},
    "synonyms": {"checks", "text_files", "data_root"},
    "word_vectors": {"checks"},
    "losses": {"checks", "synonyms"},
    "masking": {"checks", "config", "text_files", "threads"},
    "data": {"checks", "config", "synonyms", "text_files", "masking", "data_root"},
    "models": {"checks", "config", "vocab"},
    "runs": {
        "checks",
        "config",
        "stats",
        "threads",
        "metrics_file",
        "data_root",
        "data",
        "evidence",
    },  # data: file check
    "train": FOUNDATION | {"losses", "masking", "data", "models"},  # not the runner: metrics.json via metrics_file
    "viz": {"checks", "config", "losses", "label_entropy"},
    "studies": FOUNDATION | {"losses", "masking", "data", "models", "train"},
    "__main__": {"command_line", "runs", "data", "data_root"},  # the one error line: command_line.error_message; data
    # list / fetch; data_root.settle_data_root: one root for the command and its kernels
}


def _imports(path: Path) -> set[str]:
    """Top-level workbench packages/modules imported by ``path`` (``workbench.losses.pcl`` -> ``losses``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        for name in names:
            parts = name.split(".")
            if parts[0] == "workbench" and len(parts) > 1:
                found.add(parts[1])
    return found


def _unit(path: Path) -> str:
    relative = path.relative_to(PACKAGE)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else relative.stem


MODULES = sorted(path for path in PACKAGE.rglob("*.py") if path.name != "__init__.py" or path.parent != PACKAGE)


@pytest.mark.parametrize("path", MODULES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_module_imports_only_lower_layers(path):
    unit = _unit(path)
    assert unit in ALLOWED, f"{unit}: add it to the layer map (and to docs/architecture.md)"
    foreign = _imports(path) - {unit} - ALLOWED[unit]
    assert not foreign, (
        f"{path.relative_to(PACKAGE)} ({unit}) imports {sorted(foreign)}; allowed: {sorted(ALLOWED[unit])}"
    )


def test_losses_import_nothing_from_data_train_viz_or_studies():
    for path in (PACKAGE / "losses").glob("*.py"):
        assert not _imports(path) & {"data", "train", "viz", "studies"}, path.name


def test_losses_import_neither_the_config_nor_text_files():
    # issue 29: the losses' options live with them (losses/choices.py); reading a label feature is the data side's
    for path in (PACKAGE / "losses").glob("*.py"):
        assert not _imports(path) & {"config", "text_files", "data"}, path.name


def test_config_reads_from_the_losses_only_their_torch_free_choices():
    modules = set()
    for path in (PACKAGE / "config").glob("*.py"):  # the config package, every module of it
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert {module for module in modules if module.startswith("workbench.losses")} == {"workbench.losses.choices"}
    choices = ast.parse((PACKAGE / "losses" / "choices.py").read_text(encoding="utf-8"))
    imports = [node for node in ast.walk(choices) if isinstance(node, ast.Import | ast.ImportFrom)]
    assert all(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in imports)


def test_config_reads_from_the_data_only_its_registry_of_named_data_sets():
    # issue 38: a data set is one entry (data/releases.py), from which the config's sources derive; that module imports
    # nothing of the workbench but data_root, and nothing heavy, so the config stays fast and free of datasets
    modules = set()
    for path in (PACKAGE / "config").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert {module for module in modules if module.startswith("workbench.data.")} == {"workbench.data.releases"}
    releases = ast.parse((PACKAGE / "data" / "releases.py").read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(releases) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {alias.name for node in ast.walk(releases) if isinstance(node, ast.Import) for alias in node.names}
    workbench = {module for module in imported if module.startswith("workbench")}
    assert workbench == {"workbench.data_root"}
    assert not imported & {"datasets", "torch", "numpy", "pandas"}


def test_masking_does_not_import_the_losses():
    # issue 20: a masked LM's held-out evaluation with hard-correction statistics is evaluation (train), not masking
    for path in (PACKAGE / "masking").rglob("*.py"):
        assert "losses" not in _imports(path), path.name


def test_the_trainers_do_not_import_the_runner():
    # issue 20: trainers and runner both write metrics.json through ``metrics_file``, one writer below both
    for path in (PACKAGE / "train").rglob("*.py"):
        assert "runs" not in _imports(path), path.name


def test_layout_study_modules_are_small_and_benchmarks_live_outside_the_package():
    # issue 20: no study module over 400 lines; the benchmarks are the top-level ``benchmarks/``, not in the package
    for path in (PACKAGE / "studies").rglob("*.py"):
        assert len(path.read_text(encoding="utf-8").splitlines()) <= 400, path.relative_to(PACKAGE)
    assert not (PACKAGE / "bench").exists() and (PACKAGE.parent / "benchmarks" / "__main__.py").is_file()


def test_studies_import_nothing_from_each_other():
    for path in (PACKAGE / "studies").glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        modules |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        siblings = {name for name in modules if name.startswith("workbench.studies")}
        assert not siblings, f"{path.name} imports {sorted(siblings)}"


def test_notebooks_import_only_public_packages():
    import json

    public = {
        "workbench.losses",
        "workbench.masking",
        "workbench.train",
        "workbench.viz",
        "workbench.data",
        "workbench.runs",
        "workbench.stats",
        "workbench.synonyms",
        "workbench.word_vectors",
        "workbench.label_entropy",
        "workbench.evidence",
        "workbench.decisions",
    }
    for notebook in sorted((PACKAGE.parent / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        source = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("workbench"):
                assert node.module in public or node.module.startswith("workbench.studies"), (
                    f"{notebook.name} imports from {node.module}"
                )
            assert not (isinstance(node, (ast.FunctionDef, ast.ClassDef))), (
                f"{notebook.name} defines {node.name} in a cell"
            )
            if isinstance(node, ast.Import):
                assert not any(alias.name.startswith(("plotly", "matplotlib")) for alias in node.names), notebook.name
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("plotly"), f"{notebook.name}: plotly belongs in workbench.viz"
