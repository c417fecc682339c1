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
    "redaction",
}
ALLOWED: dict[str, set[str]] = {
    "checks": {"redaction"},  # a message shows a secret as its mark
    "command_line": set(),
    "stats": {"checks", "metrics"},  # the paired bootstrap resamples metrics.confusion_scores
    "threads": set(),
    "config": {"checks", "yaml_files", "losses", "data_root", "redaction", "data"},  # losses.choices (torch-free);
    # $WORKBENCH_DATA/ paths; redaction: a shown config hides its secrets; data.releases: the named data sets
    "data_root": set(),
    "metrics_file": {"redaction"},
    "yaml_files": {"redaction"},  # an override's error shows a secret as its mark
    "redaction": set(),
    "text_files": set(),
    "hub": set(),
    "vocab": {"text_files", "hub"},  # text_files.read_lines: the one reader of text files; hub: a name looked up
    "metrics": {"checks"},
    "decisions": {"checks", "metrics"},
    "evidence": {"checks", "metrics", "stats", "redaction"},
    "label_entropy": {"checks"},
    "synonyms": {"checks", "text_files", "data_root", "data"},  # data.root_files alone: a lexicon of the data root
    # checked against its pinned sha256 as a data set's file is
    "word_vectors": {"checks"},
    "losses": {"checks", "data_root"},  # losses stand alone (issue 39): hard correction takes a synonym matcher the
    # trainer builds; data_root: losses/modules.py alone (no loss), a loss module's path may be $WORKBENCH_DATA/...
    "masking": {"checks", "config", "text_files", "threads"},
    "data": {"checks", "config", "synonyms", "text_files", "masking", "data_root", "redaction"},  # redaction: a
    # fetch's URL shown without its credentials
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
        "redaction",
        "losses",
    },  # data: file check; losses: a params set's loss_modules imported and extra_settings checked before kernels
    "train": FOUNDATION | {"losses", "masking", "data", "models"},  # not the runner: metrics.json via metrics_file
    "viz": {"checks", "config", "losses", "label_entropy"},
    "studies": FOUNDATION | {"losses", "masking", "data", "models", "train"},
    "__main__": {"command_line", "runs", "data", "data_root"},  # the one error line: command_line.error_message; data
    # list / fetch; data_root.settle_data_root: one root for the command and its kernels
}


