"""The command lines a newcomer meets first: their help texts, and how fast they answer."""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.__main__ import build_parser as runner_parser

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "datasets", "pandas", "plotly")


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_train_help_is_plain_text_and_imports_no_heavy_library():
    # --help used to import torch and transformers (6.8 s) and showed the docstring's ``literals``
    completed = _run_python(
        "import sys\n"
        "from workbench.train.__main__ import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        f"print('LOADED', sorted(name for name in {HEAVY!r} if name in sys.modules))\n"
    )
    assert completed.returncode == 0, completed.stderr
    assert "usage: python -m workbench.train" in completed.stdout
    assert "``" not in completed.stdout
    assert "LOADED []" in completed.stdout


def test_runner_help_is_plain_text_and_imports_no_heavy_library():
    completed = _run_python(
        "import sys\n"
        "from workbench.__main__ import main\n"
        "try:\n"
        "    main(['run', '--help'])\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        f"print('LOADED', sorted(name for name in {HEAVY!r} if name in sys.modules))\n"
    )
    assert completed.returncode == 0, completed.stderr
    assert "``" not in completed.stdout
    assert "LOADED []" in completed.stdout


def test_every_runner_option_has_help_text():
    run_parser = next(action for action in runner_parser()._actions if action.dest == "command").choices["run"]
    undocumented = [
        action.option_strings[0] for action in run_parser._actions if action.option_strings and not action.help
    ]
    assert not undocumented, f"options without help text: {undocumented}"
    params_set = next(action for action in run_parser._actions if action.dest == "params_set")
    assert all(name in params_set.help for name in ("default", "smoke", "gpu"))


def test_an_interrupted_run_exits_130_with_one_line(monkeypatch, capsys):
    import workbench.runs
    from workbench.__main__ import main

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr(workbench.runs, "run", interrupted)
    assert main(["run", "--only", "01"]) == 130
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("interrupted:")


def test_python_m_workbench_help_works_as_the_readme_says():
    for argv in (["--help"], ["run", "--help"]):
        completed = subprocess.run(
            [sys.executable, "-m", "workbench", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120
        )
        assert completed.returncode == 0 and completed.stdout.startswith("usage: python -m workbench"), completed.stderr


def test_the_readme_runner_commands_plan_as_written():
    from workbench.runs.options import parse_seeds, parse_sweep
    from workbench.runs.params_sets import select_notebooks
    from workbench.runs.plan import plan_executions

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^    \.venv/bin/python -m workbench (run .*)$", readme, flags=re.MULTILINE)
    assert len(commands) >= 2, commands
    for command in commands:
        if "--help" in command:
            continue
        args = runner_parser().parse_args(shlex.split(command))
        notebooks = select_notebooks(ROOT / args.notebooks_dir, args.only)
        seeds = parse_seeds(args.seeds) if args.seeds else None
        sweep = parse_sweep(args.sweep)
        assert plan_executions(notebooks, ROOT / args.params_dir, args.params_set, sweep, seeds, args.encoder), command


@pytest.mark.parametrize(
    ("missing", "command"),
    [
        ("nbformat", "from workbench.__main__ import main\nsys.exit(main(['export', 'notebook.ipynb']))"),
        (
            "transformers",
            "from workbench.train.__main__ import main\nsys.exit(main(['params/examples/two_stage_aux.yaml']))",
        ),
    ],
    ids=["export", "train"],
)
def test_a_missing_package_is_one_line_naming_it_not_a_traceback(missing, command):
    # `python -m workbench run` has its own test (test_runner); these are the README's other command lines
    completed = _run_python(f"import sys\nsys.modules[{missing!r}] = None  # as if it were not installed\n{command}\n")
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.startswith(f"error: package {missing} is missing") and completed.stderr.count("\n") == 1
    assert f"-m pip install {missing}" in completed.stderr


@pytest.mark.parametrize("script", sorted(path.name for path in (ROOT / "scripts").glob("*.py")))
def test_every_scripts_help_shows_its_whole_docstring_and_does_nothing_else(script, tmp_path):
    # the help was the docstring's first line, which stops mid-sentence; update_config_docs.py --help rewrote the docs
    path = ROOT / "scripts" / script
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
    before = {file: file.read_bytes() for file in (ROOT / "docs").glob("*.md")}
    completed = subprocess.run(
        [sys.executable, str(path), "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert completed.returncode == 0, completed.stderr
    assert " ".join(docstring.split()) in " ".join(completed.stdout.split())
    assert {file: file.read_bytes() for file in (ROOT / "docs").glob("*.md")} == before


def test_the_sweep_example_of_the_runner_help_names_a_parameter_a_notebook_has():
    from workbench.__main__ import SWEEP_EXAMPLE
    from workbench.runs.notebook_cells import notebook_parameters
    from workbench.runs.options import parse_sweep

    run_parser = next(action for action in runner_parser()._actions if action.dest == "command").choices["run"]
    assert SWEEP_EXAMPLE in " ".join(run_parser.format_help().split())
    (key,) = parse_sweep([SWEEP_EXAMPLE])
    assert any(key in notebook_parameters(notebook) for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")))
