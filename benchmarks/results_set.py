"""How long the ``results`` parameter set takes on an idle 2-core machine: one fit of each kind timed, times the fits
each notebook's results file asks for.

``python -m benchmarks results_set [--params-dir params] [--set results] [--jobs 2]``

Each unit (a probe fit of notebooks 01, 02 and 05, a fine-tune and a two-stage run of 04, a pre-training run and a
fine-tune of 03) runs once with the file's own data, model and training sections, on one torch thread (what each of
the two kernels gets), and is measured in process CPU time, which does not grow when other jobs share the cores (wall
time does). The counts come from the same files: seeds x settings, Table 8's five sets (by their sizes), the Tversky
alphas, the balanced Table 9 task, the fair baselines, the auxiliary-label sweep, the pre-training plan. The table
gives each notebook's estimate and the run's, two notebooks at a time in the runner's order. Needs the data root
(``$WORKBENCH_DATA``). Fixed costs (kernel start, data loading, figures, the bootstrap, the HTML exports) are not in
the units: the page quotes the estimate with that caveat, beside a measured run.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from workbench.config import LossSpec, load_config, read_yaml_file
from workbench.data import SynonymAugmenter, label_counts, load_splits, rebalance, table8_class_counts
from workbench.synonyms import SynonymTable
from workbench.train import build_fitter, finetune, loss_from_spec, pretrain_mlm, two_stage

NOTEBOOKS = (
    "01_dice_loss",
    "02_propensity_corrected_loss",
    "03_true_negatives",
    "04_auxiliary_labels",
    "05_pcl_vs_dice_walkthrough",
)


def cpu_seconds(call: Callable[[], Any]) -> float:
    start = time.process_time()
    call()
    return time.process_time() - start


def probe_fit(parameters: dict[str, Any], splits: Any, model: dict[str, Any]) -> float:
    config = load_config({"model": model, "training": parameters["training"]})
    fitter = build_fitter(config.model, config.training, parameters["data"].get("max_length", 128))
    return cpu_seconds(lambda: fitter.fit(splits, loss_from_spec(LossSpec("ce"), splits["train"]), 0))


def dice_notebook(parameters: dict[str, Any]) -> tuple[float, str]:
    splits = load_splits(parameters["data"])
    share, seed = parameters.get("positive_share"), parameters["data"].get("seed", 0)
    if share is not None:
        ratio = share / (1 - share)
        names = list(splits) if parameters.get("thin_evaluation") else ["train"]
        thinned = {
            name: rebalance(splits[name], ratio, positive_label=1, method="downsample", seed=seed) for name in names
        }
        splits = type(splits)({**splits, **thinned})
    unit = probe_fit(parameters, splits, parameters["model"])
    negative, positive = label_counts(splits["train"])
    sizes = [sum(pair) / (negative + positive) for pair in table8_class_counts(positive, negative).values()]
    balanced = 2 * min(negative, positive) / (negative + positive)
    fits = len(parameters["table8_losses"]) * sum(sizes) + len(parameters.get("baselines", []))
    fits += len(parameters["tversky_alphas"]) + len(parameters["table9_losses"]) * balanced + 2  # + the DSC presets
    augmenter = SynonymAugmenter(SynonymTable.from_path(parameters.get("table8_lexicon")), seed=seed)
    texts = splits["train"]["text"][:500]
    augment = cpu_seconds(lambda: [augmenter(text) for text in texts]) * (len(splits["train"]) / len(texts))
    seeds = len(parameters["seeds"])
    return unit * fits * seeds + augment, f"{unit:.1f} s a probe fit x {fits * seeds:.0f} fits (size-weighted)"


def pcl_notebook(parameters: dict[str, Any], model: dict[str, Any], settings: int) -> tuple[float, str]:
    unit = probe_fit(parameters, load_splits(parameters["data"]), model)
    fits = settings * len(parameters["seeds"])
    return unit * fits, f"{unit:.1f} s a probe fit x {fits} fits"


def auxiliary_notebook(parameters: dict[str, Any], folder: Path) -> tuple[float, str]:
    sections = {key: parameters[key] for key in ("data", "model", "training")}
    baseline = cpu_seconds(
        lambda: finetune(load_config({**sections, "output_dir": str(folder / "ft")}, task="finetune"))
    )
    aux = {**parameters["aux"], "num_aux": max(parameters["num_aux_values"])}
    config = load_config({**sections, "aux": aux, "output_dir": str(folder / "ts")}, task="two_stage")
    stages = cpu_seconds(lambda: two_stage(config))
    seeds, n = len(parameters["seeds"]), len(parameters["num_aux_values"])
    total = seeds * (baseline + n * stages)
    return (
        total,
        f"{baseline:.0f} s a fine-tune, {stages:.0f} s a two-stage run (n = {aux['num_aux']}), x {seeds} seeds",
    )


def true_negatives_notebook(parameters: dict[str, Any], folder: Path) -> tuple[float, str]:
    """Two pre-training units, plain MLM and sentence-level SR (its extra encoder passes make it the slowest; HC and
    word-level SR cost about plain's, docs/benchmarks.md, issue 21), and one fine-tune."""

    def pretraining(name: str, objective: dict[str, Any]) -> float:
        sections = {
            "data": parameters["data"],
            "model": parameters["model"],
            "masking": {"mlm_probability": 0.15, "max_ngram": 1, "strategy": "wwm"},
            "objective": {**parameters["objective"], **objective},
            "training": parameters["pretrain_training"],
            "output_dir": str(folder / name),
        }
        return cpu_seconds(lambda: pretrain_mlm(load_config(sections, task="pretrain_mlm")))

    plain = pretraining("plain", {"name": "plain"})
    sentence = pretraining("sr_sentence", {"name": "sr", "level": "sentence"})
    finetuning = {
        "data": parameters["finetune_data"],
        "model": parameters["model"],
        "training": parameters["finetune_training"],
        "output_dir": str(folder / "finetune"),
    }
    tune = cpu_seconds(lambda: finetune(load_config(finetuning, task="finetune")))
    runs = len(parameters["strategies"]) * len(parameters["objectives"]) + len(parameters["extra_runs"]) + 1
    sentences = sum(1 for _, objective in parameters["extra_runs"] if objective == "sr_sentence")
    fine_tunes = (runs + 1) * len(parameters["seeds"])
    total = plain * (runs - sentences) + sentence * sentences + tune * fine_tunes
    note = (
        f"{plain:.0f} s a pre-training run x {runs - sentences}, {sentence:.0f} s with sentence-level SR x {sentences}"
    )
    return total, f"{note}, {tune:.0f} s a fine-tune x {fine_tunes}"


def schedule(seconds: list[float], jobs: int) -> float:
    """The run's wall time when ``jobs`` kernels take the notebooks in order, each the next free slot."""
    slots = [0.0] * jobs
    for cost in seconds:
        slots[int(np.argmin(slots))] += cost
    return max(slots)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks results_set", description=__doc__.splitlines()[0])
    parser.add_argument("--params-dir", default="params")
    parser.add_argument("--set", default="results")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="+", metavar="NN", help="time these notebooks only (e.g. 03); no run total")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    files = {name: read_yaml_file(Path(args.params_dir) / args.set / f"{name}.yaml", "params") for name in NOTEBOOKS}
    rows = []
    with tempfile.TemporaryDirectory(prefix="results-bench-") as folder:
        estimates = {
            NOTEBOOKS[0]: lambda p: dice_notebook(p),
            NOTEBOOKS[1]: lambda p: pcl_notebook(
                p, next(iter(p["encoders"].values())), len(p["settings"]) + len(p.get("baselines", []))
            ),
            NOTEBOOKS[2]: lambda p: true_negatives_notebook(p, Path(folder) / "03"),
            NOTEBOOKS[3]: lambda p: auxiliary_notebook(p, Path(folder) / "04"),
            NOTEBOOKS[4]: lambda p: pcl_notebook(p, p["model"], len(p["settings"])),
        }
        for name in (name for name in NOTEBOOKS if not args.only or name[:2] in args.only):
            seconds, how = estimates[name](files[name])
            rows.append((name, seconds, how))
            print(f"{name}: {seconds / 60:.1f} min ({how})", flush=True)
    total = schedule([seconds for _, seconds, _ in rows], args.jobs)  # in the runner's order
    print("\n| notebook | estimate (min, one core) | from |\n|---|---|---|")
    for name, seconds, how in rows:
        print(f"| {name} | {seconds / 60:.1f} | {how} |")
    if not args.only:
        print(f"\nThe run, {args.jobs} notebooks at a time in order: {total / 60:.1f} min of fits (no fixed costs).")


if __name__ == "__main__":
    main()
