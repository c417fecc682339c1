"""``python -m workbench.train CONFIG.yaml [section.key=value ...]``: run the config's task (also under
``torchrun --nproc_per_node=N -m workbench.train ...`` or ``accelerate launch -m workbench.train ...``)."""

from __future__ import annotations

import argparse
import json
import sys

from workbench.command_line import error_message

# The README's example; 8 epochs (the config's) learn every class, 3 learnt little more than the majority.
EXAMPLE = "python -m workbench.train params/examples/finetune_qbqtc_sample_pcl.yaml loss.params.epsilon=0.2"


def main(argv: list[str] | None = None) -> int:
    """Run the config's task; 0 on success, 2 for bad input (config, data, output_dir, a full disk, a hub that does not
    answer), 1 when training diverged, 130 when interrupted (Ctrl-C; SIGTERM with training.enable_jit_checkpoint: the
    checkpoint is kept, training.resume=true continues)."""
    parser = argparse.ArgumentParser(
        prog="python -m workbench.train",
        description="Run a trainer config: finetune, pretrain_mlm, two_stage or pretrain_electra (docs/training.md).",
        epilog=f"example (README.md, about a minute on 2 CPU cores): {EXAMPLE}",
    )
    parser.add_argument("config", help="YAML config file (docs/training.md lists every key)")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides; values are parsed as YAML")
    arguments = parser.parse_args(argv)
    try:  # bad input (config, a file, a missing package): one line, exit 2; divergence: exit 1
        from workbench.config import load_config  # after parsing: --help stays fast

        config = load_config(arguments.config, arguments.overrides)
        from workbench.train import TASK_RUNNERS

        result = TASK_RUNNERS[config.task](config)
    except (ValueError, OSError, FloatingPointError, ModuleNotFoundError) as error:
        print(error_message(error), file=sys.stderr)
        return 1 if isinstance(error, FloatingPointError) else 2
    except KeyboardInterrupt as error:  # the run is not finished: no metrics.json, its checkpoints kept
        print(f"interrupted: {error or 'stopped'}", file=sys.stderr)
        return 130
    from workbench.train.run_folder import is_main_process

    if is_main_process():
        scalars = {key: value for key, value in result.metrics.items() if isinstance(value, int | float | str)}
        print(json.dumps({"output_dir": str(result.output_dir), **scalars}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
