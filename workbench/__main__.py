"""Command line: ``python -m workbench run [options]``, ``python -m workbench export NOTEBOOK`` (docs/runner.md) and
``python -m workbench data list`` / ``data fetch NAME ...`` (docs/data.md)."""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
from typing import Any

from workbench.command_line import error_message
from workbench.data_root import settle_data_root
from workbench.runs.params_sets import describe_sets

PARAMS_DIR, NOTEBOOKS_DIR = "params", "notebooks"  # the defaults of --params-dir and --notebooks-dir
SWEEP_EXAMPLE = "table8_losses=[CE,DSC],[CE,FL]"  # notebook 01's parameter: --help's example of a list-valued sweep


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``run``, ``export``, ``data list`` / ``data fetch`` and ``results``, a subcommand each."""
    parser = argparse.ArgumentParser(
        prog="python -m workbench", description="The Imbalance Workbench's notebook runner."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    _add_run_command(commands)
    _add_export_command(commands)
    _add_data_command(commands)
    _add_results_command(commands)
    return parser


def _add_run_command(commands: Any) -> None:
    """``run``: which notebooks with which parameters, how they run, where the notebooks, parameter sets and run
    folders are, and the kernel."""
    run = commands.add_parser(
        "run",
        help="execute notebooks headless through papermill into outputs/<run-id>/",
        description=(
            "Execute notebooks headless into a new outputs/<run-id>/ folder with summaries and index.html "
            "(docs/runner.md)."
        ),
    )
    _add_run_selection(run)
    _add_run_resources(run)
    option = run.add_argument
    option(
        "--notebooks-dir", default=NOTEBOOKS_DIR, metavar="DIR", help="where the notebooks are; default: %(default)s"
    )
    option("--params-dir", default=PARAMS_DIR, metavar="DIR", help="where the parameter sets are; default: %(default)s")
    option(
        "--outputs-dir", default="outputs", metavar="DIR", help="where run folders are created; default: %(default)s"
    )
    option("--run-id", help="folder name under outputs-dir (must not exist); default: timestamp + suffix")
    option("--kernel", help="kernelspec name; default: one that runs this interpreter")


def _add_run_selection(run: argparse.ArgumentParser) -> None:
    """``run``'s choice of notebooks and parameters: the set, the notebooks, a sweep, the seeds, the encoder."""
    option = run.add_argument
    sets = f"{describe_sets(PARAMS_DIR, NOTEBOOKS_DIR)}, or a folder of yours"  # the sets present when asked
    option("--params-set", default="default", help=f"a folder <params-dir>/<set>/ of <notebook>.yaml files: {sets}")
    option(
        "--only", nargs="+", action="extend", metavar="NAME", help="notebook stems or prefixes, e.g. 01 or 01_dice_loss"
    )
    sweep_help = (
        f"one execution per value (several keys: their grid); values are YAML, lists in brackets: {SWEEP_EXAMPLE}"
    )
    option("--sweep", nargs="+", action="extend", default=[], metavar="KEY=V1,V2", help=sweep_help)
    option("--seeds", metavar="1,2,3", help="the seeds list every notebook repeats over (mean and spread)")
    option(
        "--encoder",
        metavar="NAME_OR_FOLDER",
        help="the pre-trained encoder: a hub name (hfl/chinese-roberta-wwm-ext) or a checkpoint folder; replaces every "
        "model_name_or_path of the set (the gpu set's models/workbench-zh-mini); docs/gpu.md",
    )


def _add_run_resources(run: argparse.ArgumentParser) -> None:
    """``run``'s machine: threads per kernel, notebooks at once, GPUs, the executor and its job parameters."""
    option = run.add_argument
    option(
        "--threads",
        type=int,
        metavar="N",
        help="CPU threads per kernel (default: half the cores, or the cores over the GPUs)",
    )
    option(
        "--jobs",
        type=int,
        metavar="N",
        help="notebooks at once (default: one per GPU, else as many kernels as the cores hold)",
    )
    option("--gpus", metavar="0,1", help="GPU ids; each running kernel gets its own (default: every visible GPU)")
    executors = (
        "threads: kernels on this machine; slurm: a Slurm array job per execution (submitit); local: submitit locally"
    )
    option("--executor", default="threads", choices=("threads", "slurm", "local"), help=executors)
    option(
        "--slurm",
        nargs="+",
        action="extend",
        default=[],
        metavar="K=V",
        help="submitit job parameters: slurm_partition=gpu",
    )


def _add_export_command(commands: Any) -> None:
    """``export NOTEBOOK``: the offline page of an executed notebook."""
    export = commands.add_parser(
        "export",
        help="the offline HTML page of an executed notebook",
        description="Write the page the runner writes: one file that opens offline anywhere (docs/runner.md).",
    )
    export.add_argument("notebook", metavar="NOTEBOOK.ipynb")
    export.add_argument(
        "--student", action="store_true", help="leave out the cells tagged solution or answer (any case, plurals too)"
    )
    export.add_argument(
        "--trusted",
        action="store_true",
        help="keep the notebook's own HTML and scripts as they are (default: sanitised, figures drawn from their data)",
    )
    export.add_argument(
        "--assets-folder",
        action="store_true",
        help="load plotly.js and MathJax from an assets/ folder (the run folder's, or beside the page) instead of "
        "inlining them: a smaller page that needs that folder beside it",
    )
    export.add_argument(
        "-o",
        dest="output",
        metavar="OUT.html",
        help="default: NOTEBOOK.html beside the notebook (NOTEBOOK.student.html with --student); an existing page is "
        "replaced only with --force",
    )
    export.add_argument("--force", action="store_true", help="replace an existing page (default: refused)")


