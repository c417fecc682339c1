"""Dispatch ``python -m benchmarks NAME [options]`` to ``benchmarks.NAME.main``."""

from __future__ import annotations

import importlib
import sys

SUITES = ("intervals", "losses", "masking", "mlm_head", "pretrain", "results_set", "threads", "train")


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in SUITES:
        raise SystemExit(f"usage: python -m benchmarks {{{','.join(SUITES)}}} [options]")
    importlib.import_module(f"benchmarks.{argv[0]}").main(argv[1:])


if __name__ == "__main__":
    main()
