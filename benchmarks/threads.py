"""The example trainer on an idle machine and with one core kept busy elsewhere, per thread count.

``python -m benchmarks threads [--config PATH] [--epochs E] [--threads LIST] [--repeats R]``

Each run is ``python -m workbench.train CONFIG training.num_train_epochs=E training.quiet=true
training.threads=N`` in a fresh process, into a temporary folder (``N = default`` leaves
``training.threads`` null: the workbench's choice, ``workbench.threads.default_threads``).
"Busy" runs start with a separate process spinning on one core (``busy_core``), as a second
notebook or another user's job would. Runs are interleaved (idle, busy per setting, ``repeats``
times); the table gives the median wall time of the whole command and the median
``train_runtime`` (the training loop), and busy / idle for both. Target: the workbench's
default setting stays within ``TARGET`` (1.5x) of its idle time with one core busy; torch's
own choice (one thread per core, ``N = cores``) is the contrast.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from workbench.threads import THREAD_VARIABLES, default_threads

DEFAULT_CONFIG = Path("params", "examples", "finetune_qbqtc_sample_pcl.yaml")
TARGET = 1.5
DEFAULT = "default"


def _spin(stop: Any) -> None:
    while not stop.is_set():
        for _ in range(100_000):
            pass


@contextmanager
def busy_core() -> Iterator[int]:
    """One process spinning on a core for the length of the block; yields its pid."""
    stop = multiprocessing.get_context("spawn").Event()
    spinner = multiprocessing.get_context("spawn").Process(target=_spin, args=(stop,), daemon=True)
    spinner.start()
    try:
        time.sleep(0.2)  # let it reach the loop before the timed run starts
        yield spinner.pid
    finally:
        stop.set()
        spinner.join(timeout=5)
        if spinner.is_alive():
            spinner.kill()
            spinner.join()


def parse_threads(text: str) -> list[str]:
    """``default,1,2`` -> ``["default", "1", "2"]``; ValueError for anything but ``default`` and ints >= 1."""
    settings = [part.strip() for part in text.split(",") if part.strip()]
    if not settings:
        raise ValueError(f"--threads: a comma-separated list of 'default' and ints >= 1, got {text!r}")
    for setting in settings:
        if setting != DEFAULT and not (setting.isdigit() and int(setting) >= 1):
            raise ValueError(f"--threads: {setting!r} is neither 'default' nor an int >= 1")
    if len(set(settings)) != len(settings):
        raise ValueError(f"--threads: repeated setting in {text!r}")
    return settings


def train_once(config: Path, epochs: float, threads: str, output_dir: Path) -> tuple[float, float]:
    """Run the trainer CLI once in a fresh process; (wall seconds of the command, train_runtime).

    ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` are removed from its environment, so ``default`` is the
    workbench's own choice and a number is ``training.threads``."""
    command = [
        sys.executable,
        "-m",
        "workbench.train",
        str(config),
        f"training.num_train_epochs={epochs}",
        "training.quiet=true",
        f"output_dir={output_dir}",
    ]
    if threads != DEFAULT:
        command.append(f"training.threads={threads}")
    environment = {name: value for name, value in os.environ.items() if name not in THREAD_VARIABLES}
    start = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, env=environment)
    wall = time.perf_counter() - start
    if completed.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({completed.returncode}):\n{completed.stderr[-2000:]}")
    return wall, float(json.loads(completed.stdout)["train_runtime"])


def ratio_rows(
    times: dict[tuple[str, bool], list[tuple[float, float]]], settings: Sequence[str]
) -> list[dict[str, float | str]]:
    """Per setting: median wall and train_runtime idle and busy, and busy / idle for both."""
    rows = []
    for setting in settings:
        idle, busy = times[(setting, False)], times[(setting, True)]
        row: dict[str, float | str] = {"threads": setting}
        for index, clock in enumerate(("wall", "train")):
            row[f"{clock}_idle"] = statistics.median(run[index] for run in idle)
            row[f"{clock}_busy"] = statistics.median(run[index] for run in busy)
            row[f"{clock}_ratio"] = row[f"{clock}_busy"] / row[f"{clock}_idle"]
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks threads", description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="trainer config (default: %(default)s)")
    parser.add_argument(
        "--epochs", type=float, default=1.0, help="training.num_train_epochs of every run (default: %(default)s)"
    )
    parser.add_argument(
        "--threads",
        default=f"{DEFAULT},{os.cpu_count() or 1}",
        help="comma-separated settings: 'default' (training.threads null) and thread counts "
        "(default: %(default)s, i.e. also torch's one thread per core)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions, median reported")
    arguments = parser.parse_args(argv)
    try:
        settings = parse_threads(arguments.threads)
    except ValueError as error:
        parser.error(str(error))
    config = Path(arguments.config)
    if not config.is_file():
        parser.error(f"--config: {config} does not exist (run from the repository root)")
    times: dict[tuple[str, bool], list[tuple[float, float]]] = {(s, b): [] for s in settings for b in (False, True)}
    with tempfile.TemporaryDirectory(prefix="workbench_bench_threads_") as folder:
        train_once(config, arguments.epochs, settings[0], Path(folder) / "warm-up")  # disk caches, data generation
        for repeat in range(arguments.repeats):
            for setting in settings:
                for busy in (False, True):
                    output_dir = Path(folder) / f"{repeat}-{setting}-{'busy' if busy else 'idle'}"
                    if busy:
                        with busy_core():
                            times[(setting, busy)].append(train_once(config, arguments.epochs, setting, output_dir))
                    else:
                        times[(setting, busy)].append(train_once(config, arguments.epochs, setting, output_dir))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{config} x {arguments.epochs:g} epoch(s), {os.cpu_count()} cores (default threads here: "
        f"{default_threads()}), median of {arguments.repeats}, load average at the end {load:.2f}"
    )
    print("| threads | wall idle s | wall busy s | busy / idle | train idle s | train busy s | busy / idle | target |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|")
    for row in ratio_rows(times, settings):
        target = f"<= {TARGET}x" if row["threads"] == DEFAULT else ""
        print(
            f"| {row['threads']} | {row['wall_idle']:.1f} | {row['wall_busy']:.1f} | {row['wall_ratio']:.2f}x "
            f"| {row['train_idle']:.1f} | {row['train_busy']:.1f} | {row['train_ratio']:.2f}x | {target} |"
        )
