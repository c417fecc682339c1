"""Command line: ``python -m workbench run [options]`` and ``python -m workbench export NOTEBOOK`` (docs/runner.md)."""

from __future__ import annotations

import argparse
import sys

from workbench.runs import PARAMS_SETS, parse_seeds, parse_sweep, run
from workbench.runs.export import export_notebook


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workbench", description="The Imbalance Workbench's notebook runner.")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser(
        "run",
        help="execute notebooks headless through papermill into outputs/<run-id>/",
        description="Execute notebooks headless into a new outputs/<run-id>/ folder with summaries and index.html "
        "(docs/runner.md).",
    )
    run_parser.add_argument(
        "--params-set",
        default="default",
        choices=PARAMS_SETS,
        help="parameter files params/<set>/<notebook>.yaml: default (CPU, sample data, minutes), "
        "smoke (seconds, used by the tests) or gpu (real data, the workbench's encoder, bf16); "
        "default: %(default)s",
    )
    run_parser.add_argument("--only", nargs="+", metavar="NAME", help="notebook stems or prefixes, e.g. 01 or 01_dice_loss")
    run_parser.add_argument(
        "--sweep",
        nargs="+",
        default=[],
        metavar="KEY=V1,V2",
        help="one execution per value (several keys: their grid); values are YAML, lists in brackets: "
        "table8_losses=[CE,DSC],[FL]",
    )
    run_parser.add_argument("--seeds", metavar="1,2,3", help="the seeds list every notebook repeats over (mean and spread)")
    run_parser.add_argument(
        "--threads", type=int, metavar="N", help="CPU threads per kernel (default: half the cores, at least 1)"
    )
    run_parser.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="notebooks run at once (default: as many kernels of --threads threads as the cores "
        "hold, at least 1; 1 runs them one after another, for timings without neighbours)",
    )
    run_parser.add_argument(
        "--notebooks-dir", default="notebooks", metavar="DIR", help="where the notebooks are; default: %(default)s"
    )
    run_parser.add_argument(
        "--params-dir",
        default="params",
        metavar="DIR",
        help="where the parameter sets are (<DIR>/<set>/<notebook>.yaml); default: %(default)s",
    )
    run_parser.add_argument(
        "--outputs-dir", default="outputs", metavar="DIR", help="where run folders are created; default: %(default)s"
    )
    run_parser.add_argument("--run-id", help="folder name under outputs-dir (must not exist); default: timestamp + suffix")
    run_parser.add_argument("--kernel", help="kernelspec name; default: one that runs this interpreter")
    export_parser = commands.add_parser(
        "export", help="the offline HTML page of an executed notebook", description="Write the page the runner writes."
    )
    export_parser.add_argument("notebook", metavar="NOTEBOOK.ipynb")
    export_parser.add_argument("--student", action="store_true", help="leave out the cells tagged solution")
    export_parser.add_argument(
        "-o",
        dest="output",
        metavar="OUT.html",
        help="default: beside the notebook, NOTEBOOK.html (NOTEBOOK.student.html "
        "with --student); an existing file is never overwritten",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command; 0 when every notebook succeeded, 1 when any failed, 2 for invalid input,
    130 when interrupted (Ctrl-C: the running kernels are stopped)."""
    args = build_parser().parse_args(argv)
    if args.command == "export":
        try:
            print(export_notebook(args.notebook, args.output, student=args.student))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    try:
        report = run(
            params_set=args.params_set,
            only=args.only,
            sweep=parse_sweep(args.sweep),
            seeds=parse_seeds(args.seeds) if args.seeds else None,
            notebooks_dir=args.notebooks_dir,
            params_dir=args.params_dir,
            outputs_dir=args.outputs_dir,
            run_id=args.run_id,
            kernel_name=args.kernel,
            threads=args.threads,
            jobs=args.jobs,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "interrupted: the running notebooks were stopped; the run folder keeps what they wrote, without summaries",
            file=sys.stderr,
        )
        return 130
    print(f"{len(report.outcomes) - len(report.failed)}/{len(report.outcomes)} ok; report: {report.run_dir / 'index.html'}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