def _add_data_command(commands: Any) -> None:
    """``data list`` and ``data fetch NAME ...``: the named data sets of the data root."""
    data = commands.add_parser(
        "data",
        help="the named data sets in the data root ($WORKBENCH_DATA): list them, fetch them",
        description="The data sets the workbench knows by name, in their public releases' layout (docs/data.md).",
    )
    data_commands = data.add_subparsers(dest="data_command", required=True)
    data_commands.add_parser(
        "list", help="each data set's files: present, size, checksum, source URL, licence", description="List them."
    )
    fetch = data_commands.add_parser(
        "fetch",
        help="download data sets from their public releases into the data root (checked, atomic)",
        description="Download each named data set's missing files, check their sha256 and rename them into place; "
        "$WORKBENCH_DATA_MIRROR replaces the releases' URLs by <mirror>/<path>.",
    )
    fetch.add_argument("names", nargs="+", metavar="NAME", help="qbqtc, tnews, lcqmc, chnsenticorp, corpus, ...")


def _add_results_command(commands: Any) -> None:
    """``results RUN_DIR``: the results page of a run folder."""
    results = commands.add_parser(
        "results",
        help="the results page (claims, statistics, verdicts) of a run folder",
        description="Write the results page of a run folder, printed from its run.json and metrics.json files.",
    )
    results.add_argument("run_dir", metavar="RUN_DIR", help="a folder python -m workbench run made (outputs/<run-id>)")
    results.add_argument(
        "-o",
        dest="output",
        metavar="OUT.md",
        help="default: RUN_DIR/results.md; e.g. docs/results.md (replaced, its figures in OUT-figures/; never a "
        "file of the run)",
    )


def data_command(args: argparse.Namespace) -> int:
    """``data list`` / ``data fetch``: 0 when done, 2 (one error line) when a file cannot be fetched."""
    from workbench.data.fetch import fetch, list_releases

    if args.data_command == "list":
        print(list_releases())
    else:
        fetch(args.names)
    return 0


def export_command(args: argparse.Namespace) -> int:
    """``export``: prints the page written; 0."""
    from workbench.runs.export import export_notebook

    page = export_notebook(
        args.notebook,
        args.output,
        student=args.student,
        trusted=args.trusted,
        assets_folder=args.assets_folder,
        force=args.force,
    )
    print(page)
    return 0


def results_command(args: argparse.Namespace) -> int:
    """``results``: prints the results page written; 0."""
    from workbench.runs.results import RESULTS_FILE, write_page

    print(write_page(args.run_dir, args.output or f"{args.run_dir}/{RESULTS_FILE}"))
    return 0


def run_command(args: argparse.Namespace, command: str) -> int:
    """``run``: prints how many notebooks succeeded and where the report is; 0 when every one did, else 1."""
    from workbench.runs import parse_assignments, parse_seeds, parse_sweep, run

    report = run(
        params_set=args.params_set,
        only=args.only,
        sweep=parse_sweep(args.sweep),
        seeds=parse_seeds(args.seeds) if args.seeds is not None else None,
        notebooks_dir=args.notebooks_dir,
        params_dir=args.params_dir,
        outputs_dir=args.outputs_dir,
        run_id=args.run_id,
        kernel_name=args.kernel,
        threads=args.threads,
        jobs=args.jobs,
        gpus=[gpu.strip() for gpu in args.gpus.split(",")] if args.gpus is not None else None,
        executor=args.executor,
        slurm=parse_assignments(args.slurm, "--slurm"),
        command=command,
        encoder=args.encoder,
    )
    succeeded = len(report.outcomes) - len(report.failed)
    print(f"{succeeded}/{len(report.outcomes)} ok; report: {report.run_dir / 'index.html'}")
    return 1 if report.failed else 0


COMMANDS = {"data": data_command, "export": export_command, "results": results_command}


def interrupted(args: argparse.Namespace, interruption: KeyboardInterrupt) -> int:
    """Says what an interruption left (a fetch: no partial file; a run: its report of what ran); 130."""
    if args.command == "data":
        print("interrupted: no partial file was left in the data root", file=sys.stderr)
        return 130
    report = getattr(interruption, "report", None)  # RunInterrupted: the report of what ran
    stopped = f"the running notebooks were stopped; report: {report.run_dir / 'index.html'}" if report else "stopped"
    print(f"interrupted: {stopped}", file=sys.stderr)
    return 130


def main(argv: list[str] | None = None) -> int:
    """Run the command; 0 when every notebook succeeded (every data set was fetched), 1 when any failed, 2 for invalid
    input, a missing package or a failed fetch, 130 when interrupted (Ctrl-C, SIGTERM or SIGHUP: the running kernels
    are stopped; a fetch leaves no partial file)."""
    args = build_parser().parse_args(argv)
    settle_data_root()  # a relative $WORKBENCH_DATA: the same root for this command and the kernels it starts
    command = shlex.join(["python", "-m", "workbench", *(sys.argv[1:] if argv is None else argv)])
    stops = (signal.SIGTERM, signal.SIGHUP)  # a CI cancel, `timeout`, a closed terminal: as Ctrl-C
    previous = {number: signal.signal(number, signal.default_int_handler) for number in stops}
    try:
        if args.command in COMMANDS:
            return COMMANDS[args.command](args)
        return run_command(args, command)
    except (ValueError, ModuleNotFoundError) as error:
        print(error_message(error), file=sys.stderr)
        return 2
    except KeyboardInterrupt as interruption:
        return interrupted(args, interruption)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


if __name__ == "__main__":
    sys.exit(main())