def imported_modules(path: Path, with_names: bool = True, root: Path = PACKAGE) -> set[str]:
    """Every module ``path`` imports (module level or inside a function), relative imports resolved to absolute
    names (``from .masking_demo import BLANK`` in ``studies/true_negatives/`` ->
    ``workbench.studies.true_negatives.masking_demo``); with ``with_names``, ``from package import name`` gives
    ``package.name`` too (the name may be a module: ``from workbench import config``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # the package the module lies in: workbench/studies/true_negatives/x.py -> its 3 parts
                package = ["workbench", *path.relative_to(root).parent.parts]
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            found.add(base)
            if with_names:
                found |= {f"{base}.{alias.name}" for alias in node.names if alias.name != "*"}
    return found


def _imports(path: Path) -> set[str]:
    """Top-level workbench packages/modules imported by ``path`` (``workbench.losses.pcl`` -> ``losses``), relative
    imports included."""
    return {
        name.split(".")[1]
        for name in imported_modules(path)
        if name.split(".")[0] == "workbench" and len(name.split(".")) > 1
    }


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
    for path in (PACKAGE / "losses").rglob("*.py"):
        assert not _imports(path) & {"data", "train", "viz", "studies"}, path.name


@pytest.mark.parametrize("path", sorted((PACKAGE / "losses").rglob("*.py")), ids=lambda path: path.name)
def test_losses_stand_alone_importing_of_the_workbench_only_checks(path):
    # issue 39, as MONAI's losses do: torch, workbench.checks and their own modules (hard correction takes a synonym
    # matcher the trainer builds from its lexicon)
    # losses/modules.py imports your files (it is no loss): it reads data_root, a leaf, for $WORKBENCH_DATA/ paths
    allowed = {"checks", "losses", "data_root"} if path.name == "modules.py" else {"checks", "losses"}
    assert _imports(path) <= allowed, sorted(_imports(path))


@pytest.mark.parametrize("package", ["train", "viz", "studies", "runs", "data", "masking", "models"])
def test_the_layers_above_use_only_the_public_names_of_the_losses(package):
    # issue 39: what train/ and viz/ need is exported by workbench.losses (the config alone reads losses.choices)
    for path in (PACKAGE / package).rglob("*.py"):
        inner = sorted(
            name for name in imported_modules(path, with_names=False) if name.startswith("workbench.losses.")
        )
        assert not inner, f"{path.relative_to(PACKAGE)} imports {inner}; import from workbench.losses"


def test_losses_import_neither_the_config_nor_text_files():
    # issue 29: the losses' options live with them (losses/choices.py); reading a label feature is the data side's
    for path in (PACKAGE / "losses").rglob("*.py"):
        assert not _imports(path) & {"config", "text_files", "data"}, path.name


def test_config_reads_from_the_losses_only_their_torch_free_choices():
    modules = set()
    for path in (PACKAGE / "config").rglob("*.py"):  # the config package, every module of it
        modules |= imported_modules(path)
    losses = {module for module in modules if module == "workbench.losses" or module.startswith("workbench.losses.")}
    assert "workbench.losses.choices" in losses
    assert all(module.startswith("workbench.losses.choices") for module in losses), sorted(losses)
    choices = imported_modules(PACKAGE / "losses" / "choices.py", with_names=False)
    assert choices <= {"__future__", "workbench.checks"}, sorted(choices)  # no torch: a config loads fast


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


def test_the_lexicons_read_from_the_data_only_the_check_of_the_root_s_files():
    # issue 37: a lexicon of the data root gets the checksum warning a data set's file gets, from the one place that
    # writes it (data/root_files.py); that module imports of the workbench only the registry and data_root, and nothing
    # heavy, as the registry
    synonyms = imported_modules(PACKAGE / "synonyms.py", with_names=False)
    assert {module for module in synonyms if module.startswith("workbench.data.")} == {"workbench.data.root_files"}
    root_files = imported_modules(PACKAGE / "data" / "root_files.py", with_names=False)
    assert {module for module in root_files if module.startswith("workbench")} == {
        "workbench.data.releases",
        "workbench.data_root",
    }
    assert not root_files & {"datasets", "torch", "numpy", "pandas"}


def test_masking_does_not_import_the_losses():
    # issue 20: a masked LM's held-out evaluation with hard-correction statistics is evaluation (train), not masking
    for path in (PACKAGE / "masking").rglob("*.py"):
        assert "losses" not in _imports(path), path.name


def test_the_trainers_do_not_import_the_runner():
    # issue 20: trainers and runner both write metrics.json through ``metrics_file``, one writer below both
    for path in (PACKAGE / "train").rglob("*.py"):
        assert "runs" not in _imports(path), path.name


def test_layout_benchmarks_live_outside_the_package():
    # issue 20: the benchmarks are the top-level ``benchmarks/``, not in the package (issue 39: no line budget for a
    # study module; a budget invites squeezing)
    assert not (PACKAGE / "bench").exists() and (PACKAGE.parent / "benchmarks" / "__main__.py").is_file()


def _study(path: Path) -> str:
    """The study a module belongs to: ``studies/dice.py`` -> ``dice``, ``studies/true_negatives/x.py`` ->
    ``true_negatives``."""
    return path.relative_to(PACKAGE / "studies").parts[0].removesuffix(".py")


STUDY_MODULES = sorted(path for path in (PACKAGE / "studies").rglob("*.py") if path != PACKAGE / "studies/__init__.py")


@pytest.mark.parametrize("path", STUDY_MODULES, ids=lambda path: str(path.relative_to(PACKAGE)))
def test_studies_import_nothing_from_each_other(path):
    # every module of a study package (studies/true_negatives/) too, relative imports resolved
    study = _study(path)
    others = {
        name
        for name in imported_modules(path)
        if name == "workbench.studies" or name.startswith("workbench.studies.") and name.split(".")[2] != study
    }
    assert not others, f"{path.relative_to(PACKAGE)} imports {sorted(others)}"


def test_the_import_reader_sees_every_form_of_import(tmp_path):
    # the rules above are only as good as this reader: relative imports, ``from workbench import x``, in functions
    module = tmp_path / "studies" / "mine" / "part.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from .sibling import A\nfrom .. import dice\nfrom workbench import config\n"
        "def f():\n    import workbench.runs.plan\n",
        encoding="utf-8",
    )
    found = imported_modules(module, root=tmp_path)
    assert {"workbench.studies.mine.sibling", "workbench.studies.dice", "workbench.config"} <= found
    assert "workbench.runs.plan" in found
    assert "workbench.studies.mine.sibling.A" not in imported_modules(module, with_names=False, root=tmp_path)


def test_notebooks_import_only_public_packages():
    import json

    public = {
        "workbench.checks",  # a notebook's checks cell checks its parameters with the library's own checks
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
