"""``python -m workbench.train CONFIG.yaml [section.key=value ...]``: run the config's task.

Runs unchanged under ``torchrun --nproc_per_node=N -m workbench.train ...`` or
``accelerate launch -m workbench.train ...`` (the Trainer's distributed support).
"""

from __future__ import annotations

import argparse
import json
import sys

from workbench.train import TASK_RUNNERS, load_config
from workbench.train.runs import is_main_process


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.train", description=__doc__.splitlines()[0])
    parser.add_argument("config", help="YAML config file (see docs/training.md)")
    parser.add_argument("overrides", nargs="*", help="section.key=value overrides; values are parsed as YAML")
    arguments = parser.parse_args(argv)
    try:
        config = load_config(arguments.config, arguments.overrides)
    except ValueError as error:
        parser.error(str(error))
    result = TASK_RUNNERS[config["task"]](config)
    if is_main_process():
        scalars = {key: value for key, value in result.metrics.items() if isinstance(value, (int, float, str))}
        print(json.dumps({"output_dir": str(result.output_dir), **scalars}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
