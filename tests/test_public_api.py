"""The public API a user can guess: studies use only the packages' top-level names, every
registered loss is importable from ``workbench.losses``, choices are defined once, and the
docs name only things that exist."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest
from test_architecture import imported_modules

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "workbench"
PACKAGES = {"losses", "masking", "train", "data", "viz", "runs"}  # a study imports these from the package itself


@pytest.mark.parametrize(
    "path", sorted((PACKAGE / "studies").rglob("*.py")), ids=lambda path: str(path.relative_to(PACKAGE))
)
def test_studies_import_packages_through_their_public_api(path):
    # every module of a study package (studies/true_negatives/) too, relative imports resolved
    for module in sorted(imported_modules(path, with_names=False)):
        parts = module.split(".")
        if parts[0] == "workbench" and len(parts) > 2 and parts[1] in PACKAGES:
            pytest.fail(f"{path.name} imports {module}; import from workbench.{parts[1]} (its public names)")


def test_every_registered_loss_class_is_importable_from_workbench_losses():
    import workbench.losses
    from workbench.losses.registry import LOSSES

    for name, loss_class in LOSSES.items():
        assert getattr(workbench.losses, loss_class.__name__) is loss_class, name
        assert loss_class.__name__ in workbench.losses.__all__, name


def test_every_loss_names_its_equation_in_the_first_docstring_line():
    from workbench.losses.registry import LOSSES

    for name, loss_class in LOSSES.items():  # the MLM objectives too (issue 20)
        first_line = loss_class.__doc__.strip().splitlines()[0]
        assert re.search(r"\b(eq|sec)\. \d+", first_line), f"{name}: {first_line}"


def test_choices_are_defined_once():
    # the objectives' options live with the losses (losses/choices.py); the config's objective section reads them
    from workbench import config
    from workbench.losses import choices, mlm
    from workbench.masking import packing

    for name in ("HC_LEVELS", "SR_LEVELS", "SR_PREDICTIONS", "KL_DIRECTIONS"):
        assert getattr(mlm, name) is getattr(config, name), name
        assert getattr(choices, name) is getattr(config, name), name
    assert packing.BLOCK_BOUNDARIES is config.BLOCK_BOUNDARIES


def _lookup(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes
    (AttributeError or ImportError when there is none)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            found = getattr(found, part)
        return found
    raise ImportError(dotted)


def _resolves(dotted: str) -> bool:
    try:
        _lookup(dotted)
    except (AttributeError, ImportError):
        return False
    return True


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "notebooks").glob("*.ipynb"))]


def test_docs_and_notebooks_name_only_modules_and_names_that_exist():
    pattern = re.compile(r"workbench(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
    missing = []
    for document in _documents():
        text = document.read_text(encoding="utf-8")
        if document.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        missing += [f"{document.name}: {name}" for name in sorted(set(pattern.findall(text))) if not _resolves(name)]
    assert not missing, "\n".join(missing)


ENTRY_POINTS = (
    "workbench.config.load_config",
    "workbench.losses.build_loss",
    "workbench.train.loss_from_spec",
    "workbench.masking.build_collator",
    "workbench.train.build_fitter",
    "workbench.train.Fitter.fit",
    "workbench.vocab.load_tokenizer",
    "workbench.synonyms.SynonymTable.from_path",
    "workbench.runs.plan_executions",
)


@pytest.mark.parametrize("dotted", ENTRY_POINTS)
def test_entry_points_document_their_arguments_and_result(dotted):
    lines = [line.strip() for line in (_lookup(dotted).__doc__ or "").splitlines()]
    assert "Args:" in lines and "Returns:" in lines, f"{dotted}: document Args and Returns"


def test_every_notebook_takes_one_seeds_list():
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        [parameters] = [cell for cell in cells if "parameters" in cell.get("metadata", {}).get("tags", [])]
        assigned = {
            target.id: node.value
            for node in ast.parse("".join(parameters["source"])).body
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        assert isinstance(assigned.get("seeds"), ast.List), (
            f"{notebook.name}: needs a seeds list (the runner's --seeds sets it)"
        )
        assert not {"seed", "n_seeds"} & set(assigned), f"{notebook.name}: one seeds list, no second seed layer"
